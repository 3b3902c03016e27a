"""The optional parts of AgentRun.py, each imported on first use: env families that third-party packages bring
(pixels, goals, teams, no_velocity; AgentRun.ENV_FAMILIES maps ids to them), masks of legal actions (masks), EnvPool
as the explorer's backend (envpool_backend), and the command line's research tools (tools: replay, export, grids,
comparison plots)."""

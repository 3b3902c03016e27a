"""Team envs, an optional family of AgentRun's (its ENV_FAMILIES table): a PettingZoo parallel env as one gymnasium env
of the whole team (MultiAgentEnv), and mpe2's particle envs by id."""
import importlib

import gymnasium as gym
import numpy as np

from AgentZoo import RefusedError


class MultiAgentEnv(gym.Env):
    """A PettingZoo parallel env (the multi-agent API of the gymnasium ecosystem) as one gymnasium env of the whole
    team, so that vector envs, the loops, evaluation, checkpoints and replay serve multi-agent agents as they are:
    - observation: every agent's, zero-padded to the longest and joined in possible_agents' order,
      (num_agents * obs_dim,);
    - action: every agent's, MultiDiscrete (num_agents,) or Box (num_agents * action_dim,): one action space for all;
    - reward: the team's, the sum of the agents' rewards (what evaluation reports), and each agent's own in
      info["agent_rewards"] (num_agents,), in possible_agents' order, for the agents that learn from their own;
    - terminated, truncated: the team ends its episode when every agent ends its own, at one step (agents that
      leave or join mid-episode are refused): terminated if every agent terminated, else truncated.
    The env's max_cycles (PettingZoo's episode length) is its time limit. Made by gym.make for "mpe2/<name>" ids
    (make_mpe2_env registers them), or around an instance: MultiAgentEnv(parallel_env=...)."""

    metadata = {"render_modes": ["human", "rgb_array"]}  # mpe2's, which gym.make checks before one is made

    def __init__(self, parallel_env=None, module: str | None = None, render_mode: str | None = None, **kwargs):
        if parallel_env is None:
            if not str(module).startswith("mpe2."):  # kwargs may come from a config.json: import mpe2's modules only
                raise RefusedError(f"MultiAgentEnv(module={module!r}) is not accepted: it imports an mpe2 env's module "
                                   f"(mpe2.<name>); pass other PettingZoo envs as parallel_env=<the instance>")
            # the raw env: mpe2's wrappers check what step() already ensures (reset first, actions in the space) and
            # took 30% of the env's time (History/UPDATE_LOG.md, 2026-11-28); step() clips Box actions as they did
            raw_env = importlib.import_module(module).raw_env(render_mode=render_mode, **kwargs)
            parallel_env = importlib.import_module("pettingzoo.utils.conversions").aec_to_parallel(raw_env)
        self.env = parallel_env
        self.name = parallel_env.metadata.get("name", type(parallel_env).__name__)
        self.possible_agents = list(parallel_env.possible_agents)
        self.metadata = {"render_modes": parallel_env.metadata.get("render_modes", []),
                         "render_fps": parallel_env.metadata.get("render_fps", 10)}
        self.render_mode = getattr(parallel_env, "render_mode", render_mode)
        self.max_cycles = getattr(parallel_env.unwrapped, "max_cycles", None)

        obs_spaces = [parallel_env.observation_space(agent) for agent in self.possible_agents]
        if not all(isinstance(space, gym.spaces.Box) for space in obs_spaces):
            raise RefusedError(f"{self.name}: observation spaces {obs_spaces} are not supported; the agents take Box "
                               f"observations (flattened)")
        self.obs_sizes = [int(np.prod(space.shape)) for space in obs_spaces]
        self.obs_dim = max(self.obs_sizes)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (len(self.possible_agents) * self.obs_dim,),
                                                np.float32)

        spaces = [parallel_env.action_space(agent) for agent in self.possible_agents]
        if any(space != spaces[0] for space in spaces) or not isinstance(spaces[0],
                                                                         (gym.spaces.Discrete, gym.spaces.Box)):
            raise RefusedError(f"{self.name}: the agents' action spaces {dict(zip(self.possible_agents, spaces))} "
                               f"are not supported; the multi-agent agents act in one action space shared by every "
                               f"agent, Discrete or flat Box (not mixed Box and Discrete, nor Discrete ones of "
                               f"different sizes); wrap the env so that every agent has the same one")
        self.agent_space = spaces[0]
        if isinstance(self.agent_space, gym.spaces.Discrete):
            self.action_space = gym.spaces.MultiDiscrete([self.agent_space.n] * len(spaces))  # actions from 0
        else:
            low, high = (np.tile(bound.ravel(), len(spaces)) for bound in (self.agent_space.low, self.agent_space.high))
            self.action_space = gym.spaces.Box(low, high, dtype=np.float32)

    def joint_observation(self, observations: dict) -> np.ndarray:
        joint = np.zeros((len(self.possible_agents), self.obs_dim), np.float32)  # (num_agents, obs_dim)
        for row, agent, size in zip(joint, self.possible_agents, self.obs_sizes):
            row[:size] = np.asarray(observations[agent], np.float32).ravel()
        return joint.ravel()

    def check_agents(self, agents, when: str):
        if set(agents) != set(self.possible_agents):  # a set: the env's dicts may list them in any order
            raise RefusedError(f"{self.name}: agents {list(agents)} {when}, not the env's possible_agents "
                               f"{self.possible_agents}; the multi-agent agents need every agent from the first step "
                               f"to the last (agents that leave or join mid-episode are not supported)")

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        observations, _ = self.env.reset(seed=seed, options=options)
        self.check_agents(self.env.agents, "began the episode")
        return self.joint_observation(observations), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        if isinstance(self.agent_space, gym.spaces.Discrete):
            actions = {agent: int(a) + int(self.agent_space.start) for agent, a in zip(self.possible_agents, action)}
        else:
            rows = np.asarray(action, self.agent_space.dtype).reshape(len(self.possible_agents),
                                                                      *self.agent_space.shape)
            actions = dict(zip(self.possible_agents, np.clip(rows, self.agent_space.low, self.agent_space.high)))
        observations, rewards, terminations, truncations, _ = self.env.step(actions)
        self.check_agents(observations, "stepped")
        done = {terminations[agent] or truncations[agent] for agent in self.possible_agents}
        if len(done) > 1:
            raise RefusedError(f"{self.name}: terminations {terminations} and truncations {truncations}: some agents "
                               f"ended the episode and others go on; agents that leave mid-episode are not supported")
        # all end together: the team's episode truly ends only if every agent's did; else a time limit cut it
        terminated = all(terminations[agent] for agent in self.possible_agents)
        truncated = done.pop() and not terminated
        if not (terminated or truncated):
            self.check_agents(self.env.agents, "go on")
        agent_rewards = np.array([rewards[agent] for agent in self.possible_agents], np.float32)
        return (self.joint_observation(observations), float(agent_rewards.sum()), terminated, truncated,
                {"agent_rewards": agent_rewards})

    def render(self):
        return self.env.render()

    def close(self):
        self.env.close()


# the mpe2 envs whose agents compete: the adversaries' rewards are the other agents' losses
COMPETING_MPE2 = ("simple_tag", "simple_adversary", "simple_push", "simple_crypto", "simple_world_comm")


def from_pettingzoo(env) -> MultiAgentEnv:
    """A PettingZoo parallel env as a MultiAgentEnv; an AEC env (its agents act one after another) refused."""
    if hasattr(env, "agent_iter"):
        raise RefusedError(f"{type(env).__name__} is a PettingZoo AEC env; the multi-agent agents take the parallel "
                           f"API: make it with the env module's parallel_env(), or convert it with "
                           f"pettingzoo.utils.conversions.aec_to_parallel(env)")
    return MultiAgentEnv(parallel_env=env)


def is_competing_team(env_name: str) -> bool:
    return env_name.removeprefix("mpe2/").rpartition("_v")[0] in COMPETING_MPE2


def make(env_id: str, frame_stack: int | None = None, **kwargs) -> gym.Env:
    """A Multi Particle Environment of the optional mpe2 package, "simple_spread_v3" or "mpe2/simple_spread_v3", as a
    MultiAgentEnv; its id is registered with gymnasium on first use, so that config.json records it (with kwargs such
    as continuous_actions=True, on an instance that make made) and resume and replay rebuild it."""
    return gym.make(register(env_id), **kwargs)


def register(env_id: str) -> str:
    """Register an mpe2 env's id with gymnasium (once) and return it, "mpe2/<name>"."""
    name = env_id.removeprefix("mpe2/")
    try:
        importlib.import_module(f"mpe2.{name}")
    except ModuleNotFoundError as error:
        if error.name == "mpe2":
            raise RefusedError(f"{env_id} is a multi-agent env of mpe2, an optional package: "
                               f"pip install mpe2") from None
        raise RefusedError(f"unknown mpe2 env {env_id!r}; mpe2 has simple_spread_v3, simple_reference_v3, "
                           f"simple_speaker_listener_v4 and others (its modules)") from None
    gym_id = f"mpe2/{name}"
    if gym_id not in gym.registry:
        # by the library's module name: gymnasium imports it when it remakes the env from a spec
        gym.register(gym_id, entry_point="extras.teams:MultiAgentEnv", kwargs={"module": f"mpe2.{name}"},
                     disable_env_checker=True)
    return gym_id

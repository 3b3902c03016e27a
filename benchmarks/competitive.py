"""Cross-play on mpe2's competitive envs: MADDPG against independent DDPG, the MADDPG paper's comparison (Lowe et al.
arXiv:1706.02275, section 5, Figure 3: MADDPG's agents paired with DDPG's do better than DDPG's paired with MADDPG's).
For each seed, AgentDiscreteMADDPG and AgentDiscreteIDDPG (each agent a DDPG learner with a critic of its own
observation and action, the paper's baseline) train with their defaults for break_step steps, each run a fresh
process; then, seed i against seed i, the good agents of one team and the adversaries of the other play `episodes`
episodes in each of the four pairings. Appends one row per pairing, seed, actor and policy to History/competitive.csv
(History/benchmarks.csv holds one agent's run per row): each side's mean episode reward per agent. Then prints, per
actor and policy, the median and the worst seed of each side's reward in each pairing.

    python benchmarks/competitive.py env=simple_adversary_v3 seeds=0,1,2,3,4 break_step=100000 episodes=100
    python benchmarks/competitive.py env=simple_tag_v3 break_step=50000      # seeds 0-4, 100 episodes: the defaults
    python benchmarks/competitive.py table=<commit>    # the same tables from the rows of that commit

actor: `last` plays each team's actors as the run ended (checkpoint/act.pt), the trained policies that the paper
pairs; `best` its actor.pt, chosen by the evaluations' mean of the team's summed reward, which on a competitive env
prizes the moments one side beat the other. policy: `greedy` takes each agent's most likely action (the library's
evaluation), `sampled` draws it from the agent's policy, as it explored. Every pairing, actor and policy meets the
same episodes: env seeds 0 to episodes - 1, torch's draws seeded alike.
"""
import copy
import csv
import datetime
import itertools
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import torch

from time_to_target import ROOT, STOP_LINE, git_commit

sys.path.insert(0, ROOT)
from AgentRun import find_checkpoint, make_env, saved_agent  # noqa: E402
from extras.tools import read_run  # noqa: E402
from AgentZoo import AgentBase, load_weights  # noqa: E402

RESULTS = os.path.join(ROOT, "History", "competitive.csv")
COLUMNS = ["date", "commit", "env", "seed", "steps", "good", "adversary", "actor", "policy", "episodes", "good_reward",
           "adversary_reward"]
AGENTS = ("AgentDiscreteMADDPG", "AgentDiscreteIDDPG")
ACTORS, POLICIES = ("last", "best"), ("greedy", "sampled")


def train(agent: str, env: str, seed: int, break_step: int, cwd: str) -> float:
    """One run of AgentRun.py with the agent's defaults; its seconds."""
    command = [sys.executable, "AgentRun.py", f"agent={agent}", f"env={env}", f"seed={seed}", f"cwd={cwd}",
               f"break_step={break_step}"]
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed (exit {out.returncode}):\n{out.stderr[-2000:]}")
    return float(STOP_LINE.search(out.stdout)["seconds"])


def load_team(cwd: str, actor: str) -> AgentBase:
    """The team trained in cwd, on the CPU, acting with its last or its best actor (weights_only loads)."""
    config = read_run(cwd, "competitive.py")
    team = saved_agent(cwd, config, make_env(config["env"])[1], device="cpu")  # actor.pt, the best
    if actor == "last":
        team.act.load_state_dict(load_weights(os.path.join(find_checkpoint(cwd), "act.pt"), team.device))
    return team


def paired(good_team: AgentBase, adversary_team: AgentBase, if_adversary: np.ndarray) -> AgentBase:
    """good_team acting with adversary_team's networks for the adversaries: TeamActorDiscrete holds one network per
    agent (nets), in the env's possible_agents order."""
    team = copy.deepcopy(good_team)
    for i, adversary in enumerate(if_adversary):
        if adversary:
            team.act.nets[i] = adversary_team.act.nets[i]
    return team


def play(team: AgentBase, envs: list, policy: str) -> np.ndarray:
    """One episode in each env, side by side, from env seeds 0, 1, ...: each agent's mean episode reward
    (info["agent_rewards"] summed over an episode, averaged over the episodes), (num_agents,)."""
    states = np.stack([env.reset(seed=i)[0] for i, env in enumerate(envs)])  # (episodes, num_agents * obs_dim)
    torch.manual_seed(0)  # the sampled policy's draws
    totals = np.zeros((len(envs), team.num_agents))  # (episodes, num_agents)
    running = np.ones(len(envs), bool)
    while running.any():
        actions = team.select_action(states[running], deterministic=policy == "greedy")
        for i, action in zip(np.flatnonzero(running), actions, strict=True):
            states[i], _, terminated, truncated, info = envs[i].step(action)
            totals[i] += info["agent_rewards"]
            running[i] = not (terminated or truncated)
    return totals.mean(axis=0)


def short(agent: str) -> str:
    return agent.removeprefix("AgentDiscrete")


def print_tables(rows: list[dict]):
    """Per env, actor and policy: each side's reward in each pairing, median (worst seed) over the seeds."""
    groups = {}
    for row in rows:
        groups.setdefault((row["env"], row["steps"], row["actor"], row["policy"]), []).append(row)
    for (env, steps, actor, policy), group in groups.items():
        seeds = sorted({row["seed"] for row in group})
        print(f"\n{env}, {steps} steps, {actor} actors, {policy} policy: each side's mean episode reward per agent, "
              f"median (worst seed) over {len(seeds)} seeds\n"
              f"| good agents | adversaries | good agents' reward | adversaries' reward |\n|---|---|---|---|")
        for good, adversary in itertools.product(AGENTS, AGENTS):
            pairing = [row for row in group if (row["good"], row["adversary"]) == (good, adversary)]
            cell = lambda key: (f"{statistics.median(float(row[key]) for row in pairing):.2f} "
                                f"({min(float(row[key]) for row in pairing):.2f})")
            print(f"| {short(good)} | {short(adversary)} | {cell('good_reward')} | {cell('adversary_reward')} |")


def table(commit: str):
    with open(RESULTS, newline="") as f:
        rows = [row for row in csv.DictReader(f) if row["commit"] == commit]
    if not rows:
        raise SystemExit(f"no rows of commit {commit!r} in {RESULTS}")
    print_tables(rows)


def main(argv: list[str]):
    options = dict(item.split("=", 1) for item in argv)
    if "table" in options:
        return table(options["table"])
    env = options.get("env", "simple_adversary_v3")
    break_step, episodes = int(options.get("break_step", 100_000)), int(options.get("episodes", 100))
    seeds = [int(seed) for seed in options.get("seeds", "0,1,2,3,4").split(",")]
    envs = [make_env(env)[0] for _ in range(episodes)]
    if_adversary = np.array([name.startswith("adversary") for name in envs[0].unwrapped.possible_agents])
    commit, rows = git_commit(), []
    for seed in seeds:
        with tempfile.TemporaryDirectory() as tmp:
            for agent in AGENTS:
                seconds = train(agent, env, seed, break_step, os.path.join(tmp, agent))
                print(f"{agent} seed {seed}: trained {break_step} steps in {seconds:.0f} s", flush=True)
            for actor in ACTORS:
                teams = {agent: load_team(os.path.join(tmp, agent), actor) for agent in AGENTS}
                for policy, good, adversary in itertools.product(POLICIES, AGENTS, AGENTS):
                    rewards = play(paired(teams[good], teams[adversary], if_adversary), envs, policy)
                    row = dict(zip(COLUMNS, [datetime.date.today().isoformat(), commit, env, seed, break_step, good,
                                             adversary, actor, policy, episodes,
                                             round(float(rewards[~if_adversary].mean()), 3),
                                             round(float(rewards[if_adversary].mean()), 3)]))
                    rows.append(row)
                    print(f"  {actor} {policy}: good {short(good)} {row['good_reward']}, "
                          f"adversary {short(adversary)} {row['adversary_reward']}", flush=True)
                    if_new = not os.path.exists(RESULTS)
                    with open(RESULTS, "a", newline="") as f:
                        writer = csv.DictWriter(f, COLUMNS)
                        if if_new:
                            writer.writeheader()
                        writer.writerow(row)
    print_tables(rows)


if __name__ == "__main__":
    main(sys.argv[1:])

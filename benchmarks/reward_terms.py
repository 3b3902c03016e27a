"""A saved run's return split into the env's own reward terms (issue 63's collapse): for MuJoCo's locomotion tasks
the info dict of every step holds reward_forward, reward_ctrl, reward_contact and reward_survive (each task the ones
it has), so a low return says whether the policy runs backwards, pays for large actions, or falls. The run's best
actor (actor.pt) and its last checkpoint's (checkpoint/act.pt) play the same seeded episodes, deterministically.

    python benchmarks/reward_terms.py cwd=<run> episodes=5
"""
import collections
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import AgentRun  # noqa: E402
from extras import tools  # noqa: E402


def reward_terms(cwd: str, actor: str, episodes: int) -> dict[str, float]:
    """Per-episode means of the return, the length, the mean |action| and every info term named reward_*."""
    config = AgentRun.read_config(os.path.join(cwd, "config.json"))
    env, env_info = AgentRun.make_env(config["env"])
    agent = tools.saved_agent(cwd, config, env_info, device="cpu", actor=actor)
    sums = collections.defaultdict(float)
    for episode in range(episodes):
        state, done = env.reset(seed=config["seed"] + episode)[0], False
        while not done:
            action = agent.select_action(state, deterministic=True)
            state, reward, terminated, truncated, info = env.step(action)
            done = terminated or truncated
            sums["return"] += float(reward)
            sums["length"] += 1
            sums["mean |action|"] += float(np.abs(action).mean())
            for name, value in info.items():
                if name.startswith("reward_"):
                    sums[name] += float(value)
    sums["mean |action|"] /= sums["length"]  # per step, the others per episode
    return {name: value if name == "mean |action|" else value / episodes for name, value in sums.items()}


def main(cwd: str, episodes: str = "5"):
    rows = {actor: reward_terms(cwd, actor, int(episodes)) for actor in ("best", "last")}
    names = list(rows["best"])
    print(f"{cwd}, {episodes} episodes each\n")
    print("| actor | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for actor, row in rows.items():
        print(f"| {actor} | " + " | ".join(f"{row[name]:.3f}" if name == "mean |action|" else f"{row[name]:.1f}"
                                          for name in names) + " |")


if __name__ == "__main__":
    main(**dict(item.split("=", 1) for item in sys.argv[1:]))

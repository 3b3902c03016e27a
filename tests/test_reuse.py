"""Reuse by copying: AgentSAC and only what it names, pasted into a fresh module, trains from a plain loop."""
import importlib.util
import inspect

import gymnasium as gym
import numpy as np
import torch

import AgentNet
import AgentZoo

HEADER = """import math
import os
from copy import deepcopy

import numpy as np
import torch
import torch.nn as nn
"""
FROM_NET = ["layer_init_orthogonal", "build_mlp", "Actor", "ActorSAC", "Critic", "CriticTwin"]
FROM_ZOO = ["soft_update", "optimizer_step", "new_adam", "frozen_copy", "ReplayBuffer", "AgentBase", "AgentOffPolicy",
            "AgentSAC"]


def test_copied_sac_trains_on_pendulum_from_a_plain_loop(tmp_path):
    pieces = [inspect.getsource(getattr(AgentNet, name)) for name in FROM_NET]
    pieces += [inspect.getsource(getattr(AgentZoo, name)) for name in FROM_ZOO]
    path = tmp_path / "my_sac.py"
    path.write_text(HEADER + "\n\n".join(pieces))
    spec = importlib.util.spec_from_file_location("my_sac", path)
    my_sac = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(my_sac)
    assert "import Agent" not in path.read_text() and "from Agent" not in path.read_text()

    torch.manual_seed(0)
    env = gym.wrappers.RescaleAction(gym.make("Pendulum-v1"), np.float32(-1), np.float32(1))
    env.reset(seed=0)
    agent = my_sac.AgentSAC(128, 3, 1, device="cpu")
    buffer = my_sac.ReplayBuffer(2 ** 14, 3, 1, if_discrete=False, device=agent.device)

    def evaluate(episodes=3):
        returns = []
        for _ in range(episodes):
            state, _ = env.reset()
            episode_return, done = 0.0, False
            while not done:
                state, reward, terminated, truncated, _ = env.step(agent.select_action(state, deterministic=True))
                episode_return += reward
                done = terminated or truncated
            returns.append(episode_return)
        return float(np.mean(returns))

    before = evaluate()
    for _ in range(15):  # 3000 steps, one gradient step per step
        buffer.extend(*agent.explore_env(env, 200))
        stats = agent.update_net(buffer, batch_size=128, repeat_times=1.0)
    after = evaluate()
    assert set(stats) == {"obj_critic", "obj_actor", "alpha"}
    print(f'deterministic return before {before:.0f}, after {after:.0f}')
    assert after > -600 and after > before + 300, (before, after)

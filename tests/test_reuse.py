"""Reuse by copying: an agent class and only what it names, pasted into a fresh module, trains from a plain loop."""
import importlib.util
import os
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

HEADER = """import contextlib
import math
import os
import pickle
from copy import deepcopy

import numpy as np
import torch
import torch.nn as nn
"""
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
from lines_to_copy import definitions, pieces_to_copy  # noqa: E402


def copy_agent(tmp_path, *names: str):
    """The pieces benchmarks/lines_to_copy.py lists for the names (an agent; a buffer it does not name), and nothing
    else: the list BENCHMARKS.md counts."""
    order = list(definitions())
    pieces = sorted({piece for name in names for piece in pieces_to_copy(name)}, key=order.index)
    return module_of(tmp_path, [definitions()[piece][1] for piece in pieces])


def module_of(tmp_path, pieces: list[str]):
    """The pieces' sources pasted below HEADER into a fresh module, imported; it imports nothing of the library."""
    path = tmp_path / "my_agent.py"
    path.write_text(HEADER + "\n\n".join(pieces))
    assert "import Agent" not in path.read_text() and "from Agent" not in path.read_text()
    spec = importlib.util.spec_from_file_location("my_agent", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def evaluate(env, agent, episodes=3) -> float:
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


@pytest.mark.learning
def test_copied_sac_trains_on_pendulum_from_a_plain_loop(tmp_path):
    my_sac = copy_agent(tmp_path, "AgentSAC")
    torch.manual_seed(0)
    env = gym.wrappers.RescaleAction(gym.make("Pendulum-v1"), np.float32(-1), np.float32(1))
    env.reset(seed=0)
    agent = my_sac.AgentSAC(128, 3, 1, device="cpu")
    buffer = my_sac.ReplayBuffer(2 ** 14, 3, 1, if_discrete=False, device=agent.device)
    before = evaluate(env, agent)
    for _ in range(15):  # 3000 steps, one gradient step per step
        buffer.extend(*agent.explore_env(env, 200))
        stats = agent.update_net(buffer, batch_size=128, replay_ratio=1.0)
    after = evaluate(env, agent)
    assert set(stats) == {"obj_critic", "obj_actor", "mean_q", "alpha"}
    print(f'deterministic return before {before:.0f}, after {after:.0f}')
    assert after > -600 and after > before + 300, (before, after)
    normed = my_sac.AgentSAC(128, 3, 1, device="cpu", if_state_norm=True)  # the copy standardises states too
    normed.update_state_norm(torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]]))
    assert torch.allclose(normed.act.state_norm.mean, torch.tensor(2.0)), normed.act.state_norm.mean


@pytest.mark.learning
def test_copied_rainbow_trains_on_cartpole_from_a_plain_loop(tmp_path):
    my_rainbow = copy_agent(tmp_path, "AgentRainbow", "PrioritizedReplayBuffer")
    torch.manual_seed(0)
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    agent = my_rainbow.AgentRainbow(128, 4, 2, device="cpu")
    buffer = my_rainbow.PrioritizedReplayBuffer(2 ** 14, 4, 2, if_discrete=True, device=agent.device)
    before = evaluate(env, agent)
    for _ in range(24):  # 6144 steps, half a gradient step per step
        buffer.extend(*agent.explore_env(env, 256))
        agent.update_net(buffer, batch_size=64, replay_ratio=0.5)
    after = evaluate(env, agent)
    print(f'deterministic return before {before:.0f}, after {after:.0f}')
    assert after > before + 100, (before, after)


@pytest.mark.learning
def test_copied_ppo_from_the_lines_to_copy_list_trains_on_cartpole_from_a_plain_loop(tmp_path):
    my_ppo = copy_agent(tmp_path, "AgentDiscretePPO")
    torch.manual_seed(0)
    env = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 4,
                                   autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)  # the agents' autoreset
    env.reset(seed=0)
    agent = my_ppo.AgentDiscretePPO(64, 4, 2, device="cpu")
    buffer = my_ppo.RolloutBuffer()
    eval_env = gym.make("CartPole-v1")
    eval_env.reset(seed=0)
    before = evaluate(eval_env, agent)
    for _ in range(20):  # 20 rounds of 4 x 256 steps
        buffer.extend(*agent.explore_env(env, 256))
        agent.update_net(buffer, batch_size=256, epochs=8)
    after = evaluate(eval_env, agent)
    print(f'deterministic return before {before:.0f}, after {after:.0f}')
    assert after > before + 100, (before, after)

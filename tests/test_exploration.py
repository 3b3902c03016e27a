"""Coloured exploration noise (AgentZoo.ColoredNoise): N(0, 1) at every step, correlated along the steps as its
exponent says, in the actions of DDPG, TD3 and SAC (noise_beta) and in their random warm-up (random_beta)."""
import numpy as np
import pytest
import torch

from AgentZoo import AgentDDPG, AgentSAC, AgentTD3, ColoredNoise


def draws(beta: float, shape=(500,), steps=1000) -> torch.Tensor:
    noise = ColoredNoise(beta, shape, seq_len=steps)
    return torch.stack([noise.sample() for _ in range(steps)], dim=-1)  # (*shape, steps)


def lag_one_correlation(x: torch.Tensor) -> float:
    return ((x[..., 1:] * x[..., :-1]).mean() / x.var()).item()


@pytest.mark.parametrize("beta", [0.0, 1.0, 2.0])
def test_every_step_is_standard_normal(beta):
    x = draws(beta)
    assert abs(x.mean().item()) < 0.05 and abs(x.var().item() - 1) < 0.05
    assert abs(x[:, 500].var().item() - 1) < 0.2  # one step across the 500 streams, not only on average


def test_the_exponent_sets_how_long_the_noise_keeps_its_direction():
    white, pink, red = (lag_one_correlation(draws(beta)) for beta in (0.0, 1.0, 2.0))
    assert abs(white) < 0.02 and 0.6 < pink < 0.9 and red > 0.95


def test_an_odd_sequence_length_keeps_unit_variance():
    assert abs(draws(1.0, steps=999).var().item() - 1) < 0.05


@pytest.mark.parametrize("agent_class", [AgentDDPG, AgentTD3, AgentSAC])
def test_exploring_actions_follow_the_noise_colour(agent_class):
    """A fixed policy's exploring actions change little from step to step with red noise, freely with white."""
    state = np.zeros((64, 3), dtype=np.float32)  # 64 env copies in one state: one noise stream each
    correlations = []
    for beta in (0.0, 2.0):
        torch.manual_seed(0)
        agent = agent_class(16, 3, 1, device="cpu", noise_beta=beta, **({} if agent_class is AgentSAC else {"explore_noise": 0.3}))
        actions = torch.as_tensor(np.stack([agent.select_action(state)[:, 0] for _ in range(200)], axis=-1))  # (64, 200)
        correlations.append(lag_one_correlation(actions - actions.mean()))
    assert abs(correlations[0]) < 0.1 and correlations[1] > 0.8


def warm_up_correlation(agent, steps=1000) -> float:
    actions = np.stack([agent.random_action(50) for _ in range(steps)], axis=-1)  # (50 envs, action_dim, steps)
    assert actions.shape == (50, agent.action_dim, steps) and np.abs(actions).max() < 1
    assert np.allclose(np.quantile(actions, [0.25, 0.5, 0.75]), [-0.5, 0.0, 0.5], atol=0.05)  # uniform on (-1, 1)
    return lag_one_correlation(torch.as_tensor(actions))


@pytest.mark.parametrize("agent_class", [AgentDDPG, AgentTD3, AgentSAC])
def test_random_warm_up_is_uniform_and_coloured_by_random_beta_whatever_the_policy_noise(agent_class):
    """The warm-up's colour is random_beta's, not noise_beta's: white policy noise keeps a pink warm-up."""
    assert 0.6 < warm_up_correlation(agent_class(16, 3, 2, device="cpu", noise_beta=0.0, random_beta=1.0)) < 0.95
    assert abs(warm_up_correlation(agent_class(16, 3, 2, device="cpu", noise_beta=1.0, random_beta=0.0))) < 0.02


def test_the_default_warm_up_is_pink_but_td3s_white():
    ddpg, td3, sac = (warm_up_correlation(agent_class(16, 3, 2, device="cpu")) for agent_class in (AgentDDPG, AgentTD3, AgentSAC))
    assert ddpg > 0.6 and sac > 0.6 and abs(td3) < 0.02


def test_the_policy_noise_after_a_pink_warm_up_is_white():
    """The warm-up's stream does not leak into the policy's: its first steps after the warm-up are independent."""
    agent = AgentSAC(16, 3, 1, device="cpu")
    state = np.zeros((64, 3), dtype=np.float32)
    for _ in range(10):
        agent.random_action(64)
    actions = torch.as_tensor(np.stack([agent.select_action(state)[:, 0] for _ in range(200)], axis=-1))
    assert abs(lag_one_correlation(actions - actions.mean())) < 0.1


@pytest.mark.parametrize("env_id, num_envs, steps", [("Pendulum-v1", None, 200), ("MountainCarContinuous-v0", 3, 999),
                                                     ("BipedalWalker-v3", None, 1600)])
def test_the_noise_sequence_is_as_long_as_the_explored_envs_episodes(env_id, num_envs, steps):
    """Pendulum's 200-step episodes see a 200-step sequence, not a fifth of a 1000-step one (a near-constant offset);
    the walker's 1600 a whole one, not one and a sixth; a vector env its copies'."""
    from AgentRun import make_vector_env

    env = make_vector_env(env_id, num_envs)[0]
    agent = AgentSAC(16, env.observation_space.shape[-1], env.action_space.shape[-1], device="cpu")
    agent.explore_env(env, 4, if_random=True)  # the pink warm-up
    assert agent.noise.seq_len == steps and agent.noise.beta == 1.0
    agent.explore_env(env, 4)  # the policy's white noise, a stream of its own of the same length
    assert agent.noise.seq_len == steps and agent.noise.beta == 0.0

import math

import pytest
import torch

from AgentNet import (Actor, ActorSAC, Critic, CriticTwin, CriticTwinEncoded, QNet, QNetDuel,
                      build_mlp)

STATE_DIM, ACTION_DIM, NET_DIM, BATCH = 5, 3, 32, 7


def test_build_mlp_layers_and_output_shape():
    net = build_mlp([4, 16, 16, 2])
    assert [type(m).__name__ for m in net] == ["Linear", "ReLU", "Linear", "ReLU", "Linear"]
    assert net(torch.randn(6, 4)).shape == (6, 2)


@pytest.mark.parametrize("net_class", [QNet, QNetDuel])
def test_q_networks_shapes(net_class):
    net = net_class(NET_DIM, STATE_DIM, ACTION_DIM)
    assert net(torch.randn(BATCH, STATE_DIM)).shape == (BATCH, ACTION_DIM)
    assert net(torch.randn(STATE_DIM)).shape == (ACTION_DIM,)  # one unbatched state


def test_dueling_advantage_has_zero_mean():
    net = QNetDuel(NET_DIM, STATE_DIM, ACTION_DIM)
    state = torch.randn(BATCH, STATE_DIM)
    hidden = net.net(state)
    q = net(state)
    # Q - V is the centred advantage: zero mean over actions
    assert torch.allclose((q - net.value(hidden)).mean(dim=1), torch.zeros(BATCH), atol=1e-6)


def test_actor_range_and_noise():
    actor = Actor(NET_DIM, STATE_DIM, ACTION_DIM)
    state = torch.randn(BATCH, STATE_DIM) * 100  # large inputs still give actions in [-1, 1]
    action = actor(state)
    assert action.shape == (BATCH, ACTION_DIM) and action.abs().max() <= 1
    noisy = actor.get_action(state, noise_std=5.0)
    assert noisy.abs().max() <= 1 and not torch.equal(noisy, action)
    assert torch.equal(actor.get_action(state, noise_std=0.0), action)


def test_actor_sac_range_and_deterministic_action():
    actor = ActorSAC(NET_DIM, STATE_DIM, ACTION_DIM)
    state = torch.randn(BATCH, STATE_DIM)
    assert torch.equal(actor(state), actor(state))
    assert actor(state).abs().max() <= 1
    action, log_prob = actor.get_action_log_prob(state)
    assert action.shape == (BATCH, ACTION_DIM) and log_prob.shape == (BATCH,)
    assert action.abs().max() <= 1 and torch.isfinite(log_prob).all()


def test_actor_sac_log_prob_matches_change_of_variables():
    """log pi(a|s) must equal log N(u) - sum log(1 - tanh(u)^2), checked against torch.distributions."""
    actor = ActorSAC(NET_DIM, STATE_DIM, ACTION_DIM)
    state = torch.randn(BATCH, STATE_DIM)
    torch.manual_seed(1)
    action, log_prob = actor.get_action_log_prob(state)
    mean, log_std = actor.get_mean_log_std(state)
    dist = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(mean, log_std.exp()), [torch.distributions.TanhTransform(cache_size=1)])
    torch.manual_seed(1)
    u = mean + log_std.exp() * torch.randn_like(mean)
    expected = dist.log_prob(u.tanh()).sum(dim=-1)
    assert torch.allclose(action, u.tanh())
    assert torch.allclose(log_prob, expected, atol=1e-3)


def test_actor_sac_log_prob_stays_finite_when_saturated():
    actor = ActorSAC(NET_DIM, STATE_DIM, ACTION_DIM)
    with torch.no_grad():
        actor.net[-1].bias.fill_(30.0)  # mean 30: tanh(u) rounds to exactly 1 in float32
    _, log_prob = actor.get_action_log_prob(torch.randn(BATCH, STATE_DIM))
    assert torch.isfinite(log_prob).all()


@pytest.mark.parametrize("net_class, heads", [(Critic, 1), (CriticTwin, 2), (CriticTwinEncoded, 2)])
def test_critics_shapes(net_class, heads):
    net = net_class(NET_DIM, STATE_DIM, ACTION_DIM)
    state, action = torch.randn(BATCH, STATE_DIM), torch.rand(BATCH, ACTION_DIM) * 2 - 1
    assert net(state, action).shape == (BATCH,)
    q_heads = net.get_q_heads(state, action)
    assert len(q_heads) == heads and all(q.shape == (BATCH,) for q in q_heads)


def test_orthogonal_init_and_small_output_layer():
    net = build_mlp([8, 64, 64, 2], output_std=0.1)
    w = net[0].weight  # (64, 8): orthogonal columns scaled by sqrt(2)
    assert torch.allclose(w.T @ w, 2 * torch.eye(8), atol=1e-4)
    out = net[-1].weight  # (2, 64): orthonormal rows scaled by output_std 0.1, every entry within +-0.1
    assert torch.allclose(out @ out.T, 0.01 * torch.eye(2), atol=1e-6) and out.abs().max() <= 0.1
    assert math.isclose(net[0].bias.abs().sum().item(), 0.0)

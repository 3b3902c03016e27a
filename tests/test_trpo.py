"""VPG and TRPO: the natural-gradient parts against hand-computed or explicit values, and the updates' shapes."""
import math

import pytest
import torch
from torch.nn.utils import parameters_to_vector

import AgentZoo
from AgentNet import ActorDiscretePPO, ActorPPO
from AgentZoo import (AgentDiscreteA2C, AgentDiscreteTRPO, AgentDiscreteVPG, AgentTRPO, AgentVPG, RolloutBuffer,
                      conjugate_gradient, fisher_vector_product, frozen_copy, line_search)

STATE_DIM, ACTION_DIM, NET_DIM = 3, 2, 8


def test_conjugate_gradient_solves_a_five_by_five_system():
    torch.manual_seed(0)
    m = torch.randn(5, 5, dtype=torch.float64)
    a = m @ m.T + 5 * torch.eye(5, dtype=torch.float64)  # symmetric positive definite
    x_true = torch.tensor([1.0, -2.0, 0.5, 3.0, -1.5], dtype=torch.float64)
    products = []
    x = conjugate_gradient(lambda v: products.append(v) or a @ v, a @ x_true, iterations=5)
    assert torch.allclose(x, x_true, atol=1e-8) and len(products) <= 5  # exact within n = 5 iterations
    diagonal = torch.tensor([1.0, 2.0, 4.0, 8.0, 16.0], dtype=torch.float64)
    assert torch.allclose(conjugate_gradient(lambda v: diagonal * v, torch.ones(5, dtype=torch.float64), 5), 1 / diagonal)
    # a zero gradient (equal advantages, no entropy bonus) gives the zero step at once, not 0 / 0
    calls = []
    assert torch.equal(conjugate_gradient(lambda v: calls.append(v) or a @ v, torch.zeros(5, dtype=torch.float64)),
                       torch.zeros(5, dtype=torch.float64)) and not calls


class MeanKL(torch.nn.Module):
    """actor.get_kl(state, old).mean() as a module, so that torch.func.functional_call can swap its parameters."""

    def __init__(self, actor):
        super().__init__()
        self.actor = actor

    def forward(self, state, old):
        return self.actor.get_kl(state, old).mean()


@pytest.mark.parametrize("actor_class", [ActorPPO, ActorDiscretePPO])
def test_fisher_vector_product_is_the_hessian_of_the_kl(actor_class):
    """On a tiny network, (F + damping I) v from two backward passes equals the explicit Hessian of the mean
    KL(pi_old || pi_theta) at theta_old, times v, plus damping v."""
    torch.manual_seed(1)
    actor = actor_class(4, STATE_DIM, ACTION_DIM).double()
    torch.nn.init.normal_(actor.net[-1].weight, std=0.5)  # outputs that depend on the state
    state = torch.randn(6, STATE_DIM, dtype=torch.float64)
    old = frozen_copy(actor)
    names, params = zip(*actor.named_parameters())
    theta = parameters_to_vector(params).detach()

    def mean_kl_at(flat: torch.Tensor) -> torch.Tensor:
        pieces = torch.split(flat, [p.numel() for p in params])
        probe = {f"actor.{name}": piece.view(p.shape) for name, piece, p in zip(names, pieces, params, strict=True)}
        return torch.func.functional_call(MeanKL(actor), probe, (state, old))

    assert mean_kl_at(theta).item() == pytest.approx(0.0, abs=1e-12)
    hessian = torch.autograd.functional.hessian(mean_kl_at, theta)  # (P, P)
    assert torch.linalg.eigvalsh(hessian).min() > -1e-9  # a Fisher matrix: positive semi-definite
    product = fisher_vector_product(actor.get_kl(state, old).mean(), list(params), damping=0.1)
    for _ in range(3):
        v = torch.randn_like(theta)
        assert torch.allclose(product(v), hessian @ v + 0.1 * v, atol=1e-9)


def test_kl_of_both_actors_matches_torch_distributions():
    torch.manual_seed(2)
    state = torch.randn(5, STATE_DIM)
    actor, other = ActorPPO(NET_DIM, STATE_DIM, ACTION_DIM), ActorPPO(NET_DIM, STATE_DIM, ACTION_DIM)
    with torch.no_grad():
        other.log_std.copy_(torch.tensor([0.3, -1.0]))
    normal = lambda a: torch.distributions.Normal(a.net(state), a.log_std.exp())
    expected = torch.distributions.kl_divergence(normal(other), normal(actor)).sum(dim=1)  # KL(other || actor)
    assert torch.allclose(actor.get_kl(state, other), expected, atol=1e-6)
    discrete, other = ActorDiscretePPO(NET_DIM, STATE_DIM, 4), ActorDiscretePPO(NET_DIM, STATE_DIM, 4)
    torch.nn.init.normal_(other.net[-1].weight)
    categorical = lambda a: torch.distributions.Categorical(logits=a.net(state))
    assert torch.allclose(discrete.get_kl(state, other),
                          torch.distributions.kl_divergence(categorical(other), categorical(discrete)), atol=1e-6)
    assert torch.allclose(discrete.get_kl(state, discrete), torch.zeros(5), atol=1e-6)


def test_line_search_keeps_the_first_step_inside_the_region_or_restores():
    """Surrogate = x (to increase), KL = x^2 / 2 from x = 0: the full step 1 has KL 0.5 > 0.02; 0.8^j shrinks it
    until KL <= 0.02, i.e. x <= 0.2, first at j = 8 (0.8^8 = 0.168). A step that lowers the surrogate is refused."""
    x = torch.nn.Parameter(torch.zeros(1))
    evaluate = lambda: (x.item(), x.item() ** 2 / 2)
    assert line_search([x], torch.ones(1), evaluate, max_kl=0.02) == 8
    assert x.item() == pytest.approx(0.8 ** 8)
    x.data.zero_()
    assert line_search([x], -torch.ones(1), evaluate, max_kl=0.02) is None and x.item() == 0.0  # only worse steps
    assert line_search([x], torch.ones(1), evaluate, max_kl=1e-9) is None and x.item() == 0.0  # none small enough


def rollout(agent, horizon=16, num_envs=4) -> RolloutBuffer:
    """A made-up rollout of the agent's own actions: random states and rewards, some episode ends."""
    torch.manual_seed(3)
    states = torch.randn(horizon, num_envs, agent.state_dim)
    with torch.no_grad():
        actions, log_probs = agent.act.get_action_log_prob(states)
    buffer = RolloutBuffer()
    buffer.extend(states, actions, log_probs, torch.randn(horizon, num_envs), (torch.rand(horizon, num_envs) > 0.1).float(),
                  (torch.rand(horizon, num_envs) > 0.2).float(), torch.randn(horizon, num_envs, agent.state_dim))
    return buffer


@pytest.mark.parametrize("agent_class, action_dim", [(AgentTRPO, ACTION_DIM), (AgentDiscreteTRPO, 3)])
def test_trpo_step_stays_in_the_trust_region_and_improves_the_surrogate(agent_class, action_dim, monkeypatch):
    """The full step s is as long as the quadratic model allows, s.(F + damping I)s / 2 = max_kl; the step taken
    keeps the exact mean KL within max_kl and raises the surrogate."""
    agent = agent_class(NET_DIM, STATE_DIM, action_dim, device="cpu", max_kl=0.01)
    buffer = rollout(agent)
    batch = agent.get_rollout_batch(buffer)[:4]
    old_act = frozen_copy(agent.act)
    with torch.no_grad():
        surrogate_before = -agent.get_obj_actor(batch).item()
    full_steps = []
    monkeypatch.setattr(AgentZoo, "line_search", lambda params, full_step, *a: full_steps.append(full_step) or
                        line_search(params, full_step, *a))
    obj_actor = agent.update_actor(batch)
    full_step = full_steps[0]
    with torch.no_grad():
        kl = agent.act.get_kl(batch[0], old_act).mean().item()
    assert 0 < kl <= 0.01  # a step was accepted, inside the trust region
    assert -obj_actor > surrogate_before
    agent.act.load_state_dict(old_act.state_dict())  # F where the step started
    product = fisher_vector_product(agent.act.get_kl(batch[0], old_act).mean(), list(agent.act.parameters()),
                                    agent.damping)
    assert (full_step @ product(full_step)).item() / 2 == pytest.approx(0.01, rel=1e-4)
    assert agent.act_optimizer is None  # no Adam for the actor: nothing else moves it, nothing stale is saved


@pytest.mark.parametrize("agent_class, action_dim", [(AgentVPG, ACTION_DIM), (AgentDiscreteVPG, 3),
                                                     (AgentTRPO, ACTION_DIM)])
def test_vpg_steps_the_actor_once_and_the_critic_for_every_minibatch(agent_class, action_dim, monkeypatch):
    agent = agent_class(NET_DIM, STATE_DIM, action_dim, device="cpu")
    buffer = rollout(agent)  # 64 samples
    actor_calls, critic_steps = [], []
    update_actor = type(agent).update_actor
    monkeypatch.setattr(type(agent), "update_actor", lambda self, batch: actor_calls.append(batch[0].shape) or
                        update_actor(self, batch))
    step = agent.cri_optimizer.step
    monkeypatch.setattr(agent.cri_optimizer, "step", lambda *a: critic_steps.append(1) or step(*a))
    before = parameters_to_vector(agent.act.parameters()).clone()
    stats = agent.update_net(buffer, batch_size=16, epochs=3)
    assert actor_calls == [(64, STATE_DIM)]  # one step of the actor, on the whole rollout
    assert len(critic_steps) == 3 * 4  # 3 epochs of 4 minibatches
    assert not torch.equal(before, parameters_to_vector(agent.act.parameters()))
    assert {"obj_critic", "obj_actor"} <= set(stats) and all(math.isfinite(v) for v in stats.values())


def test_vpg_and_trpo_are_overrides():
    """VPG is A2C's actor step with the critic fitted in epochs; TRPO changes the actor step; the discrete ones
    only combine classes."""
    assert set(vars(AgentVPG)) - {"__module__", "__doc__", "__qualname__", "__firstlineno__", "__static_attributes__"} == {
        "train_defaults", "update_net", "update_actor", "fit_critic", "critic_step"}  # the last two: COMA's hooks too
    assert AgentTRPO.train_defaults == AgentVPG.train_defaults | {"steps_per_round": 2048}
    assert AgentVPG.get_obj_actor is AgentDiscreteA2C.get_obj_actor
    for cls, own in ((AgentDiscreteVPG, set()), (AgentDiscreteTRPO, {"hyper_defaults"})):
        assert set(vars(cls)) - {"__module__", "__doc__", "__qualname__", "__firstlineno__", "__static_attributes__"} == own
        assert cls.if_discrete and cls.act_class is ActorDiscretePPO
    # discrete TRPO's own: TRPO's hyperparameters and the discrete agents' action masks (issue 44)
    assert AgentDiscreteTRPO.hyper_defaults == AgentTRPO.hyper_defaults | {"if_action_mask": False}
    assert AgentDiscreteVPG.hyper_defaults["entropy_coef"] == AgentDiscreteA2C.hyper_defaults["entropy_coef"]
    assert AgentTRPO.hyper_defaults["max_kl"] == 0.01
    assert AgentDiscreteTRPO.hyper_defaults["entropy_coef"] == 0.0  # the paper's surrogate, without a bonus

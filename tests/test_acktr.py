"""ACKTR's K-FAC optimizer against the exact natural gradient, its trust region, its refusals and its checkpoint."""
import gymnasium as gym
import pytest
import torch
import torch.nn as nn

from AgentNet import NoisyLinear
from AgentRun import Arguments, train_and_evaluate
from AgentZoo import KFAC, AgentACKTR, AgentDiscreteACKTR, RolloutBuffer

IN, OUT, DAMPING = 3, 2, 0.01


def layer_with_statistics(lr: float, kl_clip: float):
    """A Linear(3, 2) whose factors come from a batch in which every input x_i meets every output gradient g_j, so
    that the exact Fisher of the batch, the mean of vec(g_j a_i^T) vec(g_j a_i^T)^T, is G (x) A exactly; and the
    gradient of an objective. Returns the layer, its optimizer, the exact Fisher and the flat gradient."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(IN, OUT)).double()
    optimizer = KFAC(net, lr=lr, kl_clip=kl_clip, damping=DAMPING, stat_decay=0.99)
    xs, gs = torch.randn(5, IN, dtype=torch.float64), torch.randn(4, OUT, dtype=torch.float64)
    inputs, output_grads = xs.repeat_interleave(len(gs), 0), gs.repeat(len(xs), 1)  # (20, IN), (20, OUT): every pair
    optimizer.update_factors(lambda: (net(inputs) * output_grads).sum())  # d loss / d output_n = g_n
    per_sample = [torch.cat((g.outer(x), g.unsqueeze(1)), dim=1).flatten() for x, g in zip(inputs, output_grads)]
    fisher = torch.stack([v.outer(v) for v in per_sample]).mean(dim=0)  # (OUT * (IN + 1),) squared

    optimizer.zero_grad()
    net(torch.randn(7, IN, dtype=torch.float64)).pow(2).sum().backward()
    layer = net[0]
    gradient = torch.cat((layer.weight.grad, layer.bias.grad.unsqueeze(1)), dim=1).flatten()
    return layer, optimizer, fisher, gradient


def take_step(layer: nn.Linear, optimizer: KFAC) -> torch.Tensor:
    before = torch.cat((layer.weight, layer.bias.unsqueeze(1)), dim=1).detach().clone()
    optimizer.step()
    return (torch.cat((layer.weight, layer.bias.unsqueeze(1)), dim=1).detach() - before).flatten()


def test_kfac_step_on_one_linear_layer_is_the_exact_natural_gradient_step():
    layer, optimizer, fisher, gradient = layer_with_statistics(lr=0.05, kl_clip=1e6)  # the trust region not binding
    damped = fisher + DAMPING * torch.eye(len(gradient), dtype=torch.float64)
    expected = -0.05 * torch.linalg.solve(damped, gradient)
    torch.testing.assert_close(take_step(layer, optimizer), expected)


def test_trust_region_bounds_each_step_to_kl_clip_in_the_quadratic_model():
    layer, optimizer, fisher, gradient = layer_with_statistics(lr=1e6, kl_clip=1e-3)  # the trust region binding
    damped = fisher + DAMPING * torch.eye(len(gradient), dtype=torch.float64)
    step = take_step(layer, optimizer)
    natural = torch.linalg.solve(damped, gradient)
    torch.testing.assert_close(0.5 * step @ damped @ step, torch.tensor(1e-3, dtype=torch.float64))
    torch.testing.assert_close(step / step.norm(), -natural / natural.norm())  # along the natural gradient


def test_kfac_refuses_layers_other_than_linear():
    with pytest.raises(ValueError, match=r"nn.Linear layers .* Sequential.1 is a LayerNorm"):
        KFAC(nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4)), lr=0.25, kl_clip=1e-3, damping=0.01, stat_decay=0.99)
    with pytest.raises(ValueError, match=r"Sequential.0 is a NoisyLinear"):  # a subclass with parameters of its own
        KFAC(nn.Sequential(NoisyLinear(3, 4)), lr=0.25, kl_clip=1e-3, damping=0.01, stat_decay=0.99)
    KFAC(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)), lr=0.25, kl_clip=1e-3, damping=0.01,
         stat_decay=0.99)  # parameter-free activations are fine


def rollout(agent, env_id: str, horizon: int = 32):
    env = gym.make_vec(env_id, num_envs=2, vectorization_mode="sync",
                       vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})
    env.reset(seed=0)
    buffer = RolloutBuffer()
    buffer.extend(*agent.explore_env(env, horizon))
    return buffer


@pytest.mark.parametrize("agent_class, env_id, state_dim, action_dim", [(AgentACKTR, "Pendulum-v1", 3, 1),
                                                                        (AgentDiscreteACKTR, "CartPole-v1", 4, 2)])
def test_acktr_checkpoint_holds_the_factors_and_a_loaded_agent_steps_alike(agent_class, env_id, state_dim,
                                                                          action_dim, tmp_path):
    """The running factors are part of the optimizers' state_dicts: an agent loaded from a checkpoint takes the
    same next step as the one that saved it."""
    torch.manual_seed(0)
    agent = agent_class(64, state_dim, action_dim, device="cpu")
    agent.update_net(rollout(agent, env_id))
    agent.save_or_load_agent(str(tmp_path), if_save=True)
    loaded = agent_class(64, state_dim, action_dim, device="cpu")
    loaded.save_or_load_agent(str(tmp_path), if_save=False)
    buffer = rollout(agent, env_id)
    for one in (agent, loaded):
        torch.manual_seed(1)  # the same samples for the Fisher
        one.update_net(buffer)
    for one, other in ((agent.act, loaded.act), (agent.cri, loaded.cri)):
        for p, q in zip(one.parameters(), other.parameters(), strict=True):
            torch.testing.assert_close(p, q)


@pytest.mark.parametrize("agent, env, target_return, break_step", [("AgentDiscreteACKTR", "CartPole-v1", 475, 80_000),
                                                                   ("AgentACKTR", "Pendulum-v1", -250, 160_000)])
@pytest.mark.learning
def test_acktr_reaches_target(agent, env, target_return, break_step, tmp_path):
    args = Arguments(agent=agent, env=env, seed=0, cwd=str(tmp_path / "run"), break_step=break_step,
                     target_return=target_return, eval_gap=0)
    result = train_and_evaluate(args)
    assert result["if_solved"], result

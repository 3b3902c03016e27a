"""AgentModSAC: independent twin Q networks, the actor's share of steps set by how reliable the critic is, and a
clamped temperature."""
import math

import pytest
import torch

from AgentZoo import AgentModSAC


def test_the_two_q_estimates_share_no_parameter():
    """Clipped double Q (Fujimoto et al. arXiv:1802.09477, section 4.1) takes the smaller of two estimates whose
    errors differ; the 2020 library's two heads on one trunk erred together, and on Ant-v5 the smaller followed
    both up (History/UPDATE_LOG.md, 2026-11-28): no parameter may move both."""
    agent = AgentModSAC(32, 3, 1, device="cpu")
    state, action = torch.randn(8, 3), torch.rand(8, 1) * 2 - 1
    q1, q2 = agent.cri.get_q_heads(state, action)
    params = list(agent.cri.parameters())
    grads_1 = torch.autograd.grad(q1.sum(), params, retain_graph=True, allow_unused=True)
    grads_2 = torch.autograd.grad(q2.sum(), params, allow_unused=True)
    assert not any(g1 is not None and g2 is not None for g1, g2 in zip(grads_1, grads_2))
    assert not torch.equal(q1, q2) and torch.equal(agent.cri(state, action), q1)  # the actor follows q1


def actor_steps(agent: AgentModSAC, obj_critic: float, critic_steps: int) -> int:
    return sum(agent.is_actor_step(torch.tensor(obj_critic)) for _ in range(critic_steps))


def test_the_actor_steps_on_half_the_critic_steps_when_the_critic_is_unreliable_and_on_all_when_it_is():
    unreliable = AgentModSAC(16, 3, 1, device="cpu")
    actor_steps(unreliable, 100.0, 2000)  # the running average reaches the loss: lambda = exp(-50^2) = 0
    assert actor_steps(unreliable, 100.0, 1000) == 500
    reliable = AgentModSAC(16, 3, 1, device="cpu")
    actor_steps(reliable, 0.0, 2000)  # lambda -> 1
    assert actor_steps(reliable, 0.0, 1000) >= 995


def test_a_half_reliable_critic_gets_two_actor_steps_in_three():
    agent = AgentModSAC(16, 3, 1, device="cpu")
    loss = 2 * math.sqrt(-math.log(0.5))  # two heads: a loss per head at which lambda = 0.5
    assert actor_steps(agent, loss, 3000) in (2000, 2001)  # 1 / (2 - 0.5) = 2/3; the first critic step has one


def test_the_critics_loss_counts_relative_to_the_spread_of_its_bootstrap_values():
    """lambda reads the loss over the variance of the batch's bootstrap values, so rewards in other units (a loss
    2^28 times larger with values 2^14 times wider) give the same share of actor steps."""
    agent = AgentModSAC(16, 3, 1, device="cpu")
    next_q = agent.get_next_q(torch.randn(64, 3) * 5)
    assert torch.equal(agent.target_spread, next_q.var())
    unit, wide = AgentModSAC(16, 3, 1, device="cpu"), AgentModSAC(16, 3, 1, device="cpu")
    unit.target_spread, wide.target_spread = torch.tensor(1.0), torch.tensor(2.0 ** 28)
    loss = 2 * math.sqrt(-math.log(0.5))  # lambda = 0.5 at a unit spread
    assert actor_steps(unit, loss, 3000) == actor_steps(wide, loss * 2 ** 28, 3000) in (2000, 2001)


def test_log_alpha_is_clamped_after_its_step():
    agent = AgentModSAC(16, 3, 1, device="cpu")
    batch = (torch.randn(32, 3),)
    with torch.no_grad():
        agent.log_alpha.fill_(5.0)
    agent.extra_update(batch)
    assert agent.log_alpha.item() == 2.0
    with torch.no_grad():
        agent.log_alpha.fill_(-30.0)
    agent.extra_update(batch)
    assert agent.log_alpha.item() == -16.0


def test_a_checkpoint_holds_the_running_loss_and_the_actor_credit(tmp_path):
    agent = AgentModSAC(16, 3, 1, device="cpu")
    actor_steps(agent, 100.0, 700)  # an unreliable critic: lambda near 0
    agent.save_or_load_agent(str(tmp_path), if_save=True)
    resumed = AgentModSAC(16, 3, 1, device="cpu")
    resumed.save_or_load_agent(str(tmp_path), if_save=False)
    assert torch.equal(resumed.actor_share, agent.actor_share)
    assert actor_steps(resumed, 100.0, 100) == actor_steps(agent, 100.0, 100)  # not a fresh start at lambda 0.5


def counted_update(agent_class, critic_steps: int, **hyperparameters) -> dict[str, int]:
    """Critic, actor, temperature and target steps of update_net with critic_steps critic steps, counted by the
    optimizers' and soft_update's calls; a critic loss of 100 per head keeps ModSAC's critic unreliable."""
    import AgentZoo
    from AgentZoo import ReplayBuffer

    agent = agent_class(16, 3, 1, device="cpu", reward_scale=100.0, **hyperparameters)
    buffer = ReplayBuffer(critic_steps, 3, 1, if_discrete=False)
    buffer.extend(torch.randn(critic_steps, 3), torch.rand(critic_steps, 1) * 2 - 1, torch.randn(critic_steps) * 100,
                  torch.full((critic_steps,), 0.99), torch.randn(critic_steps, 3))
    counts = {"critic": 0, "actor": 0, "alpha": 0, "target": 0}
    for name, optimizer in (("critic", agent.cri_optimizer), ("actor", agent.act_optimizer),
                            ("alpha", getattr(agent, "alpha_optimizer", None))):
        if optimizer is None:  # TD3: no temperature
            continue
        optimizer.register_step_post_hook(lambda *_, name=name: counts.__setitem__(name, counts[name] + 1))
    soft_update = AgentZoo.soft_update

    def counting_soft_update(target, online, tau):
        counts["target"] += target is agent.cri_target
        soft_update(target, online, tau)

    AgentZoo.soft_update = counting_soft_update
    try:
        agent.update_net(buffer, batch_size=16, replay_ratio=1.0)
    finally:
        AgentZoo.soft_update = soft_update
    return counts


@pytest.mark.slow
def test_only_the_actor_waits_for_a_reliable_critic_the_target_and_temperature_step_every_time():
    """The 2020 library's ModSAC soft-updates the critic's target and steps alpha after every critic step and gates
    only the actor: 600 critic steps of an unreliable critic give about 300 actor steps and 600 of the others."""
    counts = counted_update(AgentModSAC, 600)
    assert counts["critic"] == counts["target"] == counts["alpha"] == 600
    assert 290 <= counts["actor"] <= 310


def test_td3_delays_its_targets_with_its_actor():
    """TD3's delayed updates (its Algorithm 1): the targets move on the actor's steps, every policy_delay-th."""
    from AgentZoo import AgentTD3

    counts = counted_update(AgentTD3, 600)
    assert counts["critic"] == 600 and counts["actor"] == counts["target"] == 300 and counts["alpha"] == 0

"""The SAC family's critic diverged on BipedalWalkerHardcore-v3 (History/UPDATE_LOG.md, 2026-11-28): the actor's
pre-tanh mean drifted to |u| ~ 90 on rare states, where the tanh correction -log(1 - tanh(u)^2) ~ 2|u| per dimension
made log pi ~ 300 and the soft targets -alpha log pi reached -30,000. ActorSAC bounds what enters the tanh."""
import math

import torch

from AgentNet import ActorSAC


def saturated_actor(action_dim: int = 4) -> ActorSAC:
    """An actor whose last layer gives every state a pre-tanh mean of 90 and a log std of -16."""
    torch.manual_seed(0)
    actor = ActorSAC(16, 3, action_dim)
    last = actor.net[-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.copy_(torch.cat((torch.full((action_dim,), 90.0), torch.full((action_dim,), -16.0))))
    return actor


def test_the_pre_tanh_mean_and_the_log_std_are_bounded():
    mean, log_std = saturated_actor().get_mean_log_std(torch.zeros(5, 3))
    assert mean.abs().max() <= 5.0 and log_std.min() >= -5.0, (mean.abs().max(), log_std.min())


def test_log_pi_of_a_saturated_actor_stays_within_its_bound():
    """log pi per dimension is at most -log std (5) plus the tanh correction 2 |u| - 2 log 2 (|u| <= 5 + 5 std of
    noise), far from the ~300 in all that the unbounded actor gave."""
    action_dim = 4
    action, log_prob = saturated_actor(action_dim).get_action_log_prob(torch.zeros(1000, 3))
    bound = action_dim * (5.0 + 2 * 5.0 + 2 * math.log(2) + 1)
    assert torch.isfinite(log_prob).all() and log_prob.max() < bound, (log_prob.max(), bound)
    assert action.abs().max() <= 1.0

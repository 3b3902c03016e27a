"""AgentTQC (Kuznetsov et al. arXiv:2005.04269): the truncated mixture target and the quantile Huber loss, each computed
by hand on a small batch, and the critic's shapes."""
import math

import torch

from AgentNet import CriticQuantiles
from AgentZoo import AgentTQC


def test_the_critic_holds_every_critics_atoms_and_one_head_of_their_mean():
    critic = CriticQuantiles(16, 3, 2)
    state, action = torch.randn(5, 3), torch.rand(5, 2) * 2 - 1
    quantiles = critic.get_quantiles(state, action)
    assert quantiles.shape == (5, 2, 25)
    (q,) = critic.get_q_heads(state, action)
    assert torch.allclose(q, quantiles.mean(dim=(1, 2))) and q.shape == (5,)


def small_agent() -> AgentTQC:
    """Two critics of three atoms each (num_critics, num_quantiles) and one atom per critic dropped."""
    critic_class = type("SmallQuantiles", (CriticQuantiles,), {"num_critics": 2, "num_quantiles": 3})
    agent = type("SmallTQC", (AgentTQC,), {"cri_class": critic_class, "drop_per_critic": 1})(8, 3, 1, device="cpu")
    with torch.no_grad():
        agent.log_alpha.fill_(math.log(0.5))
    return agent


def test_the_target_pools_the_target_critics_atoms_drops_the_largest_and_subtracts_the_entropy_term():
    agent = small_agent()
    target_atoms = torch.tensor([[[1.0, 5.0, 3.0], [2.0, 9.0, 0.0]]])  # (B=1, N=2, M=3)
    agent.cri_target.get_quantiles = lambda state, action: target_atoms
    agent.act.get_action_log_prob = lambda state: (torch.zeros(1, 1), torch.tensor([-2.0]))
    next_q = agent.get_next_q(torch.zeros(1, 3))
    # pooled and sorted: 0 1 2 3 5 9; the 2 x 1 largest (5, 9) dropped; minus alpha * log_prob = 0.5 * -2 = -1
    assert torch.allclose(next_q, torch.tensor([[1.0, 2.0, 3.0, 4.0]]))


def test_the_critic_objective_is_the_quantile_huber_loss_against_every_kept_target_atom():
    agent = small_agent()
    kept = torch.tensor([[0.0, 1.0, 2.0, 3.0], [-4.0, 0.5, 0.5, 2.0]])  # get_next_q's (B=2, K=4)
    agent.get_next_q = lambda next_state: kept
    quantiles = torch.tensor([[[0.0, 1.0, 4.0], [0.5, 0.5, 0.5]],
                              [[-1.0, 0.0, 1.0], [2.0, 3.0, 4.0]]], requires_grad=True)  # (B, N, M)
    agent.cri.get_quantiles = lambda state, action: quantiles
    reward, discount = torch.tensor([1.0, 0.0]), torch.tensor([0.5, 0.0])  # the second transition terminated
    batch = (torch.zeros(2, 3), torch.zeros(2, 1), reward, discount, torch.zeros(2, 3))
    weights = torch.tensor([1.0, 3.0])
    obj_critic, td_errors = agent.get_obj_critic(batch, weights)

    expected, errors = [], []
    for b in range(2):
        targets = [reward[b].item() + discount[b].item() * k for k in kept[b].tolist()]
        total = 0.0
        for n in range(2):
            for m in range(3):
                fraction = (2 * m + 1) / 6
                for y in targets:
                    u = y - quantiles[b, n, m].item()
                    huber = 0.5 * u * u if abs(u) <= 1 else abs(u) - 0.5
                    total += abs(fraction - (1.0 if u < 0 else 0.0)) * huber / (3 * 4)  # mean over atoms and targets
        expected.append(total * weights[b].item())  # summed over the critics
        errors.append(abs(quantiles[b].mean().item() - sum(targets) / 4))
    assert math.isclose(obj_critic.item(), sum(expected) / 2, rel_tol=1e-6)
    assert torch.allclose(td_errors, torch.tensor(errors))
    obj_critic.backward()
    assert quantiles.grad.abs().sum() > 0  # the loss trains the online atoms; the target is fixed

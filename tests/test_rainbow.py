"""Rainbow's parts and discrete SAC: the sum tree, n-step returns, the C51 projection and loss, noisy layers, and the
discrete SAC target, against values computed by hand."""
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from envs import CounterEnv, make_counter_vector_env
from AgentNet import NoisyLinear, QNetDist, QNetDistDuel
from AgentZoo import (AgentC51, AgentDiscreteSAC, AgentDQN, AgentRainbow, PrioritizedReplayBuffer, ReplayBuffer,
                      n_step_returns, project_distribution)

STATE_DIM, NET_DIM = 3, 16


class SmallTreeBuffer(PrioritizedReplayBuffer):
    """Two children per node, so that five transitions need three levels above the leaves; priorities equal to the
    TD errors (alpha 1, eps 0) so that they can be written by hand."""
    fanout, alpha, eps = 2, 1.0, 0.0


def transitions(ids):
    """Transitions whose reward is their id."""
    ids = torch.as_tensor(ids, dtype=torch.float32)
    return ids[:, None].repeat(1, 2), torch.zeros(len(ids), 1, dtype=torch.long), ids, torch.ones(len(ids)), ids[:, None].repeat(1, 2)


def test_sum_tree_totals_minimum_and_new_transitions_at_the_largest_priority():
    buffer = SmallTreeBuffer(5, 2, 2, if_discrete=True)
    assert [level.shape[0] for level in buffer.sum_tree] == [6, 4, 2, 1]
    buffer.extend(*transitions(range(5)))
    assert buffer.sum_tree[-1].item() == 5 and buffer.min_tree[-1].item() == 1  # new ones at the first max, 1
    buffer.update_priorities(torch.tensor([0, 3, 3]), torch.tensor([3.0, 0.5, 0.5]))  # an index twice: same value
    assert buffer.sum_tree[0][:5].tolist() == [3, 1, 1, 0.5, 1]
    assert buffer.sum_tree[-1].item() == 6.5 and buffer.min_tree[-1].item() == 0.5
    assert buffer.sum_tree[1].tolist() == [4, 1.5, 1, 0] and buffer.sum_tree[2].tolist() == [5.5, 1]
    buffer.extend(*transitions([5]))  # overwrites slot 0 at the largest priority so far, 3
    assert buffer.sum_tree[0][:5].tolist() == [3, 1, 1, 0.5, 1] and buffer.rewards[0] == 5
    buffer.update_priorities(torch.tensor([0]), torch.tensor([2.0]))
    assert buffer.sum_tree[-1].item() == 5.5

    copy = SmallTreeBuffer(5, 2, 2, if_discrete=True)
    copy.load_state_dict(buffer.state_dict())  # the whole tree is rebuilt from the leaves
    assert all(torch.equal(a, b) for a, b in zip(copy.sum_tree + copy.min_tree, buffer.sum_tree + buffer.min_tree))
    assert copy.max_priority.item() == 3


def test_prioritized_sampling_frequencies_and_importance_weights():
    torch.manual_seed(0)
    buffer = SmallTreeBuffer(5, 2, 2, if_discrete=True)
    buffer.extend(*transitions(range(5)))
    priorities = torch.tensor([4.0, 1.0, 2.0, 0.5, 0.5])
    buffer.update_priorities(torch.arange(5), priorities)
    counts = torch.zeros(5)
    for _ in range(400):
        (state, _, reward, _, _), weights, idx = buffer.sample(64)
        assert torch.equal(reward, idx.float()) and torch.equal(state[:, 0], reward)  # columns of the sampled rows
        counts += torch.bincount(idx, minlength=5)
        # (N P(i))^-beta / max_k (N P(k))^-beta = (p_i / p_min)^-beta: 1 for the rarest, smaller for the rest
        assert torch.allclose(weights, (priorities[idx] / 0.5) ** -buffer.beta)
    assert torch.allclose(counts / counts.sum(), priorities / priorities.sum(), atol=0.01)


def test_prioritized_sampling_never_returns_an_empty_slot(monkeypatch):
    buffer = PrioritizedReplayBuffer(100, 2, 2, if_discrete=True)  # 4 of the 32 nodes under the root exist
    buffer.extend(*transitions(range(3)))
    idx = buffer.sample(4096)[2]
    assert idx.max() <= 2 and set(idx.tolist()) == {0, 1, 2}
    # the largest draw, rounded up to the whole sum, still lands on the last transition, not on an empty slot
    monkeypatch.setattr(torch, "rand", lambda *shape, **kwargs: torch.ones(*shape, dtype=torch.float64))
    assert buffer.sample(4)[2].tolist() == [0, 1, 2, 2]


def test_n_step_returns_stop_at_episode_ends_and_at_the_end_of_the_trajectory():
    """Env 0 terminates at step 1; env 1 is truncated at step 2; gamma 0.5, n_step 3, five steps."""
    rewards = torch.tensor([[1.0, 10], [2, 20], [3, 30], [4, 40], [5, 50]])
    not_terminated = torch.ones(5, 2)
    not_terminated[1, 0] = 0
    not_done = not_terminated.clone()
    not_done[2, 1] = 0
    returns, discounts, last = n_step_returns(rewards, not_terminated, not_done, 0.5, 3)
    assert returns[:, 0].tolist() == [1 + 0.5 * 2, 2, 3 + 0.5 * 4 + 0.25 * 5, 4 + 0.5 * 5, 5]
    assert discounts[:, 0].tolist() == [0, 0, 0.125, 0.25, 0.5]  # the terminated episode never bootstraps
    assert last[:, 0].tolist() == [1, 1, 4, 4, 4]
    assert returns[:, 1].tolist() == [10 + 10 + 7.5, 20 + 15, 30, 40 + 25, 50]
    assert discounts[:, 1].tolist() == [0.125, 0.25, 0.5, 0.25, 0.5]  # the truncated one bootstraps from step 2's state
    assert last[:, 1].tolist() == [2, 2, 2, 4, 4]
    one_step = n_step_returns(rewards, not_terminated, not_done, 0.5, 1)
    assert torch.equal(one_step[0], rewards) and torch.equal(one_step[1], 0.5 * not_terminated)
    short = n_step_returns(rewards[:2], not_terminated[:2], not_done[:2], 0.5, 5)  # n_step beyond the horizon
    assert short[0][:, 1].tolist() == [20, 20] and short[1][:, 1].tolist() == [0.25, 0.5]


def test_n_step_transitions_of_a_vector_env_whose_copies_end_at_different_steps():
    """make_counter_vector_env: env 0 terminates every 3 steps, env 1 is truncated every 2. The n-step transition
    from state s bootstraps from the state k steps later (its final observation at an episode's end)."""
    agent = AgentDQN(NET_DIM, 1, 2, device="cpu", gamma=0.5, reward_scale=1.0, n_step=3)
    states, _, rewards, discounts, next_states = agent.explore_env(make_counter_vector_env(), 5)
    by_env = lambda tensor: tensor.reshape(5, 2).T.tolist()
    assert by_env(states) == [[0, 1, 2, 0, 1], [0, 1, 0, 1, 0]]
    assert by_env(next_states) == [[3, 3, 3, 2, 2], [2, 2, 2, 2, 1]]
    assert by_env(rewards) == [[1.75, 1.5, 1, 1.5, 1], [1.5, 1, 1.5, 1, 1]]
    assert by_env(discounts) == [[0, 0, 0, 0.25, 0.5], [0.25, 0.5, 0.25, 0.5, 0.5]]


def test_n_step_transitions_stand_alone_across_calls_and_the_ring_wrap():
    """Each stored transition carries its own return, discount and bootstrap state: a ring that wraps, or the next
    call's steps, change none of them. A transition near a call's end sums fewer steps."""
    env = gym.wrappers.TimeLimit(CounterEnv(terminate_at=100), max_episode_steps=100)
    agent = AgentDQN(NET_DIM, 1, 2, device="cpu", gamma=0.5, reward_scale=1.0, n_step=3)
    buffer = ReplayBuffer(8, 1, 2, if_discrete=True)
    for _ in range(3):  # 15 steps into 8 slots
        buffer.extend(*agent.explore_env(env, 5))
    assert buffer.pointer == 7
    states, rewards, discounts, next_states = (t.flatten().tolist() for t in
                                               (buffer.states, buffer.rewards, buffer.discounts, buffer.next_states))
    steps = {0.25: 2, 0.125: 3, 0.5: 1}
    for state, reward, discount, next_state in zip(states, rewards, discounts, next_states):
        k = steps[discount]
        assert next_state == state + k and reward == sum(0.5 ** j for j in range(k))
        assert k == min(3, 5 - state % 5)  # steps 3 and 4 of each call of five have fewer steps after them


def test_c51_projection_on_three_atoms():
    support = torch.tensor([-1.0, 0.0, 1.0])
    probs = torch.tensor([[0.2, 0.3, 0.5], [0.2, 0.3, 0.5]])
    # row 0: r = 0.5, discount 0.5: atoms move to -0.0, 0.5, 1.0; row 1: r = -3 (terminated): every atom at -3 -> -1
    target_support = torch.tensor([[0.5 - 0.5, 0.5, 1.0], [-3.0, -3.0, -3.0]])
    projected = project_distribution(probs, target_support, support)
    assert torch.allclose(projected, torch.tensor([[0.0, 0.2 + 0.15, 0.15 + 0.5], [1.0, 0.0, 0.0]]))
    assert torch.allclose(projected.sum(dim=1), torch.ones(2))


def test_c51_loss_is_the_cross_entropy_to_the_projected_target():
    torch.manual_seed(0)
    agent = AgentC51(NET_DIM, STATE_DIM, 2, device="cpu", num_atoms=3, v_min=-1.0, v_max=1.0, gamma=0.5)
    with torch.no_grad():  # the target network: every state, action 0 -> atoms (0.2, 0.3, 0.5), action 1 -> (1, 0, 0)
        agent.cri_target.net[-1].weight.zero_()
        agent.cri_target.net[-1].bias.copy_(torch.tensor([0.2, 0.3, 0.5, 1.0, 1e-9, 1e-9]).log())
    state, next_state = torch.randn(2, STATE_DIM), torch.randn(2, STATE_DIM)
    action = torch.tensor([[1], [0]])
    batch = (state, action, torch.tensor([0.5, -3.0]), torch.tensor([0.5, 0.0]), next_state)
    # the next action is the target's best mean: action 0 (mean 0.3) over action 1 (-1); targets as in the test above
    target = torch.tensor([[0.0, 0.35, 0.65], [1.0, 0.0, 0.0]])
    log_probs = agent.cri.get_log_probs(state)[torch.arange(2), action.squeeze(1)]
    cross_entropy = -(target * log_probs).sum(dim=1)
    obj, td_errors = agent.get_obj_critic(batch, torch.tensor([1.0, 0.5]))
    assert torch.allclose(obj, (cross_entropy * torch.tensor([1.0, 0.5])).mean(), atol=1e-5)
    target_entropy = torch.tensor([-(0.35 * np.log(0.35) + 0.65 * np.log(0.65)), 0.0], dtype=torch.float32)
    assert torch.allclose(td_errors, cross_entropy - target_entropy, atol=1e-5)  # priorities from the KL divergence


@pytest.mark.parametrize("net_class", [QNetDist, QNetDistDuel])
def test_distributional_networks_give_the_mean_of_a_distribution(net_class):
    net = net_class(NET_DIM, STATE_DIM, 4, num_atoms=5, v_min=-2.0, v_max=2.0)
    state = torch.randn(6, STATE_DIM)
    log_probs = net.get_log_probs(state)
    assert log_probs.shape == (6, 4, 5) and torch.allclose(log_probs.exp().sum(dim=-1), torch.ones(6, 4))
    assert torch.allclose(net(state), (log_probs.exp() * torch.linspace(-2, 2, 5)).sum(dim=-1))
    with pytest.raises(ValueError, match="num_atoms >= 2 and v_min < v_max"):
        net_class(NET_DIM, STATE_DIM, 4, num_atoms=5, v_min=2.0, v_max=2.0)


def test_noisy_layer_draws_fresh_noise_per_forward_and_none_in_eval_mode():
    torch.manual_seed(0)
    layer = NoisyLinear(4, 3)
    x = torch.randn(1, 4).repeat(2, 1)  # two equal rows in one batch
    first, second = layer(x), layer(x)
    assert torch.equal(first[0], first[1])  # one draw of noise for the whole batch
    assert not torch.allclose(first, second)  # a fresh draw at the next forward
    layer.eval()
    mean = torch.nn.functional.linear(x, layer.weight, layer.bias)
    assert torch.equal(layer(x), mean) and torch.equal(layer(x), mean)


def test_rainbow_acts_greedily_on_mean_weights_when_deterministic_and_explores_with_noise():
    torch.manual_seed(0)
    agent = AgentRainbow(NET_DIM, STATE_DIM, 4, device="cpu")
    assert agent.explore_rate == 0 and agent.n_step == 3 and AgentRainbow.train_defaults["if_per"]
    states = np.random.randn(200, STATE_DIM).astype(np.float32)
    deterministic = agent.select_action(states, deterministic=True)
    assert np.array_equal(deterministic, agent.select_action(states, deterministic=True))
    explored = np.stack([agent.select_action(states) for _ in range(20)])  # (draws, states)
    assert (explored != deterministic).any(axis=1).sum() >= 2  # noisy layers explore, with a fresh draw each call
    assert agent.cri.training  # learning draws noise again after a deterministic action


def test_discrete_sac_soft_value_and_policy_objective_by_hand():
    agent = AgentDiscreteSAC(NET_DIM, STATE_DIM, 2, device="cpu", alpha_init=0.5)
    with torch.no_grad():
        for net, q in ((agent.cri_target.q1, [1.0, 3.0]), (agent.cri_target.q2, [2.0, 2.0]),
                       (agent.cri.q1, [0.0, 4.0]), (agent.cri.q2, [1.0, 1.0])):
            net.net[-1].weight.zero_()
            net.net[-1].bias.copy_(torch.tensor(q))
        agent.act.net[-1].weight.zero_()
        agent.act.net[-1].bias.copy_(torch.tensor([0.25, 0.75]).log())  # pi = (0.25, 0.75) in every state
    state = torch.randn(4, STATE_DIM)
    log_pi = torch.tensor([0.25, 0.75]).log()
    # the value without an entropy reward (SACLite): sum_a pi min of the target twins, (1, 2): 0.25 + 1.5
    expected_value = torch.tensor(1.75)
    assert torch.allclose(agent.get_next_q(state), expected_value.expand(4))
    # policy objective: sum_a pi (alpha log pi - min of the online twins, (0, 1))
    expected_obj = (log_pi.exp() * (0.5 * log_pi - torch.tensor([0.0, 1.0]))).sum()
    assert torch.allclose(agent.get_obj_actor((state,)), expected_obj)
    assert abs(agent.target_entropy - agent.target_entropy_share * np.log(2)) < 1e-9 and agent.target_entropy < 0.56
    alpha = agent.log_alpha.item()
    agent.extra_update((state,))  # entropy of (0.25, 0.75), 0.56, is above the target: alpha shrinks
    assert agent.log_alpha.item() < alpha


def test_a_negative_td_error_gets_the_smallest_priority_and_a_nan_one_is_refused():
    """A float32 KL divergence dips just below 0 where the net fits its target: its priority is eps^alpha, and the
    tree, max_priority and sampling stay finite. A NaN error (a diverged critic) is refused with the indices."""
    buffer = PrioritizedReplayBuffer(4, 2, 2, if_discrete=True)
    buffer.extend(*transitions(range(4)))
    buffer.update_priorities(torch.tensor([1, 2]), torch.tensor([-1.2e-6, 0.5]))
    assert buffer.sum_tree[0][1].item() == pytest.approx(buffer.eps ** buffer.alpha)
    assert torch.isfinite(buffer.sum_tree[-1]).all() and torch.isfinite(buffer.max_priority)
    _, weights, idx = buffer.sample(8)
    assert torch.isfinite(weights).all() and not (idx == 0).all()
    with pytest.raises(ValueError, match=r"non-finite TD errors \[nan\] for replay indices \[3\]"):
        buffer.update_priorities(torch.tensor([2, 3]), torch.tensor([0.5, math.nan]))
    assert torch.isfinite(buffer.sum_tree[-1]).all()  # refused before anything was written

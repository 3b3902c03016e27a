import math
import os

import gymnasium as gym
import numpy as np
import pytest
import torch

from envs import CounterEnv, make_counter_vector_env
from AgentZoo import (AgentD3QN, AgentDDPG, AgentDoubleDQN, AgentDQN, AgentSAC, AgentTD3, ReplayBuffer,
                      optimizer_step, soft_update)

STATE_DIM, ACTION_DIM, NET_DIM = 3, 2, 16
GAMMA = 0.9


def hand_batch():
    """Three transitions: ordinary, terminated (no bootstrap), truncated by a time limit (bootstraps), and the
    discounts gamma * not_terminated that the replay buffer holds for them."""
    state = torch.randn(3, STATE_DIM)
    reward = torch.tensor([1.0, 2.0, 3.0])
    not_terminated = torch.tensor([1.0, 0.0, 1.0])
    next_state = torch.randn(3, STATE_DIM)
    return state, reward, GAMMA * not_terminated, next_state


def critic_objective(agent, batch, weights=torch.ones(())):
    """get_obj_critic's objective, checked to come with the absolute TD errors (B,) a prioritized buffer uses."""
    obj, td_errors = agent.get_obj_critic(batch, weights)
    assert td_errors.shape == (batch[2].shape[0],) and not td_errors.requires_grad and (td_errors >= 0).all()
    return obj


def set_constant_output(linear: torch.nn.Linear, bias: list[float]):
    """Make a network's output layer return `bias` whatever the input."""
    with torch.no_grad():
        linear.weight.zero_()
        linear.bias.copy_(torch.tensor(bias))


def test_soft_update_moves_target_by_tau():
    online, target = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    expected = [0.25 * o + 0.75 * t for o, t in zip(online.parameters(), target.parameters())]
    soft_update(target, online, tau=0.25)
    assert all(torch.allclose(t, e) for t, e in zip(target.parameters(), expected))


def test_optimizer_step_changes_only_its_network():
    net_a, net_b = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)
    before_b = [p.clone() for p in net_b.parameters()]
    before_a = [p.clone() for p in net_a.parameters()]
    optimizer_a = torch.optim.SGD(net_a.parameters(), lr=0.1)
    x = torch.randn(4, 2)
    optimizer_step(optimizer_a, (net_a(x) + net_b(x)).pow(2).mean(), clip_grad_norm=1.0)
    assert all(torch.equal(p, q) for p, q in zip(net_b.parameters(), before_b))
    assert any(not torch.equal(p, q) for p, q in zip(net_a.parameters(), before_a))


@pytest.mark.parametrize("agent_class", [AgentDQN, AgentDoubleDQN, AgentD3QN])
def test_dqn_family_td_target_by_hand(agent_class):
    agent = agent_class(NET_DIM, STATE_DIM, ACTION_DIM, device="cpu", gamma=GAMMA)
    state, reward, discount, next_state = hand_batch()
    action = torch.tensor([[0], [1], [1]])
    # target Q(s', .) = [2, 5], online Q(., .) = [1.5, 0.5] for every state. DQN bootstraps from the target's max, 5;
    # Double DQN from the target's value of the online network's argmax (action 0), 2.
    for net, q in ((agent.cri_target, [2.0, 5.0]), (agent.cri, [1.5, 0.5])):
        if agent_class is AgentD3QN:  # dueling: Q = V + A - mean(A); V = 0, A = q gives Q = q - mean(q)
            set_constant_output(net.value, [0.0])
            set_constant_output(net.advantage, q)
        else:
            set_constant_output(net.net[-1], q)

    next_q = {AgentDQN: 5.0, AgentDoubleDQN: 2.0, AgentD3QN: -1.5}[agent_class]  # D3QN: target [-1.5, 1.5], online argmax 0
    q_target = torch.tensor([1 + GAMMA * next_q, 2.0, 3 + GAMMA * next_q])  # the terminated one keeps its reward only
    q_taken = torch.tensor([1.5, 0.5, 0.5]) - (1.0 if agent_class is AgentD3QN else 0.0)  # dueling: centred, [0.5, -0.5]
    expected = torch.nn.functional.smooth_l1_loss(q_taken, q_target)

    batch = (state, action, reward, discount, next_state)
    assert torch.allclose(agent.get_next_q(next_state), torch.full((3,), next_q))
    assert torch.allclose(critic_objective(agent, batch), expected)
    assert torch.allclose(agent.get_obj_critic(batch, torch.ones(()))[1], (q_taken - q_target).abs())
    weights = torch.tensor([1.0, 0.0, 0.5])  # a prioritized buffer's importance weights scale each transition's loss
    weighted = (torch.nn.functional.smooth_l1_loss(q_taken, q_target, reduction="none") * weights).mean()
    assert torch.allclose(critic_objective(agent, batch, weights), weighted)


@pytest.mark.parametrize("agent_class", [AgentDDPG, AgentTD3])
def test_deterministic_actor_critic_td_target_by_hand(agent_class):
    agent = agent_class(NET_DIM, STATE_DIM, ACTION_DIM, device="cpu", gamma=GAMMA)
    state, reward, discount, next_state = hand_batch()
    action = torch.rand(3, ACTION_DIM) * 2 - 1
    if agent_class is AgentDDPG:
        set_constant_output(agent.cri_target.net[-1], [-4.0])
        set_constant_output(agent.cri.net[-1], [1.0])
        next_q, heads = -4.0, 1
    else:  # twins: the smaller target head, -6, is the bootstrap value whatever the smoothing noise
        set_constant_output(agent.cri_target.q1.net[-1], [-4.0])
        set_constant_output(agent.cri_target.q2.net[-1], [-6.0])
        set_constant_output(agent.cri.q1.net[-1], [1.0])
        set_constant_output(agent.cri.q2.net[-1], [1.0])
        next_q, heads = -6.0, 2
    q_target = torch.tensor([1 + GAMMA * next_q, 2.0, 3 + GAMMA * next_q])
    expected = heads * torch.nn.functional.mse_loss(torch.ones(3), q_target)
    assert torch.allclose(critic_objective(agent, (state, action, reward, discount, next_state)), expected)


def test_td3_bootstraps_from_a_target_action_smoothed_by_clipped_noise():
    """TD3 paper, eq. 14: next_q = min_j Q'_j(s', clip(mu'(s') + clip(eps, -noise_clip, noise_clip), -1, 1)),
    eps ~ N(0, policy_noise^2). With mu'(s') = 0 the action the target critics value is the clipped noise itself:
    P(|eps| > 0.3) = 2 (1 - Phi(0.3 / 0.4)) = 0.45 of its draws sit at +-0.3, and none beyond."""
    torch.manual_seed(0)
    agent = AgentTD3(NET_DIM, STATE_DIM, ACTION_DIM, device="cpu", policy_noise=0.4, noise_clip=0.3)
    set_constant_output(agent.act_target.net[-1], [0.0] * ACTION_DIM)  # mu'(s') = tanh(0)
    valued, get_q_heads = [], agent.cri_target.get_q_heads
    agent.cri_target.get_q_heads = lambda state, action: valued.append(action) or get_q_heads(state, action)
    next_state = torch.randn(4096, STATE_DIM)
    next_q = agent.get_next_q(next_state)
    noise, = valued
    assert noise.shape == (4096, ACTION_DIM) and noise.abs().max() <= 0.3 + 1e-6
    assert 0.42 < (noise.abs() > 0.3 - 1e-6).float().mean() < 0.48 and abs(noise.mean()) < 0.02
    assert torch.equal(next_q, torch.min(*get_q_heads(next_state, noise)))
    noiseless = torch.min(*get_q_heads(next_state, torch.zeros(4096, ACTION_DIM)))
    assert not torch.allclose(next_q, noiseless)

    agent.policy_noise = 0.0  # no smoothing: the target actor's own action
    assert torch.equal(agent.get_next_q(next_state), noiseless) and torch.equal(valued[1], torch.zeros(4096, ACTION_DIM))


def test_sac_td_target_subtracts_entropy_term():
    agent = AgentSAC(NET_DIM, STATE_DIM, ACTION_DIM, device="cpu", gamma=GAMMA, alpha_init=0.5)
    state, reward, discount, next_state = hand_batch()
    set_constant_output(agent.cri_target.q1.net[-1], [-4.0])
    set_constant_output(agent.cri_target.q2.net[-1], [-6.0])
    set_constant_output(agent.cri.q1.net[-1], [1.0])
    set_constant_output(agent.cri.q2.net[-1], [1.0])
    torch.manual_seed(3)
    _, next_log_prob = agent.act.get_action_log_prob(next_state)
    next_value = -6.0 - 0.5 * next_log_prob.detach()  # soft value: min target Q - alpha * log pi
    q_target = reward + discount * next_value
    assert q_target[1] == 2.0
    expected = 2 * torch.nn.functional.mse_loss(torch.ones(3), q_target)
    torch.manual_seed(3)
    obj = critic_objective(agent, (state, torch.zeros(3, ACTION_DIM), reward, discount, next_state))
    assert torch.allclose(obj, expected)


@pytest.mark.parametrize("terminate_at, time_limit, not_terminated", [
    (3, 10, [1, 1, 0, 1, 1, 0, 1]),  # terminated at step 3: no bootstrap
    (10, 3, [1, 1, 1, 1, 1, 1, 1]),  # truncated at step 3 by the time limit: still bootstraps
])
def test_explore_env_keeps_truncation_apart_from_termination(terminate_at, time_limit, not_terminated):
    env = gym.wrappers.TimeLimit(CounterEnv(terminate_at), max_episode_steps=time_limit)
    agent = AgentDQN(NET_DIM, 1, 2, device="cpu", reward_scale=0.5, gamma=GAMMA)
    states, actions, rewards, discounts, next_states = agent.explore_env(env, 7)
    assert discounts.tolist() == pytest.approx([GAMMA * x for x in not_terminated])
    assert states[:, 0].tolist() == [0, 1, 2, 0, 1, 2, 0]  # a new episode starts after each end
    assert next_states[:, 0].tolist() == [1, 2, 3, 1, 2, 3, 1]  # the final observation, not the reset one
    assert rewards.tolist() == [0.5] * 7  # reward_scale applied
    assert actions.shape == (7, 1) and actions.dtype == torch.long
    assert agent.last_state[0] == 1  # the next call continues this episode
    assert agent.explore_env(env, 1)[0][0, 0] == 1


def test_off_policy_vector_explore_returns_transitions_step_by_step():
    """A vector env (num_envs > 1) gives an off-policy agent the transitions one env would, flattened step then env:
    the final observation on an episode's end, and bootstrapping through truncation but not termination."""
    torch.manual_seed(0)
    agent = AgentDQN(NET_DIM, 1, 2, device="cpu", reward_scale=0.5, gamma=0.5)
    states, actions, rewards, discounts, next_states = agent.explore_env(make_counter_vector_env(), 5)
    assert states.shape == next_states.shape == actions.shape == (10, 1) and actions.dtype == torch.long
    assert rewards.shape == discounts.shape == (10,) and rewards.unique().tolist() == [0.5]
    by_env = lambda tensor: tensor.reshape(5, 2).T.tolist()  # row i: env i's five steps
    assert by_env(states) == [[0, 1, 2, 0, 1], [0, 1, 0, 1, 0]]
    assert by_env(next_states) == [[1, 2, 3, 1, 2], [1, 2, 1, 2, 1]]  # 3 and 2: final observations, not reset ones
    assert by_env(discounts * 2) == [[1, 1, 0, 1, 1], [1, 1, 1, 1, 1]]  # env 1's truncations still bootstrap
    assert agent.last_state[:, 0].tolist() == [2, 1]  # the next call continues these episodes

    agent.last_state = None  # another env: start its episodes
    uniform = agent.explore_env(make_counter_vector_env(), 200, if_random=True)[1]
    assert uniform.shape == (400, 1) and 0.4 < uniform.float().mean() < 0.6
    td3 = AgentTD3(NET_DIM, 1, 3, device="cpu")
    assert td3.random_action(4).shape == (4, 3) and abs(td3.random_action(4)).max() <= 1
    with pytest.raises(ValueError, match="autoreset_mode=AutoresetMode.SAME_STEP"):
        agent.explore_env(make_counter_vector_env(gym.vector.AutoresetMode.NEXT_STEP), 2)


def test_random_exploration_is_uniform_whatever_the_policy():
    """The warm-up's actions cover the action space; the untrained policy's stay near its first guess."""
    torch.manual_seed(0)
    dqn = AgentDQN(NET_DIM, 1, 2, device="cpu")  # greedy on CounterEnv: nearly always one action
    env = gym.wrappers.TimeLimit(CounterEnv(50), max_episode_steps=50)
    greedy = dqn.explore_env(env, 400)[1]
    uniform = dqn.explore_env(env, 400, if_random=True)[1]
    assert max(greedy.float().mean(), 1 - greedy.float().mean()) > 0.85
    assert 0.4 < uniform.float().mean() < 0.6 and uniform.shape == (400, 1) and uniform.dtype == torch.long

    td3 = AgentTD3(NET_DIM, 3, 1, device="cpu")
    env = gym.wrappers.RescaleAction(gym.make("Pendulum-v1"), np.float32(-1), np.float32(1))
    env.reset(seed=0)
    noisy = td3.explore_env(env, 400)[1]  # the policy's action near 0 plus noise of std 0.1
    uniform = td3.explore_env(env, 400, if_random=True)[1]
    assert (noisy.abs() > 0.5).float().mean() < 0.05
    assert 0.4 < (uniform.abs() > 0.5).float().mean() < 0.6 and uniform.min() < -0.95 and uniform.max() > 0.95
    assert uniform.shape == (400, 1) and uniform.abs().max() <= 1


@pytest.mark.parametrize("agent_class", [AgentDQN, AgentDoubleDQN, AgentD3QN])
def test_discrete_select_action(agent_class):
    agent = agent_class(NET_DIM, STATE_DIM, 4, device="cpu", explore_rate=1.0)
    one = agent.select_action(np.zeros(STATE_DIM, np.float32), deterministic=True)
    assert one.shape == () and np.issubdtype(one.dtype, np.integer)
    batch = agent.select_action(np.random.randn(500, STATE_DIM).astype(np.float32))
    assert batch.shape == (500,) and set(batch.tolist()) == {0, 1, 2, 3}  # explore_rate 1: uniform
    states = np.random.randn(20, STATE_DIM).astype(np.float32)
    assert np.array_equal(agent.select_action(states, deterministic=True),
                          agent.cri(torch.as_tensor(states)).argmax(1).numpy())


@pytest.mark.parametrize("agent_class", [AgentDDPG, AgentTD3, AgentSAC])
def test_continuous_select_action(agent_class):
    agent = agent_class(NET_DIM, STATE_DIM, ACTION_DIM, device="cpu")
    states = np.random.randn(50, STATE_DIM).astype(np.float32)
    explore = agent.select_action(states)
    deterministic = agent.select_action(states, deterministic=True)
    assert explore.shape == deterministic.shape == (50, ACTION_DIM)
    assert np.abs(explore).max() <= 1 and np.abs(deterministic).max() <= 1
    assert np.array_equal(deterministic, agent.select_action(states, deterministic=True))
    assert not np.array_equal(explore, deterministic)
    assert agent.select_action(states[0]).shape == (ACTION_DIM,)


def test_update_net_returns_floats_and_moves_targets():
    agent = AgentSAC(NET_DIM, STATE_DIM, ACTION_DIM, device="cpu")
    buffer = ReplayBuffer(100, STATE_DIM, ACTION_DIM, if_discrete=False)
    buffer.extend(torch.randn(40, STATE_DIM), torch.rand(40, ACTION_DIM) * 2 - 1, torch.randn(40),
                  torch.ones(40), torch.randn(40, STATE_DIM))
    target_before = [p.clone() for p in agent.cri_target.parameters()]
    stats = agent.update_net(buffer, batch_size=16, replay_ratio=0.25)
    assert set(stats) == {"obj_critic", "obj_actor", "mean_q", "alpha"} and all(isinstance(v, float) for v in stats.values())
    assert buffer.add_size == 0
    assert all(not p.requires_grad for p in agent.cri_target.parameters())
    assert any(not torch.equal(p, q) for p, q in zip(agent.cri_target.parameters(), target_before))


def test_td3_delays_the_actor():
    agent = AgentTD3(NET_DIM, STATE_DIM, ACTION_DIM, device="cpu")
    buffer = ReplayBuffer(100, STATE_DIM, ACTION_DIM, if_discrete=False)
    buffer.extend(torch.randn(4, STATE_DIM), torch.zeros(4, ACTION_DIM), torch.randn(4), torch.ones(4), torch.randn(4, STATE_DIM))
    agent.update_net(buffer, batch_size=4, replay_ratio=1.0)  # 4 critic steps, the actor after the 2nd and the 4th
    assert agent.act_optimizer.state_dict()["state"][0]["step"] == 2
    assert agent.cri_optimizer.state_dict()["state"][0]["step"] == 4


def test_td3_delays_the_actor_and_both_targets_across_calls():
    """One critic step per call: the actor and both targets move every policy_delay = 2 critic steps, counted
    across calls (TD3 paper, Algorithm 1), not at the first step of every call."""
    agent = AgentTD3(NET_DIM, STATE_DIM, ACTION_DIM, device="cpu")
    buffer = ReplayBuffer(100, STATE_DIM, ACTION_DIM, if_discrete=False)
    buffer.extend(torch.randn(8, STATE_DIM), torch.zeros(8, ACTION_DIM), torch.randn(8), torch.ones(8), torch.randn(8, STATE_DIM))
    snapshot = lambda net: [p.clone() for p in net.parameters()]
    moved = lambda net, before: any(not torch.equal(p, q) for p, q in zip(net.parameters(), before))
    obj_actors = []
    for call in range(1, 11):
        buffer.add_size = 1  # one critic step per call
        act_target, cri_target, act = snapshot(agent.act_target), snapshot(agent.cri_target), snapshot(agent.act)
        obj_actors.append(agent.update_net(buffer, batch_size=4, replay_ratio=1.0)["obj_actor"])
        if_delayed_step = call % 2 == 0
        assert moved(agent.act, act) == moved(agent.act_target, act_target) == moved(agent.cri_target, cri_target) \
            == if_delayed_step, call
    assert agent.cri_optimizer.state_dict()["state"][0]["step"] == 10
    assert agent.act_optimizer.state_dict()["state"][0]["step"] == 5
    assert [math.isnan(value) for value in obj_actors] == [True, False] * 5  # the column is there in every call


@pytest.mark.parametrize("agent_class", [AgentDQN, AgentD3QN, AgentDDPG, AgentTD3, AgentSAC])
def test_save_load_round_trip(agent_class, tmp_path):
    action_dim = 2
    agent = agent_class(NET_DIM, STATE_DIM, action_dim, device="cpu")
    buffer = ReplayBuffer(100, STATE_DIM, action_dim, if_discrete=agent.if_discrete)
    actions = torch.randint(action_dim, (32, 1)) if agent.if_discrete else torch.rand(32, action_dim)
    buffer.extend(torch.randn(32, STATE_DIM), actions, torch.randn(32), torch.ones(32), torch.randn(32, STATE_DIM))
    agent.update_net(buffer, batch_size=8, replay_ratio=0.25)  # optimizers now have state
    agent.save_or_load_agent(str(tmp_path), if_save=True)

    torch.manual_seed(123)
    other = agent_class(NET_DIM, STATE_DIM, action_dim, device="cpu")
    other.save_or_load_agent(str(tmp_path), if_save=False)
    for name in ("act", "act_target", "cri", "cri_target"):
        mine, theirs = getattr(agent, name), getattr(other, name)
        if mine is None:
            assert theirs is None
            continue
        assert all(torch.equal(p, q) for p, q in zip(mine.state_dict().values(), theirs.state_dict().values()))
    assert other.cri_optimizer.state_dict()["state"][0]["step"] == agent.cri_optimizer.state_dict()["state"][0]["step"]
    if agent_class is AgentSAC:
        assert torch.equal(other.log_alpha, agent.log_alpha)
    states = np.random.randn(5, STATE_DIM).astype(np.float32)
    assert np.array_equal(agent.select_action(states, deterministic=True), other.select_action(states, deterministic=True))


class Payload:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_load_refuses_pickled_code(tmp_path):
    agent = AgentDQN(NET_DIM, STATE_DIM, 2, device="cpu")
    agent.save_or_load_agent(str(tmp_path), if_save=True)
    torch.save({"net.0.weight": Payload()}, tmp_path / "cri.pt")
    with pytest.raises(ValueError, match=r"cri\.pt cannot be loaded: UnpicklingError: Weights only load failed") as error:
        agent.save_or_load_agent(str(tmp_path), if_save=False)
    assert "does not fit" not in str(error.value)  # an unreadable file is not blamed on another agent's networks


def test_load_of_another_networks_checkpoint_names_the_file(tmp_path):
    AgentD3QN(NET_DIM * 2, STATE_DIM, 2, device="cpu").save_or_load_agent(str(tmp_path), if_save=True)
    agent = AgentD3QN(NET_DIM, STATE_DIM, 2, device="cpu")
    with pytest.raises(ValueError, match=r"cri\.pt does not fit AgentD3QN's cri \(net_dim 16.*another agent, network size"):
        agent.save_or_load_agent(str(tmp_path), if_save=False)


def test_unknown_hyperparameter_is_refused():
    with pytest.raises(ValueError, match=r"unknown hyperparameter\(s\) \['explore_rate'\].*accepts"):
        AgentSAC(NET_DIM, STATE_DIM, ACTION_DIM, explore_rate=0.1)

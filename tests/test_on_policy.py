import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from AgentNet import ActorDiscretePPO, ActorPPO, CriticValue
from AgentZoo import AgentA2C, AgentDiscreteA2C, AgentDiscretePPO, AgentPPO, RolloutBuffer
from envs import make_counter_vector_env

STATE_DIM, ACTION_DIM, NET_DIM = 3, 2, 16


def test_on_policy_networks_shapes_and_log_prob():
    state = torch.randn(7, STATE_DIM)
    actor = ActorPPO(NET_DIM, STATE_DIM, ACTION_DIM)
    action, log_prob = actor.get_action_log_prob(state)
    assert action.shape == (7, ACTION_DIM) and log_prob.shape == (7,)
    mean, std = actor.net(state), actor.log_std.exp()
    expected = torch.distributions.Normal(mean, std).log_prob(action).sum(dim=1)  # independent dimensions
    assert torch.allclose(log_prob, expected)
    new_log_prob, entropy = actor.get_log_prob_entropy(state, action)
    assert torch.allclose(new_log_prob, log_prob) and entropy.shape == (7,)
    assert actor(state * 100).abs().max() <= 1  # the evaluation action is clipped into [-1, 1]
    assert ActorPPO.convert_action_for_env(torch.tensor([-3.0, 0.5, 2.0])).tolist() == [-1.0, 0.5, 1.0]

    discrete = ActorDiscretePPO(NET_DIM, STATE_DIM, 4)
    action, log_prob = discrete.get_action_log_prob(state)
    assert action.shape == (7,) and action.dtype == torch.long and log_prob.shape == (7,)
    assert torch.equal(discrete(state), discrete.net(state).argmax(dim=1))
    assert CriticValue(NET_DIM, STATE_DIM)(state).shape == (7,)
    assert CriticValue(NET_DIM, STATE_DIM)(torch.randn(5, 2, STATE_DIM)).shape == (5, 2)  # (T, N) rollouts


def test_gae_by_hand_with_a_termination_and_a_truncation():
    """5 steps, 2 envs, gamma 0.9, lambda 0.8. Env 0 terminates at t=2 (no bootstrap, chain cut);
    env 1 is truncated at t=1 (bootstraps from its final observation's value 3.0, chain cut)."""
    buffer = RolloutBuffer()
    rewards = torch.tensor([[1.0, 0.0], [1.0, 2.0], [1.0, 0.0], [1.0, 2.0], [1.0, 0.0]])
    not_terminated = torch.ones(5, 2)
    not_terminated[2, 0] = 0.0
    not_done = not_terminated.clone()
    not_done[1, 1] = 0.0
    buffer.extend(torch.zeros(5, 2, 1), torch.zeros(5, 2), torch.zeros(5, 2), rewards, not_terminated, not_done,
                  torch.zeros(5, 2, 1))
    values = torch.tensor([[0.5, 1.0], [0.4, 1.5], [0.3, 0.5], [0.2, 1.0], [0.1, 0.5]])
    # V(next state): the next row's value inside an episode; 9.0 after the termination (must be ignored);
    # 3.0, the final observation's value, after the truncation; after the horizon, 0.7 and 0.8
    next_values = torch.tensor([[0.4, 1.5], [0.3, 3.0], [9.0, 1.0], [0.1, 0.5], [0.7, 0.8]])
    advantages, returns = buffer.get_advantages(values, next_values, gamma=0.9, lambda_gae=0.8)
    expected = torch.tensor([  # delta_t + gamma * lambda * not_done_t * A_{t+1}, worked on paper
        [1.84928, 2.654],  # 0.86 + 0.72 * 1.374;  0.35 + 0.72 * 3.2
        [1.374, 3.2],  # 0.87 + 0.72 * 0.7;  2 + 0.9 * 3.0 - 1.5, chain cut
        [0.7, 1.558048],  # 1 - 0.3, no bootstrap, chain cut;  0.4 + 0.72 * 1.6084
        [1.9916, 1.6084],  # 0.89 + 0.72 * 1.53;  1.45 + 0.72 * 0.22
        [1.53, 0.22],  # 1 + 0.9 * 0.7 - 0.1;  0 + 0.9 * 0.8 - 0.5
    ])
    assert torch.allclose(advantages, expected, atol=1e-5)
    assert torch.allclose(returns, expected + values)


def test_vector_explore_keeps_final_observations_and_flags():
    agent = AgentDiscretePPO(NET_DIM, 1, 2, device="cpu", reward_scale=0.5)
    states, actions, log_probs, rewards, not_terminated, not_done, next_states = agent.explore_env(make_counter_vector_env(), 5)
    assert states.shape == next_states.shape == (5, 2, 1)
    assert actions.shape == log_probs.shape == rewards.shape == (5, 2)
    assert states[:, :, 0].T.tolist() == [[0, 1, 2, 0, 1], [0, 1, 0, 1, 0]]
    assert next_states[:, :, 0].T.tolist() == [[1, 2, 3, 1, 2], [1, 2, 1, 2, 1]]  # 3 and 2: final observations
    assert not_terminated.T.tolist() == [[1, 1, 0, 1, 1], [1, 1, 1, 1, 1]]  # the truncations still bootstrap
    assert not_done.T.tolist() == [[1, 1, 0, 1, 1], [1, 0, 1, 0, 1]]
    assert rewards.unique().tolist() == [0.5]
    assert agent.last_state[:, 0].tolist() == [2, 1]  # the next call continues these episodes


def test_vector_explore_refuses_next_step_autoreset():
    agent = AgentDiscretePPO(NET_DIM, 1, 2, device="cpu")
    with pytest.raises(ValueError, match="autoreset_mode=AutoresetMode.SAME_STEP"):
        agent.explore_env(make_counter_vector_env(gym.vector.AutoresetMode.NEXT_STEP), 2)


@pytest.mark.parametrize("advantage, ratio, expected", [
    (1.0, 2.0, -1.2),  # a good action made much likelier: the gain is clipped at 1 + 0.2
    (-1.0, 2.0, 2.0),  # a bad action made likelier: the loss is not clipped (pessimistic bound)
    (1.0, 0.5, -0.5),  # a good action made less likely: not clipped either
    (-1.0, 0.5, 0.8),  # a bad action made less likely: the gain is clipped at 1 - 0.2
])
def test_ppo_clipped_surrogate_by_hand(advantage, ratio, expected):
    agent = AgentPPO(NET_DIM, STATE_DIM, ACTION_DIM, device="cpu", ratio_clip=0.2, entropy_coef=0.0)
    state = torch.randn(4, STATE_DIM)
    action, log_prob = agent.act.get_action_log_prob(state)
    old_log_prob = log_prob - math.log(ratio)
    obj = agent.get_obj_actor((state, action, old_log_prob, torch.full((4,), advantage)))
    assert math.isclose(obj.item(), expected, rel_tol=1e-5)


def test_a2c_shares_ppo_code():
    for name in ("explore_env", "init_networks", "select_action"):
        assert name not in vars(AgentA2C) and name not in vars(AgentDiscreteA2C)
    assert "update_net" not in vars(AgentDiscreteA2C)  # A2C's: PPO's update, one step on the whole rollout
    assert set(vars(AgentDiscreteA2C)) <= {"__module__", "__doc__", "__qualname__", "__firstlineno__", "__static_attributes__",
                                           "hyper_defaults"}
    # A2C's hyperparameters (no ratio to clip) with the categorical policy's entropy bonus
    assert AgentDiscreteA2C.hyper_defaults == {name: value for name, value in AgentDiscretePPO.hyper_defaults.items()
                                               if name != "ratio_clip"}
    assert AgentDiscreteA2C.hyper_defaults["entropy_coef"] > 0 and "ratio_clip" not in AgentA2C.hyper_defaults
    assert AgentDiscreteA2C.act_class is ActorDiscretePPO and AgentDiscreteA2C.if_discrete
    assert AgentDiscreteA2C.get_obj_actor is AgentA2C.get_obj_actor
    assert "repeat_times" not in AgentA2C.train_defaults and "batch_size" not in AgentA2C.train_defaults  # one step


def test_update_net_on_a_rollout():
    agent = AgentPPO(NET_DIM, 3, 1, device="cpu")
    env = gym.vector.SyncVectorEnv([lambda: gym.wrappers.RescaleAction(gym.make("Pendulum-v1"), np.float32(-1), np.float32(1))] * 1,
                                   autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    buffer = RolloutBuffer()
    buffer.extend(*agent.explore_env(env, 64))
    assert buffer.add_size == 64
    before = [p.clone() for p in agent.act.parameters()]
    stats = agent.update_net(buffer, batch_size=16, repeat_times=2)
    assert set(stats) == {"obj_critic", "obj_actor", "action_std"}
    assert agent.act_optimizer.state_dict()["state"][0]["step"] == 8  # 2 epochs x 4 minibatches
    assert any(not torch.equal(p, q) for p, q in zip(agent.act.parameters(), before))


def stale_rollout(agent_class, env_id: str):
    """A learner, and a rollout its explorer acted with older weights (the multiprocess loop's, a round behind)."""
    torch.manual_seed(0)
    env = gym.vector.SyncVectorEnv([lambda: gym.make(env_id)] * 4, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    behaviour = agent_class(NET_DIM, env.single_observation_space.shape[0], 1 if env_id == "Pendulum-v1" else 2,
                            device="cpu")
    learner = agent_class(NET_DIM, behaviour.state_dim, behaviour.action_dim, device="cpu")
    with torch.no_grad():  # the learner's policy has moved on since the behaviour's weights were sent
        for p, q in zip(learner.act.parameters(), behaviour.act.parameters()):
            p.copy_(q + 0.3 * torch.randn_like(q))
    buffer = RolloutBuffer()
    buffer.extend(*behaviour.explore_env(env, 64))
    return learner, buffer


@pytest.mark.parametrize("agent_class, env_id", [(AgentPPO, "Pendulum-v1"), (AgentDiscretePPO, "CartPole-v1")])
def test_ppo_clips_around_the_policy_that_acted(agent_class, env_id):
    """PPO's trust region is around the policy that acted (the paper's eq. 7, pi_old the sampling policy): a stale
    sample whose ratio is already past 1 + ratio_clip in its advantage's direction gives no gradient; one inside does."""
    learner, buffer = stale_rollout(agent_class, env_id)
    learner.entropy_coef = 0.0  # the bonus has a gradient of its own
    state, action, old_log_prob, advantage, _ = learner.get_rollout_batch(buffer)
    assert torch.equal(old_log_prob, buffer.log_probs.flatten())  # the stored log-probs, not recomputed ones
    with torch.no_grad():
        ratio = (learner.act.get_log_prob_entropy(state, action)[0] - old_log_prob).exp()
    outside = ((ratio > 1 + learner.ratio_clip) & (advantage > 0)).nonzero()[0]
    inside = (ratio - 1).abs().argmin().view(1)
    assert (ratio[inside] - 1).abs() < learner.ratio_clip
    for index, if_gradient in ((outside, False), (inside, True)):
        learner.act.zero_grad()
        learner.get_obj_actor(tuple(x[index] for x in (state, action, old_log_prob, advantage))).backward()
        grad = torch.cat([p.grad.flatten() for p in learner.act.parameters() if p.grad is not None])
        assert bool(grad.abs().max() > 0) == if_gradient


@pytest.mark.parametrize("agent_class", [AgentA2C, AgentDiscreteA2C])
def test_a2c_gradient_is_importance_weighted_on_a_stale_rollout(agent_class):
    """The policy gradient of samples a policy other than the learner's acted on, weighted by pi / pi_old; on the
    learner's own samples (the serial loop) the weight is 1 and it is the plain log pi * advantage gradient."""
    learner, buffer = stale_rollout(agent_class, "CartPole-v1" if agent_class.if_discrete else "Pendulum-v1")
    state, action, old_log_prob, advantage, _ = learner.get_rollout_batch(buffer)
    params = list(learner.act.parameters())
    learner.entropy_coef = 0.0

    def gradients(log_prob_acted):
        got = torch.autograd.grad(learner.get_obj_actor((state, action, log_prob_acted, advantage)), params)
        log_prob = learner.act.get_log_prob_entropy(state, action)[0]
        weight = (log_prob - log_prob_acted).exp().detach()
        expected = torch.autograd.grad(-(weight * log_prob * advantage).mean(), params)
        return got, expected, weight

    got, expected, weight = gradients(old_log_prob)
    assert (weight - 1).abs().max() > 0.2  # the weights matter here
    assert all(torch.allclose(g, e, atol=1e-6) for g, e in zip(got, expected))
    with torch.no_grad():
        own = learner.act.get_log_prob_entropy(state, action)[0]
    got, expected, weight = gradients(own)
    assert torch.allclose(weight, torch.ones_like(weight))
    assert all(torch.allclose(g, e, atol=1e-6) for g, e in zip(got, expected))


@pytest.mark.parametrize("agent_class", [AgentA2C, AgentDiscreteA2C])
def test_a2c_takes_one_step_on_the_whole_rollout(agent_class):
    """A second plain policy-gradient step would follow the gradient on data the stepped policy did not act on:
    batch_size and repeat_times are not A2C's to set (the loop refuses them), and update_net ignores them."""
    if agent_class.if_discrete:
        agent, env = agent_class(NET_DIM, 1, 2, device="cpu"), make_counter_vector_env()
    else:  # actions in [-1, 1] already
        agent = agent_class(NET_DIM, 2, 1, device="cpu")
        env = gym.vector.SyncVectorEnv([lambda: gym.make("MountainCarContinuous-v0")] * 2,
                                       autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    buffer = RolloutBuffer()
    buffer.extend(*agent.explore_env(env, 64))
    agent.update_net(buffer, batch_size=16, repeat_times=4)
    assert agent.act_optimizer.state_dict()["state"][0]["step"] == 1
    assert agent.cri_optimizer.state_dict()["state"][0]["step"] == 1

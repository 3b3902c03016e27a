import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from AgentNet import ActorDiscretePPO, ActorPPO, CriticValue
from AgentZoo import AgentA2C, AgentDiscreteA2C, AgentDiscretePPO, AgentPPO, RolloutBuffer, optimizer_step
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


def entropy_by_hand(agent, state: torch.Tensor) -> torch.Tensor:
    """The policy's entropy, (batch,): a Gaussian's sum over dimensions of log std + log(2 pi e) / 2, whatever the
    state; a categorical's -sum_a pi(a) log pi(a) of the softmax of the actor's output layer."""
    if not agent.if_discrete:
        return (agent.act.log_std + 0.5 * math.log(2 * math.pi * math.e)).sum().expand(state.shape[0])
    probs = agent.act.net(state).softmax(dim=-1)
    return -(probs * probs.log()).sum(dim=-1)


@pytest.mark.parametrize("agent_class", [AgentPPO, AgentDiscretePPO, AgentA2C, AgentDiscreteA2C])
def test_the_entropy_bonus_is_added_to_what_the_actor_maximises(agent_class):
    """At ratio 1 (the policy that acted) the objective is -(advantage + entropy_coef * entropy).mean(); with zero
    advantages a step on it makes the policy more random."""
    torch.manual_seed(0)
    agent = agent_class(NET_DIM, STATE_DIM, 4 if agent_class.if_discrete else ACTION_DIM, device="cpu", entropy_coef=0.5)
    with torch.no_grad():
        agent.act.net[-1].weight.mul_(300.0)  # a peaked policy (a categorical one starts almost uniform)
    state = torch.randn(8, STATE_DIM)
    with torch.no_grad():
        action, log_prob = agent.act.get_action_log_prob(state)
    advantage = torch.randn(8)
    entropy = entropy_by_hand(agent, state)
    obj = agent.get_obj_actor((state, action, log_prob, advantage))
    assert torch.allclose(obj, -(advantage.mean() + 0.5 * entropy.mean()), atol=1e-5)

    optimizer_step(agent.act_optimizer, agent.get_obj_actor((state, action, log_prob, torch.zeros(8))))
    assert (entropy_by_hand(agent, state) - entropy).mean() > 1e-4


def test_optimizer_step_applies_the_gradient_clipped_to_clip_grad_norm():
    """SGD with learning rate 1 moves each parameter by minus its gradient, as clipped: a gradient of 1e6 on each of 4
    parameters (norm 2e6) is scaled to norm 0.5, 0.25 each."""
    net = torch.nn.Linear(3, 1)
    before = [param.detach().clone() for param in net.parameters()]
    optimizer_step(torch.optim.SGD(net.parameters(), lr=1.0), 1e6 * sum(param.sum() for param in net.parameters()),
                   clip_grad_norm=0.5)
    for param, old in zip(net.parameters(), before):
        torch.testing.assert_close(old - param.detach(), torch.full_like(old, 0.25))


def test_ppo_steps_with_gradients_clipped_to_max_grad_norm():
    """Every step of PPO's critic and actor takes gradients of norm at most max_grad_norm; returns in the thousands
    (reward_scale) give the critic gradients far beyond it, and most of the actor's exceed it too (norms 0.4 to 2 on
    this seed): those arrive at the optimizer at exactly that norm."""
    torch.manual_seed(0)
    agent = AgentPPO(NET_DIM, 3, 1, device="cpu", reward_scale=1000.0)
    norms = {"critic": [], "actor": []}
    for name, optimizer in (("critic", agent.cri_optimizer), ("actor", agent.act_optimizer)):
        params = [param for group in optimizer.param_groups for param in group["params"]]
        optimizer.register_step_pre_hook(lambda opt, args, kwargs, name=name, params=params: norms[name].append(
            torch.cat([param.grad.flatten() for param in params if param.grad is not None]).norm().item()))
    env = gym.vector.SyncVectorEnv([lambda: gym.wrappers.RescaleAction(gym.make("Pendulum-v1"), np.float32(-1), np.float32(1))] * 2,
                                   autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    buffer = RolloutBuffer()
    buffer.extend(*agent.explore_env(env, 64))
    agent.update_net(buffer, batch_size=32, epochs=2)
    assert len(norms["critic"]) == len(norms["actor"]) == 8  # 2 epochs x 4 minibatches
    assert all(math.isclose(norm, agent.max_grad_norm, rel_tol=1e-3) for norm in norms["critic"]), norms["critic"]
    assert all(norm <= agent.max_grad_norm * (1 + 1e-4) for norm in norms["actor"]), norms["actor"]
    assert sum(math.isclose(norm, agent.max_grad_norm, rel_tol=1e-3) for norm in norms["actor"]) >= 4  # clipped ones


def test_a2c_shares_ppo_code():
    for name in ("explore_env", "init_networks", "select_action"):
        assert name not in vars(AgentA2C) and name not in vars(AgentDiscreteA2C)
    assert "update_net" not in vars(AgentDiscreteA2C)  # A2C's: one step on the whole rollout, the loop PPO inherits
    assert set(vars(AgentDiscreteA2C)) <= {"__module__", "__doc__", "__qualname__", "__firstlineno__", "__static_attributes__",
                                           "hyper_defaults"}
    # A2C's hyperparameters (no ratio to clip, no epochs for target_kl to stop) with the categorical policy's entropy bonus
    assert AgentDiscreteA2C.hyper_defaults == {name: value for name, value in AgentDiscretePPO.hyper_defaults.items()
                                               if name not in ("ratio_clip", "target_kl")}
    assert AgentDiscreteA2C.hyper_defaults["entropy_coef"] > 0 and "ratio_clip" not in AgentA2C.hyper_defaults
    assert "target_kl" not in AgentA2C.hyper_defaults
    assert AgentDiscreteA2C.act_class is ActorDiscretePPO and AgentDiscreteA2C.if_discrete
    assert AgentDiscreteA2C.get_obj_actor is AgentA2C.get_obj_actor
    assert not {"epochs", "replay_ratio", "batch_size"} & set(AgentA2C.train_defaults)  # one step


def test_update_net_on_a_rollout():
    agent = AgentPPO(NET_DIM, 3, 1, device="cpu")
    env = gym.vector.SyncVectorEnv([lambda: gym.wrappers.RescaleAction(gym.make("Pendulum-v1"), np.float32(-1), np.float32(1))] * 1,
                                   autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    buffer = RolloutBuffer()
    buffer.extend(*agent.explore_env(env, 64))
    assert buffer.add_size == 64
    before = [p.clone() for p in agent.act.parameters()]
    stats = agent.update_net(buffer, batch_size=16, epochs=2)
    assert set(stats) == {"obj_critic", "obj_actor", "clip_fraction_start", "clip_fraction", "approx_kl_start", "approx_kl",
                          "entropy_start", "entropy", "explained_variance", "action_std"}
    assert agent.act_optimizer.state_dict()["state"][0]["step"] == 8  # 2 epochs x 4 minibatches
    assert any(not torch.equal(p, q) for p, q in zip(agent.act.parameters(), before))


def stale_rollout(agent_class, env_id: str):
    """A learner, and a rollout acted by other weights: what the objectives do with a ratio away from 1 (within a round
    every step moves it there; every loop starts a round at 1)."""
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
    learner's own samples (every loop's, at a round's start) the weight is 1: the plain log pi * advantage gradient."""
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


def record_first_ratios(agent_class, monkeypatch, path) -> None:
    """Patch agent_class so that each update round writes to `path` (a line each; the learner may be a child process)
    max |ratio - 1| of the rollout's samples before its first step, the ratio being pi / the log-prob the batch
    carries, and max |pi / pi_behaviour - 1|: how stale the data is that the round learns from."""
    get_rollout_batch = agent_class.get_rollout_batch

    def recording_get_rollout_batch(self, buffer):
        batch = get_rollout_batch(self, buffer)
        state, action, old_log_prob = batch[:3]
        with torch.no_grad():
            log_prob = self.act.get_log_prob_entropy(state, action)[0]
        behaviour = buffer.log_probs.flatten(0, 1)
        with open(path, "a") as f:
            f.write(f"{((log_prob - old_log_prob).exp() - 1).abs().max().item()} "
                    f"{((log_prob - behaviour).exp() - 1).abs().max().item()}\n")
        return batch

    monkeypatch.setattr(agent_class, "get_rollout_batch", recording_get_rollout_batch)


def read_ratios(path) -> list[tuple[float, float]]:
    return [tuple(map(float, line.split())) for line in path.read_text().splitlines()]


@pytest.mark.learning
def test_serial_ppo_with_state_norm_learns_on_the_inputs_its_log_probs_came_from(tmp_path, monkeypatch):
    """The statistics move after the update, not between the rollout and it: the stored log-probs are the learner's
    own at the round's start (pi / pi_behaviour = 1), so no weight and no ratio is off by the statistics' move."""
    from AgentRun import Arguments, train_and_evaluate

    path = tmp_path / "ratios.txt"
    record_first_ratios(AgentPPO, monkeypatch, path)
    train_and_evaluate(Arguments(agent="AgentPPO", env="Pendulum-v1", cwd=str(tmp_path / "run"), break_step=8192,
                                 target_return=1e9, eval_times=1, eval_gap=0, if_multiprocess=False, if_state_norm=True))
    ratios = read_ratios(path)
    assert len(ratios) == 4 and max(max(pair) for pair in ratios) < 1e-4, ratios


@pytest.mark.slow
def test_multiprocess_ppo_ratio_is_one_at_the_first_minibatch_of_every_round(tmp_path, monkeypatch):
    """The explorer waits for the weights trained on its last rollout: the learner learns every round from the policy
    that acted, with that policy's log-probs, so every round starts at ratio 1, and recorder.csv says so
    (clip_fraction_start). (An explorer that took the newest weights without waiting acted a round behind: ratios up
    to 40% outside the clip range at a round's first minibatch.)"""
    from AgentRun import Arguments, train_and_evaluate
    from extras.tools import read_recorder

    path, acted = tmp_path / "ratios.txt", tmp_path / "acted.txt"
    record_first_ratios(AgentDiscretePPO, monkeypatch, path)  # fork: the children inherit the patches
    explore_env = AgentDiscretePPO.explore_env

    def checked_explore_env(self, env, horizon):  # the explorer's: its log-probs against the weights it acts with
        trajectory = explore_env(self, env, horizon)
        with torch.no_grad():
            log_prob = self.act.get_log_prob_entropy(trajectory[0], trajectory[1])[0]
        with open(acted, "a") as f:
            f.write(f"{(log_prob - trajectory[2]).abs().max().item()}\n")
        return trajectory

    monkeypatch.setattr(AgentDiscretePPO, "explore_env", checked_explore_env)
    cwd = str(tmp_path / "run")
    train_and_evaluate(Arguments(agent="AgentDiscretePPO", env="CartPole-v1", cwd=cwd, break_step=20480,
                                 target_return=1e9, eval_times=1, eval_gap=0, if_multiprocess=True, start_method="fork"))
    ratios = read_ratios(path)
    assert len(ratios) >= 8 and max(max(pair) for pair in ratios) < 1e-5, ratios  # no round learns from stale data
    assert max(float(line) for line in acted.read_text().split()) < 1e-5  # the log-probs of the weights that acted
    rows = read_recorder(cwd)
    assert rows and all(row["clip_fraction_start"] == 0.0 for row in rows)
    assert all(0.0 <= row["clip_fraction"] < 1.0 for row in rows)


@pytest.mark.parametrize("agent_class", [AgentA2C, AgentDiscreteA2C])
def test_a2c_takes_one_step_on_the_whole_rollout(agent_class):
    """A second plain policy-gradient step would follow the gradient on data the stepped policy did not act on:
    batch_size and epochs are not A2C's to set (the loop refuses them), and update_net ignores them."""
    if agent_class.if_discrete:
        agent, env = agent_class(NET_DIM, 1, 2, device="cpu"), make_counter_vector_env()
    else:  # actions in [-1, 1] already
        agent = agent_class(NET_DIM, 2, 1, device="cpu")
        env = gym.vector.SyncVectorEnv([lambda: gym.make("MountainCarContinuous-v0")] * 2,
                                       autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    buffer = RolloutBuffer()
    buffer.extend(*agent.explore_env(env, 64))
    agent.update_net(buffer, batch_size=16, epochs=4)
    assert agent.act_optimizer.state_dict()["state"][0]["step"] == 1
    assert agent.cri_optimizer.state_dict()["state"][0]["step"] == 1

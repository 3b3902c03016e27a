"""Multi-agent agents on PettingZoo parallel envs (extras.teams.MultiAgentEnv): the team as one gymnasium env; VDN, QMIX,
QTRAN, MADDPG, MAPPO and COMA against their papers' equations, on matrix games and on mpe2's simple_spread_v3; the
refusals."""
import numpy as np
import pytest
import torch
from mpe2 import simple_speaker_listener_v4, simple_spread_v3
from pettingzoo import ParallelEnv

import AgentRun
import AgentZoo
from AgentNet import MonotonicMixer, QMixNet
from AgentRun import Arguments, make_vector_env, make_env, resume, train_and_evaluate
from extras.tools import replay
from AgentZoo import (AgentCOMA, AgentDiscreteMADDPG, AgentDiscreteMAPPO, AgentMADDPG, AgentMAPPO, AgentQMIX, AgentQTRAN,
                      AgentVDN, ReplayBuffer, RolloutBuffer)
from envs import CLIMBING_GAME, ContinuousMatrixGame, MatrixGame
from test_resume import assert_learned_state, assert_same, saves_and_restores  # noqa: F401 (a fixture)
from extras import teams


def test_the_team_is_one_gymnasium_env():
    env, info = make_env("simple_spread_v3")
    assert (info.if_multi_agent, info.num_agents, info.state_dim, info.action_dim, info.if_discrete) == (True, 3, 18, 5, True)
    state, _ = env.reset(seed=0)
    assert state.shape == (54,) and env.action_space.shape == (3,)
    rewards, length, ended = 0.0, 0, False
    while not ended:
        state, reward, terminated, truncated, _ = env.step(np.array([0, 1, 2]))
        rewards, length, ended = rewards + reward, length + 1, terminated or truncated
    assert (length, terminated, truncated) == (25, False, True)  # max_cycles is a time limit: the last step bootstraps
    continuous = teams.make("simple_spread_v3", continuous_actions=True)
    continuous_info = make_env(continuous)[1]
    assert (continuous_info.action_dim, continuous_info.if_discrete) == (5, False)
    assert AgentRun.env_to_config(continuous)["kwargs"]["continuous_actions"] is True  # config.json can rebuild it


@pytest.mark.parametrize("kwargs", [{}, {"continuous_actions": True}])
def test_an_mpe2_id_steps_as_mpe2s_own_parallel_env(kwargs):
    """make's env skips mpe2's checking wrappers (for speed): the same observations, rewards and ends as the
    parallel_env() they wrap, Box actions outside [0, 1] clipped as their ClipOutOfBounds wrapper does."""
    ours, theirs = teams.MultiAgentEnv(module="mpe2.simple_spread_v3", **kwargs), teams.MultiAgentEnv(
        parallel_env=simple_spread_v3.parallel_env(**kwargs))
    rng = np.random.default_rng(0)
    for episode in range(3):
        assert np.array_equal(ours.reset(seed=episode)[0], theirs.reset(seed=episode)[0])
        ended = False
        while not ended:
            action = ours.action_space.sample() if not kwargs else rng.uniform(-0.5, 1.5, 15).astype(np.float32)
            (state, reward, terminated, truncated, info), expected = ours.step(action), theirs.step(action)
            assert np.array_equal(state, expected[0]) and (reward, terminated, truncated) == expected[1:4]
            assert np.array_equal(info["agent_rewards"], expected[4]["agent_rewards"])
            ended = terminated or truncated


def test_the_team_reward_is_the_sum_of_the_agents_rewards():
    env = make_env(MatrixGame(CLIMBING_GAME))[0]
    env.reset(seed=0)
    assert env.step(np.array([0, 1]))[1] == -30.0  # each agent got -15


def test_observations_of_different_lengths_are_zero_padded():
    team = teams.MultiAgentEnv(parallel_env=PaddedSpeakerListener())
    state, _ = team.reset(seed=0)
    assert team.obs_dim == 11 and state.shape == (22,)
    assert np.all(state[3:11] == 0) and np.all(state[:3] == 1)  # the speaker's 3 numbers, then zeros


class PaddedSpeakerListener(ParallelEnv):
    """simple_speaker_listener_v4's observations (3 and 11 long) with one action space for both agents."""

    metadata = {"name": "padded"}

    def __init__(self):
        self.possible_agents, self.agents, self.max_cycles = ["speaker_0", "listener_0"], [], 25

    def observation_space(self, agent):
        import gymnasium as gym
        return gym.spaces.Box(-np.inf, np.inf, (3 if agent == "speaker_0" else 11,), np.float32)

    def action_space(self, agent):
        import gymnasium as gym
        return gym.spaces.Discrete(5)

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        return {agent: np.ones(self.observation_space(agent).shape, np.float32) for agent in self.agents}, {}


def test_the_monotonic_mixer_never_lowers_q_tot_when_an_agent_q_rises():
    mixer = MonotonicMixer(team_state_dim=6, num_agents=3)
    agent_q = torch.randn(256, 3, requires_grad=True)
    q_tot = mixer(agent_q, torch.randn(256, 6) * 5)
    gradient, = torch.autograd.grad(q_tot.sum(), agent_q)
    assert gradient.min() >= 0 and gradient.max() > 0  # eq. 5 of the QMIX paper: dQ_tot / dq_i >= 0


def test_the_agents_share_one_network_that_tells_them_apart():
    net = QMixNet(16, state_dim=4, action_dim=5, num_agents=3)
    team_state = torch.randn(4).repeat(3)  # every agent sees the same observation
    q = net(team_state)
    assert q.shape == (3, 5) and not torch.allclose(q[0], q[1])  # the one-hot index differs


def test_double_q_target_picks_each_agents_action_online_and_values_the_joint_one_with_the_target():
    agent = AgentQMIX(16, 2, 3, device="cpu", num_agents=2)
    with torch.no_grad():
        for param in agent.cri.parameters():
            param.add_(torch.randn_like(param))  # online and target differ
    next_state = torch.randn(5, 4)
    online_choice = agent.cri(next_state).argmax(dim=-1)  # (5, 2)
    expected = agent.cri_target.get_q_heads(next_state, online_choice)[0]
    assert torch.allclose(agent.get_next_q(next_state), expected)
    assert not torch.equal(online_choice, agent.cri_target(next_state).argmax(dim=-1))  # not the target's own max


def test_a_teams_transitions_hold_every_agents_action():
    env, info = make_vector_env("simple_spread_v3", num_envs=4)
    agent = AgentVDN(16, info.state_dim, info.action_dim, device="cpu", num_agents=3)
    agent.last_state = env.reset(seed=0)[0]
    buffer = ReplayBuffer(100, info.state_dim, info.action_dim, True, num_agents=3)
    buffer.extend(*agent.explore_env(env, 5))
    assert buffer.states.shape == (100, 54) and buffer.actions.shape == (100, 3) and buffer.cur_len == 20
    assert buffer.actions[:20].max() < 5
    assert agent.random_action(4).shape == (4, 3)


def untrained_greedy_actions(agent: str, game: MatrixGame) -> list[int]:
    """The joint action a team's greedy policy takes before it learns, its networks built as the serial loop builds
    them (Learner: the run's seed, then the agent)."""
    args = Arguments(agent=agent, env=game)
    env_info = make_env(game)[1]
    args.resolve(env_info)
    torch.manual_seed(args.seed)
    team = AgentRun.build_agent(args, env_info, device="cpu")
    return team.select_action(np.ones(2, np.float32), deterministic=True).tolist()  # both observe 1


def two_optima_away_from(action: int) -> MatrixGame:
    """(a, a) pays 10 for the two actions a other than `action`, (action, action) 2, a mix 0: each agent's best action
    is the one the other takes, and a team whose agent 0 keeps to `action` is at neither optimum."""
    return MatrixGame(np.diag([2.0 if a == action else 10.0 for a in range(3)]))


@pytest.mark.parametrize("agent, steps", [("AgentVDN", 4096), ("AgentQMIX", 4096), ("AgentDiscreteMAPPO", 8192),
                                          ("AgentCOMA", 8192)])
@pytest.mark.learning
def test_a_team_coordinates_on_one_of_two_optima(tmp_path, agent, steps, monkeypatch):
    # the optima away from the untrained team's greedy play (on seed 0 MAPPO's and COMA's untrained agents both take
    # action 0, which the game [[10, 0, 0], [0, 2, 0], [0, 0, 10]] rewarded with its optimum before any learning)
    game = two_optima_away_from(untrained_greedy_actions(agent, MatrixGame(CLIMBING_GAME))[0])
    settings = dict(agent=agent, env=game, break_step=steps, eval_gap=0, eval_times=1, target_return=10.0)
    result = train_and_evaluate(Arguments(cwd=str(tmp_path / "learns"), **settings))
    assert result["if_solved"]
    # the same run with every optimizer step a no-op: the untrained team reaches neither optimum
    monkeypatch.setattr(AgentZoo, "optimizer_step", lambda optimizer, objective, clip_grad_norm=None: None)
    frozen = train_and_evaluate(Arguments(cwd=str(tmp_path / "frozen"), **settings))
    assert frozen["step"] >= steps and not frozen["if_solved"] and frozen["best_return"] < result["best_return"]


@pytest.mark.learning
def test_continuous_mappo_learns_a_continuous_team_game(tmp_path, monkeypatch):
    """AgentMAPPO's Gaussian actors: the team learns actions 0.5 and -0.5 (return 1; the untrained policy's mean 0
    returns 0.5); with every optimizer step a no-op it does not."""
    settings = dict(agent="AgentMAPPO", env=ContinuousMatrixGame(), break_step=16_384, eval_gap=0, eval_times=1,
                    target_return=0.95)
    assert train_and_evaluate(Arguments(cwd=str(tmp_path / "learns"), **settings))["if_solved"]
    monkeypatch.setattr(AgentZoo, "optimizer_step", lambda optimizer, objective, clip_grad_norm=None: None)
    frozen = train_and_evaluate(Arguments(cwd=str(tmp_path / "frozen"), **settings))
    assert frozen["step"] >= 16_384 and not frozen["if_solved"]


# A random team returns -80 +- 23 (an 8-episode mean: +- 8). Seed 0, evaluated after every round, first reached
# these targets at: VDN 23k steps, QMIX 13k, QTRAN 15k, MADDPG 13k, MAPPO 51k, COMA 26k (History/UPDATE_LOG.md)
@pytest.mark.parametrize("agent, steps, target", [
    ("AgentVDN", 40_000, -50.0), ("AgentQMIX", 20_000, -60.0), ("AgentQTRAN", 30_000, -60.0),
    ("AgentDiscreteMADDPG", 25_000, -55.0), ("AgentDiscreteMAPPO", 80_000, -60.0), ("AgentCOMA", 40_000, -55.0)])
@pytest.mark.learning
def test_learns_simple_spread(tmp_path, agent, steps, target):
    # an evaluation after every round (eval_gap 0): with one a second, a loaded machine evaluated too seldom to see it
    result = train_and_evaluate(Arguments(agent=agent, env="simple_spread_v3", cwd=str(tmp_path), break_step=steps,
                                          target_return=target, eval_gap=0))
    assert result["if_solved"]


# every shape of team agent: replay buffer, rollouts, a critic's target network (COMA), value statistics (MAPPO)
@pytest.mark.parametrize("agent, steps, settings", [
    ("AgentVDN", 1024, {}), ("AgentDiscreteMADDPG", 1024, {"random_steps": 512}), ("AgentQTRAN", 1024, {}),
    ("AgentDiscreteMAPPO", 2048, {}), ("AgentCOMA", 512, {})])
@pytest.mark.slow
def test_a_team_run_resumes_and_replays_as_a_gif(tmp_path, agent, steps, settings, saves_and_restores):
    checkpoints, restored = saves_and_restores
    cwd = str(tmp_path / "run")
    train_and_evaluate(Arguments(agent=agent, env="simple_spread_v3", cwd=cwd, break_step=steps, eval_gap=0, **settings))
    last_checkpoint = checkpoints[-1]
    assert_learned_state(last_checkpoint)
    result = resume(cwd, break_step=2 * steps)
    assert result["step"] >= 2 * steps
    assert len(restored) == 1  # the serial loop's learner, in this process
    assert_same(last_checkpoint, restored[0])  # networks, targets, optimizers, value statistics, buffer, random draws
    shown = replay(cwd, episodes=2)
    assert shown["frames"] == 25 and (tmp_path / "run" / "replay.gif").exists()


@pytest.mark.parametrize("env, message", [
    (lambda: simple_spread_v3.env(), "aec_to_parallel"),
    (lambda: simple_speaker_listener_v4.parallel_env(), "one action space shared by every agent"),
    (lambda: "simple_nothing_v1", "unknown mpe2 env"),
])
def test_envs_the_team_agents_cannot_take_are_refused(tmp_path, env, message):
    with pytest.raises(ValueError, match=message):
        train_and_evaluate(Arguments(agent="AgentVDN", env=env(), cwd=str(tmp_path)))


class OneLeavesEarly(MatrixGame):
    """A two-step game in which agent_1 is done after the first step while agent_0 goes on."""

    def __init__(self):
        super().__init__(CLIMBING_GAME)
        self.max_cycles = 2

    def step(self, actions):
        observations = {agent: np.ones(1, np.float32) for agent in self.agents}
        ends = {"agent_0": False, "agent_1": True}
        self.agents = ["agent_0"]
        return observations, {agent: 0.0 for agent in observations}, ends, {agent: False for agent in ends}, {}


def test_an_agent_that_leaves_mid_episode_is_refused():
    env = make_env(OneLeavesEarly())[0]
    env.reset(seed=0)
    with pytest.raises(ValueError, match="leave mid-episode"):
        env.step(np.array([0, 0]))


class EndsMixed(MatrixGame):
    """The one-step game in which every agent ends at the same step, agent_0 terminated and agent_1 cut by a time
    limit, its dicts listing the agents in the reverse of possible_agents' order."""

    def __init__(self, terminations):
        super().__init__(CLIMBING_GAME)
        self.terminations = terminations

    def reset(self, seed=None, options=None):
        observations, infos = super().reset(seed=seed, options=options)
        return dict(reversed(observations.items())), infos

    def step(self, actions):
        observations, rewards, _, _, infos = super().step(actions)
        agents = list(reversed(observations))
        return ({agent: observations[agent] for agent in agents}, {agent: rewards[agent] for agent in agents},
                {agent: self.terminations[agent] for agent in agents},
                {agent: not self.terminations[agent] for agent in agents}, infos)


@pytest.mark.parametrize("terminations, ends", [
    ({"agent_0": True, "agent_1": False}, (False, True)),  # some terminated, some truncated: the team was cut
    ({"agent_0": True, "agent_1": True}, (True, False)),  # every agent terminated: the team terminated
    ({"agent_0": False, "agent_1": False}, (False, True)),
])
def test_agents_that_all_end_at_one_step_end_the_teams_episode_in_any_dict_order(terminations, ends):
    env = make_env(EndsMixed(terminations))[0]
    env.reset(seed=0)
    assert env.step(np.array([0, 0]))[2:4] == ends


def test_team_agents_and_single_agents_are_refused_on_each_others_envs(tmp_path):
    with pytest.raises(ValueError, match="AgentQMIX is a multi-agent agent, but CartPole-v1 is a single-agent env"):
        train_and_evaluate(Arguments(agent="AgentQMIX", env="CartPole-v1", cwd=str(tmp_path)))
    with pytest.raises(ValueError, match=r"is a multi-agent env \(3 agents\); use one of .*AgentQMIX"):
        train_and_evaluate(Arguments(agent="AgentDQN", env="simple_spread_v3", cwd=str(tmp_path)))
    with pytest.raises(ValueError, match="if_state_norm"):
        train_and_evaluate(Arguments(agent="AgentVDN", env="simple_spread_v3", cwd=str(tmp_path), if_state_norm=True))


def test_maddpg_critics_see_every_agents_action_and_each_actor_only_its_own_observation():
    agent = AgentMADDPG(16, 4, 2, device="cpu", num_agents=3)
    state, action = torch.randn(8, 12), torch.rand(8, 6) * 2 - 1
    q = agent.cri(state, action)
    assert q.shape == (3, 8)
    for i in range(3):  # agent 2's action moves every critic's Q
        moved = action.clone()
        moved[:, 4:] += 0.5
        assert not torch.allclose(agent.cri(state, moved)[i], q[i])
    other_obs = state.clone()
    other_obs[:, 4:] += 1.0  # agents 1 and 2 see something else: agent 0's action stays
    assert torch.equal(agent.act(other_obs)[:, :2], agent.act(state)[:, :2])
    assert agent.select_action(state[0].numpy()).shape == (6,) and agent.random_action(5).shape == (5, 6)


def test_maddpg_actor_i_is_graded_by_critic_i_with_the_others_actions_as_replayed():
    agent = AgentMADDPG(16, 4, 2, device="cpu", num_agents=2)
    state, action = torch.randn(8, 8), torch.rand(8, 4) * 2 - 1
    own = agent.act(state)
    expected = -(agent.cri.critics[0](state, torch.cat((own[:, :2], action[:, 2:]), 1)).mean()
                 + agent.cri.critics[1](state, torch.cat((action[:, :2], own[:, 2:]), 1)).mean()) / 2
    assert torch.allclose(agent.get_obj_actor((state, action)), expected)


def test_maddpg_critic_i_regresses_onto_its_own_target():
    """Each critic's target is its own agent's reward, (B, num_agents) in the batch, plus its own target Q."""
    agent = AgentMADDPG(16, 4, 2, device="cpu", num_agents=2)
    with torch.no_grad():
        for param in agent.cri.parameters():
            param.add_(torch.randn_like(param) * 0.1)
    batch = (torch.randn(8, 8), torch.rand(8, 4) * 2 - 1, torch.randn(8, 2), torch.full((8,), 0.99), torch.randn(8, 8))
    state, action, reward, discount, next_state = batch
    next_q = agent.cri_target(next_state, agent.act_target(next_state))  # (2, 8)
    q = agent.cri(state, action)
    expected = sum(((q[i] - (reward[:, i] + discount * next_q[i])) ** 2).mean() for i in range(2))
    obj_critic, td_errors = agent.get_obj_critic(batch, torch.ones(()))
    assert torch.allclose(obj_critic, expected / 2)  # the mean over both agents' transitions
    assert td_errors.shape == (8,)


@pytest.mark.slow
def test_a_team_trains_in_the_multiprocess_loop(tmp_path):
    # the untrained greedy team runs off: -168 at best over this run's evaluations with every optimizer step a no-op
    # (-168 to -205 each); learning, -71 at the first (step 256), evaluated after every round (eval_gap 0)
    result = train_and_evaluate(Arguments(agent="AgentVDN", env="simple_spread_v3", cwd=str(tmp_path),
                                          if_multiprocess=True, break_step=2048, eval_gap=0))
    assert result["step"] >= 2048 and result["best_return"] > -130


def test_discrete_maddpg_acts_in_integers_and_grades_a_one_hot_that_carries_the_actors_gradient():
    agent = AgentDiscreteMADDPG(16, 4, 5, device="cpu", num_agents=2)
    state = torch.randn(8, 8)
    assert agent.select_action(state[0].numpy()).shape == (2,)
    assert agent.select_action(state.numpy(), deterministic=True).dtype == np.int64
    action = torch.randint(5, (8, 2))
    q_int = agent.cri(state, action)
    one_hot = torch.nn.functional.one_hot(action, 5).flatten(-2).float()
    assert torch.equal(q_int, agent.cri(state, one_hot))  # integer actions are one-hot encoded
    own, replayed = agent.get_team_actions(state, action)
    assert torch.all(own.sum(-1) == 1) and torch.equal(replayed.argmax(-1), action)
    agent.get_obj_actor((state, action)).backward()
    assert all(param.grad is not None and param.grad.abs().sum() > 0 for param in agent.act.parameters())


def climbing_game_batch(size: int) -> tuple[torch.Tensor, ...]:
    """One-step transitions of the climbing game with both actions uniformly random: the full exploration of the QTRAN
    paper's matrix game (section 4.1)."""
    action = torch.randint(3, (size, 2))
    state = torch.ones(size, 2)
    reward = torch.tensor(CLIMBING_GAME, dtype=torch.float32)[action[:, 0], action[:, 1]]
    return state, action, reward, torch.zeros(size), state


@pytest.mark.slow
@pytest.mark.parametrize("agent_class, if_optimum", [(AgentQTRAN, True), (AgentVDN, False)])
def test_qtran_factorises_the_climbing_game_where_vdn_cannot(agent_class, if_optimum):
    torch.manual_seed(0)
    agent = agent_class(64, 1, 3, device="cpu", num_agents=2)
    for _ in range(1000):
        obj_critic = agent.get_obj_critic(climbing_game_batch(256), torch.ones(()))[0]
        agent.cri_optimizer.zero_grad()
        obj_critic.backward()
        agent.cri_optimizer.step()
    # QTRAN's greedy agents take the optimum 11 at (0, 0); VDN's sum of per-agent values cannot put its maximum there,
    # next to the -30s
    assert (agent.cri(torch.ones(2)).argmax(dim=-1).tolist() == [0, 0]) == if_optimum


def test_qtran_objective_is_td_plus_the_two_factorisation_losses_with_q_jt_held_fixed():
    torch.manual_seed(0)
    agent = AgentQTRAN(16, 1, 3, device="cpu", num_agents=2, lambda_opt=0.5, lambda_nopt=2.0)
    batch = climbing_game_batch(8)
    state, action = batch[:2]
    q = agent.cri(state)  # (8, 2, 3)
    q_jt = lambda joint: agent.cri.get_q_heads(state, joint)[0]
    value = agent.cri.get_value(state)
    gap_opt = q.max(-1).values.sum(-1) - q_jt(q.argmax(-1)) + value
    gap_nopt = q.gather(-1, action.unsqueeze(-1)).squeeze(-1).sum(-1) - q_jt(action) + value
    q_target = batch[2] * 1.0  # one-step episodes: no bootstrap
    obj_td = torch.nn.functional.smooth_l1_loss(q_jt(action), q_target)
    expected = obj_td + 0.5 * gap_opt.square().mean() + 2.0 * torch.clamp(gap_nopt, max=0).square().mean()
    obj_critic = agent.get_obj_critic(batch, torch.ones(()))[0]
    assert torch.allclose(obj_critic, expected)
    obj_critic.backward()
    joint_grads = [param.grad.clone() for param in agent.cri.joint_net.parameters()]
    agent.cri.zero_grad()
    obj_td.backward()  # Q_jt's gradient is L_td's alone
    assert all(torch.allclose(g, param.grad) for g, param in zip(joint_grads, agent.cri.joint_net.parameters()))


def test_mappo_shares_one_actor_and_weighs_each_agents_ratio_by_its_own_advantage():
    torch.manual_seed(0)
    agent = AgentDiscreteMAPPO(16, 18, 5, device="cpu", num_agents=3)
    state = torch.randn(6, 54)
    action, log_prob = agent.act.get_action_log_prob(state)
    assert action.shape == log_prob.shape == (6, 3) and agent.select_action(state.numpy()).shape == (6, 3)
    same_obs = torch.randn(18).repeat(3)
    log_probs = agent.act.get_log_probs(same_obs)  # (3, 5): one network, told apart by the agent's index
    assert not torch.allclose(log_probs[0], log_probs[1])
    buffer = RolloutBuffer()
    rollout = agent.explore_env(AgentRun.make_vector_env("simple_spread_v3", num_envs=2)[0], 8)
    buffer.extend(*rollout)
    with torch.no_grad():  # agent i's advantages from its own rewards and value V_i, before the values' statistics move
        values, next_values = agent.cri(buffer.states), agent.cri(buffer.next_states)  # (8, 2, 3) each
        own = buffer.get_advantages(values, next_values, agent.gamma, agent.lambda_gae)[0].flatten(0, 1)
    states, actions, log_probs, advantages, returns = agent.get_rollout_batch(buffer)
    assert log_probs.shape == advantages.shape == returns.shape == (16, 3)  # every agent's own
    assert buffer.rewards.shape == (8, 2, 3)
    torch.testing.assert_close(advantages, (own - own.mean()) / (own.std() + 1e-8), atol=1e-4, rtol=1e-4)
    # the actor's objective: each agent's own ratio, clipped to [0.8, 1.2], times its advantage (here one for all
    # three), with the entropy bonus of each agent's policy; ratios chosen for two samples by three agents, the table
    # worked by hand (the team's joint ratio, 0.825 and 0.675, would give 1.65 for each agent of the first and -0.8 of the second)
    ratio = torch.tensor([[1.5, 0.5, 1.1], [1.5, 0.9, 0.5]])
    team_advantage = torch.tensor([2.0, -1.0])
    surrogate = torch.tensor([[2.4, 1.0, 2.2],  # min(r A, clip(r) A) with A = 2: 1.2 * 2, 0.5 * 2, 1.1 * 2
                              [-1.5, -0.9, -0.8]])  # with A = -1: 1.5 * -1, 0.9 * -1, 0.8 * -1
    all_log_probs = agent.act.get_log_probs(states[:2])  # (2, 3 agents, 5 actions)
    own_log_prob = all_log_probs.gather(-1, actions[:2].unsqueeze(-1)).squeeze(-1)  # (2, 3)
    entropy = -(all_log_probs.exp() * all_log_probs).sum(dim=-1)  # (2, 3)
    obj_actor = agent.get_obj_actor((states[:2], actions[:2], own_log_prob.detach() - ratio.log(),
                                     team_advantage.unsqueeze(1).expand(2, 3)))
    assert agent.ratio_clip == 0.2 and agent.entropy_coef > 0
    assert torch.allclose(obj_actor, -(surrogate + agent.entropy_coef * entropy).mean(), atol=1e-5)
    # value normalisation: the critic's statistics hold the returns it regresses onto, and it learns them standardised
    assert torch.allclose(agent.cri.value_norm.mean.double(), returns.double().mean(dim=0), atol=1e-5)  # each agent's
    normalised = (returns - returns.mean(dim=0)) / returns.std(dim=0, correction=0)
    expected = ((agent.cri.get_normalized_value(states) - normalised) ** 2).mean()
    assert torch.allclose(agent.get_obj_critic(states, returns), expected, atol=1e-4)
    assert torch.allclose(agent.cri(states), agent.cri.get_normalized_value(states) * agent.cri.value_norm.std
                          + agent.cri.value_norm.mean)  # V in the returns' units for the advantages


def test_continuous_mappo_acts_for_every_agent_with_a_log_prob_each():
    agent = AgentMAPPO(16, 4, 2, device="cpu", num_agents=3)
    state = torch.randn(5, 12)
    action, log_prob = agent.act.get_action_log_prob(state)
    assert action.shape == (5, 6) and log_prob.shape == (5, 3)
    assert torch.allclose(agent.act.get_log_prob_entropy(state, action)[0], log_prob, atol=1e-5)
    assert agent.select_action(state[0].numpy(), deterministic=True).shape == (6,)


def test_coma_critic_row_i_ignores_agent_is_own_action_and_its_advantage_is_counterfactual():
    torch.manual_seed(0)
    agent = AgentCOMA(16, 4, 3, device="cpu", num_agents=2)
    state, action = torch.randn(5, 8), torch.randint(3, (5, 2))
    q = agent.cri(state, action)  # (5, 2, 3)
    moved = action.clone()
    moved[:, 0] = (moved[:, 0] + 1) % 3
    q_moved = agent.cri(state, moved)
    assert torch.allclose(q_moved[:, 0], q[:, 0]) and not torch.allclose(q_moved[:, 1], q[:, 1])
    # eq. 4: A_0 = Q(s, a) - sum_a' pi_0(a') Q(s, (a', a_1)), every Q from agent 0's row
    probs = agent.act.get_log_probs(state).exp()  # (5, 2, 3)
    expected = q[torch.arange(5), 0, action[:, 0]] - sum(probs[:, 0, a] * q[:, 0, a] for a in range(3))
    assert torch.allclose(agent.get_advantage(state, action)[:, 0], expected)


def test_discrete_maddpg_target_values_a_sampled_joint_action():
    torch.manual_seed(0)
    agent = AgentDiscreteMADDPG(16, 4, 5, device="cpu", num_agents=2)
    next_state = torch.randn(4096, 8)
    greedy = agent.cri_target(next_state, agent.act_target(next_state))  # (2, 4096)
    sampled = agent.get_next_q(next_state)
    assert sampled.shape == (2, 4096) and not torch.allclose(sampled, greedy)
    logits = agent.act_target.get_logits(next_state)  # the target policy's expectation, by enumerating its 25 pairs
    probs = logits.softmax(-1)
    pairs = torch.cartesian_prod(torch.arange(5), torch.arange(5))  # (25, 2)
    expected = sum(probs[:, 0, a] * probs[:, 1, b] * agent.cri_target(next_state, torch.stack((a, b)).expand(4096, 2))
                   for a, b in pairs)
    assert torch.allclose(sampled.mean(1), expected.mean(1), atol=0.02)

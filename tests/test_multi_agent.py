"""Multi-agent agents on PettingZoo parallel envs (AgentRun.MultiAgentEnv): the team as one gymnasium env, VDN and
QMIX on a coordination game and on mpe2's simple_spread_v3, the monotonic mixer, and the refusals."""
import numpy as np
import pytest
import torch
from mpe2 import simple_speaker_listener_v4, simple_spread_v3
from pettingzoo import ParallelEnv

import AgentRun
from AgentNet import MonotonicMixer, QMixNet
from AgentRun import Arguments, build_env, prepare_env, replay, resume, train_and_evaluate
from AgentZoo import AgentMADDPG, AgentQMIX, AgentVDN, ReplayBuffer
from envs import CLIMBING_GAME, MatrixGame


def test_the_team_is_one_gymnasium_env():
    env, info = prepare_env("simple_spread_v3")
    assert (info.if_multi_agent, info.num_agents, info.state_dim, info.action_dim, info.if_discrete) == (True, 3, 18, 5, True)
    state, _ = env.reset(seed=0)
    assert state.shape == (54,) and env.action_space.shape == (3,)
    rewards, length, ended = 0.0, 0, False
    while not ended:
        state, reward, terminated, truncated, _ = env.step(np.array([0, 1, 2]))
        rewards, length, ended = rewards + reward, length + 1, terminated or truncated
    assert (length, terminated, truncated) == (25, False, True)  # max_cycles is a time limit: the last step bootstraps
    continuous = AgentRun.make_mpe2_env("simple_spread_v3", continuous_actions=True)
    continuous_info = prepare_env(continuous)[1]
    assert (continuous_info.action_dim, continuous_info.if_discrete) == (5, False)
    assert AgentRun.env_to_config(continuous)["kwargs"]["continuous_actions"] is True  # config.json can rebuild it


def test_the_team_reward_is_the_sum_of_the_agents_rewards():
    env = prepare_env(MatrixGame(CLIMBING_GAME))[0]
    env.reset(seed=0)
    assert env.step(np.array([0, 1]))[1] == -30.0  # each agent got -15


def test_observations_of_different_lengths_are_zero_padded():
    team = AgentRun.MultiAgentEnv(parallel_env=PaddedSpeakerListener())
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
    env, info = build_env("simple_spread_v3", num_envs=4)
    agent = AgentVDN(16, info.state_dim, info.action_dim, device="cpu", num_agents=3)
    agent.last_state = env.reset(seed=0)[0]
    buffer = ReplayBuffer(100, info.state_dim, info.action_dim, True, num_agents=3)
    buffer.extend(*agent.explore_env(env, 5))
    assert buffer.states.shape == (100, 54) and buffer.actions.shape == (100, 3) and buffer.cur_len == 20
    assert buffer.actions[:20].max() < 5
    assert agent.random_action(4).shape == (4, 3)


@pytest.mark.parametrize("agent", ["AgentVDN", "AgentQMIX"])
def test_vdn_and_qmix_coordinate_on_one_of_two_optima(tmp_path, agent):
    # (0, 0) and (2, 2) pay 10, a mix of them 0: each agent's best action is the one the other takes
    game = MatrixGame([[10, 0, 0], [0, 2, 0], [0, 0, 10]])
    result = train_and_evaluate(Arguments(agent=agent, env=game, cwd=str(tmp_path), break_step=4096, eval_gap=0,
                                          eval_times=1, target_return=10.0))
    assert result["if_solved"]


# a random team returns -80; VDN reached -50 in 25-35k steps on 5 of 5 seeds, QMIX on 1 (History/UPDATE_LOG.md)
@pytest.mark.parametrize("agent, steps, target", [("AgentVDN", 40_000, -50.0), ("AgentQMIX", 20_000, -60.0)])
def test_learns_simple_spread(tmp_path, agent, steps, target):
    result = train_and_evaluate(Arguments(agent=agent, env="simple_spread_v3", cwd=str(tmp_path), break_step=steps,
                                          target_return=target))
    assert result["if_solved"]


def test_a_team_run_resumes_and_replays_as_a_gif(tmp_path):
    cwd = str(tmp_path / "run")
    train_and_evaluate(Arguments(agent="AgentVDN", env="simple_spread_v3", cwd=cwd, break_step=1024, eval_gap=0))
    result = resume(cwd, break_step=2048)
    assert result["step"] >= 2048
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
    env = prepare_env(OneLeavesEarly())[0]
    env.reset(seed=0)
    with pytest.raises(ValueError, match="leave mid-episode"):
        env.step(np.array([0, 0]))


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
    agent = AgentMADDPG(16, 4, 2, device="cpu", num_agents=2)
    with torch.no_grad():
        for param in agent.cri.parameters():
            param.add_(torch.randn_like(param) * 0.1)
    batch = (torch.randn(8, 8), torch.rand(8, 4) * 2 - 1, torch.randn(8), torch.full((8,), 0.99), torch.randn(8, 8))
    state, action, reward, discount, next_state = batch
    next_q = agent.cri_target(next_state, agent.act_target(next_state))  # (2, 8)
    q = agent.cri(state, action)
    expected = sum(((q[i] - (reward + discount * next_q[i])) ** 2).mean() for i in range(2))
    obj_critic, td_errors = agent.get_obj_critic(batch, torch.ones(()))
    assert torch.allclose(obj_critic, expected / 2)  # the mean over both agents' transitions
    assert td_errors.shape == (8,)


def test_a_team_trains_in_the_multiprocess_loop(tmp_path):
    result = train_and_evaluate(Arguments(agent="AgentVDN", env="simple_spread_v3", cwd=str(tmp_path),
                                          if_multiprocess=True, break_step=2048))
    assert result["step"] >= 2048 and result["best_return"] > -200

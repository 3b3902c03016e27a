"""Issue 43: recurrent PPO. Each env copy's memory is carried across steps and rounds and zeroed exactly at its episode
starts; learning replays the rollout's sequences from the stored memories (ratio 1 at a round's first minibatch);
evaluation runs each episode from a zero memory; what the agent cannot do yet is refused, saying what is accepted."""
import csv
import json
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from AgentRun import Arguments, env_family, make_env, resume, run_episodes, train_and_evaluate
from extras.tools import replay
from AgentNet import NetShape, RecurrentCore
from AgentZoo import AgentDiscreteRecurrentPPO, AgentRecurrentPPO, RecurrentRolloutBuffer, RefusedError, sequences
from envs import CounterEnv, make_counter_vector_env


def explored_agent(horizon=8, rounds=1, seq_len=4, cell="lstm"):
    """A recurrent agent (its core's cell `cell`) that explored `rounds` rollouts of the counter vector env: copy 0
    terminates every 3 steps, copy 1 is truncated every 2; returns the agent and its rollouts."""
    torch.manual_seed(0)
    env = make_counter_vector_env()
    agent = AgentDiscreteRecurrentPPO(NetShape((16, 16), "relu", cell), 1, 2, device="cpu", seq_len=seq_len)
    agent.last_state = env.reset(seed=0)[0]
    return agent, [agent.explore_env(env, horizon) for _ in range(rounds)]


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_memory_is_zeroed_exactly_at_each_copys_episode_starts(cell):
    agent, (first, second) = explored_agent(rounds=2, cell=cell)
    states, episode_start = torch.cat((first[0], second[0])), torch.cat((first[-1], second[-1]))  # (16, 2, 1), (16, 2)
    expected = torch.zeros(16, 2)
    expected[::3, 0] = 1  # copy 0: episodes of 3 steps, terminated
    expected[::2, 1] = 1  # copy 1: episodes of 2 steps, truncated
    torch.testing.assert_close(episode_start, expected)
    # the observation counts the episode's steps: a start is exactly where it reads 0
    torch.testing.assert_close(episode_start, (states[..., 0] == 0).float())

    # the second round starts from the memory the first ended with (carried across rounds, not reset)
    start_memory = first[-2]  # the actor's (rows, N, W): an LSTM's h and c, a GRU's h
    assert start_memory.shape == ({"lstm": 2, "gru": 1}[cell], 2, 16)
    memories = agent.act.core(states, start_memory, episode_start)[1]  # (17, rows, 2, W)
    torch.testing.assert_close(second[-2], memories[8])
    assert second[-2].abs().sum() > 0

    # features at a step equal those from a zero memory exactly where the copy's episode starts
    features = agent.act.core(states, start_memory, episode_start)[0]  # (16, 2, W)
    zero = agent.act.core.zero_memory(32, "cpu")
    from_zero = agent.act.core(states.flatten(0, 1)[None], zero, torch.zeros(1, 32))[0][0].view(16, 2, -1)
    same = torch.isclose(features, from_zero, atol=1e-6).all(dim=-1)  # (16, 2)
    assert torch.equal(same, episode_start.bool())


def test_sequences_are_whole_columns_cut_in_order_with_their_episode_starts():
    agent, (rollout,) = explored_agent(horizon=8, seq_len=4)
    buffer = RecurrentRolloutBuffer()
    buffer.extend(*rollout)
    index, actions, log_probs, advantages, returns = agent.get_rollout_batch(buffer)
    states, episode_start, act_first, cri_first = agent.sequence_inputs
    assert states.shape == (4, 4, 1) and actions.shape == (4, 4)  # (T // seq_len * N, seq_len, ...)
    for k in range(2):
        for n in range(2):  # sequence k * N + n is steps [4k, 4k + 4) of copy n
            torch.testing.assert_close(states[k * 2 + n], buffer.states[4 * k:4 * k + 4, n])
            torch.testing.assert_close(episode_start[k * 2 + n], buffer.episode_start[4 * k:4 * k + 4, n])
    # a sequence that crosses an episode's end is replayed with the start flag inside it: the memory is zeroed there,
    # so each sequence replayed alone gives the whole rollout's features
    whole = agent.act.core(buffer.states, buffer.start_memory, buffer.episode_start)[0]  # (8, 2, W)
    torch.testing.assert_close(agent.features(agent.act, index, 0), sequences(whole, 4))
    assert sequences(torch.arange(16).view(8, 2), 4).tolist() == [[0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14],
                                                                  [9, 11, 13, 15]]


@pytest.mark.parametrize("agent_class, env_id, state_dim, action_dim",
                         [(AgentDiscreteRecurrentPPO, "CartPoleNoVel-v1", 4, 2),
                          (AgentRecurrentPPO, "PendulumNoVel-v1", 3, 1)])
def test_a_rounds_first_minibatch_replays_the_policy_that_acted(agent_class, env_id, state_dim, action_dim):
    env_family(env_id)  # registers the velocity-masked ids (extras.no_velocity), as a run does
    torch.manual_seed(0)
    env = gym.vector.SyncVectorEnv([lambda: gym.make(env_id)] * 3, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    agent = agent_class(32, state_dim, action_dim, device="cpu", seq_len=8)
    agent.last_state = env.reset(seed=1)[0]
    buffer = RecurrentRolloutBuffer()
    for _ in range(2):  # the second round starts mid-episode, from the carried memories
        buffer.extend(*agent.explore_env(env, 32))
        index, actions, log_probs = agent.get_rollout_batch(buffer)[:3]
        with torch.no_grad():
            replayed = agent.get_log_prob_entropy(index, actions)[0]
        torch.testing.assert_close(replayed, log_probs, atol=1e-5, rtol=0)
        stats = agent.update_net(buffer, 64, 2)
        assert stats["clip_fraction_start"] == 0 and stats["approx_kl_start"] < 1e-8, stats


def test_the_critics_memory_goes_on_from_its_pass_over_the_last_rollout():
    """The critic does not act: its memory at a round's start is the one its pass over the last rollout ended with, so
    the values of two rounds are those of one pass over both rollouts."""
    agent, rollouts = explored_agent(horizon=8, rounds=2)
    buffer = RecurrentRolloutBuffer()
    values = []
    for rollout in rollouts:
        buffer.extend(*rollout)
        agent.get_rollout_batch(buffer)
        num_sequences = agent.sequence_inputs[0].shape[0]
        values.append(agent.cri(agent.features(agent.cri, torch.arange(num_sequences), 1)).detach())
    states, episode_start = (torch.cat([rollout[i] for rollout in rollouts]) for i in (0, -1))  # (16, 2, ...)
    whole = agent.cri(agent.cri.core(states, agent.cri.core.zero_memory(2, "cpu"), episode_start)[0]).detach()
    torch.testing.assert_close(torch.cat([sequences(whole[:8], 4), sequences(whole[8:], 4)]), torch.cat(values))
    assert not episode_start[8].all()  # the second round starts mid-episode: its memory carried, not zeroed


def test_evaluation_runs_each_episode_from_a_zero_memory():
    torch.manual_seed(0)
    agent = AgentDiscreteRecurrentPPO(16, 1, 2, device="cpu")
    states = np.arange(6, dtype=np.float32).reshape(3, 2, 1)  # 3 steps of 2 episodes side by side
    agent.reset_memory(2)
    agent.select_action(states[0], deterministic=True)
    agent.keep_memory([1])  # episode 0 ended: episode 1 goes on alone
    agent.select_action(states[1, 1:], deterministic=True)
    side_by_side = agent.act_memory
    agent.reset_memory(1)
    for t in range(2):
        agent.select_action(states[t, 1:], deterministic=True)
    torch.testing.assert_close(side_by_side, agent.act_memory)

    envs = [gym.wrappers.TimeLimit(CounterEnv(terminate_at=length), max_episode_steps=10) for length in (3, 5)]
    assert [length for _, length, _ in run_episodes(envs, agent)] == [3, 5]
    assert agent.act_memory.shape[1] == 0  # every episode ended
    with pytest.raises(RefusedError, match=r"reset_memory\(E\)"):
        agent.select_action(np.zeros((2, 1), np.float32))


@pytest.mark.parametrize("settings, message", [
    (dict(if_state_norm=True), "has no if_state_norm"),
    (dict(if_action_mask=True), "has no if_action_mask"),
    (dict(seq_len=0), "seq_len must be a number >= 1"),
    (dict(seq_len=5, steps_per_round=2048, num_envs=8), "it must divide steps_per_round // num_envs = 256"),
])
def test_what_it_cannot_do_yet_is_refused_with_what_is_accepted(settings, message, tmp_path):
    args = Arguments(agent="AgentDiscreteRecurrentPPO", env="CartPoleNoVel-v1", cwd=str(tmp_path / "run"), **settings)
    with pytest.raises(RefusedError, match=message):
        args.resolve(make_env(args.env)[1])


def test_a_gru_core_steps_its_cell_on_the_encoded_state_and_its_memory_is_h():
    """Hand-stepped: the features of each step are GRUCell(encoder(state), h), h zeroed where an episode starts."""
    torch.manual_seed(0)
    core = RecurrentCore(NetShape((8, 8), "relu", "gru"), 3)
    assert isinstance(core.cell, torch.nn.GRUCell) and core.zero_memory(2, "cpu").shape == (1, 2, 8)
    state, memory = torch.randn(3, 2, 3), torch.randn(1, 2, 8)
    episode_start = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    features, memories = core(state, memory, episode_start)
    h = memory[0]
    for t in range(3):
        h = core.cell(core.encoder(state[t]), h * (1 - episode_start[t])[:, None])
        torch.testing.assert_close(features[t], h)
        torch.testing.assert_close(memories[t + 1], h[None])


def test_a_gru_core_runs_a_sequence_in_spans_that_equal_its_cell_step_by_step():
    """A GRU core runs a sequence (T > 1) in one call over the spans between episode starts: its features, memories
    and gradients are those of GRUCell stepped one step at a time, for copies that start episodes at their first step,
    at consecutive steps (spans of one step), at different steps, or never."""
    torch.manual_seed(0)
    core = RecurrentCore(NetShape((8, 8), "relu", "gru"), 3)
    state, memory = torch.randn(7, 4, 3), torch.randn(1, 4, 8)
    episode_start = torch.zeros(7, 4)
    episode_start[0, 0] = episode_start[3, 0] = 1  # copy 0: starts at its first step and again at step 3
    episode_start[[2, 3, 6], 1] = 1  # copy 1: spans of one step (2 and 3), and a start at the last step
    episode_start[5, 2] = 1  # copy 2: one start; copy 3: none
    features, memories = core(state, memory, episode_start)
    stepped, h = [], memory[0]
    for t in range(7):
        h = core.cell(core.encoder(state[t]), h * (1 - episode_start[t])[:, None])
        stepped.append(h)
    stepped = torch.stack(stepped)  # (7, 4, 8)
    torch.testing.assert_close(features, stepped)
    torch.testing.assert_close(memories, torch.cat((memory[None], stepped[:, None])))
    weights = torch.randn(7, 4, 8)  # a loss that weighs every step of every copy differently
    grads = torch.autograd.grad((features * weights).sum(), list(core.parameters()))
    expected = torch.autograd.grad((stepped * weights).sum(), list(core.parameters()))
    for grad, by_step in zip(grads, expected):
        torch.testing.assert_close(grad, by_step)


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["AgentDiscreteRecurrentPPO"])  # R2D2's: test_r2d2.py, its resume test
def test_a_gru_run_trains_resumes_and_its_saved_actor_acts(agent, tmp_path, capsys):
    """recurrent_cell=gru end to end: the run trains, its config.json rebuilds the GRU actor that actor.pt holds
    (replay), and a resume goes on from the checkpoint (recurrent PPO restarts every env copy's memory at zero, and
    says so)."""
    cwd = str(tmp_path / "run")
    common = dict(agent=agent, env="CartPoleNoVel-v1", seed=0, cwd=cwd, eval_gap=0, eval_times=2, recurrent_cell="gru")
    train_and_evaluate(Arguments(**common, break_step=2048))
    capsys.readouterr()
    result = train_and_evaluate(Arguments(**common, break_step=4096, if_resume=True))
    assert result["step"] >= 4096
    assert "memories are not in the checkpoint; every env copy's restarts at zero" in capsys.readouterr().out
    assert math.isfinite(replay(cwd, episodes=1, render="none")["avg_return"])


@pytest.mark.slow
def test_the_default_cell_is_a_gru_and_a_run_from_before_the_setting_resumes_with_its_lstm(tmp_path):
    """R2D2 and recurrent PPO default to a GRU; a config.json without recurrent_cell (written before it existed, by an
    LSTM run) resumes with an LSTM, which its checkpoint's weights need."""
    for agent, cell in (("AgentR2D2", "gru"), ("AgentRecurrentPPO", "gru"), ("AgentDiscreteRecurrentPPO", "gru")):
        args = Arguments(agent=agent, env="CartPoleNoVel-v1" if agent != "AgentRecurrentPPO" else "PendulumNoVel-v1",
                         cwd=str(tmp_path / agent))
        args.resolve(make_env(args.env)[1])
        assert args.recurrent_cell == cell
    cwd = tmp_path / "run"
    train_and_evaluate(Arguments(agent="AgentR2D2", env="CartPoleNoVel-v1", seed=0, cwd=str(cwd), eval_gap=0,
                                 eval_times=2, break_step=1024, recurrent_cell="lstm"))
    config = json.loads((cwd / "config.json").read_text())
    del config["recurrent_cell"]
    (cwd / "config.json").write_text(json.dumps(config))
    assert resume(str(cwd), break_step=2048)["step"] >= 2048


@pytest.mark.parametrize("agent, cell, message", [
    ("AgentDiscreteRecurrentPPO", "rnn", "recurrent_cell='rnn' is not accepted: one of lstm, gru"),
    ("AgentDiscretePPO", "gru", "AgentDiscretePPO has no recurrent_cell"),
])
def test_a_recurrent_cell_it_cannot_use_is_refused(agent, cell, message, tmp_path):
    args = Arguments(agent=agent, env="CartPoleNoVel-v1", cwd=str(tmp_path / "run"), recurrent_cell=cell)
    with pytest.raises(RefusedError, match=message):
        args.resolve(make_env(args.env)[1])


@pytest.mark.slow
def test_explorer_processes_carry_their_memories_and_every_round_starts_at_ratio_1(tmp_path):
    """Two explorer processes of two env copies each: the learner takes their rollouts, with the memories each started
    from, as four copies side by side, and replays each round's first minibatch with the policy that acted."""
    cwd = tmp_path / "run"
    train_and_evaluate(Arguments(agent="AgentDiscreteRecurrentPPO", env="CartPoleNoVel-v1", seed=0, cwd=str(cwd),
                                 num_workers=2, num_envs=2, steps_per_round=256, break_step=2048, eval_gap=0, eval_times=2))
    with open(cwd / "recorder.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) >= 2 and int(rows[-1]["step"]) >= 2048
    assert all(float(row["clip_fraction_start"]) == 0 for row in rows), [row["clip_fraction_start"] for row in rows]


def test_a_sequence_length_that_cuts_the_rollout_unevenly_and_export_are_refused():
    agent, (rollout,) = explored_agent(horizon=6, seq_len=4)
    buffer = RecurrentRolloutBuffer()
    buffer.extend(*rollout)
    with pytest.raises(RefusedError, match="seq_len must divide it"):
        agent.update_net(buffer, 8, 1)
    with pytest.raises(RefusedError, match="if_recurrent=False"):
        agent.policy_module()


@pytest.mark.parametrize("agent, if_solved", [("AgentDiscreteRecurrentPPO", True), ("AgentDiscretePPO", False)])
@pytest.mark.learning
def test_it_learns_cartpole_without_velocities_where_ppo_without_memory_does_not(agent, if_solved, tmp_path):
    """The velocities are zeroed: the policy must infer them from the observations before (a memory task). At seed 0
    the recurrent agent passes 150 within 16k steps, the memoryless one stays near 50 in 30k."""
    args = Arguments(agent=agent, env="CartPoleNoVel-v1", seed=0, cwd=str(tmp_path / "run"), break_step=30_000,
                     target_return=150, eval_gap=0, eval_times=4)
    result = train_and_evaluate(args)
    assert result["if_solved"] == if_solved, result

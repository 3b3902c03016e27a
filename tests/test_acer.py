"""ACER's Retrace targets, trust region and segment replay, checked by hand; its refusals and its learning."""
import pytest
import torch

import AgentRun
from AgentRun import Arguments, train_and_evaluate
from AgentZoo import AgentACER, SegmentReplayBuffer, retrace_targets, trust_region_step
from test_resume import assert_learned_state, assert_same, saves_and_restores  # noqa: F401 (a fixture)


def test_retrace_targets_of_a_three_step_segment_with_an_episode_end():
    """Two envs, three steps, gamma 0.5. Env 0 terminates at step 1 and starts a new episode at step 2; env 1
    is cut by a time limit at step 0 (bootstrapping from its final observation's value) and runs on."""
    gamma = 0.5
    rewards = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    not_terminated = torch.tensor([[1.0, 1.0], [0.0, 1.0], [1.0, 1.0]])
    not_done = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    next_values = torch.tensor([[10.0, 20.0], [30.0, 40.0], [50.0, 60.0]])  # V(next_state[t])
    q_taken = torch.tensor([[7.0, 8.0], [9.0, 10.0], [11.0, 12.0]])
    traces = torch.tensor([[1.0, 1.0], [0.5, 0.25], [1.0, 0.5]])
    q_ret = retrace_targets(rewards, not_terminated, not_done, next_values, q_taken, traces, gamma)
    # env 0: step 2 ends the segment: 5 + 0.5 * 50 = 30; step 1 terminates: 3; step 0 continues into step 1:
    # 1 + 0.5 * (10 + 0.5 * (3 - 9)) = 4.5
    # env 1: step 2: 6 + 0.5 * 60 = 36; step 1: 4 + 0.5 * (40 + 0.5 * (36 - 12)) = 30; step 0, truncated:
    # 2 + 0.5 * 20 = 12, no correction from step 1 (another episode)
    torch.testing.assert_close(q_ret, torch.tensor([[4.5, 12.0], [3.0, 30.0], [30.0, 36.0]]))


def test_trust_region_step_leaves_a_small_step_alone_and_projects_a_large_one():
    k = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    g = torch.tensor([[0.5, 2.0], [3.0, 2.0]])  # k.g = 0.5 within delta 1; k.g = 3 beyond it
    z = trust_region_step(g, k, delta=1.0)
    torch.testing.assert_close(z, torch.tensor([[0.5, 2.0], [1.0, 2.0]]))  # the second moved along k to k.z = 1


def test_segment_replay_keeps_the_newest_rollouts_and_survives_a_checkpoint():
    buffer = SegmentReplayBuffer(max_len=12)  # rollouts of 2 steps x 2 envs: three of them
    for i in range(5):
        buffer.extend(torch.full((2, 2, 3), float(i)), torch.zeros(2, 2, dtype=torch.long), torch.zeros(2, 2, 4),
                      torch.zeros(2, 2), torch.ones(2, 2), torch.ones(2, 2), torch.zeros(2, 2, 3))
    assert [float(rollout[0][0, 0, 0]) for rollout in buffer.rollouts] == [2.0, 3.0, 4.0]
    assert float(buffer.states[0, 0, 0]) == 4.0  # the newest is also the current rollout
    assert float(buffer.sample()[0][0, 0, 0]) in (2.0, 3.0, 4.0)
    restored = SegmentReplayBuffer(max_len=12)
    restored.load_state_dict(buffer.state_dict())
    for rollout, copy in zip(buffer.rollouts, restored.rollouts, strict=True):
        for tensor, tensor_copy in zip(rollout, copy, strict=True):
            assert torch.equal(tensor, tensor_copy)


def test_acer_refuses_a_box_action_space(tmp_path):
    with pytest.raises(ValueError, match=r"AgentACER is for Discrete action spaces, but Pendulum-v1 has a Box action "
                                         r"space; use one of .*AgentPPO"):
        train_and_evaluate(Arguments(agent="AgentACER", env="Pendulum-v1", cwd=str(tmp_path / "run")))


def test_acer_run_resumes_with_its_replay(tmp_path, saves_and_restores):
    """The resumed learner starts from the saved replay's rollouts, networks (the average policy too), optimizer
    statistics and random draws."""
    checkpoints, restored = saves_and_restores
    cwd = str(tmp_path / "run")
    train_and_evaluate(Arguments(agent="AgentACER", env="CartPole-v1", cwd=cwd, break_step=2048, eval_gap=0,
                                 target_return=1e9))
    buffer = SegmentReplayBuffer(50_000)
    AgentRun.load_checkpoint(cwd, AgentACER(64, 4, 2, device="cpu"), buffer)
    assert len(buffer.rollouts) == 8  # 2048 steps in rollouts of 256
    last_checkpoint = checkpoints[-1]
    assert_learned_state(last_checkpoint)
    assert "act_target" in last_checkpoint["agent"] and last_checkpoint["buffer"]["states"].shape[0] == 8
    result = AgentRun.resume(cwd, break_step=4096)
    assert result["stop_reason"] == "reached break_step 4096"
    assert len(restored) == 1
    assert_same(last_checkpoint, restored[0])


@pytest.mark.learning
def test_acer_reaches_target(tmp_path):
    args = Arguments(agent="AgentACER", env="CartPole-v1", seed=0, cwd=str(tmp_path / "run"), break_step=40_000,
                     target_return=475, eval_gap=0)
    result = train_and_evaluate(args)
    assert result["if_solved"], result


@pytest.mark.learning
def test_acer_learns_on_the_standardised_states_it_acts_on():
    """With if_state_norm, a learning step on raw states equals the same step of an agent without state norm on states
    standardised by hand: every forward of learn_rollout (the actor's logits included) standardises as acting does."""
    torch.manual_seed(0)
    normed = AgentACER(16, 3, 2, device="cpu", if_state_norm=True)
    normed.update_state_norm(torch.randn(500, 3) * 3.0 + 2.0)
    norm = normed.act.state_norm
    plain = AgentACER(16, 3, 2, device="cpu")
    for name in ("act", "act_target", "cri"):
        getattr(plain, name).load_state_dict(getattr(normed, name).state_dict(), strict=False)  # not the statistics
    state, next_state = torch.randn(4, 2, 3) * 3.0 + 2.0, torch.randn(4, 2, 3) * 3.0 + 2.0  # (T, N, state_dim)
    with torch.no_grad():
        mu_log_probs = normed.act.get_log_probs(state)  # the acting policy's
    action = torch.distributions.Categorical(logits=mu_log_probs).sample()
    reward, ones = torch.randn(4, 2), torch.ones(4, 2)
    objectives = normed.learn_rollout((state, action, mu_log_probs, reward, ones, ones, next_state))
    expected = plain.learn_rollout((norm(state), action, mu_log_probs, reward, ones, ones, norm(next_state)))
    torch.testing.assert_close(objectives, expected)
    for name in ("act", "cri"):
        for p_normed, p_plain in zip(getattr(normed, name).net.parameters(), getattr(plain, name).net.parameters()):
            torch.testing.assert_close(p_normed, p_plain)

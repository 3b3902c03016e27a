"""Issue 43: R2D2. The value rescaling and its inverse, sequence priorities, sequences that never mix episodes without a
mask, a burn-in that only refreshes the stored memory, n-step double-Q targets (termination against truncation), each
env copy's memory zeroed at its episode starts, the refusals, resume, and learning CartPoleNoVel-v1."""
import math

import numpy as np
import pytest
import torch

from AgentRun import Arguments, merge_trajectories, make_env, train_and_evaluate
from AgentZoo import (AgentR2D2, RefusedError, SequenceReplayBuffer, sequence_priority, value_rescale,
                      value_rescale_inverse)
from envs import make_counter_vector_env
from extras.tools import replay


def test_value_rescaling_and_its_inverse_on_hand_computed_values():
    x = torch.tensor([0.0, 3.0, -3.0, 8.0, 99.0], dtype=torch.float64)
    expected = torch.tensor([0.0, 1.003, -1.003, 2.008, 9.099], dtype=torch.float64)  # sqrt(x + 1) - 1 + x / 1000
    torch.testing.assert_close(value_rescale(x), expected)
    torch.testing.assert_close(value_rescale_inverse(expected), x)
    wide = torch.linspace(-1e4, 1e4, 2001, dtype=torch.float64)
    torch.testing.assert_close(value_rescale_inverse(value_rescale(wide)), wide)
    torch.testing.assert_close(value_rescale(value_rescale_inverse(wide)), wide)


def test_sequence_priority_mixes_max_and_mean_of_the_unmasked_errors():
    td = torch.tensor([[1.0, 3.0, 2.0, 10.0], [0.5, 0.5, 4.0, 4.0]]).T  # (T, B)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]]).T  # the first sequence's last step is masked
    # 0.9 * 3 + 0.1 * 2 and 0.9 * 4 + 0.1 * 2.25
    torch.testing.assert_close(sequence_priority(td, mask, 0.9), torch.tensor([2.9, 3.825]))


def hand_made_steps(rewards, ends, state_dim=1, width=4):
    """One env copy's steps as AgentR2D2.explore_env returns them, (T, ...) each: `ends` maps a step that ends its
    episode to 'terminated' or 'truncated'; the state is the step's global index, the memory its index too."""
    num_steps, episode_steps, step = len(rewards), [], 0
    for t in range(num_steps):
        episode_steps.append(step)
        step = 0 if t in ends else step + 1
    index = torch.arange(num_steps, dtype=torch.float32)
    not_terminated = torch.tensor([0.0 if ends.get(t) == "terminated" else 1.0 for t in range(num_steps)])
    not_done = torch.tensor([0.0 if t in ends else 1.0 for t in range(num_steps)])
    return (index[:, None].expand(-1, state_dim), torch.zeros((num_steps, 1), dtype=torch.long),
            torch.tensor(rewards, dtype=torch.float32), not_terminated, not_done,
            100 + index[:, None].expand(-1, state_dim), torch.tensor(episode_steps),
            index.view(-1, 1, 1).expand(-1, 2, width))


def test_sequences_are_cut_per_episode_with_masks_and_hand_computed_n_step_returns():
    """Episode A: steps 0-2, terminated; episode B: steps 3-5, truncated; episode C from step 6 on. seq_len 4 (stride
    2), burn-in 2, gamma 0.5, 3-step returns."""
    buffer = SequenceReplayBuffer(64, 1, 4, num_envs=1, seq_len=4, burn_in=2, gamma=0.5, n_step=3)
    steps = hand_made_steps([1, 2, 4, 8, 16, 32, 1, 1, 1, 1, 1, 1], {2: "terminated", 5: "truncated"})
    buffer.extend(*(tensor[:7] for tensor in steps))  # two rounds: sequences span them
    assert buffer.cur_len == 3 and buffer.add_size == 7  # those whose last step is in; add_size counts steps
    buffer.extend(*(tensor[7:] for tensor in steps))
    states, actions, returns, discounts, last, boot_states, episode_start, mask, memory = (
        tensor[:buffer.cur_len] for tensor in buffer.tensors)
    # anchors (first training steps): A's steps 0 and 2, B's 0 (step 3) and 2 (step 5), C's 0 (step 6), 2 (step 8);
    # C's step 4 (10) needs steps up to 13; each window starts burn_in = 2 steps before its anchor
    assert states[:, :, 0].tolist() == [[0, 0, 0, 1, 2, 3], [0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6],
                                        [3, 4, 5, 6, 7, 8], [4, 5, 6, 7, 8, 9], [6, 7, 8, 9, 10, 11]]
    assert states[0, :2, 0].tolist() == [0, 0]  # padding before the run's first step, with a zero memory
    assert memory[:, 0, 0].tolist() == [0, 0, 1, 3, 4, 6]  # the explorer's memory at each window's first step
    # the mask: the anchor's episode's training steps only; the next episode's steps are padding
    assert mask.tolist() == [[0, 0, 1, 1, 1, 0], [0, 0, 1, 0, 0, 0], [0, 0, 1, 1, 1, 0],
                             [0, 0, 1, 0, 0, 0], [0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1]]
    assert episode_start.tolist()[1] == [1, 0, 0, 1, 0, 0]  # the LSTM's memory is zeroed at steps 0 and 3
    # hand-computed 3-step returns of the sequence of steps 0-5 at its training steps 2, 3 (A's end, B's start):
    # step 2 terminated: 4, no bootstrap; step 3: 8 + 0.5 * 16 + 0.25 * 32, truncated at step 5: bootstrap
    # 0.125 * V(final observation of step 5)
    assert returns[1, 2:4].tolist() == [4, 8 + 8 + 8] and discounts[1, 2:4].tolist() == [0, 0.125]
    assert last[1, 2:4].tolist() == [2, 5] and boot_states[1, 2:4, 0].tolist() == [102, 105]
    # step 5 (sequence of steps 3-8, training index 2): truncated itself, 1-step bootstrap from its final observation
    assert (returns[3, 2].item(), discounts[3, 2].item(), boot_states[3, 2, 0].item()) == (32, 0.5, 105)
    # the sequence's end shortens a return: step 10 of the last sequence (steps 6-11) at index 4 gets 2 steps
    assert (returns[5, 4].item(), discounts[5, 4].item(), last[5, 4].item()) == (1.5, 0.25, 5)
    assert (returns[5, 2].item(), discounts[5, 2].item()) == (1.75, 0.125)  # a whole 3-step return inside episode C


def small_agent(**hyperparameters) -> AgentR2D2:
    torch.manual_seed(0)
    settings = dict(seq_len=4, burn_in=2, gamma=0.5, n_step=3) | hyperparameters
    return AgentR2D2(16, 1, 2, device="cpu", **settings)


def hand_made_batch(n_step=3):
    buffer = SequenceReplayBuffer(64, 1, 16, num_envs=1, seq_len=4, burn_in=2, gamma=0.5, n_step=n_step)
    steps = hand_made_steps([1, 2, 4, 8, 16, 32, 1, 1, 1, 1, 1, 1], {2: "terminated", 5: "truncated"}, width=16)
    buffer.extend(*(tensor * 0.1 if tensor.is_floating_point() and tensor.dim() > 1 else tensor for tensor in steps))
    return [tensor[:buffer.cur_len].clone() for tensor in buffer.tensors]


def objective(agent, batch):
    return agent.get_obj_critic(tuple(batch), torch.ones(batch[0].shape[0]))[0]


def test_masked_steps_and_burn_in_steps_carry_no_loss():
    """The sequence of steps 0-5 holds the end of episode A (masked after it) and a burn-in of 2 steps: changing what
    either holds, other than the burn-in states (which refresh the memory), leaves the loss as it was."""
    agent, batch = small_agent(), hand_made_batch()
    before = objective(agent, batch)
    changed = [tensor.clone() for tensor in batch]
    masked = changed[7] == 0  # (S, window): burn-in steps and the other episodes' steps
    for column in (1, 2, 3, 5):  # actions, returns, discounts, bootstrap states
        changed[column][masked] = changed[column][masked] * 0 + 1
    changed[0][:, 2:][masked[:, 2:]] += 5  # the masked training steps' states (after the anchor's episode ended)
    torch.testing.assert_close(objective(agent, changed), before)
    changed[0][:, :2] += 5  # the burn-in states do change the memory the training steps start from
    assert not torch.isclose(objective(agent, changed), before)


def test_burn_in_steps_get_no_gradient():
    agent, batch = small_agent(), hand_made_batch()
    batch[0].requires_grad_(True)
    batch[8].requires_grad_(True)
    objective(agent, batch).backward()
    assert batch[0].grad[:, :2].abs().sum() == 0 and batch[8].grad is None  # burn-in states, stored memories
    assert batch[0].grad[:, 2:].abs().sum() > 0  # the training steps' states do get one


def test_the_target_is_the_rescaled_n_step_double_q_target():
    """With the bootstrap value fixed at 2, the target of each training step is h(G + discount * h^-1(2)), and the
    loss is the Huber loss to it averaged over each sequence's unmasked steps."""
    agent, batch = small_agent(), hand_made_batch()
    agent.get_next_q = lambda boot_states, *_: torch.full(boot_states.shape[:2], 2.0)
    obj, priority = agent.get_obj_critic(tuple(batch), torch.ones(batch[0].shape[0]))
    with torch.no_grad():
        q = agent.cri(agent.unroll(agent.cri, batch)[0]).gather(-1, batch[1][:, 2:].T[..., None]).squeeze(-1)
    returns, discounts, mask = (tensor[:, 2:].T for tensor in (batch[2], batch[3], batch[7]))
    target = value_rescale(returns + discounts * value_rescale_inverse(torch.tensor(2.0)))
    assert target[0, 1].item() == pytest.approx(value_rescale(torch.tensor(4.0)).item())  # step 2 terminated
    loss = (torch.nn.functional.smooth_l1_loss(q, target, reduction="none") * mask).sum(0) / mask.sum(0)
    torch.testing.assert_close(obj, loss.mean())
    torch.testing.assert_close(priority, sequence_priority((q - target).abs(), mask, 0.9))


def test_the_bootstrap_memory_is_the_one_after_the_returns_last_step():
    """Inside an episode, the online network's features of a step's bootstrap state equal those the unroll reaches at
    the step after its return's last step, where that step's state is the bootstrap state."""
    agent, batch = small_agent(), hand_made_batch(n_step=1)
    seq = 4  # steps 4-9: training steps 6-9 of episode C (starts at 6)
    batch[5][seq, 2:5] = batch[0][seq, 3:6]  # bootstrap state of a 1-step return: the next step's state
    features, memories = agent.unroll(agent.cri, batch)
    boot, last = batch[5][:, 2:].transpose(0, 1), batch[4][:, 2:].T - 2
    next_features = agent.next_features(agent.cri, boot, last, memories)
    torch.testing.assert_close(next_features[:3, seq], features[1:, seq])


def test_each_copys_memory_is_zeroed_exactly_at_its_episode_starts():
    """Copy 0 terminates every 3 steps, copy 1 is truncated every 2: the stored episode steps count each copy's
    episodes, and the memory each step acts from is zero exactly at an episode's first step."""
    agent = small_agent(seq_len=2, burn_in=1)
    env = make_counter_vector_env()
    agent.last_state = env.reset(seed=0)[0]
    rounds = [agent.explore_env(env, 5) for _ in range(2)]
    states, episode_steps, memories = (torch.cat([r[i] for r in rounds]).unflatten(0, (10, 2)) for i in (0, 6, 7))
    assert episode_steps[:, 0].tolist() == [0, 1, 2] * 3 + [0] and episode_steps[:, 1].tolist() == [0, 1] * 5
    torch.testing.assert_close(episode_steps.float(), states[..., 0])  # the counter env observes the same count
    start = (episode_steps == 0).float()
    acted, carried = agent.cri.core(states, memories[0].transpose(0, 1), start)[1][:-1], memories.transpose(1, 2)
    torch.testing.assert_close(acted, carried)  # the stored memories are the ones carried from step to step
    zero = agent.cri.core.zero_memory(20, "cpu")
    from_zero = agent.cri.core(states.flatten(0, 1)[None], zero, torch.zeros(1, 20))[1][1].view(2, 10, 2, -1)
    after = agent.cri.core(states, memories[0].transpose(0, 1), start)[1][1:]  # (10, 2, 2, W)
    same = torch.isclose(after, from_zero.transpose(0, 1), atol=1e-6).all(dim=-1).all(dim=1)  # (10, 2)
    assert torch.equal(same, start.bool())
    assert (memories[1:][start[1:].bool()].abs().sum(-1) > 0).all()  # stored before the zeroing: the one it received


@pytest.mark.parametrize("settings, message", [
    (dict(if_state_norm=True), "has no if_state_norm"),
    (dict(if_action_mask=True), "has no if_action_mask"),
    (dict(if_noisy=True), "has no if_noisy"),
    (dict(if_per=False), "has no if_per"),
    (dict(burn_in=-1), "burn_in must be a number >= 0"),
])
def test_what_it_cannot_use_is_refused_with_what_is_accepted(settings, message, tmp_path):
    args = Arguments(agent="AgentR2D2", env="CartPoleNoVel-v1", cwd=str(tmp_path / "run"), **settings)
    with pytest.raises(RefusedError, match=message):
        args.resolve(make_env(args.env)[1])


def test_two_explorers_rounds_are_cut_into_sequences_of_each_copy_alone():
    """The multiprocess loop's learner takes two explorers' steps (two counter-env copies each) as one round of four
    copies (merge_trajectories): it cuts exactly the sequences that each explorer's steps give alone."""
    explorers = []
    for seed in (0, 1):
        agent, env = small_agent(), make_counter_vector_env()
        agent.last_state = env.reset(seed=seed)[0]
        explorers.append((agent, env))
    new_buffer = lambda num_envs: SequenceReplayBuffer(256, 1, 16, num_envs, seq_len=4, burn_in=2, gamma=0.5, n_step=3)
    merged, alone = new_buffer(4), [new_buffer(2), new_buffer(2)]
    for _ in range(3):
        rounds = [agent.explore_env(env, 6) for agent, env in explorers]
        merged.extend(*merge_trajectories(rounds, True, 2))
        for buffer, trajectory in zip(alone, rounds):
            buffer.extend(*trajectory)

    def sequences(*buffers):  # each sequence's states, actions, mask and memory as one row, rows sorted
        rows = torch.cat([torch.cat([buffer.tensors[k][:buffer.cur_len].flatten(1).float() for k in (0, 1, 7, 8)], 1)
                          for buffer in buffers])
        return sorted(rows.tolist())

    assert merged.cur_len == alone[0].cur_len + alone[1].cur_len > 0
    assert sequences(merged) == sequences(*alone)


@pytest.mark.slow
def test_r2d2_trains_in_explorer_processes(tmp_path):
    result = train_and_evaluate(Arguments(agent="AgentR2D2", env="CartPoleNoVel-v1", seed=0, cwd=str(tmp_path / "run"),
                                          num_workers=2, num_envs=2, break_step=1500, eval_times=2))
    assert result["step"] >= 1500


def test_torchrun_and_export_are_refused(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "test")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    args = Arguments(agent="AgentR2D2", env="CartPoleNoVel-v1", cwd=str(tmp_path / "run"))
    with pytest.raises(RefusedError, match="not accepted under torchrun yet.*run python AgentRun.py"):
        args.resolve(make_env(args.env)[1])
    with pytest.raises(RefusedError, match="if_recurrent=False"):
        small_agent().policy_module()


def test_evaluation_is_greedy_from_a_zero_memory_per_episode():
    agent = small_agent()
    states = np.arange(4, dtype=np.float32).reshape(2, 2, 1)
    agent.reset_memory(2)
    greedy = [agent.select_action(state, deterministic=True) for state in states]
    with torch.no_grad():
        features = agent.cri.core(torch.as_tensor(states), agent.cri.core.zero_memory(2, "cpu"), torch.zeros(2, 2))[0]
    assert np.array_equal(np.stack(greedy), agent.cri(features).argmax(-1).numpy())
    with pytest.raises(RefusedError, match=r"reset_memory\(E\)"):
        agent.select_action(np.zeros((3, 1), np.float32))


@pytest.mark.slow
def test_resume_restarts_every_memory_and_keeps_the_replayed_sequences(tmp_path, capsys):
    """recurrent_cell=gru end to end: it trains, resumes, keeps a memory of one row per replayed sequence, and its
    config.json rebuilds the GRU actor that actor.pt holds (replay)."""
    cwd = str(tmp_path / "run")
    common = dict(agent="AgentR2D2", env="CartPoleNoVel-v1", seed=0, cwd=cwd, eval_times=2, eval_gap=0,
                  recurrent_cell="gru")
    train_and_evaluate(Arguments(**common, break_step=1024))
    capsys.readouterr()
    result = train_and_evaluate(Arguments(**common, break_step=2048, if_resume=True))
    assert result["step"] >= 2048 and math.isfinite(result["best_return"])
    assert "memories are not in the checkpoint; every env copy's restarts at zero" in capsys.readouterr().out
    saved = torch.load(str(tmp_path / "run" / "checkpoint" / "buffer.pt"), weights_only=True)
    assert saved["cur_len"] > 1024 // 10 and saved["window"] == 30  # both sessions' sequences: about one per stride
    assert saved["tensors"][-1].shape[1:] == (1, 128)  # a GRU's memory: one row
    assert math.isfinite(replay(cwd, episodes=1, render="none")["avg_return"])
    with pytest.raises(RefusedError, match=r"seq_len \+ burn_in=.* is not accepted on resume"):
        train_and_evaluate(Arguments(**common, break_step=4096, if_resume=True, burn_in=5))


@pytest.mark.learning
def test_it_learns_cartpole_without_velocities(tmp_path):
    """The velocities read 0: the Q-network must infer them from the observations before (a memory task). At seed 0
    the defaults pass 100 at 16.9k steps (475, the target, at 32k), where D3QN without memory stays below 50 in 46k."""
    args = Arguments(agent="AgentR2D2", env="CartPoleNoVel-v1", seed=0, cwd=str(tmp_path / "run"), break_step=20_000,
                     target_return=100, eval_gap=0, eval_times=4)
    result = train_and_evaluate(args)
    assert result["if_solved"], result

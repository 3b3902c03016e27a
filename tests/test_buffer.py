import torch

from AgentZoo import ReplayBuffer


def make_trajectory(start, size, state_dim=2, action_dim=1):
    values = torch.arange(start, start + size, dtype=torch.float32)  # (size,): each transition's id
    return (values[:, None].repeat(1, state_dim), values[:, None].repeat(1, action_dim), values,
            torch.ones(size), values[:, None].repeat(1, state_dim) + 0.5)


def test_ring_pointer_overwrites_oldest():
    buffer = ReplayBuffer(max_len=5, state_dim=2, action_dim=1, if_discrete=False)
    buffer.extend(*make_trajectory(0, 3))
    assert (buffer.cur_len, buffer.pointer, buffer.add_size) == (3, 3, 3)
    buffer.extend(*make_trajectory(3, 4))  # ids 3..6; 5 and 6 wrap onto slots 0 and 1
    assert (buffer.cur_len, buffer.pointer, buffer.add_size) == (5, 2, 7)
    assert buffer.rewards.tolist() == [5, 6, 2, 3, 4]
    assert torch.equal(buffer.next_states[:, 0], buffer.rewards + 0.5)  # columns stay aligned


def test_extend_longer_than_capacity_keeps_newest():
    buffer = ReplayBuffer(max_len=4, state_dim=2, action_dim=1, if_discrete=False)
    buffer.extend(*make_trajectory(0, 10))
    assert buffer.cur_len == 4
    assert sorted(buffer.rewards.tolist()) == [6, 7, 8, 9]


def test_sample_shapes_device_and_only_stored_rows():
    buffer = ReplayBuffer(max_len=100, state_dim=2, action_dim=1, if_discrete=False, device="cpu")
    buffer.extend(*make_trajectory(0, 10))
    (state, action, reward, discount, next_state), weights, idx = buffer.sample(64)
    assert state.shape == (64, 2) and action.shape == (64, 1) and reward.shape == (64,)
    assert discount.shape == (64,) and next_state.shape == (64, 2)
    assert all(t.device == buffer.device for t in (state, action, reward, discount, next_state, weights, idx))
    assert torch.equal(reward, idx.float()) and weights.item() == 1  # uniform: every loss weighs alike
    assert reward.max() < 10  # never a row beyond cur_len (the preallocated rest is garbage)
    assert torch.equal(state[:, 0], reward) and torch.equal(next_state[:, 0], reward + 0.5)


def test_discrete_actions_are_integer_indices():
    buffer = ReplayBuffer(max_len=8, state_dim=3, action_dim=4, if_discrete=True)
    assert buffer.actions.shape == (8, 1) and buffer.actions.dtype == torch.long
    buffer.extend(torch.zeros(2, 3), torch.tensor([[3], [1]]), torch.zeros(2), torch.ones(2), torch.zeros(2, 3))
    assert buffer.actions[:2, 0].tolist() == [3, 1]


def test_state_dict_round_trip():
    buffer = ReplayBuffer(max_len=6, state_dim=2, action_dim=1, if_discrete=False)
    buffer.extend(*make_trajectory(0, 8))
    copy = ReplayBuffer(max_len=6, state_dim=2, action_dim=1, if_discrete=False)
    copy.load_state_dict(buffer.state_dict())
    assert (copy.pointer, copy.cur_len, copy.add_size) == (buffer.pointer, buffer.cur_len, buffer.add_size)
    assert all(torch.equal(a, b) for a, b in zip(copy.tensors, buffer.tensors))

"""Frame stacks stored frame by frame (issue 42): the replay buffer of a FrameStackObservation env keeps each frame
once and gives back every state and next state bit for bit as the env made them, at episode starts, at episode ends
(termination and truncation), across rounds, with n-step returns, after the ring wraps, after a checkpoint, and where
short episodes need more frames than the ring was made for."""
import gymnasium as gym
import numpy as np
import pytest
import torch

from AgentRun import Arguments, build_buffer, make_env, train_and_evaluate
from AgentZoo import AgentDQN, FrameStackPrioritizedReplayBuffer, FrameStackReplayBuffer, PrioritizedReplayBuffer, \
    ReplayBuffer

SHAPE = (4, 84, 84)  # Atari's stack: ImageEncoder's Nature DQN network takes it


class FrameEnv(gym.Env):
    """Each frame names its env copy, episode and step in its first pixels; an episode terminates after a random
    3 to 9 steps (a TimeLimit may truncate it first)."""

    observation_space = gym.spaces.Box(0, 255, SHAPE[1:], np.uint8)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, copy: int, static: bool = False):
        self.copy, self.static, self.episode, self.t, self.length = copy, static, -1, 0, 0

    def frame(self) -> np.ndarray:
        frame = np.zeros(SHAPE[1:], np.uint8)
        frame[0, :3] = self.copy, self.episode % 256, 0 if self.static else self.t
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.episode, self.t, self.length = self.episode + 1, 0, int(self.np_random.integers(3, 10))
        return self.frame(), {}

    def step(self, action):
        self.t += 1
        return self.frame(), 1.0, self.t == self.length, False, {}


def stacked_env(copy: int, max_episode_steps: int = 6, static: bool = False) -> gym.Env:
    return gym.wrappers.FrameStackObservation(gym.wrappers.TimeLimit(FrameEnv(copy, static), max_episode_steps), 4)


def vector_env(num_envs: int, **kwargs) -> gym.vector.VectorEnv:
    env = gym.vector.SyncVectorEnv([lambda copy=copy: stacked_env(copy, **kwargs) for copy in range(num_envs)],
                                   autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    env.reset(seed=0)
    return env


def filled(num_envs=2, n_step=3, max_len=40, rounds=6, horizon=8, per=False, stack=4, **kwargs):
    """A frame buffer and a plain one of whole stacks, given the same explored rounds; stack=1 takes each (4, 84, 84)
    state for one image (an unstacked env's: MinAtar's, CarRacing's)."""
    agent = AgentDQN(32, SHAPE, 2, device="cpu", n_step=n_step)
    frame_class, plain_class = (FrameStackPrioritizedReplayBuffer, PrioritizedReplayBuffer) if per else \
        (FrameStackReplayBuffer, ReplayBuffer)
    buffer = frame_class(max_len, SHAPE, 2, True, num_envs=num_envs, n_step=n_step, stack=stack)
    plain = plain_class(max_len, SHAPE, 2, True, state_dtype=torch.uint8)
    env = vector_env(num_envs, **kwargs)
    for _ in range(rounds):
        trajectory = agent.explore_env(env, horizon, if_random=True)
        buffer.extend(*trajectory)
        plain.extend(*trajectory)
    return buffer, plain


def assert_same_stacks(buffer, plain):
    slots = torch.arange(plain.cur_len)
    assert buffer.cur_len == plain.cur_len and buffer.pointer == plain.pointer
    assert torch.equal(buffer.stacked(buffer.states[slots]), plain.states[slots])
    assert torch.equal(buffer.stacked(buffer.next_states[slots]), plain.next_states[slots])
    assert all(torch.equal(a, b) for a, b in zip(buffer.tensors[1:4], plain.tensors[1:4]))


@pytest.mark.parametrize("num_envs, n_step, stack", [(1, 1, 4), (2, 3, 4), (2, 3, 1)])
def test_every_stack_comes_back_as_the_env_made_it(num_envs, n_step, stack):
    """Two copies ending episodes at different steps, by termination (3-9 steps) and truncation (6), 3-step returns,
    6 rounds of 8 steps in a ring of 40 transitions that wraps; and each state taken for one unstacked image."""
    buffer, plain = filled(num_envs, n_step, stack=stack)
    assert plain.cur_len == 40 and plain.pointer == (6 * 8 * num_envs) % 40
    assert_same_stacks(buffer, plain)
    (states, _, _, _, next_states), _, idx = buffer.sample(64)
    assert torch.equal(states, plain.states[idx]) and torch.equal(next_states, plain.next_states[idx])


@pytest.mark.parametrize("horizon", [1, 2, 3, 4, 5, 6])
def test_rounds_shorter_than_the_n_step_window_store_as_any_other(horizon):
    """A round of fewer steps per copy than n_step (5 here; a round of 4 broke the comparison of next states with the
    states n_step on) gives back its stacks bit for bit too."""
    buffer, plain = filled(num_envs=2, n_step=5, max_len=12, rounds=6, horizon=horizon)  # full: 12 * horizon steps
    assert_same_stacks(buffer, plain)


def test_each_frame_stored_once():
    """One frame per step and one per episode end: a round's last next state is the next round's first state, a
    reset stack is one frame four times, and a final observation several n-step windows end with is stored once."""
    buffer, _ = filled(num_envs=1, n_step=3, max_len=1000, rounds=6, horizon=8)
    frames = buffer.frames[:buffer.written, 0, :3]
    episodes = len(set(frames[:, 1].tolist()))  # the episode numbers the frames show
    # the last state's episode goes on: its next state continues it with the newest frame
    assert buffer.next_states[47, :4].tolist() == buffer.states[47, 1:4].tolist() + [buffer.written - 1]
    # 48 steps; each ended episode's final observation; the last next state, the next round's first state
    assert buffer.written == 48 + (episodes - 1) + 1
    assert int((frames[:, 2] == 0).sum()) == episodes  # each reset frame once


def test_hand_computed_stamps_at_episode_starts_and_ends():
    """One copy, stack 4, n_step 1: a reset stack [a a a a] is frame a four times, its next state [a a a b] adds b,
    and a terminal step's next state (its final observation) adds the final frame; the next episode starts anew."""
    env = FrameEnv(0)
    env.reset(seed=0)
    stack = gym.wrappers.FrameStackObservation(gym.wrappers.TimeLimit(env, 100), 4)
    first, _ = stack.reset(seed=3)
    length = stack.unwrapped.length
    states, next_states, state = [], [], first
    for _ in range(length + 1):  # the episode, then the next one's first step
        next_state, _, terminated, _, _ = stack.step(0)
        states.append(state), next_states.append(next_state)
        state = stack.reset()[0] if terminated else next_state
    steps = len(states)
    trajectory = (torch.as_tensor(np.array(states)), torch.zeros(steps, 1, dtype=torch.long), torch.zeros(steps),
                  torch.ones(steps), torch.as_tensor(np.array(next_states)))
    buffer = FrameStackReplayBuffer(16, SHAPE, 2, True, num_envs=1, n_step=1, stack=4)
    buffer.extend(*trajectory)
    stamps = buffer.states[:steps, :4].tolist()
    assert stamps[0] == [0, 0, 0, 0]  # the reset frame four times
    assert stamps[1] == [0, 0, 0, 1] and stamps[3] == [0, 1, 2, 3]
    # the states' frames first: the episode's 0 .. length - 1, the next episode's reset frame; then the next states'
    assert stamps[length] == [length] * 4  # the next episode's reset stack: nothing of the episode before
    final = length + 1
    assert buffer.next_states[length - 1, :4].tolist() == [length - 3, length - 2, length - 1, final]
    assert buffer.next_states[length, :4].tolist() == [length, length, length, final + 1]
    assert buffer.written == length + 3  # each frame once: the episode's, the next's first, the final, the next's second


def test_oldest_transition_after_the_wrap_keeps_its_frames():
    """The ring of transitions wraps many times over; the oldest live transition still reads its own frames (its
    stack reaches 3 steps before it, into transitions already overwritten)."""
    buffer, plain = filled(num_envs=2, n_step=1, max_len=24, rounds=12, horizon=8, max_episode_steps=50)
    oldest = plain.pointer  # full: the slot written next holds the oldest
    assert torch.equal(buffer.stacked(buffer.states[oldest:oldest + 1]), plain.states[oldest:oldest + 1])
    assert_same_stacks(buffer, plain)
    assert buffer.capacity == 24 + 24 // 16 + 2 * 4 * 2  # never grown: about one frame per transition


def test_short_episodes_grow_the_ring():
    """Episodes of one step (a truncation each) need two frames per transition: the ring grows instead of
    overwriting frames that live transitions read."""
    buffer, plain = filled(num_envs=2, n_step=1, max_len=32, rounds=8, horizon=8, max_episode_steps=1)
    assert buffer.capacity > 32 + 32 // 16 + 16
    assert_same_stacks(buffer, plain)


def test_static_frames_and_prioritized_replay():
    """Frames that do not change (the same stack again) and the prioritized variant, Ape-X's explorer priorities
    (a trailing TD-error column) included."""
    buffer, plain = filled(num_envs=2, n_step=3, per=True, static=True)
    assert_same_stacks(buffer, plain)
    (states, _, _, _, next_states), weights, idx = buffer.sample(32)
    assert torch.equal(states, plain.states[idx]) and weights.shape == (32,)
    agent = AgentDQN(32, SHAPE, 2, device="cpu")
    trajectory = agent.explore_env(vector_env(2), 4, if_random=True)
    idx = buffer.extend(*trajectory, torch.full((8,), 5.0))
    assert torch.allclose(buffer.sum_tree[0][idx], torch.tensor(5.0 + buffer.eps, dtype=torch.float64) ** buffer.alpha)


def test_checkpoint_round_trip_keeps_the_frames_in_their_dtype():
    buffer, plain = filled(num_envs=2, n_step=3, max_len=40, rounds=6, horizon=8)
    state = buffer.state_dict()
    assert state["frames"].dtype == torch.uint8 and state["frames"].shape[0] <= buffer.capacity
    copy = FrameStackReplayBuffer(40, SHAPE, 2, True, num_envs=2, n_step=3, stack=4)
    copy.load_state_dict(state)
    assert_same_stacks(copy, plain)
    assert copy.last == [None, None]  # a resumed run starts new episodes
    with pytest.raises(ValueError, match="whole frame stacks"):  # a checkpoint of the buffer before
        copy.load_state_dict(plain.state_dict())


def test_bytes_per_atari_transition():
    """About one 84x84 frame per transition (7,056 bytes) and the stamps, not two stacks of four (56,464)."""
    max_len = 2 ** 12
    buffer = FrameStackReplayBuffer(max_len, SHAPE, 6, True, num_envs=1, n_step=1, stack=4)
    plain = ReplayBuffer(max_len, SHAPE, 6, True, state_dtype=torch.uint8)
    size = lambda b: sum(t.nbytes for t in b.tensors) + getattr(b, "frames", torch.empty(0)).nbytes
    assert size(plain) / max_len == 56_464  # two stacks (56,448), the action, reward and discount
    assert size(buffer) / max_len < 7_700  # 17/16 frames (7,497), 2 x 5 stamps, the action, reward, discount


def test_atari_like_env_gets_the_frame_buffer(tmp_path):
    env_info = make_env(stacked_env(0))[1]
    assert env_info.frame_stack == 4
    args = Arguments(agent="AgentDQN", env=stacked_env(0), num_envs=2, buffer_size=64)
    args.resolve(env_info)
    buffer = build_buffer(args, env_info, "cpu")
    assert type(buffer) is FrameStackReplayBuffer and buffer.num_envs == 2
    args = Arguments(agent="AgentRainbow", env=stacked_env(0), buffer_size=64, n_step=3)
    args.resolve(env_info)
    buffer = build_buffer(args, env_info, "cpu")
    assert type(buffer) is FrameStackPrioritizedReplayBuffer and buffer.n_step == 3
    single = gym.wrappers.FrameStackObservation(gym.wrappers.TimeLimit(FrameEnv(0), 10), 1)  # (1, 84, 84)
    env_info = make_env(single)[1]
    args = Arguments(agent="AgentDQN", env=single)
    args.resolve(env_info)
    buffer = build_buffer(args, env_info, "cpu")
    assert env_info.frame_stack == 1 and type(buffer) is FrameStackReplayBuffer and buffer.stack == 1
    assert args.buffer_size == 2 ** 20  # a frame of 7,056 bytes: 2^20 of them fit the default replay's 8 GiB


def test_default_replay_of_large_images_fits_8_gib():
    """CarRacing-v3's 96x96x3 frames (an instance's, as it comes): 2^18 transitions by default (7.2 GB of frames), not
    2^20 (29 GB, which this machine could not even allocate); a buffer_size the user sets stands. Its id's two grey
    96x96 frames store one frame a transition: 2^19 (4.8 GB)."""
    env_info = make_env(gym.make("CarRacing-v3"))[1]
    args = Arguments(agent="AgentInterSAC", env=gym.make("CarRacing-v3"))
    args.resolve(env_info)
    assert args.buffer_size == 2 ** 18
    args = Arguments(agent="AgentInterSAC", env="CarRacing-v3")
    args.resolve(make_env("CarRacing-v3")[1])
    assert args.buffer_size == 2 ** 19
    args = Arguments(agent="AgentInterSAC", env="CarRacing-v3", buffer_size=2 ** 10)
    args.resolve(env_info)
    assert args.buffer_size == 2 ** 10


@pytest.mark.slow
def test_atari_frames_cross_processes_checkpoint_and_resume(tmp_path):
    """Atari's stacks reach the learner from an explorer process, are stored frame by frame, checkpointed in uint8,
    and the run resumes serially with its replay."""
    pytest.importorskip("ale_py")
    import AgentRun
    cwd = str(tmp_path / "run")
    train_and_evaluate(Arguments(agent="AgentDQN", env="ALE/Pong-v5", cwd=cwd, break_step=512, random_steps=256,
                                 batch_size=16, eval_times=1, target_return=1e9, if_multiprocess=True,
                                 buffer_size=4096, num_envs=2))  # two copies: eight emulators cost 2 s to load
    saved = torch.load(f"{cwd}/checkpoint/buffer.pt", weights_only=True)
    assert saved["frames"].dtype == torch.uint8 and saved["frames"].shape[1:] == (84, 84)
    # one frame per stored step, one per episode end, the first state's stack and the last next state's frame
    assert saved["cur_len"] <= saved["frames"].shape[0] <= saved["cur_len"] + 16
    assert AgentRun.resume(cwd, break_step=768, if_multiprocess=False)["step"] == 768

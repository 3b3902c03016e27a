"""Learning from pixels (issue 42): the image encoders, images stored in their own dtype, the pixel envs (Atari through
ale-py, MinAtar through minatar), rewards clipped for learning only, a tiny image task learned, and what is refused."""
import json
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from AgentNet import (ActorDiscretePPO, ActorPPO, CriticValue, ImageEncoder, QNet, QNetDistDuel, QNetDuel, QNetTwin)
from AgentRun import (Arguments, make_vector_env, build_evaluator, make_explore_env, make_env, run_episodes,
                      train_and_evaluate)
from AgentZoo import AgentDiscretePPO, AgentDQN, AgentR2D2, ReplayBuffer, RolloutBuffer, SequenceReplayBuffer
from extras import tools


class ImageBanditEnv(gym.Env):
    """One step an episode: an image with a lit column in its left or right half; action 0 pays `pay` for the left,
    action 1 for the right, the other 0. A policy that reads the image earns `pay` every episode; one that does not,
    half of that on average."""

    action_space = gym.spaces.Discrete(2)

    def __init__(self, shape=(10, 10, 1), dtype=np.bool_, pay=1.0):
        high = 1 if dtype == np.bool_ else 255
        self.observation_space = gym.spaces.Box(0, high, shape, dtype)
        self.high, self.pay, self.side = high, pay, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.side = int(self.np_random.integers(2))
        return self.observe(), {}

    def observe(self) -> np.ndarray:
        image = np.zeros(self.observation_space.shape, self.observation_space.dtype)
        width = self.observation_space.shape[1]  # (H, W, C) or a stack's (C, H, W): W is the middle or last axis
        column = width // 4 + self.side * width // 2
        if self.observation_space.shape[0] == self.observation_space.shape[1]:
            image[:, column] = self.high
        else:
            image[..., column] = self.high
        return image

    def step(self, action):
        return self.observe(), self.pay * float(int(action) == self.side), True, False, {}


def bandit(**kwargs) -> gym.Env:
    return gym.wrappers.TimeLimit(ImageBanditEnv(**kwargs), max_episode_steps=1)


class ImageMemoryEnv(ImageBanditEnv):
    """The bandit with its image shown one step early (issue 43's memory task on frames, a stack of 1): the first step
    shows the lit side and pays nothing, the second shows a dark image and pays `pay` if the action names the side. A
    policy without memory sees the same dark image on either side and earns half of `pay` on average."""

    def reset(self, *, seed=None, options=None):
        self.first = True
        return super().reset(seed=seed)

    def step(self, action):
        dark = np.zeros(self.observation_space.shape, self.observation_space.dtype)
        if self.first:
            self.first = False
            return dark, 0.0, False, False, {}
        return dark, self.pay * float(int(action) == self.side), True, False, {}


# ---- encoders ----


@pytest.mark.parametrize("shape, width", [((4, 84, 84), 512), ((96, 96, 3), 512), ((10, 10, 4), 128),
                                          ((10, 10, 10), 128)])
def test_encoder_output_shapes(shape, width):
    """Nature DQN (3136 features after its convs at 84x84) and MinAtar's one conv layer; channels last or first; any
    leading dimensions, uint8 or bool in."""
    encoder = ImageEncoder(shape)
    assert encoder(torch.zeros(shape, dtype=torch.uint8)).shape == (width,)
    assert encoder(torch.zeros((3, 2, *shape), dtype=torch.bool)).shape == (3, 2, width)
    if shape == (4, 84, 84):
        assert encoder.fc[0].in_features == 64 * 7 * 7 and not encoder.channels_last
        assert [conv.kernel_size[0] for conv in encoder.convs if isinstance(conv, torch.nn.Conv2d)] == [8, 4, 3]


@pytest.mark.parametrize("net_class, out_shape", [(QNet, (5, 6)), (QNetDuel, (5, 6)), (QNetDistDuel, (5, 6)),
                                                  (QNetTwin, (5, 6)), (ActorPPO, (5, 6)), (ActorDiscretePPO, (5,)),
                                                  (CriticValue, (5,))])
def test_networks_on_images(net_class, out_shape):
    net = net_class(32, (4, 84, 84), 6)
    assert isinstance(net.net[0] if hasattr(net, "net") else net.q1.net[0], ImageEncoder)
    assert net(torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8)).shape == out_shape


def test_pixels_are_scaled_inside_the_network():
    """uint8 frames and the same values as floats / 255 are one input: the encoder scales by 1/255 (MinAtar's 0/1
    grids are not scaled)."""
    encoder = ImageEncoder((84, 84, 3))
    frames = torch.randint(0, 256, (2, 84, 84, 3), dtype=torch.uint8)
    torch.testing.assert_close(encoder(frames), encoder.fc(encoder.convs(frames.permute(0, 3, 1, 2).float() / 255)))
    assert ImageEncoder((10, 10, 4)).scale == 1.0


# ---- storage ----


def test_uint8_storage_end_to_end():
    """Frames explored from a uint8 env reach the replay buffer as uint8 (a quarter of float32's bytes), come out of a
    sample as uint8 and become floats only inside the network; a checkpoint keeps them uint8."""
    env, env_info = make_vector_env(bandit(shape=(4, 84, 84), dtype=np.uint8), num_envs=2)
    assert env_info.state_dim == (4, 84, 84) and env_info.state_dtype == torch.uint8
    agent = AgentDQN(32, env_info.state_dim, env_info.action_dim, device="cpu")
    buffer = ReplayBuffer(64, env_info.state_dim, 2, True, state_dtype=env_info.state_dtype)
    assert buffer.states.dtype == torch.uint8 and buffer.states.nbytes == 64 * 4 * 84 * 84
    buffer.extend(*agent.explore_env(env, 8))
    (states, _, _, _, next_states), _, _ = buffer.sample(16)
    assert states.dtype == next_states.dtype == torch.uint8 and states.shape == (16, 4, 84, 84)
    assert int(states.max()) == 255  # the lit column, stored as it was
    assert agent.cri(states).dtype == torch.float32
    assert all(t.dtype == torch.uint8 for t in (buffer.state_dict()["tensors"][0], buffer.state_dict()["tensors"][4]))


def test_rollout_keeps_bool_images():
    env, env_info = make_vector_env(bandit(), num_envs=2)
    agent = AgentDiscretePPO(32, env_info.state_dim, env_info.action_dim, device="cpu")
    buffer = RolloutBuffer()
    buffer.extend(*agent.explore_env(env, 4))
    assert buffer.states.dtype == buffer.next_states.dtype == torch.bool and buffer.states.shape == (4, 2, 10, 10, 1)
    assert agent.update_net(buffer, 4, 1)["obj_critic"] >= 0


@pytest.mark.slow
def test_r2d2_sequences_keep_frames_in_their_dtype():
    """R2D2's sequence replay stores explored frames and their bootstrap frames as uint8, (S, window, *shape), and
    learns from them."""
    env, env_info = make_vector_env(bandit(shape=(4, 84, 84), dtype=np.uint8), num_envs=2)
    agent = AgentR2D2(32, env_info.state_dim, env_info.action_dim, device="cpu", seq_len=4, burn_in=2, n_step=1)
    buffer = SequenceReplayBuffer(64, env_info.state_dim, agent.cri.core.width, num_envs=2, seq_len=4, burn_in=2,
                                  gamma=0.99, n_step=1, state_dtype=env_info.state_dtype)
    buffer.extend(*agent.explore_env(env, 8))
    states, boot_states = buffer.tensors[0], buffer.tensors[5]
    assert states.dtype == boot_states.dtype == torch.uint8 and states.shape == boot_states.shape == (64, 6, 4, 84, 84)
    assert buffer.cur_len > 0 and int(states[:buffer.cur_len].max()) == int(boot_states[:buffer.cur_len].max()) == 255
    assert math.isfinite(agent.update_net(buffer, 4, 1.0)["obj_critic"])


def test_r2d2_default_replay_of_frames_fits_8_gib():
    """R2D2's default capacity on Atari's (4, 84, 84) stacks is the largest power of 2 of sequences whose states and
    bootstrap states, 2 * (10 + 20) of 28,224 bytes, fit 8 GiB: 8 GiB / 1,693,440 bytes = 5,072, so 2^12."""
    pytest.importorskip("ale_py")
    pytest.importorskip("cv2")
    args = Arguments(agent="AgentR2D2", env="ALE/Pong-v5")
    args.resolve(make_env("ALE/Pong-v5")[1])
    assert args.buffer_size == 2 ** 12


# ---- learning ----


@pytest.mark.parametrize("agent, break_step", [("AgentDQN", 3000), ("AgentDiscretePPO", 4096)])
@pytest.mark.learning
def test_image_task_learned(tmp_path, agent, break_step):
    """The bandit's image says which action pays: an agent that reads it earns 1 every evaluation episode."""
    args = Arguments(agent=agent, env=bandit(), cwd=str(tmp_path / "run"), break_step=break_step, eval_gap=0,
                     target_return=1.0, if_multiprocess=False)
    result = train_and_evaluate(args)
    assert result["if_solved"], result


@pytest.mark.slow
def test_r2d2_remembers_what_an_earlier_frame_showed(tmp_path):
    """ImageMemoryEnv: the side is seen only at the first step, so every one of 32 evaluation episodes paid means the
    recurrent core carried it (chance: 2^-32). At seed 0 R2D2 gets there at 1,024 steps; D3QN, without memory, stays
    at a best of 0.625 in 6,144 (History/UPDATE_LOG.md, 2026-11-27)."""
    args = Arguments(agent="AgentR2D2", env=gym.wrappers.TimeLimit(ImageMemoryEnv(), max_episode_steps=2), seed=0,
                     cwd=str(tmp_path / "run"), break_step=4096, eval_gap=0, eval_times=32, target_return=1.0)
    result = train_and_evaluate(args)
    assert result["if_solved"], result


# ---- rewards: clipped for learning, raw in the record ----


def test_clipped_rewards_for_learning_raw_returns_for_the_record():
    """With if_clip_reward the transitions hold the rewards' signs (times reward_scale), while the explorer's episode
    statistics and the evaluation report the env's own rewards."""
    env, env_info = make_vector_env(bandit(pay=5.0))
    agent = AgentDQN(32, env_info.state_dim, env_info.action_dim, device="cpu", if_clip_reward=True, explore_rate=0.0)
    agent.cri.net[-1].bias.data[:] = torch.tensor([1.0, -1.0])  # always action 0: paid in about half the episodes
    rewards = agent.explore_env(env, 64)[2]
    torch.testing.assert_close(rewards.unique(), torch.tensor([0.0, agent.reward_scale]))
    assert set(env.return_queue) == {0.0, 5.0}
    assert {ret for ret, _, _ in run_episodes([make_env(bandit(pay=5.0))[0] for _ in range(8)], agent)} == {0.0, 5.0}


# ---- pixel environments ----


def test_atari_preprocessing_and_raw_scores():
    """ALE/<Game>-v5: 84x84 grey frames, a stack of 4, uint8; a full game; the score as the game counts it (Space
    Invaders pays 5 to 30 points an invader), which learning clips by default on ALE ids."""
    pytest.importorskip("ale_py")
    pytest.importorskip("cv2")
    env, env_info = make_env("ALE/SpaceInvaders-v5")
    assert env_info.state_dim == (4, 84, 84) and env_info.state_dtype == torch.uint8 and env_info.action_dim == 6
    state = env.reset(seed=0)[0]
    assert state.shape == (4, 84, 84) and state.dtype == np.uint8
    env.action_space.seed(0)
    rewards, lives = [], 3
    while lives == 3:  # until the first life is lost: it does not end the game
        state, reward, terminated, truncated, info = env.step(env.action_space.sample())
        rewards.append(reward)
        lives = info["lives"]
        assert not terminated and len(rewards) < 5000
    assert max(rewards) >= 5  # raw points, not their sign
    args = Arguments(agent="AgentDQN", env="ALE/SpaceInvaders-v5")
    args.resolve(env_info)
    assert args.if_clip_reward is True


@pytest.mark.slow
def test_atari_frame_stack_by_setting():
    """frame_stack=1 (issue 43's Atari for agents with memory): one 84x84 frame a state, in the explorer's and the
    evaluator's envs alike; the replay keeps a frame a transition, and R2D2's default image replay holds 4x the
    sequences of a stack of 4: 8 GiB / (2 * (10 + 20) * 7,056 bytes) = 20,290, so 2^14."""
    pytest.importorskip("ale_py")
    pytest.importorskip("cv2")
    env_info = make_env("ALE/Pong-v5", frame_stack=1)[1]
    assert env_info.state_dim == (1, 84, 84) and env_info.frame_stack == 1 and env_info.state_dtype == torch.uint8
    assert make_env("ALE/Pong-v5", frame_stack=2)[1].state_dim == (2, 84, 84)
    args = Arguments(agent="AgentR2D2", env="ALE/Pong-v5", frame_stack=1, num_envs=2, eval_times=2)
    args.resolve(env_info)
    assert args.buffer_size == 2 ** 14
    explore_env = make_explore_env(args)
    assert explore_env.reset(seed=0)[0].shape == (args.num_envs, 1, 84, 84)
    evaluator = build_evaluator(args, env_info, step=0, state=None)
    assert {env.reset(seed=0)[0].shape for env in evaluator.eval_envs} == {(1, 84, 84)}


@pytest.mark.slow
def test_atari_frame_stack_run_resumes_and_replays(tmp_path):
    """A run with frame_stack=1 records it in config.json, and its multiprocess explorer, its resume (serial) and its
    replay all make one-frame states: the stored frames are single 84x84 frames, and the resumed run's network (whose
    first convolution takes as many channels as a state has frames) accepts them."""
    pytest.importorskip("ale_py")
    pytest.importorskip("cv2")
    import AgentRun
    cwd = str(tmp_path / "run")
    train_and_evaluate(Arguments(agent="AgentDQN", env="ALE/Pong-v5", frame_stack=1, cwd=cwd, break_step=128,
                                 random_steps=64, steps_per_round=64, batch_size=8, eval_gap=1e9, eval_times=1,
                                 target_return=1e9, if_multiprocess=True, buffer_size=1024))
    assert json.load(open(f"{cwd}/config.json"))["frame_stack"] == 1
    frames = torch.load(f"{cwd}/checkpoint/buffer.pt", weights_only=True)["frames"]
    assert frames.dtype == torch.uint8 and frames.shape[1:] == (1, 84, 84)
    assert AgentRun.resume(cwd, break_step=192, if_multiprocess=False)["step"] == 192
    assert tools.replay(cwd, episodes=1, render="none")["avg_length"] > 0


def test_frame_stack_of_other_envs_refused():
    """frame_stack stacks an ALE/ id's frames; MinAtar's grids, flat states and instances are refused with what it
    takes, and a stack under 1 with what is accepted."""
    for env in ("MinAtar/Breakout-v1", "CartPole-v1", bandit()):
        with pytest.raises(ValueError, match=r"frame_stack=1 is not accepted for .*ALE/<Game>-v5.*leave frame_stack None"):
            make_env(env, frame_stack=1)
    with pytest.raises(ValueError, match=r"frame_stack=0 is not accepted: frame_stack must be an integer >= 1"):
        make_env("ALE/Pong-v5", frame_stack=0)


@pytest.mark.parametrize("agent, if_clip_reward", [("AgentR2D2", False), ("AgentDQN", True), ("AgentRainbow", True),
                                                    ("AgentApeX", True), ("AgentDiscreteSAC", True),
                                                    ("AgentDiscretePPO", True), ("AgentDiscreteA2C", True)])
def test_r2d2_learns_atari_scores_unclipped_where_the_others_clip_them_by_default(agent, if_clip_reward):
    """R2D2's value rescaling h (Pohlen et al. arXiv:1805.11593) is there so that raw scores can be learned; the DQN
    papers (Mnih et al. 2015; C51, Rainbow, Ape-X), A3C and PPO on Atari clip them to their signs."""
    pytest.importorskip("ale_py")
    pytest.importorskip("cv2")
    env_info = make_env("ALE/Breakout-v5")[1]
    args = Arguments(agent=agent, env="ALE/Breakout-v5")
    args.resolve(env_info)
    assert args.if_clip_reward is if_clip_reward


def test_minatar_env_builds_and_steps():
    pytest.importorskip("minatar")
    env, env_info = make_env("MinAtar/Breakout-v1")
    assert env_info.state_dim == (10, 10, 4) and env_info.state_dtype == torch.bool and env_info.action_dim == 3
    assert env.spec.max_episode_steps == 10_000
    state = env.reset(seed=0)[0]
    assert state.dtype == np.bool_ and env.step(0)[0].shape == (10, 10, 4)
    args = Arguments(agent="AgentDQN", env="MinAtar/Breakout-v1")
    args.resolve(env_info)
    assert args.if_clip_reward is False  # only Atari's scores are clipped by default


def test_car_racing_takes_the_continuous_on_policy_agents():
    """CarRacing-v3's (96, 96, 3) RGB frames (an instance's, as it comes) and its id's two grey frames, and Box actions:
    PPO takes them, SAC (whose critic meets the action in its first layer) is refused with the agents that do."""
    pytest.importorskip("Box2D")
    raw_info = make_env(gym.make("CarRacing-v3"))[1]
    assert raw_info.state_dim == (96, 96, 3) and raw_info.state_dtype == torch.uint8 and not raw_info.if_discrete
    Arguments(agent="AgentPPO", env=gym.make("CarRacing-v3")).resolve(raw_info)
    env_info = make_env("CarRacing-v3")[1]
    assert env_info.state_dim == (2, 96, 96) and env_info.state_dtype == torch.uint8 and env_info.frame_stack == 2
    Arguments(agent="AgentPPO", env="CarRacing-v3").resolve(env_info)
    with pytest.raises(ValueError, match=r"AgentSAC does not take image observations.*AgentPPO"):
        Arguments(agent="AgentSAC", env="CarRacing-v3").resolve(env_info)


@pytest.mark.slow
def test_car_racing_id_coasts_at_the_neutral_action_and_holds_each_action_two_frames():
    """The id's actions (AgentRun.make_car_racing_env): the agents' [-1, 1] box on every axis, gas and brake taken from
    above 0 (a negative pedal is none), so the neutral action neither brakes nor accelerates; each step two frames,
    so a race of 1,000 frames ends at step 500."""
    pytest.importorskip("Box2D")
    env, env_info = make_vector_env("CarRacing-v3")
    assert env_info.action_dim == 3 and np.all(env.action_space.low == -1) and np.all(env.action_space.high == 1)
    env.reset(seed=0)
    wheels = env.unwrapped.car.wheels
    env.step(np.array([0.0, 0.0, 0.0], np.float32))
    assert all(wheel.brake == 0 and wheel.gas == 0 for wheel in wheels)  # linearly rescaled: half gas, half brake
    env.step(np.array([0.0, -1.0, 0.7], np.float32))
    assert all(wheel.brake == pytest.approx(0.7) for wheel in wheels) and wheels[2].gas == 0
    env.step(np.array([0.0, 0.5, -1.0], np.float32))
    assert all(wheel.brake == 0 for wheel in wheels) and wheels[2].gas > 0
    steps, ended = 3, False
    while not ended:
        ended = any(env.step(np.array([0.0, 0.0, 1.0], np.float32))[2:4])
        steps += 1
    assert steps == 500 and round(env.unwrapped.t * 50) == 1 + 1000  # reset's frame, then 1,000 at 50 a second


# ---- refused ----


@pytest.mark.parametrize("shape", [(64, 64, 3), (84, 84), (3, 84, 96)])
def test_image_of_an_unsupported_shape_refused(shape):
    with pytest.raises(ValueError, match=r"is not supported.*images of 84x84, 96x96, 10x10 pixels"):
        make_env(gym.wrappers.TimeLimit(ImageBanditEnv(shape=shape, dtype=np.uint8), max_episode_steps=1))


def test_state_norm_on_images_refused(tmp_path):
    args = Arguments(agent="AgentDiscretePPO", env=bandit(), cwd=str(tmp_path / "run"), if_state_norm=True)
    with pytest.raises(ValueError, match=r"if_state_norm=True is not accepted with image observations.*flat Box"):
        train_and_evaluate(args)
    assert not (tmp_path / "run").exists()
    with pytest.raises(ValueError, match=r"if_state_norm=True is not accepted with image observations"):
        AgentDiscretePPO(32, (10, 10, 1), 2, device="cpu", if_state_norm=True)


def test_agent_without_image_networks_refused(tmp_path):
    args = Arguments(agent="AgentDiscreteACKTR", env=bandit(), cwd=str(tmp_path / "run"))
    with pytest.raises(ValueError, match=r"AgentDiscreteACKTR does not take image observations.*AgentDQN"):
        train_and_evaluate(args)


# ---- loops ----


@pytest.mark.slow
def test_multiprocess_run_on_frames_then_resume_and_replay(tmp_path):
    """MinAtar's bool grids cross from the explorer process to the learner as they are, the checkpoint keeps the
    replay buffer in that dtype, and the run resumes (serially) and replays from its id."""
    pytest.importorskip("minatar")
    import AgentRun
    cwd = str(tmp_path / "run")
    train_and_evaluate(Arguments(agent="AgentDQN", env="MinAtar/Breakout-v1", cwd=cwd, break_step=512, eval_gap=0,
                                 eval_times=1, target_return=1e9, if_multiprocess=True, buffer_size=2048))
    frames = torch.load(f"{cwd}/checkpoint/buffer.pt", weights_only=True)["frames"]  # each grid once (FrameStacks)
    assert frames.dtype == torch.bool and frames.shape[1:] == (10, 10, 4) and 512 <= frames.shape[0] < 600
    assert AgentRun.resume(cwd, break_step=1024, if_multiprocess=False)["step"] == 1024
    assert tools.replay(cwd, episodes=1, render="none")["avg_length"] > 0

"""Pixel envs, an optional family of AgentRun's (its ENV_FAMILIES table): Atari through ale-py, MinAtar through minatar,
CarRacing-v3 as the RL zoo prepares it; states are frames (AgentNet.ImageEncoder)."""

import gymnasium as gym
import numpy as np

from AgentZoo import RefusedError


# Atari's episode limit: 108,000 frames (27,000 steps at frame skip 4, 30 minutes of play), as Machado et al.
# arXiv:1709.06009 (section 5) cap an episode. MinAtar's games have none: 10,000 steps, beyond the 5,000 or fewer
# that a MinAtar episode of a good DQN policy lasts (Young & Tian arXiv:1903.03176), so that evaluation always ends.
ATARI_MAX_FRAMES, MINATAR_MAX_STEPS = 108_000, 10_000


def make_atari_env(env_id: str, frame_stack: int = 4, **kwargs) -> gym.Env:
    """An ALE/<Game>-v5 env of ale-py, an optional package (it ships the ROMs), preprocessed as the DQN paper (Mnih et
    al. 2015) and the field since: frames grey and 84x84, each action repeated 4 frames (AtariPreprocessing, so the env
    is made with frameskip=1; v5's sticky actions, 0.25, stay: Machado et al. arXiv:1709.06009), up to 30 no-op actions
    at the start, and the last frame_stack frames stacked, (frame_stack, 84, 84) uint8 (frame_stack 1: one frame, what
    moves hidden, for agents with memory). An episode is a full game (every life), and the rewards are the game's:
    learning clips them (AgentBase.learned_reward, if_clip_reward), evaluation reports the score."""
    if isinstance(frame_stack, bool) or not isinstance(frame_stack, int) or frame_stack < 1:
        raise RefusedError(f"frame_stack={frame_stack!r} is not accepted: frame_stack must be an integer >= 1 "
                           f"(the last frames a state of {env_id} stacks), or None for 4")
    register(env_id)
    env = gym.make(env_id, frameskip=1, max_episode_steps=ATARI_MAX_FRAMES, **kwargs)
    env = gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84, terminal_on_life_loss=False,
                                          grayscale_obs=True)
    return gym.wrappers.FrameStackObservation(env, frame_stack)


def make_minatar_env(env_id: str, **kwargs) -> gym.Env:
    """A MinAtar/<Game>-v1 env (v0: all 6 actions; v1: the game's own) of minatar, an optional package, its
    observations (10, 10, C) bool grids, limited to MINATAR_MAX_STEPS steps."""
    register(env_id)
    return SeededReset(gym.make(env_id, max_episode_steps=MINATAR_MAX_STEPS, **kwargs))


class SeededReset(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """reset(seed=...) seeds gymnasium's np_random of the env too, as gymnasium's envs do (its env checker asks it):
    MinAtar's seeds its game only."""

    def __init__(self, env: gym.Env):
        gym.utils.RecordConstructorArgs.__init__(self)
        super().__init__(env)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        gym.Env.reset(self.env.unwrapped, seed=seed)
        return super().reset(seed=seed, options=options)


class ActionRepeat(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Each action held for `repeat` frames, their rewards summed; an episode that ends in between ends the step.
    It records its constructor's arguments, as gymnasium's own wrappers do, so that the env's spec can remake it."""

    def __init__(self, env: gym.Env, repeat: int):
        gym.utils.RecordConstructorArgs.__init__(self, repeat=repeat)
        super().__init__(env)
        self.repeat = repeat

    def step(self, action):
        total = 0.0
        for _ in range(self.repeat):
            obs, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
            if terminated or truncated:
                break
        return obs, total, terminated, truncated, info


def make_car_racing_env(env_id: str, **kwargs) -> gym.Env:
    """CarRacing-v3 (gymnasium's box2d extra) as the RL zoo's PPO entry prepares it: each action held 2 frames
    (ActionRepeat), frames grey, the last 2 stacked: (2, 96, 96) uint8 (the zoo also shrinks them to 64x64, with
    OpenCV). A race is still 1,000 frames (500 steps) and its return the game's. Gas and brake take the agents'
    actions above 0 (a negative one is none, as SB3 clips actions to the bounds), so that the neutral action 0 coasts:
    rescaled linearly from [-1, 1], it would hold half gas and half brake, and the car would hardly move."""
    env = gym.make(env_id, **kwargs)
    pedals = np.array([-1.0, 0.0, 0.0], np.float32)  # steering keeps [-1, 1]; gas and brake [0, 1] from above 0
    env = gym.wrappers.TransformAction(env, lambda action: np.maximum(action, pedals),
                                       gym.spaces.Box(-1.0, 1.0, (3,), np.float32))
    env = gym.wrappers.GrayscaleObservation(ActionRepeat(env, 2), keep_dim=False)  # (96, 96)
    return gym.wrappers.FrameStackObservation(env, 2)


# env ids by prefix, and who makes them
PIXEL_MAKERS = {"ALE/": make_atari_env, "MinAtar/": make_minatar_env, "CarRacing-": make_car_racing_env}


def make(env_id: str, frame_stack: int | None = None, **kwargs) -> gym.Env:
    """The env of an id that PIXEL_MAKERS has a maker for; frame_stack (ALE/ ids only, make_env) where it is set."""
    stack = {} if frame_stack is None else {"frame_stack": frame_stack}
    return next(maker for prefix, maker in PIXEL_MAKERS.items() if env_id.startswith(prefix))(env_id, **stack, **kwargs)


def register(env_id: str):
    """Register the ids of the package that has env_id (ale-py's ALE/, minatar's MinAtar/) with gymnasium, or say how
    to install it; CarRacing is gymnasium's own."""
    if env_id.startswith("ALE/"):
        try:
            import ale_py
            import cv2  # noqa: F401  (AtariPreprocessing resizes with it)
        except ImportError:
            raise RefusedError(f"{env_id} is an Atari env: pip install ale-py opencv-python-headless (ale-py ships the "
                               f"ROMs; AtariPreprocessing resizes frames with OpenCV)") from None
        gym.register_envs(ale_py)
    elif env_id.startswith("MinAtar/"):
        try:
            import minatar.gym
        except ImportError:
            raise RefusedError(f"{env_id} is a MinAtar env: pip install minatar") from None
        if env_id not in gym.registry:
            minatar.gym.register_envs()

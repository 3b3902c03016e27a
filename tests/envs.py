"""Tiny environments whose every step is known in advance, for tests of bootstrapping."""
import gymnasium as gym
import numpy as np


class CounterEnv(gym.Env):
    """Observation = steps taken in this episode; reward 1 per step; terminates when it reaches `terminate_at`."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, terminate_at):
        self.terminate_at, self.t = terminate_at, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([self.t], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t], np.float32), 1.0, self.t == self.terminate_at, False, {}


def make_counter_vector_env(autoreset_mode=gym.vector.AutoresetMode.SAME_STEP):
    return gym.vector.SyncVectorEnv([
        lambda: gym.wrappers.TimeLimit(CounterEnv(terminate_at=3), max_episode_steps=10),  # terminates every 3 steps
        lambda: gym.wrappers.TimeLimit(CounterEnv(terminate_at=10), max_episode_steps=2),  # truncated every 2 steps
    ], autoreset_mode=autoreset_mode)

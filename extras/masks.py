"""Masks of legal actions (if_action_mask=True, the discrete agents): the env's mask at the end of each state."""
import gymnasium as gym
import numpy as np

from AgentRun import check_flattenable
from AgentZoo import RefusedError


class ActionMaskObservation(gym.Wrapper):
    """A Discrete-action env whose observations end with its mask of legal actions, action_dim entries of 1 (legal) or
    0, so that replay buffers, rollouts, n-step returns and processes carry each state's mask with it; the agents read
    it back (AgentNet.legal_only). The mask comes from info["action_mask"] at reset and at every step (gymnasium's
    Taxi), or from a Dict observation's "action_mask" key (PettingZoo's and sb3-contrib's convention), the other parts
    flattened. A mask of another length or of values other than 0 and 1, or one without a legal action where the
    episode goes on, is refused."""

    def __init__(self, env: gym.Env, env_name: str):
        super().__init__(env)
        if not isinstance(env.action_space, gym.spaces.Discrete):
            raise RefusedError(f"if_action_mask=True is not accepted for {env_name}: masks of legal actions are for "
                               f"Discrete action spaces, and its is {env.action_space}")
        space, self.env_name, self.action_dim = env.observation_space, env_name, int(env.action_space.n)
        self.if_in_observation = isinstance(space, gym.spaces.Dict) and "action_mask" in space.spaces
        if self.if_in_observation:
            space = gym.spaces.Dict({key: part for key, part in space.spaces.items() if key != "action_mask"})
        check_flattenable(space, env_name)
        self.rest_space, flat = space, gym.spaces.flatten_space(space)
        self.observation_space = gym.spaces.Box(np.append(flat.low, np.zeros(self.action_dim)).astype(np.float32),
                                                np.append(flat.high, np.ones(self.action_dim)).astype(np.float32))

    def reset(self, **kwargs):
        observation, info = self.env.reset(**kwargs)
        return self.with_mask(observation, info, if_acting=True), info

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        return self.with_mask(observation, info, if_acting=not terminated), reward, terminated, truncated, info

    def with_mask(self, observation, info: dict, if_acting: bool) -> np.ndarray:
        """The flat observation and its mask; if_acting: the agent acts in this state, or bootstraps from it (a
        truncated episode's last), so at least one action must be legal."""
        if self.if_in_observation:
            mask = observation["action_mask"]
            observation = {key: part for key, part in observation.items() if key != "action_mask"}
        elif "action_mask" in info:
            mask = info["action_mask"]
        else:
            raise RefusedError(f"if_action_mask=True, but {self.env_name} gave no info['action_mask'] and its "
                               f"observations have no 'action_mask' key; "
                               f"the mask of legal actions comes from one of them")
        mask = np.asarray(mask)
        if mask.shape != (self.action_dim,) or not np.isin(mask, (0, 1)).all():
            raise RefusedError(f"{self.env_name}'s action mask {mask!r} is not accepted: a mask holds one 0 or 1 per "
                               f"action, {self.action_dim} of them (1: legal)")
        if if_acting and not mask.any():
            raise RefusedError(f"{self.env_name}'s action mask has no legal action in a state where its episode "
                               f"goes on (or is truncated, so that its value is bootstrapped): "
                               f"at least one must be legal")
        return np.append(gym.spaces.flatten(self.rest_space, observation), mask).astype(np.float32)

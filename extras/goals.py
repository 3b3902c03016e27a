"""Goal envs, an optional family of AgentRun's (its ENV_FAMILIES table): gymnasium-robotics' ids, and GoalObservation,
which flattens any goal env's Dict observations for the agents and hindsight replay (AgentZoo.HindsightReplayBuffer)."""
import os

import gymnasium as gym
import numpy as np

from AgentZoo import RefusedError


def make(env_id: str, frame_stack: int | None = None, **kwargs) -> gym.Env:
    """An env of gymnasium-robotics, an optional package: importing it registers its ids."""
    register(env_id)
    return gym.make(env_id, **kwargs)


def register(env_id: str):
    """Import gymnasium-robotics, which registers its ids, or say how to install it."""
    if "DISPLAY" not in os.environ:  # mujoco renders (replay's GIF) without a display through EGL
        os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        import gymnasium_robotics  # noqa: F401
    except ImportError:
        raise RefusedError(f"{env_id} is a gymnasium-robotics env: pip install gymnasium-robotics 'mujoco<3.4' (mujoco "
                           f"3.4 and later fail FetchReach's reset)") from None
class GoalObservation(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """A goal env (gymnasium-robotics' convention: Dict observations of observation, achieved_goal and desired_goal,
    and compute_reward(achieved_goal, desired_goal, info)) with flat observations [observation, achieved_goal,
    desired_goal], which the networks take as any Box (SB3's MultiInputPolicy concatenates the same three).
    With if_record_ends it also records, step by step, whether the episode went on, for HindsightReplayBuffer."""

    keys = ("observation", "achieved_goal", "desired_goal")

    def __init__(self, env: gym.Env, if_record_ends: bool = False):
        gym.utils.RecordConstructorArgs.__init__(self, if_record_ends=if_record_ends)  # so that its spec remakes it
        super().__init__(env)
        spaces = env.observation_space.spaces
        if set(spaces) != set(self.keys) or not all(isinstance(spaces[key], gym.spaces.Box) for key in self.keys) or \
                spaces["achieved_goal"].shape != spaces["desired_goal"].shape or \
                not callable(getattr(env.unwrapped, "compute_reward", None)):
            name = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
            raise RefusedError(f"{name}: observation space {env.observation_space} is not supported; the agents take"
                               f" flat Box observations, or a goal env's Dict of Box observation, achieved_goal "
                               f"and desired_goal (goals of one shape) with a compute_reward method")
        self.goal_dim = int(np.prod(spaces["desired_goal"].shape))
        size = sum(int(np.prod(spaces[key].shape)) for key in self.keys)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)
        self.not_done_log: list[bool] | None = [] if if_record_ends else None

    def observation(self, observation: dict) -> np.ndarray:
        return np.concatenate([np.asarray(observation[key], np.float32).ravel() for key in self.keys])

    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        if self.not_done_log is not None:
            self.not_done_log.append(not (terminated or truncated))
        return observation, reward, terminated, truncated, info

    def pop_not_done(self) -> list[bool]:
        """Whether each step since the last call left its episode going on."""
        log, self.not_done_log = self.not_done_log, []
        return log

    def feedback(self, achieved: np.ndarray, desired: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Rewards and terminations (None where the env has no compute_terminated) of steps that reached `achieved`
        with `desired` as their goal, (B, goal_dim) each -> (B,). The infos of the steps are not kept: {} stands for
        them (gymnasium-robotics' tasks compute both from the goals alone)."""
        unwrapped = self.env.unwrapped
        terminated = (unwrapped.compute_terminated(achieved, desired, {})
                      if hasattr(unwrapped, "compute_terminated") else None)
        if terminated is not None and np.ndim(terminated) == 0 and len(achieved) > 1:  # one bool for the batch (mazes)
            terminated = np.array([unwrapped.compute_terminated(a, d, {}) for a, d in zip(achieved, desired)], bool)
        return np.asarray(unwrapped.compute_reward(achieved, desired, {}), np.float32), terminated


def check_arguments(args, env_info):
    """Refuse hindsight relabelling (her_k > 0 in AgentRun's Arguments) where it cannot work: HindsightReplayBuffer
    relabels one-step transitions of a goal env, drawn uniformly."""
    if not env_info.goal_dim:
        raise RefusedError(f"her_k={args.her_k} is not accepted: {env_info.env_name} is not a goal env; hindsight "
                           f"relabelling needs Dict observations of observation, achieved_goal and desired_goal and a "
                           f"compute_reward method (gymnasium-robotics' convention); pass her_k=0 for any other env")
    for name, value, accepted in (("n_step", args.n_step, 1), ("if_per", args.if_per, False)):
        if value != accepted:
            raise RefusedError(f"{name}={value!r} is not accepted with her_k={args.her_k}: a relabelled transition "
                               f"is a one-step one drawn uniformly (HindsightReplayBuffer); pass {name}={accepted}, "
                               f"or her_k=0")

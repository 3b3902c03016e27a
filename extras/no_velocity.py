"""The RL zoo's velocity-masked tasks (CartPoleNoVel-v1, ...), an optional family of AgentRun's (its ENV_FAMILIES
table): benchmark tasks for agents with memory, registered with gymnasium when this module is imported."""
import gymnasium as gym
import numpy as np

from AgentRun import TARGET_RETURN_WITHOUT_THRESHOLD


# Tasks that need a memory: the RL zoo's velocity-masked ones (CartPoleNoVel-v1, ...), by id: the base env's id and the
# observation entries that are velocities, which read 0 (NoVelocityObservation). Registered with gymnasium when this
# module is imported (register_no_velocity_envs), with the base's time limit and target.
NO_VELOCITY = {"CartPoleNoVel-v1": ("CartPole-v1", (1, 3)), "PendulumNoVel-v1": ("Pendulum-v1", (2,)),
               "LunarLanderNoVel-v3": ("LunarLander-v3", (2, 3, 5)),
               "LunarLanderContinuousNoVel-v3": ("LunarLanderContinuous-v3", (2, 3, 5)),
               "MountainCarContinuousNoVel-v0": ("MountainCarContinuous-v0", (1,))}


class NoVelocityObservation(gym.ObservationWrapper):
    """An env whose observation's velocity entries read 0, its shape kept (the RL zoo's MaskVelocityWrapper
    convention), so that a policy must infer the velocities from the observations before: a partially observed task."""

    def __init__(self, env: gym.Env, indices: tuple[int, ...]):
        super().__init__(env)
        self.mask = np.ones(env.observation_space.shape, dtype=env.observation_space.dtype)
        self.mask[list(indices)] = 0

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return observation * self.mask


def make_no_velocity_env(base_id: str, indices: tuple[int, ...], **kwargs) -> gym.Env:
    """The base env as its entry point makes it (gym.make of the NoVel id adds the time limit and checks), masked."""
    base = gym.spec(base_id)
    return NoVelocityObservation(gym.envs.registration.load_env_creator(base.entry_point)(**base.kwargs | kwargs),
                                 indices)


def register_no_velocity_envs():
    """Register NO_VELOCITY's ids with gymnasium, once per process."""
    for env_id, (base_id, indices) in NO_VELOCITY.items():
        if env_id not in gym.registry:
            base = gym.spec(base_id)
            threshold = base.reward_threshold
            if threshold is None:  # Pendulum-v1 declares none
                threshold = TARGET_RETURN_WITHOUT_THRESHOLD[base_id]
            gym.register(env_id, entry_point="extras.no_velocity:make_no_velocity_env", reward_threshold=threshold,
                         max_episode_steps=base.max_episode_steps, kwargs=dict(base_id=base_id, indices=indices))


def make(env_id: str, frame_stack: int | None = None, **kwargs) -> gym.Env:
    """The NO_VELOCITY task of that id (frame_stack: AgentRun refuses it for flat states before)."""
    return gym.make(env_id, **kwargs)


def register(env_id: str):
    """Nothing more: importing this module registered every NO_VELOCITY id."""


register_no_velocity_envs()

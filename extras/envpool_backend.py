"""EnvPool's C++ vector envs as the explorer's env (env_backend="envpool"), an optional family of AgentRun's."""
import warnings

import gymnasium as gym
import numpy as np

from AgentNet import is_image
from AgentZoo import RefusedError


class EnvPoolVectorEnv(gym.vector.VectorEnv):
    """num_envs copies of a task in EnvPool's C++ vector env on one thread (env_backend="envpool"; pip install
    envpool), the explorer's env in place of gymnasium's SyncVectorEnv: 2.0x the steps/s on LunarLanderContinuous-v3,
    1.25x on HalfCheetah-v5 (BENCHMARKS.md "Environment speed"). EnvPool resets an ended copy on the step after, whose
    action it ignores; the agents take gymnasium's SAME_STEP autoreset (AgentZoo.check_same_step), so this resets such
    copies in the step that ended them (EnvPool's reset of those copies alone), with their final observations in
    info["final_obs"]: every step is a transition. EnvPool seeds copy i with seed + i when it makes the copies, so
    reset(seed=...) makes them anew."""

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}

    def __init__(self, env_id: str, num_envs: int):
        self.env_id, self.num_envs, self.spec = env_id, num_envs, gym.spec(env_id)
        self.pool = self.make_pool(seed=0)
        self.single_observation_space, self.single_action_space = self.pool.observation_space, self.pool.action_space
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)

    def make_pool(self, seed: int):
        import envpool  # optional; check_arguments said how to install it
        # its own limit one step past the spec's, which step() applies: EnvPool reports a termination on its limit step
        # as a truncation only (trunc = done and elapsed >= limit), and the agents would bootstrap from a terminal state
        pool = envpool.make_gymnasium(self.env_id, num_envs=self.num_envs, batch_size=self.num_envs, num_threads=1,
                                      seed=seed, max_episode_steps=self.spec.max_episode_steps + 1)
        with warnings.catch_warnings():  # EnvPool builds its spaces on first use (its own reset's too), and the float64
            warnings.simplefilter("ignore", UserWarning)  # bounds it gives its float32 Boxes warn: built here, quietly
            pool.observation_space, pool.action_space  # noqa: B018
        return pool

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        if seed is not None:
            self.pool.close()
            self.pool = self.make_pool(seed)
        return self.pool.reset()[0], {}

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        obs, reward, terminated, _, info = self.pool.step(actions)
        truncated = info["elapsed_step"] >= self.spec.max_episode_steps  # as gymnasium's TimeLimit, beside terminated
        ended = terminated | truncated
        info = {}
        if ended.any():
            info = {"final_obs": obs.copy(), "_final_obs": ended}
            obs[ended] = self.pool.reset(np.flatnonzero(ended))[0]
        return obs, reward, terminated, truncated, info

    def close_extras(self, **kwargs):
        self.pool.close()


def check_arguments(args, env_info):
    """Refuse a run (AgentRun's Arguments and EnvInfo) that EnvPool cannot step: envpool steps a task EnvPool has by
    the same id, with flat observations and no wrapper of this library's."""
    wrapped = (["her_k"] if args.her_k else []) + (["if_action_mask"] if args.if_action_mask else [])
    if wrapped or not isinstance(args.env, str) or is_image(env_info.state_dim) or env_info.if_multi_agent:
        raise RefusedError(f"env_backend='envpool' is not accepted for {env_info.env_name}"
                           + (f" with {' and '.join(wrapped)}" if wrapped else "") + ": it takes a gymnasium id of "
                           "a task with flat observations (not an Env instance, images, a team or a goal env) "
                           "that EnvPool has under the same id, such as LunarLanderContinuous-v3 or HalfCheetah-v5; "
                           "pass env_backend='gymnasium'")
    try:
        import envpool
    except ImportError:
        raise RefusedError("env_backend='envpool' needs the envpool package: pip install envpool") from None
    if args.env not in envpool.list_all_envs():
        raise RefusedError(f"env_backend='envpool' is not accepted for {args.env}: EnvPool has no task of that id "
                           f"(envpool.list_all_envs() lists its ids); pass env_backend='gymnasium'")

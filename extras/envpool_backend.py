"""EnvPool's C++ vector envs as the explorer's env (env_backend="envpool"), an optional family of AgentRun's."""
import warnings

import gymnasium as gym
import numpy as np



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
        import envpool  # optional; Arguments.check_env_backend said how to install it
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

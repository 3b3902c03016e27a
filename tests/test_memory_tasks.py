"""Issue 43: the tasks that need a memory, by name: the RL zoo's velocity-masked tasks, registered when AgentRun is
imported, with the base task's time limit and target. A run by name in a fresh process, where AgentRun is __main__:
tests/test_grid.py's grid runs CartPoleNoVel-v1."""
import gymnasium as gym
import numpy as np
import pytest

import AgentRun
from extras.no_velocity import NO_VELOCITY


@pytest.mark.parametrize("env_id", sorted(NO_VELOCITY))
def test_the_velocities_read_zero_and_the_rest_is_the_base_tasks(env_id):
    base_id, indices = NO_VELOCITY[env_id]
    env, base = gym.make(env_id), gym.make(base_id)
    observation, base_observation = env.reset(seed=3)[0], base.reset(seed=3)[0]
    action = env.action_space.sample()
    for _ in range(5):  # the same dynamics: the other entries follow the base task's
        observation, reward, *_ = env.step(action)
        base_observation, base_reward, *_ = base.step(action)
    velocities = np.zeros(observation.shape, bool)
    velocities[list(indices)] = True
    assert (observation[velocities] == 0).all() and (base_observation[velocities] != 0).any()
    np.testing.assert_array_equal(observation[~velocities], base_observation[~velocities])
    assert reward == base_reward and env.spec.max_episode_steps == base.spec.max_episode_steps
    info = AgentRun.make_env(env_id)[1]
    assert info.target_return == AgentRun.make_env(base_id)[1].target_return and info.state_dim == observation.shape[0]

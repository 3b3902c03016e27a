"""EnvPool as the explorer's backend (env_backend="envpool", issue 45): its copies step as gymnasium's do, transition by
transition; an ended copy resets in the same step with its final observation in info; Box actions are rescaled to the
task's bounds; the seed decides the copies; the loops learn with it; what it cannot step is refused."""
import dataclasses
import math

import gymnasium as gym
import numpy as np
import pytest

import AgentRun
from AgentRun import Arguments, train_and_evaluate
from extras.envpool_backend import EnvPoolVectorEnv


def gymnasium_twin(env_id: str) -> gym.Env:
    env = gym.make(env_id).unwrapped
    env.reset(seed=0)
    return env


def test_cartpole_copies_step_as_gymnasium_and_reset_in_the_step_that_ends_them():
    """From each copy's state, gymnasium's CartPole takes the same action to the same next state, reward and
    termination; an ended copy's next state is in info["final_obs"] and the state it returns is a new episode's."""
    env = EnvPoolVectorEnv("CartPole-v1", 2)
    twin = gymnasium_twin("CartPole-v1")
    state = env.reset(seed=3)[0]
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(300):
        actions = rng.integers(2, size=2)
        next_state, reward, terminated, truncated, info = env.step(actions)
        ended = terminated | truncated
        assert np.array_equal(info.get("_final_obs", np.zeros(2, bool)), ended)
        for i in range(2):
            twin.state, twin.steps_beyond_terminated = state[i].astype(np.float64), None  # as if never ended
            twin_state, twin_reward, twin_terminated = twin.step(int(actions[i]))[:3]
            reached = info["final_obs"][i] if ended[i] else next_state[i]
            np.testing.assert_allclose(reached, twin_state, atol=1e-4)
            assert (reward[i], terminated[i], truncated[i]) == (twin_reward, twin_terminated, False)
            if ended[i]:  # a new episode: CartPole starts within 0.05 of upright and still
                assert np.all(np.abs(next_state[i]) <= 0.05) and not np.allclose(next_state[i], reached)
        ends += int(ended.sum())
        state = next_state
    assert ends >= 10


def test_an_episode_that_terminates_on_its_limit_step_is_terminated(monkeypatch):
    """EnvPool reports a termination on the time limit's step as truncated only (trunc = done and elapsed >= limit);
    gymnasium's TimeLimit says both, and the agents must not bootstrap from that terminal state. Pushed left from seed
    0, EnvPool's CartPole falls at step 8: with a limit of 8 the last step terminates and truncates; with 9 it only
    terminates, and with 7 the episode is cut before the fall."""
    for limit, expected in ((8, (True, True)), (9, (True, False)), (7, (False, True))):
        spec = dataclasses.replace(gym.spec("CartPole-v1"), max_episode_steps=limit)
        monkeypatch.setattr(gym, "spec", lambda env_id: spec)
        env = EnvPoolVectorEnv("CartPole-v1", 1)
        env.reset(seed=0)
        for step in range(1, 10):
            terminated, truncated = env.step(np.zeros(1, dtype=np.int64))[2:4]
            if terminated[0] or truncated[0]:
                break
        assert (bool(terminated[0]), bool(truncated[0])) == expected and step == min(limit, 8)
        env.close()


def test_pendulum_actions_are_rescaled_and_time_limits_truncate():
    """The agents' actions in [-1, 1] reach Pendulum as torques in [-2, 2]: gymnasium's Pendulum given the doubled torque
    from the same state makes the same step. Every 200 steps the copies are truncated, not terminated."""
    env = AgentRun.make_explore_env(Arguments(agent="AgentPPO", env="Pendulum-v1", env_backend="envpool", num_envs=3,
                                               steps_per_round=1000))
    assert env.single_action_space == gym.spaces.Box(-1, 1, (1,), np.float32)
    twin = gymnasium_twin("Pendulum-v1")
    state = env.reset(seed=0)[0]
    rng = np.random.default_rng(1)
    for step in range(1, 401):
        actions = rng.uniform(-1, 1, (3, 1)).astype(np.float32)
        next_state, reward, terminated, truncated, info = env.step(actions)
        assert not terminated.any() and truncated.all() == (step % 200 == 0) and truncated.any() == truncated.all()
        for i in range(3):
            twin.state = np.array([math.atan2(state[i, 1], state[i, 0]), state[i, 2]], np.float64)
            twin_state, twin_reward = twin.step(2 * actions[i])[:2]
            reached = info["final_obs"][i] if truncated[i] else next_state[i]
            np.testing.assert_allclose(reached, twin_state, atol=1e-4)
            assert reward[i] == pytest.approx(twin_reward, abs=1e-4)
        state = next_state


def test_the_seed_decides_the_copies():
    def first_states(seed):
        env = EnvPoolVectorEnv("LunarLanderContinuous-v3", 2)
        states = [env.reset(seed=seed)[0]]
        states += [env.step(np.zeros((2, 2), np.float32))[0] for _ in range(5)]
        return np.stack(states)

    assert np.array_equal(first_states(7), first_states(7))
    assert not np.allclose(first_states(7), first_states(8))
    assert not np.allclose(first_states(7)[:, 0], first_states(7)[:, 1])  # each copy its own seed


def test_every_episode_is_counted_with_its_return(tmp_path):
    """RecordEpisodeStatistics over EnvPool's copies: Pendulum's 200-step episodes, each return the sum of its rewards."""
    args = Arguments(agent="AgentPPO", env="Pendulum-v1", env_backend="envpool", num_envs=2, steps_per_round=1000)
    env = AgentRun.make_explore_env(args)
    env.reset(seed=0)
    total = np.zeros(2)
    for _ in range(200):
        total += env.step(np.zeros((2, 1), np.float32))[1]
    assert AgentRun.episode_count(env) == 2
    np.testing.assert_allclose(list(env.return_queue), total, rtol=1e-5)


@pytest.mark.learning
def test_ppo_solves_cartpole_with_envpool_copies(tmp_path):
    args = Arguments(agent="AgentDiscretePPO", env="CartPole-v1", env_backend="envpool", seed=0,
                     cwd=str(tmp_path / "run"), break_step=60_000, target_return=475, eval_gap=0, if_multiprocess=False)
    result = train_and_evaluate(args)
    assert result["if_solved"], result


@pytest.mark.learning
def test_sac_learns_pendulum_in_the_multiprocess_loop_with_one_envpool_copy(tmp_path):
    """An off-policy agent's one copy is a vector env of one under EnvPool; its explorer process makes its own."""
    args = Arguments(agent="AgentSAC", env="Pendulum-v1", env_backend="envpool", cwd=str(tmp_path / "run"),
                     break_step=16_000, target_return=-250, eval_gap=0, if_multiprocess=True)
    result = train_and_evaluate(args)
    assert result["if_solved"], result
    run_state = AgentRun.read_run_state(str(tmp_path / "run"))
    assert run_state["episodes"] == run_state["step"] // 200 > 0, run_state  # every 200-step episode, none twice


@pytest.mark.parametrize("overrides, message", [
    ({"env_backend": "sample_factory"}, r"env_backend='sample_factory' is not accepted: 'gymnasium' or 'envpool'"),
    ({"env": "CartPoleNoVel-v1"}, r"EnvPool has no task of that id.*pass env_backend='gymnasium'"),
    ({"env": gym.make("CartPole-v1")}, r"it takes a gymnasium id of a task with flat observations .not an Env instance"),
    ({"env": "MinAtar/Breakout-v1"}, r"MinAtar/Breakout-v1: it takes a gymnasium id of a task with flat observations"),
    ({"env": "Taxi-v4", "if_action_mask": True}, r"Taxi-v4 with if_action_mask: it takes a gymnasium id"),
])
def test_what_envpool_cannot_step_is_refused(overrides, message, tmp_path):
    settings = {"agent": "AgentDiscretePPO", "env": "CartPole-v1", "env_backend": "envpool", "cwd": str(tmp_path / "run")}
    with pytest.raises(AgentRun.RefusedError, match=message):
        train_and_evaluate(Arguments(**(settings | overrides)))
    assert not (tmp_path / "run").exists()  # refused before anything is written

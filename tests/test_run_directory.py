"""A run directory is data, not code: resume, replay and a grid started again rebuild the env that config.json records
from this process's gymnasium registry, never from an entry point or wrapper the file names (issue 40, item 12)."""
import json
import os

import gymnasium as gym
import pytest

import AgentRun
from AgentRun import Arguments, train_and_evaluate
from extras import tools
from extras import teams


def tiny_run(cwd: str):
    train_and_evaluate(Arguments(agent="AgentDQN", env=gym.make("CartPole-v1", max_episode_steps=100), cwd=cwd,
                                 break_step=512, eval_gap=0, eval_times=1, target_return=1e9))


def write_env(cwd: str, env: dict):
    path = os.path.join(cwd, "config.json")
    with open(path) as f:
        config = json.load(f)
    with open(path, "w") as f:
        json.dump(config | {"env": env}, f)


def payloads(marker) -> list[dict]:
    """Specs that would run `touch marker` if gymnasium made them: an entry point, a wrapper, an unregistered id."""
    spec = json.loads(gym.spec("CartPole-v1").to_json())
    command = {"args": ["touch", str(marker)]}
    wrapper = {"name": "run", "entry_point": "subprocess:run", "kwargs": command}
    return [spec | {"entry_point": "subprocess:run", "kwargs": command},
            spec | {"additional_wrappers": [wrapper]},
            spec | {"id": "Evil-v0", "entry_point": "subprocess:run", "kwargs": command},
            json.loads(gym.spec(teams.register("simple_spread_v3")).to_json()) | {"kwargs": {"module": "this"}}]


@pytest.mark.parametrize("payload, message", [
    (0, r"config.json records env 'CartPole-v1' with entry_point 'subprocess:run' \(registered: 'gymnasium.envs"),
    (1, r"with additional_wrappers .*subprocess:run.* \(registered: \[\]\): resume and replay rebuild an env from "
        r"this process's registry only"),
    (2, r"env id 'Evil-v0', which is not registered in this process; register it"),
    (3, r"MultiAgentEnv\(module='this'\) is not accepted"),
])
@pytest.mark.slow
def test_a_config_that_names_code_is_refused_by_resume_and_replay_without_running_it(payload, message, tmp_path):
    cwd, marker = str(tmp_path / "run"), tmp_path / "pwned"
    tiny_run(cwd)
    write_env(cwd, payloads(marker)[payload])
    with pytest.raises(ValueError, match=message):
        AgentRun.resume(cwd, break_step=1024)
    with pytest.raises(ValueError, match=message):
        tools.replay(cwd, episodes=1)
    assert not marker.exists()


@pytest.mark.slow
def test_a_grid_started_again_refuses_a_run_whose_config_names_code(tmp_path):
    grid, marker = tmp_path / "grid", tmp_path / "pwned"
    argv = ["agent=AgentDQN", "env=CartPole-v1", "seed=0,1", "break_step=512", "eval_gap=0", "eval_times=1",
            "target_return=1e9"]
    tools.run_grid(str(grid), argv, workers=1)
    run_dir = grid / "seed=1"
    os.remove(run_dir / "summary.json")  # as if the grid had been killed during this run: started again, it resumes it
    write_env(str(run_dir), payloads(marker)[0])
    rows = tools.run_grid(str(grid), argv, workers=1)
    assert "registry only" in rows[1]["error"] and "error" not in rows[0]
    assert not marker.exists()


@pytest.mark.slow
def test_an_instance_with_kwargs_and_a_time_limit_is_still_rebuilt(tmp_path):
    cwd = str(tmp_path / "run")
    tiny_run(cwd)
    with open(os.path.join(cwd, "config.json")) as f:
        recorded = json.load(f)["env"]
    assert recorded["max_episode_steps"] == 100
    rebuilt = AgentRun.env_from_config(recorded | {"kwargs": {"sutton_barto_reward": True}})
    assert rebuilt.spec.max_episode_steps == 100 and rebuilt.unwrapped._sutton_barto_reward
    assert tools.replay(cwd, episodes=1)["avg_length"] <= 100
    assert AgentRun.resume(cwd, break_step=1024)["step"] == 1024

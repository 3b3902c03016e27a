"""A run directory is data, not code: resume, replay and a grid started again rebuild the env that config.json records
from this process's gymnasium registry, never from an entry point or wrapper the file names (issue 40, item 12). The
grid's case is tests/test_grid.py's grid started again (its runs already made)."""
import json
import os
import shutil

import gymnasium as gym
import pytest

import AgentRun
from AgentRun import Arguments, train_and_evaluate
from extras import tools
from extras import teams


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> str:
    """A short DQN run on CartPole with a 100-step limit, trained once: each test takes a copy (tiny_run_copy)."""
    cwd = str(tmp_path_factory.mktemp("tiny") / "run")
    train_and_evaluate(Arguments(agent="AgentDQN", env=gym.make("CartPole-v1", max_episode_steps=100), cwd=cwd,
                                 break_step=512, eval_gap=0, eval_times=1, target_return=1e9))
    return cwd


@pytest.fixture
def tiny_run_copy(tiny_run, tmp_path) -> str:
    return str(shutil.copytree(tiny_run, tmp_path / "run"))


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
def test_a_config_that_names_code_is_refused_by_resume_and_replay_without_running_it(payload, message, tmp_path,
                                                                                     tiny_run_copy):
    cwd, marker = tiny_run_copy, tmp_path / "pwned"
    write_env(cwd, payloads(marker)[payload])
    with pytest.raises(ValueError, match=message):
        AgentRun.resume(cwd, break_step=1024)
    with pytest.raises(ValueError, match=message):
        tools.replay(cwd, episodes=1)
    assert not marker.exists()


@pytest.mark.slow
def test_an_instance_with_kwargs_and_a_time_limit_is_still_rebuilt(tiny_run_copy):
    cwd = tiny_run_copy
    with open(os.path.join(cwd, "config.json")) as f:
        recorded = json.load(f)["env"]
    assert recorded["max_episode_steps"] == 100
    rebuilt = AgentRun.env_from_config(recorded | {"kwargs": {"sutton_barto_reward": True}})
    assert rebuilt.spec.max_episode_steps == 100 and rebuilt.unwrapped._sutton_barto_reward
    assert tools.replay(cwd, episodes=1)["avg_length"] <= 100
    assert AgentRun.resume(cwd, break_step=1024)["step"] == 1024


@pytest.mark.slow
def test_a_copied_run_resumes_in_its_copy_and_leaves_the_original_as_it_was(tiny_run, tiny_run_copy):
    """The checkpoint names the run's plot by its file name, not by the directory it was written in."""
    plots = sorted(os.listdir(tiny_run))
    assert any(name.startswith("plot_") for name in plots)
    AgentRun.resume(tiny_run_copy, break_step=1024)
    assert sorted(os.listdir(tiny_run)) == plots
    assert len([name for name in os.listdir(tiny_run_copy) if name.startswith("plot_")]) == 1

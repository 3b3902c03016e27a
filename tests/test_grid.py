"""The experiment grid (python AgentRun.py key=v1,v2 grid=<dir>) and the comparison plot (plot=<dir>)."""
import contextlib
import csv
import io
import json
import os
import shutil

import matplotlib.image
import pytest

from AgentRun import main
from extras.tools import grid_runs, group_runs, plot_runs, run_grid
from test_run_directory import payloads, write_env


def test_comma_lists_make_every_combination():
    spec, runs = grid_runs(["agent=AgentDQN,AgentD3QN", "env=CartPole-v1", "seed=0,1,2", "learning_rate=1e-3"])
    assert spec == {"agent": "AgentDQN,AgentD3QN", "env": "CartPole-v1", "seed": "0,1,2", "learning_rate": "1e-3"}
    assert len(runs) == 6 and runs[0] == {"agent": "AgentDQN", "env": "CartPole-v1", "seed": 0, "learning_rate": 1e-3}
    assert [(run["agent"], run["seed"]) for run in runs[:4]] == [("AgentDQN", 0), ("AgentDQN", 1), ("AgentDQN", 2),
                                                                 ("AgentD3QN", 0)]


@pytest.mark.parametrize("argv, message", [
    (["agent=AgentDQN", "cwd=/tmp/a,/tmp/b", "grid=x"], "cwd= is not accepted in a grid"),
    (["seed=0,one", "grid=x"], "seed='one' is not accepted: seed takes an integer"),
    (["agent=AgentDQN", "seed=0,1"], "a comma list makes a grid of runs: name its directory with grid=<dir>"),
    (["seed=0", "workers=2"], "workers= is the number of runs a grid runs at a time: it needs grid=<dir>"),
    (["grid=x", "workers=0"], "workers=0 is not accepted"),
    (["plot=x", "seed=1"], "plot= takes no other key=value"),
])
def test_bad_grid_input_is_refused(argv, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        main(argv)
    assert not os.path.exists(tmp_path / "x")  # refused before anything was written


def test_plot_of_a_directory_without_runs_is_refused(tmp_path):
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    with pytest.raises(ValueError, match="plot= found no runs under .*empty"):
        plot_runs([str(tmp_path / "empty")])


def recorded_best(cwd: str) -> float:
    """The best evaluation mean in cwd's recorder.csv, to the summary's one decimal."""
    with open(os.path.join(cwd, "recorder.csv")) as f:
        returns = [float(row["avg_return"]) for row in csv.DictReader(f)]
    assert returns, cwd
    return round(max(returns), 1)


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """Two agents by two seeds, one of them unfit for the env (DDPG on Discrete actions), two runs at a time. The
    command line's main(argv) in this process; each run is a fresh `python AgentRun.py` (extras.tools.run_in_grid)."""
    grid_dir = str(tmp_path_factory.mktemp("grid") / "g")
    argv = ["agent=AgentDQN,AgentDDPG", "env=CartPoleNoVel-v1", "seed=0,1", "break_step=512", "eval_times=2",
            "grid=" + grid_dir, "workers=2"]  # an id registered on AgentRun's import: each run a fresh process (below)
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):  # capsys is a test's, not a module fixture's
        main(argv)
    return grid_dir, argv, stdout.getvalue()


@pytest.mark.slow
def test_grid_runs_each_combination_in_its_own_cwd_and_reports_failures(grid):
    grid_dir, _, out = grid
    names = ["agent=AgentDQN_seed=0", "agent=AgentDQN_seed=1", "agent=AgentDDPG_seed=0", "agent=AgentDDPG_seed=1"]
    for name in names[:2]:
        config = json.load(open(os.path.join(grid_dir, name, "config.json")))
        assert config["agent"] == "AgentDQN" and config["seed"] == int(name[-1]) and config["break_step"] == 512
        assert os.path.isfile(os.path.join(grid_dir, name, "recorder.csv"))
        # (was tests/test_memory_tasks.py's run by name) a fresh `python AgentRun.py`, where AgentRun is __main__ and
        # CartPoleNoVel-v1's entry point imports it by name too, records rows
        assert len(list(csv.DictReader(open(os.path.join(grid_dir, name, "recorder.csv"))))) >= 1
    with open(os.path.join(grid_dir, "summary.csv")) as f:
        rows = list(csv.DictReader(f))
    assert [(row["agent"], row["seed"]) for row in rows] == [("AgentDQN", "0"), ("AgentDQN", "1"), ("AgentDDPG", "0"),
                                                             ("AgentDDPG", "1")]  # the settings that vary, in order
    assert all(row["solved"] == "False" and not row["error"] for row in rows[:2])
    for name, row in zip(names[:2], rows[:2]):  # the best evaluation mean each run recorded
        assert float(row["best_return"]) == recorded_best(os.path.join(grid_dir, name)) > 0, name
    assert all("AgentDDPG is for Box action spaces" in row["error"] for row in rows[2:])
    lines = out.splitlines()
    assert sum(line.startswith("[") and "/4] " in line for line in lines) == 4  # a progress line per finished run
    assert any(line.startswith("AgentDQN ") and " 0/2 " in line for line in lines)  # the median table
    image = matplotlib.image.imread(os.path.join(grid_dir, "comparison.png"))
    assert image.shape[0] > 300 and image.shape[1] > 600


@pytest.mark.slow
def test_grid_started_again_skips_finished_runs_refuses_code_and_another_grid(grid, tmp_path):
    """A run directory is data, not code (tests/test_run_directory.py): a grid started again resumes a killed run
    from this process's registry, so a config.json that names code is refused, its code never run."""
    grid_dir, argv, _ = grid
    grid_dir = str(shutil.copytree(grid_dir, tmp_path / "g"))  # the module's grid stays as its run left it
    finished = os.path.join(grid_dir, "agent=AgentDQN_seed=0")
    modified = os.path.getmtime(os.path.join(finished, "recorder.csv"))
    os.remove(os.path.join(grid_dir, "agent=AgentDQN_seed=1", "summary.json"))  # as if killed after a checkpoint
    # the refused AgentDDPG seed 0 left no files: made a killed run (a config.json, a checkpoint) whose env names code
    marker, code_run = tmp_path / "pwned", os.path.join(grid_dir, "agent=AgentDDPG_seed=0")
    shutil.copy(os.path.join(finished, "config.json"), code_run)
    os.mkdir(os.path.join(code_run, "checkpoint"))
    write_env(code_run, payloads(marker)[0])
    rows = run_grid(grid_dir, [item for item in argv if not item.startswith(("grid=", "workers="))], workers=1)
    assert os.path.getmtime(os.path.join(finished, "recorder.csv")) == modified  # skipped
    with open(os.path.join(grid_dir, "agent=AgentDQN_seed=1", "stdout.txt")) as f:
        assert "resumed at step" in f.read()  # resumed from its checkpoint, not started over
    assert len(rows) == 4 and rows[1]["best_return"] == recorded_best(os.path.join(grid_dir, "agent=AgentDQN_seed=1")) > 0
    assert "registry only" in rows[2]["error"] and "error" not in rows[0]
    assert not marker.exists()
    with pytest.raises(ValueError, match="holds another grid"):
        run_grid(grid_dir, ["agent=AgentDQN", "env=CartPole-v1", "seed=0,1,2"])


@pytest.mark.slow  # the grid's runs
def test_plot_compares_configs_from_several_directories(grid, tmp_path):
    grid_dir, _, _ = grid
    path = main([f"plot={grid_dir},{tmp_path}"])
    assert path == os.path.join(grid_dir, "comparison.png") and os.path.isfile(path)


def test_configs_are_labelled_by_what_the_user_varied():
    """An agent's own defaults come along when the agent varies: the label names the agent only; a setting set to
    other values than the agent's default is named; seeds and limits never make another config."""
    dqn = {"agent": "AgentDQN", "env": "CartPole-v1", "seed": 0, "learning_rate": 1e-3, "batch_size": 64, "max_time": 9}
    ddpg = {"agent": "AgentDDPG", "env": "Pendulum-v1", "seed": 0, "learning_rate": 2e-3, "batch_size": 128}
    groups = group_runs([(dqn, 1), (dqn | {"seed": 1, "max_time": 5}, 2), (ddpg, 3)])
    assert {label: [value for _, value in members] for label, members in groups.items()} == {
        "agent=AgentDQN env=CartPole-v1": [1, 2], "agent=AgentDDPG env=Pendulum-v1": [3]}
    groups = group_runs([(dqn, 1), (dqn | {"learning_rate": 3e-4}, 2)])
    assert list(groups) == ["learning_rate=0.001", "learning_rate=0.0003"]

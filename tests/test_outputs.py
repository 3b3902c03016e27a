"""What users look at: the files a run leaves in cwd, and replay of a cwd."""
import csv
import glob
import json
import math
import os
import re
import shutil
import subprocess
import sys

import gymnasium as gym
import matplotlib.image
import numpy as np
import pytest
import torch
from PIL import Image

from AgentRun import (AGENT_CLASSES, ARGUMENT_NAMES, Arguments, env_family, build_agent, main, parse_overrides,
                      make_env, run_episodes, train_and_evaluate)
from extras import goals
from extras.tools import replay
from AgentZoo import AgentDiscretePPO

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("short") / "run"
    args = Arguments(agent="AgentDiscretePPO", env="CartPole-v1", cwd=str(cwd), break_step=6144, eval_gap=0,
                     eval_times=2, target_return=1e9, if_multiprocess=False)  # serial: one row per update
    result = train_and_evaluate(args)
    return cwd, result


def test_short_run_writes_config_recorder_actor_and_one_plot(short_run):
    cwd, result = short_run
    assert result["stop_reason"] == "reached break_step 6144"
    config = json.loads((cwd / "config.json").read_text())
    assert config["agent"] == "AgentDiscretePPO" and config["num_envs"] == 8 and config["eval_times"] == 2
    with open(cwd / "recorder.csv") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["step", "seconds", "avg_return", "std_return", "explore_return", "min_return", "max_return",
                       "avg_length", "obj_critic", "obj_actor", "clip_fraction_start", "clip_fraction", "approx_kl_start",
                       "approx_kl", "entropy_start", "entropy", "explained_variance"]
    assert all(float(row[10]) == 0.0 and 0.0 <= float(row[11]) < 1.0 for row in rows[1:])  # every round starts at ratio 1
    assert [int(row[0]) for row in rows[1:]] == [2048, 4096, 6144]  # one row per evaluation
    assert (cwd / "actor.pt").is_file()

    plots = glob.glob(str(cwd / "*.png"))
    assert len(plots) == 1  # redrawn at each evaluation, the newest replacing the previous
    match = re.fullmatch(r"plot_(\d+)E_(\d+)T_(\d+)s\.png", os.path.basename(plots[0]))
    assert match and int(match[2]) == 6144 and int(match[1]) > 0
    image = matplotlib.image.imread(plots[0])
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100


def test_agent_hyperparameters_are_arguments_that_reach_the_agent_and_config(tmp_path):
    """Every knob of every agent can be set in Arguments and so on the command line (DESIGN.md); the ones left at
    None take the agent's defaults, and config.json records what was used."""
    for agent_class in AGENT_CLASSES.values():
        assert set(agent_class.hyper_defaults) <= ARGUMENT_NAMES, agent_class
        assert set(agent_class.train_defaults) <= ARGUMENT_NAMES, agent_class
    args = Arguments(agent="AgentDiscretePPO", env="CartPole-v1", cwd=str(tmp_path / "run"),
                     **parse_overrides(["entropy_coef=0.05", "lambda_gae=0.9"]))
    env_info = make_env(args.env)[1]
    args.resolve(env_info)
    args.prepare_cwd()
    agent = build_agent(args, env_info, device="cpu")
    assert (agent.entropy_coef, agent.lambda_gae, agent.ratio_clip) == (0.05, 0.9, 0.2)  # ratio_clip: the default
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (config["entropy_coef"], config["lambda_gae"], config["ratio_clip"]) == (0.05, 0.9, 0.2)
    assert config["explore_rate"] is None and config["alpha_init"] is None  # not this agent's



@pytest.mark.parametrize("overrides, epsilon", [([], 0.1), (["if_noisy=True"], 0.0),
                                                (["if_noisy=True", "explore_rate=0.05"], 0.05)])
def test_noisy_layers_explore_without_epsilon_unless_it_is_set(overrides, epsilon):
    """Noisy layers replace epsilon-greedy (NoisyNet-DQN): epsilon 0 when they are on, unless it is set too."""
    args = Arguments(agent="AgentDQN", env="CartPole-v1", **parse_overrides(overrides))
    args.resolve(make_env(args.env)[1])
    assert args.explore_rate == epsilon

@pytest.mark.slow
def test_replay_writes_a_gif_and_reports_returns(short_run, capsys):
    cwd, _ = short_run
    capsys.readouterr()
    result = main([f"replay={cwd}"])  # the command line's replay=: the run's eval_times (2) episodes
    assert re.search(r"2 episodes: return [-\d.]+ \+- [\d.]+, length \d+ \+- \d+", capsys.readouterr().out)
    assert result["frames"] > 1 and 0 < result["avg_length"] <= 500
    # the evaluation episodes of actor.pt on CartPole-v1 envs seeded as replay seeds them (the run's seed + i): one
    # reward per step, and the GIF one frame per step of the first
    agent = AgentDiscretePPO(json.loads((cwd / "config.json").read_text())["net_dims"], 4, 2, device="cpu")
    agent.act.load_state_dict(torch.load(cwd / "actor.pt", weights_only=True))
    envs = [gym.make("CartPole-v1") for _ in range(2)]
    for seed, env in enumerate(envs):
        env.reset(seed=seed)
    lengths = [length for _, length, _ in run_episodes(envs, agent)]
    assert result["avg_length"] == result["avg_return"] == np.mean(lengths) and result["frames"] == lengths[0]
    with Image.open(result["gif"]) as gif:
        assert gif.n_frames > 1


@pytest.mark.slow
def test_replay_without_actor_names_the_file(short_run, tmp_path):
    cwd, _ = short_run
    (tmp_path / "config.json").write_text((cwd / "config.json").read_text())
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "actor.pt"))):
        replay(str(tmp_path))
    out = subprocess.run([sys.executable, "AgentRun.py", f"replay={tmp_path}"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "actor.pt" in out.stderr and "Traceback" not in out.stderr


def test_replay_of_an_empty_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        replay(str(tmp_path))


def test_tensorboard_scalars_when_asked_for(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cwd = tmp_path / "run"
    train_and_evaluate(Arguments(agent="AgentDiscretePPO", env="CartPole-v1", cwd=str(cwd), break_step=4096,
                                 eval_gap=0, eval_times=2, target_return=1e9, if_tensorboard=True, if_multiprocess=False))
    events = EventAccumulator(str(cwd))
    events.Reload()
    assert {"avg_return", "explore_return", "obj_critic", "obj_actor", "avg_length"} <= set(events.Tags()["scalars"])
    assert [event.step for event in events.Scalars("avg_return")] == [2048, 4096]


def test_tensorboard_absent_gives_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # as if the package were not installed
    with pytest.raises(ValueError, match=r"if_tensorboard=True needs the tensorboard package \(pip install tensorboard\)"):
        train_and_evaluate(Arguments(agent="AgentDiscretePPO", env="CartPole-v1", cwd=str(tmp_path / "run"),
                                     if_tensorboard=True))
    assert not (tmp_path / "run").exists()


def test_no_tensorboard_files_unless_asked_for(short_run):
    cwd, _ = short_run
    assert not glob.glob(str(cwd / "events.out.tfevents.*"))


PRETRAINED = sorted(glob.glob(os.path.join(ROOT, "Result", "pretrained", "*")))


def test_a_pretrained_run_for_each_benchmark_task():
    assert [os.path.basename(run) for run in PRETRAINED] == [
        "AgentACER_Acrobot-v1", "AgentDDPG_MountainCarContinuous-v0", "AgentDiscreteACKTR_CartPole-v1",
        "AgentDiscretePPO_LunarLander-v3", "AgentPPO_BipedalWalker-v3", "AgentPPO_LunarLanderContinuous-v3",
        "AgentSAC_Pendulum-v1", "AgentTD3_FetchReach-v4"]


@pytest.mark.slow
@pytest.mark.parametrize("run", PRETRAINED, ids=os.path.basename)
def test_pretrained_run_replays_on_a_fresh_checkout(run, tmp_path):
    """Its config.json and actor.pt are all replay needs; replay seeds its episodes from config.json."""
    with open(os.path.join(run, "config.json")) as f:
        env_id = json.load(f)["env"]
    if env_family(env_id) is goals:
        pytest.importorskip("gymnasium_robotics")  # a benchmark-only package
    shutil.copytree(run, tmp_path / "run")
    result = replay(str(tmp_path / "run"), episodes=1)
    assert math.isfinite(result["avg_return"]) and os.path.isfile(result["gif"])
    if env_id == "CartPole-v1":  # the same episode every time: the solved policy balances it to the time limit
        assert result["avg_return"] == 500

"""Learning tests: each agent reaches its return within a fixed step budget and seed, through the
library's own loop. Evaluation after every update round (eval_gap=0) keeps the run deterministic."""
import csv
import json
import os

import gymnasium as gym
import numpy as np
import pytest
import torch

from AgentNet import ActorSAC
from AgentRun import Arguments, load_checkpoint, main, train_and_evaluate
from AgentZoo import AgentTD3, ReplayBuffer

pytestmark = pytest.mark.learning  # the tests here train agents (README: the quick subset skips them)


@pytest.mark.parametrize("agent, env, target_return, break_step", [
    ("AgentDQN", "CartPole-v1", 475, 40_000),
    ("AgentDoubleDQN", "CartPole-v1", 475, 40_000),
    ("AgentD3QN", "CartPole-v1", 475, 40_000),
    ("AgentDDPG", "Pendulum-v1", -250, 12_000),  # 10_000 of them random (train_defaults: random_steps)
    ("AgentTD3", "Pendulum-v1", -250, 16_000),  # TD3 keeps the paper's learning rate, tau and batch: slower here
    ("AgentModSAC", "Pendulum-v1", -250, 16_000),
    ("AgentTQC", "Pendulum-v1", -250, 16_000),
    ("AgentInterSAC", "Pendulum-v1", -250, 16_000),
    ("AgentInterAC", "Pendulum-v1", -250, 12_000),
    ("AgentDiscretePPO", "CartPole-v1", 475, 60_000),
    ("AgentPPO", "Pendulum-v1", -250, 150_000),
    ("AgentDiscreteVPG", "CartPole-v1", 475, 50_000),
    ("AgentVPG", "Pendulum-v1", -250, 160_000),
    ("AgentDiscreteTRPO", "CartPole-v1", 475, 40_000),
    ("AgentTRPO", "Pendulum-v1", -250, 70_000),
])
def test_agent_reaches_target(agent, env, target_return, break_step, tmp_path):
    args = Arguments(agent=agent, env=env, seed=0, cwd=str(tmp_path / "run"), break_step=break_step,
                     target_return=target_return, eval_gap=0)
    result = train_and_evaluate(args)
    assert result["if_solved"], result
    assert result["stop_reason"].startswith("reached target_return")


@pytest.mark.parametrize("agent, overrides, break_step", [
    ("AgentDQN", {"if_per": True}, 40_000), ("AgentDQN", {"n_step": 3}, 40_000),
    ("AgentRainbow", {}, 40_000), ("AgentDiscreteSAC", {}, 20_000),
])
def test_rainbow_parts_and_discrete_sac_solve_cartpole(agent, overrides, break_step, tmp_path):
    """Prioritized replay and n-step returns each with DQN's other defaults, all of Rainbow, and discrete SAC."""
    args = Arguments(agent=agent, env="CartPole-v1", seed=0, cwd=str(tmp_path / "run"), break_step=break_step,
                     target_return=475, eval_gap=0, **overrides)
    result = train_and_evaluate(args)
    assert result["if_solved"], result


@pytest.mark.parametrize("agent, break_step", [("AgentDDPG", 768), ("AgentTD3", 768), ("AgentSAC", 768),
                                               ("AgentPPO", 4096), ("AgentA2C", 512), ("AgentACKTR", 512)])
def test_continuous_agents_run_on_a_two_dimensional_action_space(agent, break_step, tmp_path):
    """Pendulum has one action dimension, which hides shape mistakes that broadcast; LunarLander has two.
    Off-policy agents explore at random for one round, then with their policy."""
    off_policy = agent in ("AgentDDPG", "AgentTD3", "AgentSAC")
    random_steps = {"random_steps": 256, "replay_ratio": 1 / 32} if off_policy else {}  # few updates: shapes only
    args = Arguments(agent=agent, env="LunarLanderContinuous-v3", cwd=str(tmp_path / "run"), break_step=break_step,
                     eval_times=1, target_return=1e9, **random_steps)
    result = train_and_evaluate(args)
    assert result["stop_reason"] == f"reached break_step {break_step}" and result["step"] >= break_step


@pytest.mark.parametrize("if_multiprocess, num_envs", [(False, 1), (True, 1), (False, 4), (True, 4)])
def test_random_warm_up_comes_before_learning(if_multiprocess, num_envs, tmp_path, monkeypatch):
    """TD3 explores uniformly for random_steps, then learns; the first update round trains on one round's
    transitions (steps_per_round), not on the whole warm-up. Steps count every env of a vector env."""
    add_sizes = []
    update_net = AgentTD3.update_net
    monkeypatch.setattr(AgentTD3, "update_net", lambda self, buffer, *a: add_sizes.append(buffer.add_size) or
                        update_net(self, buffer, *a))
    cwd = str(tmp_path / "run")
    train_and_evaluate(Arguments(agent="AgentTD3", env="Pendulum-v1", cwd=cwd, random_steps=1024, break_step=2048,
                                 eval_gap=0, target_return=1e9, replay_ratio=1 / 32, if_multiprocess=if_multiprocess,
                                 num_envs=num_envs))
    with open(os.path.join(cwd, "recorder.csv")) as f:
        assert int(next(csv.DictReader(f))["step"]) == 1024  # the first update round ends the warm-up
    buffer = ReplayBuffer(2 ** 20, 3, 1, if_discrete=False)
    run_state = load_checkpoint(cwd, AgentTD3(128, 3, 1, device="cpu"), buffer)
    assert run_state["step"] == buffer.cur_len >= 2048  # one step per transition stored, whatever num_envs
    warm_up = buffer.actions[:1024]
    assert 0.4 < (warm_up.abs() > 0.5).float().mean() < 0.6 and warm_up.min() < -0.95 and warm_up.max() > 0.95
    if not if_multiprocess:  # the learner process's calls are not seen here
        assert add_sizes[:2] == [256, 256]


def test_command_line_sac_solves_pendulum_and_writes_its_outputs(tmp_path, capsys):
    """DESIGN.md's example run, through the command line's main(argv) in this process (a fresh interpreter's import
    costs 3-4 s; __main__ is run by tests/test_errors.py and others): stops by itself at Pendulum's -200 with config,
    recorder and actor written."""
    cwd = tmp_path / "x"
    main(["agent=AgentSAC", "env=Pendulum-v1", f"cwd={cwd}", "break_step=12000", "eval_gap=0"])
    assert "Stop: reached target_return -200.0" in capsys.readouterr().out

    config = json.loads((cwd / "config.json").read_text())
    assert config["agent"] == "AgentSAC" and config["env"] == "Pendulum-v1" and config["target_return"] == -200.0
    assert config["net_dims"] is not None and config["gamma"] is not None  # defaults recorded as used
    with open(cwd / "recorder.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["step", "seconds", "avg_return", "std_return", "explore_return", "min_return", "max_return",
                             "avg_length", "obj_critic", "obj_actor", "mean_q", "alpha"]
    assert float(rows[-1]["avg_return"]) >= -200
    assert [int(r["step"]) for r in rows] == sorted(int(r["step"]) for r in rows)

    actor = ActorSAC(config["net_dims"], 3, 1)
    actor.load_state_dict(torch.load(cwd / "actor.pt", weights_only=True))
    env = gym.wrappers.RescaleAction(gym.make("Pendulum-v1"), np.float32(-1), np.float32(1))
    state, _ = env.reset(seed=123)
    episode_return, done = 0.0, False
    while not done:
        with torch.no_grad():
            action = actor(torch.as_tensor(state)).numpy()
        state, reward, terminated, truncated, _ = env.step(action)
        episode_return += reward
        done = terminated or truncated
    assert episode_return > -400  # the saved actor is the one that solved it

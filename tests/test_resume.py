"""Checkpoints and resume (serial loop): a kill loses at most the work since the last checkpoint."""
import copy
import csv
import json
import math
import os
import random
import signal
import subprocess
import sys
import threading
import time

import gymnasium as gym
import numpy as np
import pytest
import torch

import AgentRun
from AgentRun import Arguments, load_checkpoint, save_checkpoint, train_and_evaluate
from AgentZoo import AgentSAC, ReplayBuffer
from extras import tools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def default_sigint():
    """For a run that the test stops with SIGINT: a shell that starts a job in the background without job control
    (a CI script's `cmd &`) makes the job ignore SIGINT, and its children would inherit that. Ctrl-C in a terminal
    reaches a process with the default action, which Python turns into KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# for a test that needs a run with rows and a checkpoint, not a learned policy: a short warm-up, few updates
QUICK_START = ("random_steps=256", "replay_ratio=0.03125")


def start_run(cwd, *extra):
    return subprocess.Popen([sys.executable, "AgentRun.py", "agent=AgentSAC", "env=Pendulum-v1", f"cwd={cwd}",
                             "eval_gap=0", "break_step=16000", *extra],  # 10_000 steps of them random, the default
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)


def wait_for(path, timeout=120):
    deadline = time.time() + timeout
    while not os.path.exists(path):
        assert time.time() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def read_rows(cwd):
    with open(os.path.join(cwd, "recorder.csv")) as f:
        return list(csv.reader(f))


def fresh_sac_and_buffer():
    agent = AgentSAC(128, 3, 1, device="cpu")
    return agent, ReplayBuffer(2 ** 20, 3, 1, if_discrete=False)


def run_snapshot(agent, buffer) -> dict:
    """Copies of what a resumed run must start from: every part of the agent a checkpoint holds (networks, targets,
    optimizer states with Adam's moments, extra tensors), the buffer's stored part (None: no buffer, or none saved),
    and the next draws of torch's generator, taken from a copy of its state so that the run draws as it would have."""
    rng = torch.get_rng_state()
    draws = torch.rand(8)
    torch.set_rng_state(rng)
    parts = {name: copy.deepcopy(part.state_dict()) if hasattr(part, "state_dict") else part.detach().clone()
             for name, part in agent.parts().items()}
    return {"agent": parts, "buffer": copy.deepcopy(buffer.state_dict()) if hasattr(buffer, "state_dict") else None,
            "draws": draws}


def assert_same(saved, restored, where: str = "run"):
    """Equal tensors (same shape and values), containers and numbers, everywhere in two snapshots."""
    if isinstance(saved, torch.Tensor):
        assert isinstance(restored, torch.Tensor) and saved.shape == restored.shape, where
        assert torch.equal(saved.cpu(), restored.cpu()), where
    elif isinstance(saved, dict):
        assert isinstance(restored, dict) and saved.keys() == restored.keys(), (where, saved.keys(), restored.keys())
        for key in saved:
            assert_same(saved[key], restored[key], f"{where}[{key!r}]")
    elif isinstance(saved, (list, tuple)):
        assert isinstance(restored, (list, tuple)) and len(saved) == len(restored), where
        for i, (item, restored_item) in enumerate(zip(saved, restored)):
            assert_same(item, restored_item, f"{where}[{i}]")
    else:
        assert saved == restored, (where, saved, restored)


def assert_learned_state(snapshot: dict):
    """The snapshot is of an agent that has taken optimizer steps: every Adam's moments exist, not all zero."""
    names = [name for name in snapshot["agent"] if name.endswith("optimizer")]
    assert "cri_optimizer" in names, names
    for name in names:
        moments = [state["exp_avg"] for state in snapshot["agent"][name]["state"].values()]
        assert moments and any(moment.abs().sum() > 0 for moment in moments), name


@pytest.fixture
def saves_and_restores(monkeypatch):
    """Snapshots (run_snapshot) taken in this process as each checkpoint is written (saved), and as each resumed run
    has restored its learner from one (restored: right after start_state with an agent, which loads the checkpoint's
    networks, optimizers and buffer and sets the RNG states). A child process's are not seen."""
    saved, restored = [], []
    save_checkpoint_, start_state_ = AgentRun.save_checkpoint, AgentRun.start_state

    def save_and_record(cwd, agent, buffer, run_state):
        saved.append(run_snapshot(agent, buffer))  # the RNG state run_state["rng"] holds: nothing drew since
        save_checkpoint_(cwd, agent, buffer, run_state)

    def start_and_record(args, agent=None, buffer=None):
        run_state = start_state_(args, agent, buffer)
        if agent is not None and args.if_resume:
            restored.append(run_snapshot(agent, buffer))
        return run_state

    monkeypatch.setattr(AgentRun, "save_checkpoint", save_and_record)
    monkeypatch.setattr(AgentRun, "start_state", start_and_record)
    return saved, restored


@pytest.mark.parametrize("agent, extra", [
    ("AgentSAC", dict(break_step=768, random_steps=256, replay_ratio=1 / 32)),  # replay, alpha; few updates suffice
    ("AgentDiscretePPO", dict(break_step=4096))])  # no buffer in the checkpoint
@pytest.mark.slow
def test_a_resumed_run_starts_from_the_saved_networks_optimizers_buffer_and_random_draws(agent, extra, tmp_path,
                                                                                           saves_and_restores):
    saved, restored = saves_and_restores
    cwd = str(tmp_path / "run")
    env = "Pendulum-v1" if agent == "AgentSAC" else "CartPole-v1"
    train_and_evaluate(Arguments(agent=agent, env=env, cwd=cwd, eval_gap=0, target_return=1e9, if_multiprocess=False,
                                 **extra))
    assert restored == [] and saved
    last_saved = saved[-1]
    assert_learned_state(last_saved)
    if agent == "AgentSAC":
        assert last_saved["buffer"]["cur_len"] == 768 and "log_alpha" in last_saved["agent"]
    AgentRun.resume(cwd, break_step=2 * extra["break_step"])
    assert len(restored) == 1
    assert_same(last_saved, restored[0])  # what the first session's last checkpoint held, the second starts from


@pytest.mark.slow
def test_a_run_from_before_the_renames_resumes(tmp_path):
    """config.json written before target_step, max_memo, net_dim and repeat_times were renamed (steps_per_round,
    buffer_size, net_dims, replay_ratio or epochs) resumes with its values under the new names."""
    cwd = str(tmp_path / "run")
    train_and_evaluate(Arguments(agent="AgentDQN", env="CartPole-v1", cwd=cwd, break_step=1024, steps_per_round=128,
                                 buffer_size=4096, eval_gap=0, if_multiprocess=False))
    config_path = os.path.join(cwd, "config.json")
    with open(config_path) as f:
        config = json.load(f)
    config["target_step"], config["max_memo"] = config.pop("steps_per_round"), config.pop("buffer_size")
    config["net_dim"], config["net_dims"] = config["net_dims"], None  # net_dims None: two layers of net_dim
    config["repeat_times"] = config.pop("replay_ratio")
    del config["epochs"]
    with open(config_path, "w") as f:
        json.dump(config, f)
    AgentRun.resume(cwd, break_step=2048)
    with open(config_path) as f:
        config = json.load(f)
    assert (config["steps_per_round"], config["buffer_size"]) == (128, 4096) and "target_step" not in config
    assert config["net_dims"] == AgentRun.AGENT_CLASSES["AgentDQN"].train_defaults["net_dims"] and "net_dim" not in config
    assert config["replay_ratio"] == AgentRun.AGENT_CLASSES["AgentDQN"].train_defaults["replay_ratio"]
    assert "repeat_times" not in config and config["epochs"] is None
    assert AgentRun.read_run_state(cwd)["step"] >= 2048


@pytest.mark.parametrize("agent, new", [("AgentPPO", "epochs"), ("AgentACER", "replay_ratio"),
                                        ("AgentSAC", "replay_ratio")])
def test_an_old_repeat_times_reads_as_the_agents_own_knob(agent, new, tmp_path):
    """repeat_times was epochs for the on-policy agents and the replay ratio for the others and ACER."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"agent": agent, "env": "Pendulum-v1", "repeat_times": 3}))
    config = AgentRun.read_config(str(path))
    assert config[new] == 3 and "repeat_times" not in config


def checkpoint_step(cwd: str) -> int:
    """The step of cwd's checkpoint; -1 while it has none, or while the one it has is being replaced as this reads."""
    try:
        return AgentRun.read_run_state(cwd)["step"]
    except (FileNotFoundError, ValueError):
        return -1


@pytest.mark.learning
def test_sigkill_then_resume_continues_and_reaches_target(tmp_path, capsys):
    cwd = str(tmp_path / "run")
    # a run that would not stop by itself, killed once a checkpoint holds its 4th learning round (steps 10_240, 10_496,
    # 10_752, 11_008: random actions before 10_000); checkpoints every 0.5 s, so rows written after one are undone
    proc = start_run(cwd, "save_gap=0.5", "target_return=1e9", "break_step=100000000")
    deadline = time.time() + 120
    while checkpoint_step(cwd) < 11_008:
        assert time.time() < deadline and proc.poll() is None, "no checkpoint of the 4th learning round"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    rows_before = read_rows(cwd)

    agent, buffer = fresh_sac_and_buffer()
    run_state = load_checkpoint(cwd, agent, buffer)
    saved_step, saved_rows = run_state["step"], len(run_state["evaluator"]["history"])
    assert saved_step >= 11_008 and saved_rows >= 4 and buffer.cur_len == saved_step  # every explored transition
    assert torch.isfinite(buffer.states[:buffer.cur_len]).all()

    capsys.readouterr()
    # in this process; the command line's resume= to the target: test_multiprocess.py's SIGKILL test (main)
    AgentRun.resume(cwd, target_return=-200.0, break_step=30000)
    out = capsys.readouterr().out
    assert f"resumed at step {saved_step}" in out
    assert "Stop: reached target_return -200.0" in out
    rows_after = read_rows(cwd)
    assert rows_after[:saved_rows + 1] == rows_before[:saved_rows + 1]  # nothing the checkpoint recorded is lost
    steps = [int(row[0]) for row in rows_after[1:]]
    assert steps == sorted(set(steps))  # rows written after the checkpoint are gone: steps strictly increase
    assert steps[saved_rows] == saved_step + 256  # the step counter carries on from the checkpoint


@pytest.mark.slow
def test_sigkill_while_checkpoints_are_written_leaves_one_that_loads(tmp_path):
    cwd = str(tmp_path / "run")
    for kill in range(3):  # a checkpoint after every round: a kill often lands inside a write
        proc = start_run(cwd, "save_gap=1e-6") if kill == 0 else subprocess.Popen(
            [sys.executable, "AgentRun.py", f"resume={cwd}"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(os.path.join(cwd, "checkpoint"))
        time.sleep(random.uniform(0.5, 2.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        agent, buffer = fresh_sac_and_buffer()
        run_state = load_checkpoint(cwd, agent, buffer)
        assert buffer.cur_len == run_state["step"]


def test_death_in_the_middle_of_a_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    agent, buffer = fresh_sac_and_buffer()
    buffer.extend(torch.randn(10, 3), torch.rand(10, 1), torch.randn(10), torch.ones(10), torch.randn(10, 3))
    save_checkpoint(str(tmp_path), agent, buffer, {"step": 1})

    real_save, calls = torch.save, []

    def dying_save(obj, path):  # the process dies after two files of the next checkpoint
        calls.append(path)
        if len(calls) == 3:
            raise SystemExit("killed")
        real_save(obj, path)

    monkeypatch.setattr(torch, "save", dying_save)
    with pytest.raises(SystemExit):
        save_checkpoint(str(tmp_path), agent, buffer, {"step": 2})
    monkeypatch.undo()
    assert load_checkpoint(str(tmp_path), *fresh_sac_and_buffer())["step"] == 1

    real_rename = os.rename

    def dying_rename(src, dst):  # dies between moving the old checkpoint aside and renaming the new one
        real_rename(src, dst)
        if dst.endswith("checkpoint.old"):
            raise SystemExit("killed")

    monkeypatch.setattr(os, "rename", dying_rename)
    with pytest.raises(SystemExit):
        save_checkpoint(str(tmp_path), agent, buffer, {"step": 3})
    monkeypatch.undo()
    assert not os.path.exists(tmp_path / "checkpoint")
    assert load_checkpoint(str(tmp_path), *fresh_sac_and_buffer())["step"] == 1  # from checkpoint.old
    save_checkpoint(str(tmp_path), agent, buffer, {"step": 4})  # the next write tidies up
    assert sorted(os.listdir(tmp_path)) == ["checkpoint"]
    assert load_checkpoint(str(tmp_path), *fresh_sac_and_buffer())["step"] == 4


def test_truncated_checkpoint_names_the_file(tmp_path):
    agent, buffer = fresh_sac_and_buffer()
    save_checkpoint(str(tmp_path), agent, buffer, {"step": 1})
    path = tmp_path / "checkpoint" / "run_state.pt"
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(ValueError, match=rf"{path} cannot be loaded"):
        load_checkpoint(str(tmp_path), *fresh_sac_and_buffer())


@pytest.mark.slow
def test_resume_without_checkpoint(tmp_path):
    with pytest.raises(FileNotFoundError, match="holds no run to resume"):
        train_and_evaluate(Arguments(agent="AgentSAC", env="Pendulum-v1", cwd=str(tmp_path / "none"), if_resume=True))
    out = subprocess.run([sys.executable, "AgentRun.py", f"resume={tmp_path}"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "config.json" in out.stderr and "Traceback" not in out.stderr


class NaNAtStep(gym.Env):
    """Observation = [t]; at step `bad_step` the observation is NaN; truncated every 20 steps (wrap it in a TimeLimit)."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, bad_step=50):
        self.bad_step, self.t, self.total = bad_step, 0, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t, self.total = self.t + 1, self.total + 1
        obs = np.full(1, np.nan if self.total == self.bad_step else self.t, np.float32)
        return obs, 1.0, False, self.t >= 20, {}


def test_non_finite_observation_stops_with_the_step_and_the_run_saved(tmp_path):
    cwd = tmp_path / "run"
    args = Arguments(agent="AgentDQN", env=gym.wrappers.TimeLimit(NaNAtStep(), max_episode_steps=20), cwd=str(cwd),
                     target_return=1e9, num_envs=1)  # step 50 of one env
    with pytest.raises(ValueError, match=r"NaN or infinite observation or reward \(or the agent a NaN action\) at step 50 \(env 0\)"):
        train_and_evaluate(args)
    agent, buffer = AgentRun.AgentZoo.AgentDQN(128, 1, 2, device="cpu"), ReplayBuffer(2 ** 20, 1, 1, if_discrete=True)
    assert load_checkpoint(str(cwd), agent, buffer)["step"] == 0 and buffer.cur_len == 0  # the bad round is not in it


def test_check_finite_finds_the_first_bad_step_in_both_trajectory_layouts():
    saves = []
    off_policy = [torch.randn(8, 3), torch.rand(8, 2), torch.randn(8), torch.ones(8), torch.randn(8, 3)]  # 2-dim actions
    AgentRun.check_finite(tuple(off_policy), 100, 1, lambda: saves.append(1))
    off_policy[2][6] = math.nan  # the reward of the 7th step
    with pytest.raises(ValueError, match=r"at step 107 \(env 0\)"):
        AgentRun.check_finite(tuple(off_policy), 100, 1, lambda: saves.append(1))

    on_policy = [torch.randn(4, 3, 5), torch.rand(4, 3, 2), torch.randn(4, 3), torch.randn(4, 3), torch.ones(4, 3),
                 torch.ones(4, 3), torch.randn(4, 3, 5)]  # (horizon, num_envs, ...)
    AgentRun.check_finite(tuple(on_policy), 0, 3, lambda: saves.append(1))
    on_policy[-1][2, 1, 4] = math.inf  # next observation of step 3 in env 1
    with pytest.raises(ValueError, match=r"at step 8 \(env 1\)"):
        AgentRun.check_finite(tuple(on_policy), 0, 3, lambda: saves.append(1))
    assert saves == [1, 1]  # saved before each error, not on clean rounds


@pytest.mark.parametrize("agent, env, extra", [("AgentSAC", "Pendulum-v1", dict(break_step=1024, random_steps=256,
                                                                                replay_ratio=1 / 32)),  # few updates suffice
                                               ("AgentDiscretePPO", "CartPole-v1", dict(break_step=6144))])
@pytest.mark.slow
def test_same_seed_gives_the_same_record(agent, env, extra, tmp_path):
    records = []
    for name in ("a", "b"):
        train_and_evaluate(Arguments(agent=agent, env=env, cwd=str(tmp_path / name), seed=3, eval_gap=0,
                                     target_return=1e9, if_multiprocess=False, **extra))  # the serial loop is the reproducible one
        records.append([row[:1] + row[2:] for row in read_rows(str(tmp_path / name))])  # all but the seconds column
    assert len(records[0]) > 2 and records[0] == records[1]


@pytest.mark.parametrize("agent, extra", [("AgentDiscretePPO", dict(break_step=4096)),  # its default: 8 envs
                                           ("AgentDQN", dict(break_step=1024, num_envs=4))])
@pytest.mark.slow
def test_runs_on_vector_envs_resume(agent, extra, tmp_path):
    """A serial run whose explorer steps a vector env checkpoints plain numbers (the vector wrapper counts episodes
    in numpy integers, which weights_only loading refuses) and resumes from them."""
    cwd = str(tmp_path / "run")
    train_and_evaluate(Arguments(agent=agent, env="CartPole-v1", cwd=cwd, eval_gap=0, target_return=1e9,
                                 if_multiprocess=False, **extra))
    result = AgentRun.resume(cwd, break_step=2 * extra["break_step"])
    assert result["stop_reason"] == f"reached break_step {2 * extra['break_step']}"
    agent_class = getattr(AgentRun.AgentZoo, agent)
    buffer = ReplayBuffer(2 ** 20, 4, 2, if_discrete=True) if agent_class.if_off_policy else AgentRun.RolloutBuffer()
    run_state = load_checkpoint(cwd, agent_class(agent_class.train_defaults["net_dims"], 4, 2, device="cpu"), buffer)
    assert type(run_state["episodes"]) is int and run_state["episodes"] > 0


def stop_file_once_recording(cwd: str) -> threading.Thread:
    """A thread that makes the stop file once the run in this process writes recorder.csv, as a user would."""
    def stop():
        wait_for(os.path.join(cwd, "recorder.csv"))
        open(os.path.join(cwd, "stop"), "w").close()
    stopper = threading.Thread(target=stop, daemon=True)
    stopper.start()
    return stopper


@pytest.mark.slow
@pytest.mark.parametrize("how", ["stop file", "SIGINT"])
def test_stop_file_and_ctrl_c_stop_cleanly_with_everything_saved(how, tmp_path, capsys):
    """The stop file's run in this process (nothing to signal; a fresh interpreter costs 3-4 s), Ctrl-C's a process."""
    cwd = str(tmp_path / "run")
    settings = ("save_gap=1000", "target_return=1e9", *QUICK_START)  # no periodic checkpoint: only the stop writes one
    if how == "stop file":
        stopper = stop_file_once_recording(cwd)
        AgentRun.main(["agent=AgentSAC", "env=Pendulum-v1", f"cwd={cwd}", "eval_gap=0", "break_step=16000", *settings])
        stopper.join()
        stdout = capsys.readouterr().out
    else:
        proc = start_run(cwd, *settings)
        wait_for(os.path.join(cwd, "recorder.csv"))
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 0, stderr
    assert ("Stop: found the file `stop` in cwd" if how == "stop file" else "Stop: Ctrl-C") in stdout
    agent, buffer = fresh_sac_and_buffer()
    assert load_checkpoint(cwd, agent, buffer)["step"] > 0 and os.path.isfile(os.path.join(cwd, "actor.pt"))
    assert not os.path.exists(os.path.join(cwd, "stop"))  # honoured once, so a resume carries on


@pytest.mark.parametrize("if_multiprocess", [False, True])
def test_stop_file_during_the_random_warm_up_stops_within_one_round(if_multiprocess, tmp_path):
    """The warm-up explores and does not learn, but the stop file and the limits are checked in each of its rounds."""
    cwd = tmp_path / "run"
    cwd.mkdir()
    (cwd / "stop").touch()
    result = train_and_evaluate(Arguments(agent="AgentSAC", env="Pendulum-v1", cwd=str(cwd), random_steps=200_000,
                                          break_step=400_000, if_multiprocess=if_multiprocess))
    assert result["stop_reason"] == "found the file `stop` in cwd" and result["step"] == 256  # the first round
    assert load_checkpoint(str(cwd), *fresh_sac_and_buffer())["step"] == 256 and not (cwd / "stop").exists()


def test_max_time_during_the_random_warm_up_stops_the_run(tmp_path):
    result = train_and_evaluate(Arguments(agent="AgentSAC", env="Pendulum-v1", cwd=str(tmp_path / "run"),
                                          random_steps=10_000_000, break_step=20_000_000, max_time=1.0))
    assert result["stop_reason"] == "reached max_time 1.0 s" and 256 <= result["step"] < 100_000


class Killed(BaseException):
    """A kill the loop cannot catch: nothing is saved after it, as after SIGKILL."""


@pytest.mark.slow
def test_resume_drops_what_the_run_recorded_after_its_checkpoint(tmp_path, monkeypatch):
    """Rows and a better actor.pt written after the last checkpoint are undone by resume: recorder.csv is rewritten
    from the checkpoint's rows (steps strictly increase) and actor.pt is the actor of the best row that remains."""
    cwd = str(tmp_path / "run")
    scripted = iter([-900.0, -800.0, -700.0,  # the first session, checkpointed at its stop
                     -100.0, 0.0, None,  # the second: killed before its next checkpoint, so these rows are undone
                     -1000.0, -1000.0])  # the third, resumed from the first's checkpoint
    evaluated = []  # (return, the evaluated actor's weights), in order

    def scripted_episodes(envs, agent, frames=None):
        avg_return = next(scripted)
        if avg_return is None:
            raise Killed
        evaluated.append((avg_return, {name: t.clone() for name, t in agent.act.state_dict().items()}))
        return [(avg_return, 100, math.nan)] * len(envs)

    monkeypatch.setattr(AgentRun, "run_episodes", scripted_episodes)
    common = dict(eval_gap=0, target_return=1e9)
    train_and_evaluate(Arguments(agent="AgentDQN", env="CartPole-v1", cwd=cwd, break_step=768, **common))
    with pytest.raises(Killed):
        AgentRun.resume(cwd, break_step=4096, save_gap=1000)
    assert [int(row[0]) for row in read_rows(cwd)[1:]] == [256, 512, 768, 1024, 1280]  # as a kill leaves them
    assert torch.equal(torch.load(os.path.join(cwd, "actor.pt"), weights_only=True)["net.0.weight"],
                       evaluated[4][1]["net.0.weight"])  # the undone 0.0 row's actor

    AgentRun.resume(cwd, break_step=1280)
    rows = read_rows(cwd)
    assert [int(row[0]) for row in rows[1:]] == [256, 512, 768, 1024, 1280]
    assert [float(row[2]) for row in rows[1:]] == [-900, -800, -700, -1000, -1000]
    actor = torch.load(os.path.join(cwd, "actor.pt"), weights_only=True)
    best = evaluated[2][1]  # -700, the best row recorded
    assert all(torch.equal(actor[name], best[name]) for name in best)
    assert not os.path.exists(os.path.join(cwd, "actor.pt.tmp"))  # written aside, then renamed


def test_checkpoint_holds_only_the_stored_part_of_the_buffer(tmp_path):
    """buffer.pt grows with the transitions stored, not with buffer_size (a view would save the whole storage)."""
    agent = AgentSAC(16, 3, 1, device="cpu")
    sizes = {}
    for stored in (100, 10_000):
        buffer = ReplayBuffer(2 ** 20, 3, 1, if_discrete=False)
        buffer.extend(torch.randn(stored, 3), torch.rand(stored, 1), torch.randn(stored), torch.ones(stored),
                      torch.randn(stored, 3))
        save_checkpoint(str(tmp_path / str(stored)), agent, buffer, {"step": stored})
        sizes[stored] = os.path.getsize(tmp_path / str(stored) / "checkpoint" / "buffer.pt")
    per_transition = (3 + 1 + 1 + 1 + 3) * 4  # float32 state, action, reward, not_terminated, next_state
    assert 100 * per_transition <= sizes[100] < 100 * per_transition + 10_000
    assert 10_000 * per_transition <= sizes[10_000] < 10_000 * per_transition + 10_000


@pytest.mark.slow
def test_checkpoint_without_the_buffer_resumes_and_refills_it(tmp_path, capsys):
    cwd = str(tmp_path / "run")
    train_and_evaluate(Arguments(agent="AgentSAC", env="Pendulum-v1", cwd=cwd, break_step=512, random_steps=256,
                                 eval_gap=0, target_return=1e9, if_save_buffer=False, replay_ratio=1 / 32))
    assert not os.path.exists(os.path.join(cwd, "checkpoint", "buffer.pt"))
    capsys.readouterr()
    AgentRun.resume(cwd, break_step=1024)
    out = capsys.readouterr().out
    assert "holds no replay buffer (if_save_buffer=False); it refills from new exploration" in out
    assert "Stop: reached break_step 1024" in out
    agent, buffer = fresh_sac_and_buffer()
    load_checkpoint(cwd, agent, buffer)  # the resumed run does not save it either
    assert buffer.cur_len == 0 and not os.path.exists(os.path.join(cwd, "checkpoint", "buffer.pt"))


@pytest.mark.slow
def test_resume_and_replay_rebuild_the_env_instance_with_its_kwargs_and_time_limit(tmp_path):
    """config.json records an instance's whole spec: trained with g=3.0 and 50-step episodes, replayed and resumed
    with them (the id alone would give g=10.0 and 200 steps)."""
    cwd = str(tmp_path / "run")
    env = gym.make("Pendulum-v1", g=3.0, max_episode_steps=50)
    train_and_evaluate(Arguments(agent="AgentSAC", env=env, cwd=cwd, break_step=512, random_steps=256, eval_gap=0,
                                 eval_times=2, target_return=1e9, replay_ratio=1 / 32))
    with open(os.path.join(cwd, "config.json")) as f:
        recorded = json.load(f)["env"]
    assert recorded["id"] == "Pendulum-v1" and recorded["kwargs"] == {"g": 3.0} and recorded["max_episode_steps"] == 50
    rebuilt = AgentRun.env_from_config(recorded)
    assert rebuilt.unwrapped.g == 3.0 and rebuilt.spec.max_episode_steps == 50
    assert tools.replay(cwd, episodes=1, render="none")["avg_length"] == 50
    AgentRun.resume(cwd, break_step=1024)
    history = load_checkpoint(cwd, *fresh_sac_and_buffer())["evaluator"]["history"]
    assert history[-1]["step"] == 1024 and history[-1]["avg_length"] == 50


def test_an_env_that_cannot_be_rebuilt_is_refused_by_resume_and_replay(tmp_path):
    from envs import CounterEnv

    cwd = str(tmp_path / "run")
    make = lambda: gym.wrappers.TimeLimit(CounterEnv(terminate_at=30), max_episode_steps=20)  # not registered
    train_and_evaluate(Arguments(agent="AgentDQN", env=make(), cwd=cwd, break_step=512, eval_gap=0, target_return=1e9))
    message = r"config.json records an env instance of envs.CounterEnv, which cannot be rebuilt: it has no gymnasium spec"
    with pytest.raises(ValueError, match=message):
        AgentRun.resume(cwd, break_step=1024)
    with pytest.raises(ValueError, match=message):
        tools.replay(cwd)
    assert AgentRun.resume(cwd, env=make(), break_step=1024)["step"] == 1024  # the instance passed again

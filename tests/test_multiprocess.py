"""The multiprocess loop: learning, both start methods, faults, clean stops."""
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from AgentRun import Arguments, load_checkpoint, train_and_evaluate
from AgentZoo import AgentSAC, ReplayBuffer
from test_resume import NaNAtStep, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def is_gone(pid: int) -> bool:
    """No such process, or a zombie that only waits to be reaped."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def start_mp_run(cwd, *extra):
    proc = subprocess.Popen([sys.executable, "AgentRun.py", "agent=AgentSAC", "env=Pendulum-v1", f"cwd={cwd}",
                             "if_multiprocess=True", "break_step=100000", "target_return=0", *extra],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first_line = proc.stdout.readline()
    pids = dict(re.findall(r"(explorer|learner) pid (\d+)", first_line))
    assert set(pids) == {"explorer", "learner"}, first_line
    return proc, {name: int(pid) for name, pid in pids.items()}


@pytest.mark.parametrize("agent, env, target_return, break_step, start_method", [
    ("AgentSAC", "Pendulum-v1", -250, 12_000, None),  # the platform's default: fork on Linux
    ("AgentDiscretePPO", "CartPole-v1", 475, 60_000, "spawn"),  # macOS and Windows
])
def test_multiprocess_run_reaches_target(agent, env, target_return, break_step, start_method, tmp_path):
    args = Arguments(agent=agent, env=env, cwd=str(tmp_path / "run"), break_step=break_step, target_return=target_return,
                     eval_gap=1, if_multiprocess=True, start_method=start_method)
    result = train_and_evaluate(args)
    assert result["if_solved"], result
    assert (tmp_path / "run" / "recorder.csv").is_file() and (tmp_path / "run" / "actor.pt").is_file()
    assert (tmp_path / "run" / "checkpoint" / "run_state.pt").is_file()


@pytest.mark.parametrize("victim", ["explorer", "learner"])
def test_killed_child_stops_the_run_with_an_error_and_no_orphans(victim, tmp_path):
    proc, pids = start_mp_run(tmp_path / "run")
    wait_for(str(tmp_path / "run" / "recorder.csv"))
    os.kill(pids[victim], signal.SIGKILL)
    start = time.time()
    _, stderr = proc.communicate(timeout=60)
    assert time.time() - start < 10
    assert proc.returncode != 0
    assert f"the {victim} process was killed by signal 9" in stderr
    assert all(is_gone(pid) for pid in pids.values())


def test_child_that_raises_stops_the_run_with_its_traceback(tmp_path):
    args = Arguments(agent="AgentDQN", env=NaNAtStep(), cwd=str(tmp_path / "run"), target_return=1e9, if_multiprocess=True)
    with pytest.raises(RuntimeError, match=r"(?s)the learner process exited with code 1.*NaN or infinite observation"):
        train_and_evaluate(args)


@pytest.mark.parametrize("how", ["stop file", "SIGINT"])
def test_stop_file_and_ctrl_c_stop_a_multiprocess_run_cleanly(how, tmp_path):
    cwd = tmp_path / "run"
    proc, pids = start_mp_run(cwd, "save_gap=1000")
    wait_for(str(cwd / "recorder.csv"))
    if how == "stop file":
        (cwd / "stop").touch()
    else:
        proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert ("found the file `stop` in cwd" if how == "stop file" else "Stop: Ctrl-C") in stdout
    run_state = load_checkpoint(str(cwd), AgentSAC(128, 3, 1, device="cpu"), ReplayBuffer(2 ** 20, 3, 1, if_discrete=False))
    assert run_state["step"] > 0
    assert all(is_gone(pid) for pid in pids.values())


def test_resume_of_a_multiprocess_run_is_refused_clearly(tmp_path):
    with pytest.raises(ValueError, match="resuming a multiprocess run is not built yet"):
        train_and_evaluate(Arguments(agent="AgentSAC", env="Pendulum-v1", cwd=str(tmp_path), if_multiprocess=True,
                                     if_resume=True))

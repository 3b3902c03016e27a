"""A3C: gradients of a worker's copy step the shared networks with the shared optimizer's statistics, across
processes; its asynchronous loop learns, stops on a dead worker, resumes; its refusals."""
import multiprocessing as mp
import os
import re
import signal
import subprocess
import sys

import pytest
import torch

from AgentRun import Arguments, read_run_state, resume, train_and_evaluate
from AgentZoo import AgentA3C, AgentDiscreteA3C, new_adam, optimizer_step
from spawned import ACTION_DIM, LEARNING_RATE, STATE_DIM, actor_loss, step_in_child
from test_multiprocess import ROOT, is_gone
from test_resume import assert_learned_state, assert_same, saves_and_restores, wait_for  # noqa: F401 (a fixture)


def shared_and_worker(seed: int = 0) -> tuple[AgentA3C, AgentA3C]:
    torch.manual_seed(seed)
    shared = AgentA3C(16, STATE_DIM, ACTION_DIM, device="cpu", learning_rate=LEARNING_RATE)
    shared.share()
    worker = AgentA3C(16, STATE_DIM, ACTION_DIM, device="cpu", learning_rate=LEARNING_RATE)
    worker.attach(shared)
    return shared, worker


def test_a_worker_step_is_the_shared_adam_step_of_the_worker_gradient():
    """The shared actor moves as a plain Adam's first step moves a twin from the same weights with the same gradient
    (share() created the statistics without a trace); the worker's copy takes the result."""
    shared, worker = shared_and_worker()
    twin = AgentA3C(16, STATE_DIM, ACTION_DIM, device="cpu")
    twin.act.load_state_dict(shared.act.state_dict())
    optimizer_step(new_adam(twin.act.parameters(), LEARNING_RATE, torch.device("cpu")), actor_loss(twin))

    before = [param.detach().clone() for param in worker.act.parameters()]
    optimizer_step(worker.act_optimizer, actor_loss(worker))
    assert all(torch.equal(param, old) for param, old in zip(worker.act.parameters(), before))  # only the shared moved
    for param, expected in zip(shared.act.parameters(), twin.act.parameters()):
        torch.testing.assert_close(param, expected)
    worker.pull()
    for param, expected in zip(worker.act.parameters(), shared.act.parameters()):
        assert torch.equal(param, expected) and param.data_ptr() != expected.data_ptr()  # equal, and a copy


@pytest.mark.slow
@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_a_step_in_another_process_moves_the_shared_weights_and_statistics(start_method):
    shared, _ = shared_and_worker()
    weights = [param.detach().clone() for param in shared.act.parameters()]
    child = mp.get_context(start_method).Process(target=step_in_child, args=(shared,))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0
    moved = [not torch.equal(param, old) for param, old in zip(shared.act.parameters(), weights)]
    with_statistics = [bool(shared.act_optimizer.state[param]["exp_avg"].abs().sum() > 0)
                       for param in shared.act.parameters()]
    assert any(moved) and moved == with_statistics  # (log_std has no gradient from this loss: it keeps both)


@pytest.mark.learning
def test_discrete_a3c_learns_cartpole(tmp_path):
    result = train_and_evaluate(Arguments(agent="AgentDiscreteA3C", env="CartPole-v1", cwd=str(tmp_path / "run"),
                                          break_step=1_000_000, target_return=475, eval_gap=1))  # seeds 0-4: 61-510k steps
    assert result["if_solved"], result


@pytest.mark.slow
def test_a3c_resumes_from_its_checkpoint(tmp_path, saves_and_restores):
    """The shared agent of the resumed run starts as the first session's checkpoint left it: networks, the shared
    optimizers' statistics and the recorder's random draws."""
    checkpoints, restored = saves_and_restores
    cwd = str(tmp_path / "run")
    first = train_and_evaluate(Arguments(agent="AgentA3C", env="Pendulum-v1", cwd=cwd, break_step=8192, eval_gap=0))
    assert first["stop_reason"] == "reached break_step 8192"
    saved = read_run_state(cwd)
    assert saved["step"] == first["step"] >= 8192 and saved["episodes"] > 0
    last_checkpoint = checkpoints[-1]  # written at the stop, after the workers left
    assert_learned_state(last_checkpoint)
    second = resume(cwd, break_step=16384)
    assert second["stop_reason"] == "reached break_step 16384" and second["step"] > first["step"]
    assert read_run_state(cwd)["episodes"] > saved["episodes"]
    assert len(restored) == 1
    assert_same(last_checkpoint, restored[0])


@pytest.mark.slow
def test_a_killed_worker_stops_the_run_with_an_error_and_no_orphans(tmp_path):
    cwd = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "AgentRun.py", "agent=AgentA3C", "env=Pendulum-v1", f"cwd={cwd}",
                             "break_step=10000000", "target_return=0"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        pids = {name: int(pid) for name, pid in re.findall(r"(worker \d+) pid (\d+)", proc.stdout.readline())}
        assert set(pids) == {"worker 0", "worker 1"}
        wait_for(str(cwd / "recorder.csv"))
        os.kill(pids["worker 1"], signal.SIGKILL)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode != 0 and "the worker 1 process was killed by signal 9" in stderr, stderr
    assert all(is_gone(pid) for pid in pids.values())
    assert read_run_state(str(cwd))["step"] > 0  # the recorder saved what the workers had learnt


def test_a3c_in_the_serial_loop_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"if_multiprocess=False is not accepted: AgentDiscreteA3C learns in num_workers "
                                         r"processes of its own"):
        train_and_evaluate(Arguments(agent=AgentDiscreteA3C, env="CartPole-v1", cwd=str(tmp_path / "run"),
                                     if_multiprocess=False))

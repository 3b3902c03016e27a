"""The multiprocess loop: learning, both start methods, faults, clean stops."""
import multiprocessing as mp
import os
import random
import re
import signal
import subprocess
import sys
import time

import gymnasium as gym
import pytest
import torch

import AgentRun
from AgentRun import Arguments, load_checkpoint, resume, train_and_evaluate
from AgentZoo import AgentSAC, ReplayBuffer
from envs import CounterEnv
from spawned import put_whether_sigint_is_ignored
from test_resume import QUICK_START, NaNAtStep, default_sigint, read_rows, stop_file_once_recording, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def is_gone(pid: int) -> bool:
    """No such process, or a zombie that only waits to be reaped."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.fixture
def start_mp_run():
    """Starts `python AgentRun.py` for a multiprocess SAC run and returns it with its children's pids; whatever of it
    is still running when the test ends (a failed test) is killed, so that it cannot slow the tests after it."""
    started = []

    def start(cwd, *extra):
        proc = subprocess.Popen([sys.executable, "AgentRun.py", "agent=AgentSAC", "env=Pendulum-v1", f"cwd={cwd}",
                                 "if_multiprocess=True", "break_step=100000", "target_return=0", *extra],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=default_sigint)
        first_line = proc.stdout.readline()
        pids = {name: int(pid) for name, pid in re.findall(r"(explorer(?: \d+)?|learner) pid (\d+)", first_line)}
        started.append((proc, pids))
        workers = int(next((item.split("=")[1] for item in extra if item.startswith("num_workers=")), 1))
        explorers = ["explorer"] if workers == 1 else [f"explorer {worker}" for worker in range(workers)]
        assert set(pids) == {*explorers, "learner"}, first_line
        return proc, pids

    yield start
    for proc, pids in started:
        for pid in [proc.pid, *pids.values()]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.communicate()


# eval_gap 0: the recorder evaluates the learner's newest weights as soon as its last evaluation is done, never
# waiting on the clock, so how often it evaluates does not depend on this machine's speed against a wall-clock gap
@pytest.mark.parametrize("agent, env, target_return, break_step, start_method", [
    ("AgentDiscretePPO", "CartPole-v1", 475, 100_000, "spawn"),  # a round gathers both workers' rollouts; spawn: macOS
    ("AgentSAC", "Pendulum-v1", -250, 16_000, None),  # once per round of both workers' transitions; None: fork on Linux
])
@pytest.mark.learning
def test_two_workers_reach_the_target_and_every_episode_is_counted(agent, env, target_return, break_step, start_method,
                                                                    tmp_path):
    result = train_and_evaluate(Arguments(agent=agent, env=env, cwd=str(tmp_path / "run"), break_step=break_step,
                                          target_return=target_return, eval_gap=0, num_workers=2,
                                          start_method=start_method))
    assert result["if_solved"], result
    assert (tmp_path / "run" / "recorder.csv").is_file() and (tmp_path / "run" / "actor.pt").is_file()
    assert (tmp_path / "run" / "checkpoint" / "run_state.pt").is_file()
    if env == "Pendulum-v1":  # every episode is 200 steps: the episodes of both explorers, none twice
        run_state = AgentRun.read_run_state(str(tmp_path / "run"))
        assert run_state["episodes"] == 2 * (run_state["step"] // 2 // 200) > 0, run_state


def test_an_explorer_reports_every_episode_of_a_round(tmp_path):
    """Two-step episodes: a round of 512 steps ends 256 of them, more than gymnasium keeps returns of by default."""
    env = gym.wrappers.TimeLimit(CounterEnv(terminate_at=2), max_episode_steps=10)
    train_and_evaluate(Arguments(agent="AgentDiscretePPO", env=env, cwd=str(tmp_path / "run"), steps_per_round=512,
                                 break_step=2048, target_return=1000, eval_gap=0, if_multiprocess=True))
    run_state = AgentRun.read_run_state(str(tmp_path / "run"))
    assert run_state["episodes"] == run_state["step"] // 2, run_state


def test_workers_trajectories_merge_as_one_vector_env():
    """Worker w's env copies follow worker w-1's at every step, as the copies of one vector env do."""
    on_policy = [torch.tensor([[1.0], [2.0]]), torch.tensor([[10.0], [20.0]])]  # (T=2, N=1) of two workers
    merged, = AgentRun.merge_trajectories([(part,) for part in on_policy], if_off_policy=False, num_envs=1)
    assert merged.tolist() == [[1.0, 10.0], [2.0, 20.0]]
    # off-policy (T * N,) with N=2: step 0 env 0, step 0 env 1, step 1 env 0, step 1 env 1
    off_policy = [torch.tensor([0.0, 1, 2, 3]), torch.tensor([10.0, 11, 12, 13])]
    merged, = AgentRun.merge_trajectories([(part,) for part in off_policy], if_off_policy=True, num_envs=2)
    assert merged.tolist() == [0.0, 1, 10, 11, 2, 3, 12, 13]


@pytest.mark.slow
@pytest.mark.parametrize("victim, workers", [("explorer", 1), ("learner", 1), ("explorer 1", 2)])
def test_killed_child_stops_the_run_with_an_error_and_no_orphans(victim, workers, tmp_path, start_mp_run):
    proc, pids = start_mp_run(tmp_path / "run", f"num_workers={workers}", *QUICK_START)
    wait_for(str(tmp_path / "run" / "recorder.csv"))
    os.kill(pids[victim], signal.SIGKILL)
    start = time.time()
    _, stderr = proc.communicate(timeout=60)
    assert time.time() - start < 10
    assert proc.returncode != 0
    assert f"the {victim} process was killed by signal 9" in stderr
    assert all(is_gone(pid) for pid in pids.values())


def test_child_that_raises_stops_the_run_with_its_traceback(tmp_path):
    args = Arguments(agent="AgentDQN", env=gym.wrappers.TimeLimit(NaNAtStep(), max_episode_steps=20), cwd=str(tmp_path / "run"),
                     target_return=1e9, if_multiprocess=True)
    with pytest.raises(RuntimeError, match=r"(?s)the learner process exited with code 1.*NaN or infinite observation"):
        train_and_evaluate(args)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["stop file", "SIGINT", "SIGINT pressed again and again"])
def test_stop_file_and_ctrl_c_stop_a_multiprocess_run_cleanly(how, tmp_path, start_mp_run, capsys):
    """Ctrl-C only asks for the stop: raised as KeyboardInterrupt at any moment, it could land inside a queue's put
    and hang the stop, and a second press would end the run before the learner's final checkpoint. The stop file's
    run is in this process (nothing to signal), its children forked from it."""
    cwd = tmp_path / "run"
    if how == "stop file":
        stopper = stop_file_once_recording(str(cwd))
        AgentRun.main(["agent=AgentSAC", "env=Pendulum-v1", f"cwd={cwd}", "if_multiprocess=True", "break_step=100000",
                       "target_return=0", "save_gap=1000", *QUICK_START])  # start_mp_run's command line
        stopper.join()
        stdout = capsys.readouterr().out
        pids = {name: int(pid) for name, pid in re.findall(r"(explorer(?: \d+)?|learner) pid (\d+)", stdout)}
        assert set(pids) == {"explorer", "learner"}, stdout
    else:
        proc, pids = start_mp_run(cwd, "save_gap=1000", *QUICK_START)
        wait_for(str(cwd / "recorder.csv"))
        for _ in range(1 if how == "SIGINT" else 10):  # 10 in 0.2 s: all before the run's end
            proc.send_signal(signal.SIGINT)
            time.sleep(0.02)
        stdout, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 0, stderr
    assert ("found the file `stop` in cwd" if how == "stop file" else "Stop: Ctrl-C") in stdout, stdout
    run_state = load_checkpoint(str(cwd), AgentSAC(128, 3, 1, device="cpu"), ReplayBuffer(2 ** 20, 3, 1, if_discrete=False))
    assert run_state["step"] > 0
    assert all(is_gone(pid) for pid in pids.values())


@pytest.mark.learning
def test_sigkill_of_a_multiprocess_run_then_resume_continues_and_reaches_target(tmp_path, start_mp_run, capsys):
    cwd = str(tmp_path / "run")
    proc, pids = start_mp_run(cwd, "save_gap=0.5", "eval_gap=0", "target_return=1e9")  # it would not stop by itself
    deadline, first_step = time.time() + 120, None
    while True:  # a checkpoint with recorder rows (the learner takes the recorder's state at its next save), and then
        try:  # the next one: the kill lands after two checkpoints of the learning run, however fast this machine is
            run_state = AgentRun.read_run_state(cwd)
            if first_step is None and (run_state["evaluator"] or {}).get("history"):
                first_step = run_state["step"]
            elif first_step is not None and run_state["step"] > first_step:
                break
        except (FileNotFoundError, ValueError):  # not written yet, or being replaced as this reads
            pass
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)  # the parent only: its children must notice and leave on their own
    proc.wait(timeout=30)
    deadline = time.time() + 10
    while not all(is_gone(pid) for pid in pids.values()):
        assert time.time() < deadline, "a child outlived its killed parent"
        time.sleep(0.1)
    rows_before = read_rows(cwd)

    agent, buffer = AgentSAC(128, 3, 1, device="cpu"), ReplayBuffer(2 ** 20, 3, 1, if_discrete=False)
    run_state = load_checkpoint(cwd, agent, buffer)
    saved_step = run_state["step"]
    assert saved_step > 0 and buffer.cur_len == saved_step  # every transition the learner took is in the saved buffer
    saved_rows = [[str(row[name]) for name in rows_before[0]] for row in run_state["evaluator"]["history"]]
    assert saved_rows and saved_rows == rows_before[1:len(saved_rows) + 1]  # the recorder's state rides along

    capsys.readouterr()
    # the command line's resume=, in this process (a fresh interpreter: the resumes of the killed runs below)
    AgentRun.main([f"resume={cwd}", "break_step=30000", "target_return=-200"])
    out = capsys.readouterr().out
    assert "multiprocess" in out and f"resumed at step {saved_step}" in out
    assert "Stop: reached target_return -200.0" in out
    rows_after = read_rows(cwd)
    assert rows_after[:len(saved_rows) + 1] == rows_before[:len(saved_rows) + 1]  # nothing the checkpoint recorded is lost
    steps = [int(row[0]) for row in rows_after[1:]]
    assert steps == sorted(set(steps))  # rows written after the checkpoint are gone: steps strictly increase
    assert saved_step < steps[len(saved_rows)] <= saved_step + 1024  # the counter carries on


@pytest.mark.slow
def test_sigkill_of_every_process_while_checkpoints_are_written_leaves_one_that_loads(tmp_path):
    cwd = str(tmp_path / "run")
    for kill in range(3):  # a checkpoint after every round: killing the whole group often lands inside a write
        command = ["agent=AgentSAC", "env=Pendulum-v1", f"cwd={cwd}", "if_multiprocess=True", "save_gap=1e-6"] \
            if kill == 0 else [f"resume={cwd}"]
        proc = subprocess.Popen([sys.executable, "AgentRun.py", *command], cwd=ROOT, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wait_for(os.path.join(cwd, "checkpoint"))
        time.sleep(random.uniform(0.5, 2.0))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        agent, buffer = AgentSAC(128, 3, 1, device="cpu"), ReplayBuffer(2 ** 20, 3, 1, if_discrete=False)
        run_state = load_checkpoint(cwd, agent, buffer)
        assert buffer.cur_len == run_state["step"]


@pytest.mark.slow
def test_serial_checkpoint_resumes_in_the_multiprocess_loop(tmp_path):
    cwd = str(tmp_path / "run")
    train_and_evaluate(Arguments(agent="AgentSAC", env="Pendulum-v1", cwd=cwd, break_step=512, random_steps=256,
                                 eval_gap=0, target_return=1e9, replay_ratio=1 / 32))
    rows_before = read_rows(cwd)
    result = resume(cwd, if_multiprocess=True, break_step=1024)
    assert result["stop_reason"] == "reached break_step 1024" and result["step"] >= 1024
    rows_after = read_rows(cwd)
    assert rows_after[:len(rows_before)] == rows_before and int(rows_after[-1][0]) >= 1024


def test_weights_sent_to_another_process_are_a_copy():
    """A queue moves a CPU tensor into shared memory: were the learner's parameters sent as they are, the receiver
    would read them live, half-updated by the next step, and actor.pt might not be the evaluated actor."""
    net = torch.nn.Linear(3, 2)
    sent = {name: tensor.clone() for name, tensor in net.state_dict().items()}
    q = mp.get_context("spawn").Queue()
    q.put(AgentRun.cpu_state_dict(net))
    time.sleep(0.2)  # the queue's feeder thread has pickled the item
    with torch.no_grad():
        net.weight.add_(1.0)  # the learner's next update
    received = q.get(timeout=10)
    assert all(torch.equal(received[name], sent[name]) for name in sent)


def test_fork_is_not_the_default_where_cuda_is_available(monkeypatch):
    """A forked learner cannot use CUDA once the parent initialised it ("Cannot re-initialize CUDA in forked
    subprocess"): spawn is the default where CUDA is available, and fork is refused once it is initialised."""
    assert AgentRun.start_method_for(None) is None  # no CUDA on this machine: the platform's default
    assert AgentRun.start_method_for("fork") == "fork"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert AgentRun.start_method_for(None) == "spawn"
    assert AgentRun.start_method_for("forkserver") == "forkserver"
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.raises(ValueError, match=r"start_method='fork' is not accepted: CUDA is initialised in this process"):
        AgentRun.start_method_for("fork")


@pytest.mark.slow
def test_learner_terminated_before_its_final_checkpoint_is_an_error(tmp_path, monkeypatch):
    """A learner that does not leave in time is terminated: its final checkpoint is lost, which is no clean stop."""
    monkeypatch.setattr(AgentRun, "CHILD_EXIT_SECONDS", 2.0)
    monkeypatch.setattr(AgentRun, "save_checkpoint", lambda *args: time.sleep(60))  # fork: the learner's too
    args = Arguments(agent="AgentDiscretePPO", env="CartPole-v1", cwd=str(tmp_path / "run"), break_step=4096,
                     target_return=1e9, save_gap=1000, if_multiprocess=True, start_method="fork")
    with pytest.raises(RuntimeError, match=r"the learner did not leave within 2.0 s of the stop \(reached break_step "
                                           r"4096\) and was terminated before it finished its final checkpoint"):
        train_and_evaluate(args)


def run_with_long_history(cwd: str, rows: int = 800):
    """A checkpoint whose recorder history has `rows` rows, about 100 kB pickled: larger than a pipe holds."""
    train_and_evaluate(Arguments(agent="AgentSAC", env="Pendulum-v1", cwd=cwd, break_step=1024, random_steps=256,
                                 eval_gap=0, target_return=1e9, replay_ratio=1 / 32))
    agent, buffer = AgentSAC(128, 3, 1, device="cpu"), ReplayBuffer(2 ** 20, 3, 1, if_discrete=False)
    run_state = load_checkpoint(cwd, agent, buffer)
    last_row = run_state["evaluator"]["history"][-1]
    run_state["evaluator"]["history"] = [last_row | {"step": step} for step in range(1, rows + 1)]
    AgentRun.save_checkpoint(cwd, agent, buffer, run_state)


def resume_until_a_new_row(cwd: str, *extra):
    """Resume cwd's run in a process of its own and return it, with its children's pids, after its first new
    evaluation row: by then the recorder has passed its whole state on for the learner's checkpoints."""
    proc = subprocess.Popen([sys.executable, "AgentRun.py", f"resume={cwd}", "if_multiprocess=True",
                             "break_step=10000000", *extra], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    pids = {}
    try:
        while "learner" not in pids:
            line = proc.stdout.readline()
            assert line, f"the resumed run ended before it started its children: {proc.stderr.read()}"
            pids = {name: int(pid) for name, pid in re.findall(r"(explorer|learner) pid (\d+)", line)}
        rows, deadline = len(read_rows(cwd)), time.time() + 120
        while len(read_rows(cwd)) == rows:
            assert time.time() < deadline and proc.poll() is None
            time.sleep(0.1)
    except BaseException:
        proc.kill()
        raise
    return proc, pids


@pytest.mark.slow
def test_parent_exits_promptly_when_the_learner_dies_with_a_long_recorder_history(tmp_path):
    """After the learner's death nobody reads the recorder's state: the parent's exit must not wait for that."""
    cwd = str(tmp_path / "run")
    run_with_long_history(cwd)
    proc, pids = resume_until_a_new_row(cwd)
    os.kill(pids["learner"], signal.SIGKILL)
    start = time.time()
    try:
        _, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert time.time() - start < 10
    assert proc.returncode != 0 and "the learner process was killed by signal 9" in stderr


@pytest.mark.slow
def test_children_leave_a_parent_killed_while_it_passes_on_a_long_recorder_history(tmp_path):
    """Passed through a queue, the recorder's state waits half-written in the pipe until the learner's next checkpoint
    reads it; a parent killed then would leave the learner waiting for the other half forever."""
    cwd = str(tmp_path / "run")
    run_with_long_history(cwd)
    proc, pids = resume_until_a_new_row(cwd, "save_gap=0.5")
    proc.kill()
    proc.wait()  # not communicate(): a child left behind holds its pipes open
    deadline = time.time() + 15
    try:
        while not all(is_gone(pid) for pid in pids.values()):
            assert time.time() < deadline, "a child outlived its killed parent"
            time.sleep(0.1)
    finally:
        for pid in pids.values():
            if not is_gone(pid):
                os.kill(pid, signal.SIGKILL)
    assert AgentRun.read_run_state(cwd)["step"] >= 1024  # and its checkpoint is whole


def put_weights_and_leave(q):
    for _ in range(2):
        q.put(AgentRun.cpu_state_dict(torch.nn.Linear(2, 2)))


def test_weights_of_a_learner_that_left_at_the_stop_are_not_an_error():
    """The explorer can find weights the learner sent just before it left at the stop; their shared memory can no
    longer be fetched. That ends the explorer quietly; before the stop the same failure is an error."""
    ctx = mp.get_context("fork")
    q, stop_event = ctx.Queue(), ctx.Event()
    sender = ctx.Process(target=put_weights_and_leave, args=(q,))
    sender.start()
    sender.join()
    with pytest.raises(OSError):
        AgentRun.receive(q, stop_event)
    stop_event.set()
    assert AgentRun.receive(q, stop_event) is None


class LeavingSender:
    """A queue whose item's sender leaves while the receiver fetches its shared memory: the sender's resource sharer
    closes the connection (seen as EOFError at a benchmark run's stop, 6e4d2d5)."""

    def get(self, timeout=None):
        raise EOFError

    get_nowait = get


def test_weights_of_a_learner_leaving_at_the_stop_are_not_an_error():
    stop_event = mp.get_context("fork").Event()
    with pytest.raises(EOFError):
        AgentRun.receive(LeavingSender(), stop_event)
    stop_event.set()
    assert AgentRun.receive(LeavingSender(), stop_event) is None
    assert AgentRun.receive(LeavingSender(), stop_event, timeout=0.2) is None


@pytest.mark.slow
def test_children_start_ignoring_ctrl_c_and_then_ctrl_c_only_asks_for_the_stop():
    """A spawned child, a fresh interpreter, would raise KeyboardInterrupt on a Ctrl-C while it imports: it starts with
    SIGINT ignored. Then, within the block, SIGINT appends to the list and raises nothing; the handler before it is
    back after it; a SIGINT this process ignores stays ignored."""
    ctx = mp.get_context("spawn")
    q, before = ctx.Queue(), signal.getsignal(signal.SIGINT)
    child = ctx.Process(target=put_whether_sigint_is_ignored, args=(q,))
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, also where pytest ignores SIGINT
        with AgentRun.children_started([child]) as pressed:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.1)
            assert pressed
            assert q.get(timeout=60) is True
        child.join()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        with AgentRun.children_started([]):
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)

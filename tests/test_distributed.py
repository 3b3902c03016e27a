"""Data-parallel learners under torchrun (gloo on CPU): equal networks on every rank, learning, two nodes on
localhost, a killed rank, and the refusals."""
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from AgentRun import Arguments, make_env
from AgentZoo import AgentInterSAC, AgentModSAC, AgentSAC, ReplayBuffer
from test_multiprocess import ROOT
from test_resume import assert_learned_state, assert_same

TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]


# ModSAC: its actor steps are decided by the critic's loss, on every rank; InterSAC: its actor and critic share a layer
AGENTS_IN_STEP = (AgentSAC, AgentModSAC, AgentInterSAC)


def learn_on_own_data(rank: int, world: int, init_file: str, results):
    torch.set_num_threads(1)  # one thread per rank, as AgentRun's learners: two ranks' threads would contend for 2 cores
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    for agent_class in AGENTS_IN_STEP:
        torch.manual_seed(0)
        agent = agent_class(32, 3, 1, device="cpu")
        buffer = ReplayBuffer(1000, 3, 1, if_discrete=False)
        generator = torch.Generator().manual_seed(rank)  # each rank's own transitions
        buffer.extend(torch.randn(256, 3, generator=generator), torch.rand(256, 1, generator=generator) * 2 - 1,
                      torch.randn(256, generator=generator), torch.full((256,), 0.99),
                      torch.randn(256, 3, generator=generator))
        for _ in range(3):
            buffer.add_size = 8  # 8 gradient steps a call: each one all_reduces (about 4 ms a step on loopback here)
            agent.update_net(buffer, 32, 1.0)
        results[rank, agent_class.__name__] = torch.cat([torch.nn.utils.parameters_to_vector(net.parameters())
                                                         for net in (agent.act, agent.cri)]).detach()
    dist.destroy_process_group()


def learned_networks(world: int, init_file: str) -> dict:
    results = mp.Manager().dict()
    # forked: a spawned rank spends seconds importing torch and this module before its three updates
    mp.start_processes(learn_on_own_data, args=(world, init_file, results), nprocs=world, start_method="fork")
    return dict(results)


@pytest.mark.slow
def test_ranks_that_learn_from_their_own_data_keep_equal_networks(tmp_path):
    """Each rank steps with the mean of both ranks' gradients: equal networks, and not rank 0's alone."""
    together = learned_networks(2, str(tmp_path / "init2"))
    alone = learned_networks(1, str(tmp_path / "init1"))
    for name in (agent_class.__name__ for agent_class in AGENTS_IN_STEP):
        assert torch.equal(together[0, name], together[1, name]), name
        assert not torch.equal(together[0, name], alone[0, name]), name


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.learning
def test_ppo_with_two_ranks_learns_cartpole(tmp_path):
    out = subprocess.run(TORCHRUN + ["--standalone", "--nproc_per_node=2", "AgentRun.py", "agent=AgentDiscretePPO",
                                     "env=CartPole-v1", f"cwd={tmp_path / 'run'}", "break_step=300000"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "rank 0 of 2" in out.stdout and "rank 1 of 2" in out.stdout
    assert re.search(r"Stop: reached target_return 475.0", out.stdout), out.stdout[-2000:]
    assert (tmp_path / "run" / "checkpoint" / "run_state.pt").is_file()


@pytest.mark.slow
def test_two_nodes_on_localhost_form_one_job_and_resume_from_rank_0(tmp_path):
    """--nnodes=2, the several-machines path, simulated with two torchrun invocations on this one. Only rank 0 loads
    the checkpoint; every rank of the resumed job starts from it (networks, targets and optimizer states) and ends
    equal to rank 0, whose final checkpoint holds the same (tests/torchrun_agent_state.py saves each rank's agent)."""
    port, cwd = free_port(), tmp_path / "run"

    def launch(*extra, script="AgentRun.py"):
        return [subprocess.Popen(TORCHRUN + ["--nnodes=2", "--nproc_per_node=1", f"--node_rank={node}",
                                             "--master_addr=127.0.0.1", f"--master_port={port}", script,
                                             *extra], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=os.environ | {"AGENT_STATE_DIR": str(tmp_path)})
                for node in (0, 1)]

    nodes = launch("agent=AgentSAC", "env=Pendulum-v1", f"cwd={cwd}", "break_step=1024", "random_steps=512",
                   "target_return=0", "replay_ratio=0.03125")  # few updates: the states, not learning, are checked
    outputs = [node.communicate(timeout=300) for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], [err[-2000:] for _, err in outputs]
    assert "rank 0 of 2" in outputs[0][0] and "rank 1 of 2" in outputs[1][0]
    assert "Stop: reached break_step 1024 at step 1024" in outputs[0][0], outputs[0][0]
    load_parts = lambda names: {name: torch.load(cwd / "checkpoint" / f"{name}.pt", weights_only=True) for name in names}
    saved = load_parts([name[:-3] for name in os.listdir(cwd / "checkpoint") if name not in ("run_state.pt", "buffer.pt")])
    assert_learned_state({"agent": saved})
    port = free_port()
    nodes = launch(f"resume={cwd}", "break_step=2048", script=os.path.join("tests", "torchrun_agent_state.py"))
    outputs = [node.communicate(timeout=300) for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], [err[-2000:] for _, err in outputs]
    assert "resumed at step 1024" in outputs[0][0] and "Stop: reached break_step 2048 at step 2048" in outputs[0][0]
    agents = {(rank, when): torch.load(tmp_path / f"rank{rank}_{when}.pt", weights_only=True)
              for rank in (0, 1) for when in ("start", "end")}
    assert_same(saved, agents[0, "start"], "rank 0 at the start")
    assert_same(saved, agents[1, "start"], "rank 1 at the start")  # rank 0's checkpoint, not fresh weights
    assert_same(agents[0, "end"], agents[1, "end"], "rank 1 at the end")
    assert_same(load_parts(agents[0, "end"]), agents[0, "end"], "rank 0 at the end")


@pytest.mark.slow
def test_a_killed_rank_ends_the_job_with_an_error(tmp_path):
    proc = subprocess.Popen(TORCHRUN + ["--standalone", "--nproc_per_node=2", "AgentRun.py", "agent=AgentSAC",
                                        "env=Pendulum-v1", f"cwd={tmp_path / 'run'}", "target_return=0"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pid = None
        while pid is None:
            line = proc.stdout.readline()
            assert line, "torchrun ended before rank 1 started"
            match = re.search(r"rank 1 of 2 pid (\d+)", line)
            pid = match and int(match[1])
        time.sleep(2)
        os.kill(pid, signal.SIGKILL)
        start = time.time()
        stdout, stderr = proc.communicate(timeout=60)
        # torchrun gives a rank that ignores its SIGTERM 30 s before SIGKILL: both tails say which rank, and where
        assert time.time() - start < 30, stdout[-2000:] + stderr[-4000:]
    finally:
        proc.kill()
    assert proc.returncode != 0 and "Signal 9" in stderr, stderr[-2000:]


@pytest.mark.parametrize("overrides, message", [
    (dict(agent="AgentSAC", batch_size=255), r"batch_size=255 is not accepted with 2 ranks: each rank takes batch_size / "
                                             r"world size samples of every batch; pass a multiple of 2"),
    (dict(agent="AgentSAC", dist_backend="nccl"), r"dist_backend='nccl' is not accepted: NCCL needs CUDA"),
    (dict(agent="AgentSAC", dist_backend="mpi"), r"dist_backend='mpi' is not accepted: 'gloo', 'nccl' or None"),
    (dict(agent="AgentTRPO"), r"AgentTRPO is not accepted under torchrun: its steps are not plain gradient steps"),
    (dict(agent="AgentA3C"), r"AgentA3C is not accepted under torchrun"),
    (dict(agent="AgentPPO", if_multiprocess=True), r"if_multiprocess=True, num_workers=None is not accepted under torchrun"),
])
def test_bad_settings_under_torchrun_are_refused(overrides, message, monkeypatch):
    if "nccl" in str(overrides) and torch.cuda.is_available():
        pytest.skip("NCCL is accepted where CUDA is")
    for name, value in (("TORCHELASTIC_RUN_ID", "test"), ("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "0")):
        monkeypatch.setenv(name, value)
    args = Arguments(env="Pendulum-v1", **overrides)
    with pytest.raises(ValueError, match=message):
        args.resolve(make_env(args.env)[1])


@pytest.mark.slow
def test_two_ranks_learn_from_pixels_and_stay_equal(tmp_path):
    """MinAtar's bool grids under torchrun: each rank explores and stores its own, the ranks step with the mean
    gradient and end with equal agents; the checkpoint keeps the replay's grids as bool."""
    pytest.importorskip("minatar")
    cwd = tmp_path / "run"
    out = subprocess.run(TORCHRUN + ["--standalone", "--nproc_per_node=2", os.path.join("tests", "torchrun_agent_state.py"),
                                     "agent=AgentDQN", "env=MinAtar/Breakout-v1", f"cwd={cwd}", "break_step=1024",
                                     "random_steps=512", "target_return=1e9", "eval_times=1", "batch_size=32"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env=os.environ | {"AGENT_STATE_DIR": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Stop: reached break_step 1024" in out.stdout, out.stdout[-2000:]
    ends = [torch.load(tmp_path / f"rank{rank}_end.pt", weights_only=True) for rank in (0, 1)]
    assert_same(ends[0], ends[1], "rank 1 at the end")
    assert torch.load(cwd / "checkpoint" / "buffer.pt", weights_only=True)["frames"].dtype == torch.bool

"""Targets of the processes that tests start with spawn. A spawned child imports its target's module: from a test
module it would import the library, gymnasium and matplotlib first (about 4 s here). Not a test module."""
import signal

STATE_DIM, ACTION_DIM, LEARNING_RATE = 3, 1, 1e-3  # tests/test_a3c.py's small A3C


def put_whether_sigint_is_ignored(q):
    q.put(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)


def actor_loss(agent):
    import torch
    torch.manual_seed(1)
    return agent.act(torch.randn(8, STATE_DIM)).pow(2).sum()


def step_in_child(shared):
    from AgentZoo import AgentA3C, optimizer_step  # here: the SIGINT child above imports no torch
    worker = AgentA3C(16, STATE_DIM, ACTION_DIM, device="cpu", learning_rate=LEARNING_RATE)
    worker.attach(shared)
    optimizer_step(worker.act_optimizer, actor_loss(worker))

"""AgentRun.py's command line for a rank that torchrun starts, which also saves the rank's agent (every part a
checkpoint holds: networks, targets, optimizer states, extra tensors) as $AGENT_STATE_DIR/rank<RANK>_start.pt once
the ranks have taken rank 0's agent (broadcast_agent), and as rank<RANK>_end.pt after the run, so that a test can
compare the ranks with each other and with the checkpoint. Not a test module: tests launch it."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root

import torch  # noqa: E402

import AgentRun  # noqa: E402

learners = []  # the agent that train_distributed broadcasts: this rank's learner
broadcast_agent = AgentRun.broadcast_agent


def save_agent(agent, when: str):
    torch.save({name: part.state_dict() if hasattr(part, "state_dict") else part.detach().cpu()
                for name, part in agent.parts().items()},
               os.path.join(os.environ["AGENT_STATE_DIR"], f"rank{os.environ['RANK']}_{when}.pt"))


def broadcast_and_save(agent, rank: int):
    broadcast_agent(agent, rank)
    learners.append(agent)
    save_agent(agent, "start")


AgentRun.broadcast_agent = broadcast_and_save
AgentRun.main(sys.argv[1:])
agent, = learners
save_agent(agent, "end")
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)  # as AgentRun.py's __main__ leaves under torchrun

"""Independent DDPG (AgentDiscreteIDDPG), the MADDPG paper's DDPG baseline: agent i's critic sees agent i's
observation and action only; it trains on a competitive env from the command line."""
import csv

import pytest
import torch

import AgentRun
from AgentZoo import AgentDiscreteIDDPG, AgentDiscreteMADDPG
from extras import tools


def changed(state: torch.Tensor, action: torch.Tensor, agents: list[int], what: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A copy of a team's batch, (B, 3 * 4) states and (B, 3) actions of 5, with these agents' observations redrawn or
    their actions moved on by one."""
    state, action = state.clone(), action.clone()
    obs = state.view(len(state), 3, 4)  # (B, num_agents, state_dim), a view: writes reach state
    for i in agents:
        if what == "observation":
            obs[:, i] = torch.randn_like(obs[:, i])
        else:
            action[:, i] = (action[:, i] + 1) % 5
    return state, action


@pytest.mark.parametrize("what", ["observation", "action"])
def test_agent_i_s_critic_sees_only_its_own_observation_and_action(what):
    agent = AgentDiscreteIDDPG(16, 4, 5, device="cpu", num_agents=3)
    state, action = torch.randn(8, 12), torch.randint(5, (8, 3))
    q = agent.cri(state, action)  # (num_agents, B)
    for i in range(3):
        others = [j for j in range(3) if j != i]
        assert torch.equal(agent.cri(*changed(state, action, others, what))[i], q[i])
        assert (agent.cri(*changed(state, action, [i], what))[i] != q[i]).all()
        # the actor's objective gives each critic a joint action of its own (TeamCritic): agent i's slot counts alone
        joint = torch.nn.functional.one_hot(action, 5).flatten(-2).float().expand(3, -1, -1).clone()  # (3, B, 3 * 5)
        joint[i, :, [5 * j + k for j in others for k in range(5)]] = 0.5
        assert torch.equal(agent.cri(state, joint)[i], q[i])
    # the paper's MADDPG, against which it is measured: a centralised critic sees the other agents' too
    maddpg = AgentDiscreteMADDPG(16, 4, 5, device="cpu", num_agents=3)
    assert (maddpg.cri(*changed(state, action, [1, 2], what))[0] != maddpg.cri(state, action)[0]).all()


@pytest.mark.slow
def test_a_short_run_from_the_command_line_writes_recorder_csv(tmp_path):
    """`python AgentRun.py agent=AgentDiscreteIDDPG env=simple_adversary_v3 ...`, through main's parsing; on a
    competitive env each agent learns its own reward (common_reward False, MADDPG's default)."""
    cwd = tmp_path / "run"
    result = AgentRun.main(["agent=AgentDiscreteIDDPG", "env=simple_adversary_v3", f"cwd={cwd}", "break_step=1024",
                            "random_steps=512", "eval_gap=0"])
    assert result["step"] >= 1024
    with open(cwd / "recorder.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows and all(row["obj_critic"] for row in rows) and (cwd / "actor.pt").exists()
    assert tools.read_run(str(cwd), "replay")["common_reward"] is False

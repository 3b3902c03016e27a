"""What each agent of a team learns from: discrete MADDPG's penalty on its logits; each agent's own reward on envs
whose agents' rewards differ (MADDPG, MAPPO), a common reward for the agents that need one (VDN, QMIX, QTRAN, COMA)."""
import numpy as np
import pytest
import torch

from AgentRun import Arguments, RefusedError, make_vector_env, make_env, train_and_evaluate
from AgentZoo import AgentDiscreteMADDPG, AgentDiscreteMAPPO, AgentMADDPG, RolloutBuffer
from envs import CLIMBING_GAME, MatrixGame


def test_discrete_maddpg_penalises_the_mean_squared_logit():
    """The paper's code adds 1e-3 * mean(logits^2) to the actor's loss, which keeps the softmax from saturating."""
    agent = AgentDiscreteMADDPG(16, 4, 5, device="cpu", num_agents=2)
    bias = agent.act.nets[0][-1].bias  # agent 0's output layer
    with torch.no_grad():
        bias.fill_(30.0)  # logits far from 0
    state, action = torch.randn(8, 8), torch.randint(5, (8, 2))
    torch.manual_seed(1)
    total = agent.get_obj_actor((state, action))
    torch.manual_seed(1)  # the same Gumbel draws
    without = AgentMADDPG.get_obj_actor(agent, (state, action))
    logits = agent.act.get_logits(state)
    torch.testing.assert_close(total - without, 1e-3 * logits.square().mean())
    grad = torch.autograd.grad(1e-3 * logits.square().mean(), bias)[0]
    assert (grad > 0).all()  # descent pulls the logits back toward 0


class SelfishGame(MatrixGame):
    """A one-step game in which agent_0's action 1 earns it 1 and costs agent_1 3, whatever agent_1 does: agent_0's own
    reward makes it take action 1, the team's sum (-2 against 0) another. Its dicts list the agents in reverse order."""

    def __init__(self):
        super().__init__(CLIMBING_GAME)

    def step(self, actions):
        selfish = float(actions["agent_0"] == 1)
        agents, self.agents = self.agents, []
        rewards = {"agent_1": -3.0 * selfish, "agent_0": selfish}
        return ({agent: np.ones(1, np.float32) for agent in agents}, rewards, {agent: True for agent in agents},
                {agent: False for agent in agents}, {agent: {} for agent in agents})


def test_the_team_env_reports_each_agents_reward_beside_their_sum():
    env = make_env(SelfishGame())[0]
    env.reset(seed=0)
    _, reward, _, _, info = env.step(np.array([1, 0]))
    assert reward == -2.0 and info["agent_rewards"].tolist() == [1.0, -3.0]  # possible_agents' order


@pytest.mark.parametrize("agent_class", [AgentDiscreteMADDPG, AgentDiscreteMAPPO])
def test_agents_with_a_value_each_store_each_agents_reward_from_a_vector_env(agent_class):
    """Every copy of a vector env ends its episode at each step here: their rewards come from the final infos."""
    env = make_vector_env(SelfishGame(), num_envs=3)[0]
    agent = agent_class(16, 1, 3, device="cpu", num_agents=2)
    with torch.no_grad():  # agent_0 always takes action 1
        agent.act.get_logits = lambda state: torch.tensor([[0.0, 50.0, 0.0], [0.0, 0.0, 0.0]]).expand(*state.shape[:-1], 2, 3)
    trajectory = agent.explore_env(env, 4)
    rewards = trajectory[2] if agent_class is AgentDiscreteMADDPG else trajectory[3]
    assert rewards.reshape(-1, 2).tolist() == [[1.0, -3.0]] * 12
    common = agent_class(16, 1, 3, device="cpu", num_agents=2, common_reward=True)
    common.act.get_logits = agent.act.get_logits
    rewards = common.explore_env(env, 2)[2 if agent_class is AgentDiscreteMADDPG else 3]
    assert rewards.reshape(-1, 2).tolist() == [[-2.0, -2.0]] * 6  # the sum, for each agent


@pytest.mark.parametrize("agent", ["AgentVDN", "AgentQMIX", "AgentQTRAN", "AgentCOMA"])
def test_agents_of_one_team_value_refuse_each_agents_own_reward(agent, tmp_path):
    cwd = tmp_path / "run"
    with pytest.raises(ValueError, match=rf"common_reward=False is not accepted: {agent} learns one value of the team's "
                                         rf"common reward.*AgentMADDPG, AgentDiscreteMADDPG, AgentDiscreteIDDPG, "
                                         rf"AgentMAPPO and AgentDiscreteMAPPO learn from each agent's own reward"):
        train_and_evaluate(Arguments(agent=agent, env=SelfishGame(), cwd=str(cwd), common_reward=False))
    assert not cwd.exists()  # refused before anything was written


@pytest.mark.parametrize("env", ["simple_tag_v3", "simple_adversary_v3", "simple_push_v3", "simple_crypto_v3"])
def test_agents_of_one_team_value_refuse_envs_whose_agents_compete_unless_told(env):
    """On an env whose adversaries play against the other agents the sum of their rewards trains the prey to be caught:
    the agents of one team value refuse it on their defaults, naming the agents that learn each agent's own reward,
    and take it where common_reward=True is passed; those agents and the cooperative envs are taken as they were."""
    pytest.importorskip("mpe2")
    env_info = make_env(env)[1]
    for agent in ("AgentVDN", "AgentQMIX", "AgentQTRAN", "AgentCOMA"):
        with pytest.raises(RefusedError, match=rf"{agent} learns one value of the team's common reward.*compete.*pass "
                                               rf"common_reward=True.*AgentDiscreteIDDPG, AgentDiscreteMADDPG, "
                                               rf"AgentDiscreteMAPPO, AgentMADDPG, AgentMAPPO"):
            Arguments(agent=agent, env=env).resolve(env_info)
        args = Arguments(agent=agent, env=env, common_reward=True)
        args.resolve(env_info)
        assert args.common_reward is True
    args = Arguments(agent="AgentDiscreteMAPPO", env=env)
    args.resolve(env_info)
    assert args.common_reward is False
    for cooperative in ("simple_spread_v3", "simple_reference_v3"):
        args = Arguments(agent="AgentQMIX", env=cooperative)
        args.resolve(make_env(cooperative)[1])
        assert args.common_reward is True


@pytest.mark.parametrize("common_reward, if_selfish", [(False, True), (True, False)])
@pytest.mark.learning
def test_mappo_learns_from_each_agents_own_reward_or_from_their_sum(common_reward, if_selfish):
    """On the selfish game agent_0 learns action 1 from its own reward, another from the team's."""
    torch.manual_seed(0)
    env = make_vector_env(SelfishGame(), num_envs=8)[0]
    agent = AgentDiscreteMAPPO(16, 1, 3, device="cpu", num_agents=2, common_reward=common_reward)
    buffer = RolloutBuffer()
    for _ in range(40):
        buffer.extend(*agent.explore_env(env, 16))
        agent.update_net(buffer, batch_size=64, epochs=4)
    assert (agent.select_action(np.ones(2, np.float32), deterministic=True)[0] == 1) == if_selfish


def test_clipped_rewards_are_each_agents_signs():
    """if_clip_reward takes the sign of what each agent learns from, its own reward or the team's sum for each, in
    one env or a vector env whose second copy's episode ended in the step (its info the final one)."""
    own = AgentDiscreteMAPPO(16, 1, 3, device="cpu", num_agents=2, if_clip_reward=True)
    np.testing.assert_array_equal(own.learned_reward(1.5, {"agent_rewards": np.array([2.5, -0.5])}), [1.0, -1.0])
    info = {"agent_rewards": np.array([[2.5, 0.0], [9.0, 9.0]]), "_agent_rewards": np.array([True, False]),
            "final_info": {"agent_rewards": np.array([[9.0, 9.0], [-3.0, 0.2]]), "_agent_rewards": np.array([False, True])}}
    clipped = own.learned_reward(np.array([2.5, -2.8]), info)
    assert clipped.dtype == np.float32
    np.testing.assert_array_equal(clipped, [[1.0, 0.0], [-1.0, 1.0]])
    own.if_clip_reward = False
    np.testing.assert_allclose(own.learned_reward(np.array([2.5, -2.8]), info), [[2.5, 0.0], [-3.0, 0.2]])
    common = AgentDiscreteMAPPO(16, 1, 3, device="cpu", num_agents=2, common_reward=True, if_clip_reward=True)
    np.testing.assert_array_equal(common.learned_reward(np.array([2.0, -0.3]), {}), [[1.0, 1.0], [-1.0, -1.0]])

"""Issue 44, item 5: masks of legal actions (if_action_mask). The mask rides at the end of the state, from
info["action_mask"] or a Dict observation's "action_mask"; masked actions are never taken while exploring (the random
warm-up and epsilon's draws too) or evaluating, and learning targets take maxima and expectations over legal actions."""
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

from AgentRun import Arguments, RefusedError, make_env, train_and_evaluate
from extras.tools import export, replay
from AgentZoo import AgentC51, AgentDiscretePPO, AgentDiscreteSAC, AgentDoubleDQN, AgentDQN, AgentRainbow
from envs import MaskedEnv

STATE_DIM, ACTION_DIM = 3, 4


def masked_env(if_dict=False):
    return gym.wrappers.TimeLimit(MaskedEnv(if_dict), max_episode_steps=50)


@pytest.mark.parametrize("agent, if_dict, extra", [
    ("AgentDQN", False, dict(random_steps=300, explore_rate=0.5)),  # the warm-up and epsilon's draws are legal too
    ("AgentRainbow", True, {}),
    ("AgentDiscretePPO", True, dict(if_state_norm=True)),  # the mask is read before the statistics standardise it
    ("AgentDiscreteSAC", False, {}),
])
@pytest.mark.slow
def test_masked_actions_are_never_taken_while_exploring_or_evaluating(tmp_path, agent, if_dict, extra):
    """MaskedEnv raises on an illegal action, which half of the actions of a policy blind to the mask are."""
    result = train_and_evaluate(Arguments(agent=agent, env=masked_env(if_dict), if_action_mask=True, break_step=1200,
                                          eval_gap=0, eval_times=2, cwd=str(tmp_path / "run"), **extra))
    assert result["step"] >= 1200
    with pytest.raises(AssertionError, match="illegal action"):  # the same run without masks takes one
        train_and_evaluate(Arguments(agent=agent, env=masked_env(), break_step=1200, cwd=str(tmp_path / "blind")))


def test_the_mask_ends_the_state_from_info_or_from_a_dict_observation():
    for if_dict in (False, True):
        env, info = make_env(masked_env(if_dict), if_action_mask=True)
        state = env.reset(seed=0)[0]
        assert info.state_dim == 2 + 4 and state.shape == (6,) and state.dtype == np.float32
        np.testing.assert_array_equal(state[-4:], [1, 1, 0, 0])
        np.testing.assert_array_equal(env.step(1)[0][-4:], [0, 1, 1, 0])


def masked_states(batch=64, seed=0):
    """Random observations ending with random masks, each with at least one legal action."""
    generator = torch.Generator().manual_seed(seed)
    mask = (torch.rand(batch, ACTION_DIM, generator=generator) < 0.5).float()
    mask[torch.arange(batch), torch.randint(ACTION_DIM, (batch,), generator=generator)] = 1.0
    return torch.cat([torch.randn(batch, STATE_DIM, generator=generator), mask], dim=1), mask.bool()


def test_q_targets_take_their_maximum_over_the_legal_actions_only():
    state, legal = masked_states()
    for agent_class in (AgentDQN, AgentDoubleDQN):
        agent = agent_class(32, STATE_DIM + ACTION_DIM, ACTION_DIM, device="cpu", if_action_mask=True)
        for net in (agent.cri, agent.cri_target):  # a large Q-value on action 0, illegal in about half the states: a max to skip
            net.net[-1].bias.data += torch.tensor([50.0, 0.0, 0.0, 0.0])
        q_target, q_online = agent.cri_target(state), agent.cri(state)
        if agent_class is AgentDQN:
            expected = q_target.masked_fill(~legal, -torch.inf).max(dim=1).values
        else:  # Double DQN: the online net's legal argmax, valued by the target net
            expected = q_target.gather(1, q_online.masked_fill(~legal, -torch.inf).argmax(dim=1, keepdim=True)).squeeze(1)
        torch.testing.assert_close(agent.get_next_q(state), expected)
        unmasked = agent_class(32, STATE_DIM + ACTION_DIM, ACTION_DIM, device="cpu")
        unmasked.cri.load_state_dict(agent.cri.state_dict()), unmasked.cri_target.load_state_dict(agent.cri_target.state_dict())
        assert not torch.allclose(unmasked.get_next_q(state), expected)  # the bias makes masking matter
        greedy = agent.policy_module()(state)  # the exported policy acts on legal actions too
        assert legal[torch.arange(len(state)), greedy].all()
        actions = torch.as_tensor(agent.select_action(state.numpy().repeat(8, axis=0)))  # epsilon-greedy, 512 states
        assert legal.repeat_interleave(8, dim=0)[torch.arange(len(actions)), actions].all()


def test_distributional_targets_use_the_best_legal_next_action():
    state, legal = masked_states()
    for agent_class in (AgentC51, AgentRainbow):
        agent = agent_class(32, STATE_DIM + ACTION_DIM, ACTION_DIM, device="cpu", if_action_mask=True)
        next_probs = agent.cri_target.get_log_probs(state).exp()
        torch.manual_seed(1)  # Rainbow's noisy layers: the same noise in both forwards
        chosen = agent.get_next_action(state, next_probs)
        assert legal[torch.arange(len(state)), chosen].all()
        torch.manual_seed(1)
        q = (next_probs * agent.cri.support).sum(-1) if agent_class is AgentC51 else agent.cri(state)
        torch.testing.assert_close(chosen, q.masked_fill(~legal, -torch.inf).argmax(dim=1))


def test_categorical_policies_give_illegal_actions_probability_zero():
    state, legal = masked_states()
    ppo = AgentDiscretePPO(32, STATE_DIM + ACTION_DIM, ACTION_DIM, device="cpu", if_action_mask=True)
    log_probs = ppo.act.get_log_probs(state)
    assert (log_probs.exp()[~legal] == 0).all() and torch.allclose(log_probs.exp().sum(dim=1), torch.ones(len(state)))
    action, log_prob = ppo.act.get_action_log_prob(state)
    assert legal[torch.arange(len(state)), action].all()
    torch.testing.assert_close(ppo.act.get_log_prob_entropy(state, action)[0], log_prob)  # learning scores what acted
    entropy = ppo.act.get_log_prob_entropy(state, action)[1]
    assert torch.isfinite(entropy).all() and (entropy <= legal.sum(dim=1).log() + 1e-5).all()

    sac = AgentDiscreteSAC(32, STATE_DIM + ACTION_DIM, ACTION_DIM, device="cpu", if_action_mask=True)
    probs = sac.act.get_log_probs(state).exp()
    expected = (probs * torch.minimum(*sac.cri_target.get_q_values(state))).sum(dim=-1)
    assert (probs[~legal] == 0).all()
    torch.testing.assert_close(sac.get_next_q(state), expected)
    assert torch.isfinite(sac.get_obj_actor((state,))).all()
    # the temperature's target: the same share of the uniform entropy over each state's legal actions
    torch.testing.assert_close(sac.entropy_target(state), sac.target_entropy_share * legal.sum(dim=1).float().log())


@pytest.mark.slow
def test_an_exported_masked_policy_acts_on_legal_actions_without_the_library(tmp_path):
    cwd = str(tmp_path / "run")
    train_and_evaluate(Arguments(agent="AgentDiscretePPO", env="Taxi-v4", if_action_mask=True, break_step=512,
                                 eval_times=1, cwd=cwd))
    path = export(cwd)["torchscript"]
    env = make_env("Taxi-v4", if_action_mask=True)[0]
    states = np.stack([env.reset(seed=seed)[0] for seed in range(32)])
    np.save(tmp_path / "states.npy", states)
    code = (f"import numpy, torch; policy = torch.jit.load({path!r}); "
            f"print(policy(torch.as_tensor(numpy.load({str(tmp_path / 'states.npy')!r}))).tolist())")
    actions = eval(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert all(states[i, -6:][action] == 1 for i, action in enumerate(actions))


def test_a_masked_run_replays_with_the_mask_once(tmp_path):
    """replay= prepares the env once: its states end with one mask (Taxi-v4: 500 + 6 inputs), as they did in training."""
    cwd = str(tmp_path / "run")
    train_and_evaluate(Arguments(agent="AgentDiscretePPO", env="Taxi-v4", if_action_mask=True, break_step=512,
                                 eval_times=1, cwd=cwd))
    result = replay(cwd, episodes=2, render="none")
    assert result["avg_length"] > 0 and np.isfinite(result["avg_return"])


@pytest.mark.parametrize("env_of, agent, message", [
    (lambda: "CartPole-v1", "AgentDQN", "gave no info\\['action_mask'\\]"),
    (lambda: "Pendulum-v1", "AgentSAC", "masks of legal actions are for Discrete action spaces"),
    (lambda: masked_env(), "AgentACER", "AgentACER has no if_action_mask"),
])
def test_masks_are_refused_where_there_are_none_or_the_agent_takes_none(tmp_path, env_of, agent, message):
    with pytest.raises(RefusedError, match=message):
        train_and_evaluate(Arguments(agent=agent, env=env_of(), if_action_mask=True, break_step=600,
                                     cwd=str(tmp_path / "run")))


class WrongMaskEnv(MaskedEnv):
    def observe(self):
        observation, info = super().observe()
        return observation, {"action_mask": np.ones(3, np.int8)}  # three entries for four actions


def test_a_mask_of_the_wrong_length_is_refused_naming_what_is_accepted():
    env = make_env(gym.wrappers.TimeLimit(WrongMaskEnv(), 50), if_action_mask=True)[0]
    with pytest.raises(RefusedError, match="one 0 or 1 per action, 4 of them"):
        env.reset(seed=0)


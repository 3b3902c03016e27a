"""Observation normalisation: AgentNet.StateNorm's running statistics, the same in every network of an agent, saved
with the actor, untouched by evaluation, carried by checkpoints and merged over data-parallel ranks."""
import json
import os

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import AgentRun
from AgentNet import StateNorm
from AgentRun import Arguments, resume, train_and_evaluate
from extras.tools import replay
from AgentZoo import (AgentACER, AgentC51, AgentD3QN, AgentDiscretePPO, AgentInterSAC, AgentModSAC, AgentPPO, AgentSAC,
                      AgentTD3, AgentTRPO)

STATE_DIM = 3


def moments(states: torch.Tensor) -> tuple[torch.Tensor, ...]:
    states = states.double()
    return torch.tensor(float(states.shape[0]), dtype=torch.float64), states.sum(0), states.square().sum(0)


def test_merged_statistics_are_those_of_all_states():
    states = torch.randn(100, STATE_DIM) * torch.tensor([1.0, 10.0, 0.1]) + torch.tensor([5.0, -3.0, 0.0])
    norm = StateNorm(STATE_DIM)
    for chunk in states.split([1, 30, 69]):
        norm.update(*moments(chunk))
    assert norm.count == 100
    assert torch.allclose(norm.mean, states.mean(0), atol=1e-5)
    assert torch.allclose(norm.std, states.std(0, unbiased=False), rtol=1e-5)
    assert torch.allclose(norm(states).mean(0), torch.zeros(STATE_DIM), atol=1e-5)


def test_identity_before_any_state_and_clipped_after():
    norm = StateNorm(STATE_DIM)
    state = torch.tensor([[1.5, -7.0, 0.25]])
    assert torch.equal(norm(state), state)
    norm.update(*moments(torch.tensor([[0.0, 0.0, 0.0], [2.0, 2.0, 2.0]])))  # mean 1, std 1
    assert torch.allclose(norm(torch.tensor([[3.0, -100.0, 1.0]])), torch.tensor([[2.0, -StateNorm.clip, 0.0]]))


def test_a_constant_dimension_is_not_divided_by_zero():
    norm = StateNorm(1)
    norm.update(*moments(torch.full((50, 1), 4.0)))
    assert torch.isfinite(norm(torch.tensor([[4.0], [4.1]]))).all()
    assert norm(torch.tensor([[4.0]])).item() == 0.0


# the modules that take states: actor, critic (each of twins), and their targets where the agent keeps them
@pytest.mark.parametrize("agent_class, takers", [(AgentSAC, 5), (AgentTD3, 6), (AgentD3QN, 2), (AgentC51, 2),
                                                 (AgentPPO, 2), (AgentDiscretePPO, 2), (AgentTRPO, 2), (AgentACER, 3),
                                                 (AgentModSAC, 5), (AgentInterSAC, 3)])  # InterSAC: one trunk, 2 heads
def test_every_network_of_an_agent_standardises_with_the_same_statistics(agent_class, takers):
    agent = agent_class(16, STATE_DIM, 2, device="cpu", if_state_norm=True)
    states = torch.randn(64, 4, STATE_DIM) * 3 + 2  # (T, N, state_dim), as an on-policy rollout holds them
    agent.update_state_norm(states)
    assert len(agent.state_takers()) == takers
    flat = states.reshape(-1, STATE_DIM)
    for module in agent.state_takers():
        assert torch.allclose(module.state_norm.mean, flat.mean(0), atol=1e-5)
        assert torch.allclose(module.state_norm.std, flat.std(0, unbiased=False), rtol=1e-4)
    assert {"state_norm.count", "state_norm.mean", "state_norm.std"} <= set(agent.act.state_dict())


def test_without_if_state_norm_nothing_is_standardised():
    agent = AgentSAC(16, STATE_DIM, 1, device="cpu")
    agent.update_state_norm(torch.randn(10, STATE_DIM) + 5)
    assert all(isinstance(module.state_norm, torch.nn.Identity) for module in agent.state_takers())
    assert not any("state_norm" in name for name in agent.act.state_dict())


def test_a_copied_actor_acts_on_the_same_inputs():
    """actor.pt carries the statistics: an agent built anew and loaded from it acts as the one that learned."""
    agent = AgentSAC(16, STATE_DIM, 1, device="cpu", if_state_norm=True)
    agent.update_state_norm(torch.randn(200, STATE_DIM) * 5 + 3)
    copy = AgentSAC(16, STATE_DIM, 1, device="cpu", if_state_norm=True)
    copy.act.load_state_dict(agent.act.state_dict())
    state = torch.randn(8, STATE_DIM).numpy() * 5 + 3
    assert (copy.select_action(state, deterministic=True) == agent.select_action(state, deterministic=True)).all()


@pytest.mark.slow
def test_evaluation_leaves_the_statistics_and_a_resume_carries_them(tmp_path):
    """The statistics count exactly the explored states: none of the evaluation episodes', and a resumed run goes
    on from the checkpoint's count."""
    cwd = str(tmp_path / "run")
    train_and_evaluate(Arguments(agent="AgentDiscretePPO", env="CartPole-v1", if_state_norm=True, break_step=2048,
                                 eval_gap=0, cwd=cwd))
    checkpoint_actor = torch.load(os.path.join(cwd, "checkpoint", "act.pt"), weights_only=True)
    assert checkpoint_actor["state_norm.count"] == 2048
    resume(cwd, break_step=4096)
    checkpoint_actor = torch.load(os.path.join(cwd, "checkpoint", "act.pt"), weights_only=True)
    assert checkpoint_actor["state_norm.count"] == 4096
    # replay builds the actor with its StateNorm from config.json: it plays the episodes of actor.pt with its statistics
    # on envs seeded as replay seeds them (the run's seed + i), which the actor without them plays otherwise
    shown = replay(cwd, episodes=2, render="none")  # the returns are what it compares
    actor = torch.load(os.path.join(cwd, "actor.pt"), weights_only=True)
    with open(os.path.join(cwd, "config.json")) as f:
        net_dim = json.load(f)["net_dims"]
    returns = {}
    for if_state_norm in (True, False):
        agent = AgentDiscretePPO(net_dim, 4, 2, device="cpu", if_state_norm=if_state_norm)
        agent.act.load_state_dict(actor, strict=if_state_norm)
        envs = [gym.make("CartPole-v1") for _ in range(2)]
        for i, env in enumerate(envs):
            env.reset(seed=i)
        returns[if_state_norm] = float(np.mean([episode[0] for episode in AgentRun.run_episodes(envs, agent)]))
    assert shown["avg_return"] == returns[True] != returns[False], (shown, returns)


@pytest.mark.slow
def test_the_multiprocess_learner_sends_the_statistics_to_the_explorer(tmp_path):
    cwd = str(tmp_path / "run")
    result = train_and_evaluate(Arguments(agent="AgentPPO", env="Pendulum-v1", if_state_norm=True, if_multiprocess=True,
                                          break_step=8192, eval_gap=0, cwd=cwd))
    checkpoint_actor = torch.load(os.path.join(cwd, "checkpoint", "act.pt"), weights_only=True)
    assert checkpoint_actor["state_norm.count"] == result["step"]
    assert checkpoint_actor["state_norm.std"][2] > 1  # Pendulum's angular velocity spans [-8, 8]


def test_the_explorer_acts_with_the_statistics_of_the_weights_it_receives(tmp_path):
    """An explorer process (AgentRun.explorer_process, forked as the multiprocess loop starts it) given the learner's
    actor with statistics far from the identity: the log-probs it records are those of that actor, statistics
    included, of the actions it took; an actor without them would have recorded others."""
    args = Arguments(agent="AgentPPO", env="Pendulum-v1", if_state_norm=True, if_multiprocess=True, steps_per_round=128,
                     num_envs=2, start_method="fork", cwd=str(tmp_path / "run"))
    env_info = AgentRun.make_env(args.env)[1]
    args.resolve(env_info)
    torch.manual_seed(0)
    learner = AgentRun.build_agent(args, env_info, device="cpu")
    learner.update_state_norm(torch.randn(1000, STATE_DIM) * 4.0 + 10.0)  # mean 10, std 4: nothing like the raw states
    with torch.no_grad():
        learner.act.net[-1].weight.mul_(100.0)  # a mean action that follows the (standardised) state, as after learning
    channels, (explorer, *_), _ = AgentRun.build_children(args, env_info, step=0)
    explorer.start()
    try:
        AgentRun.put_newest(channels.weights[0], AgentRun.cpu_state_dict(learner.act))
        (states, actions, log_probs, *_), _ = channels.trajectories[0].get(timeout=120)
    finally:
        channels.stop.set()
        explorer.join(timeout=30)
        if explorer.is_alive():
            explorer.kill()
    assert states.shape == (64, 2, STATE_DIM) and log_probs.shape == (64, 2)
    with torch.no_grad():
        torch.testing.assert_close(learner.act.get_log_prob_entropy(states, actions)[0], log_probs)
        without_statistics = AgentPPO(learner.net_dim, STATE_DIM, 1, device="cpu")
        without_statistics.act.load_state_dict(learner.act.state_dict(), strict=False)
        assert not torch.allclose(without_statistics.act.get_log_prob_entropy(states, actions)[0], log_probs, atol=0.1)


def merge_own_states(rank: int, world: int, init_file: str, results):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    agent = AgentPPO(16, STATE_DIM, 1, device="cpu", if_state_norm=True)
    agent.update_state_norm(torch.full((10 * (rank + 1), STATE_DIM), float(rank)))  # 10 zeros, 20 ones
    results[rank] = torch.cat((agent.act.state_norm.mean, agent.cri.state_norm.std))
    dist.destroy_process_group()


@pytest.mark.slow
def test_data_parallel_ranks_merge_every_ranks_states(tmp_path):
    results = mp.Manager().dict()
    mp.start_processes(merge_own_states, args=(2, str(tmp_path / "init"), results), nprocs=2, start_method="fork")
    mean, std = 2 / 3, (2 / 9) ** 0.5  # of ten zeros and twenty ones
    expected = torch.tensor([mean] * STATE_DIM + [std] * STATE_DIM)
    assert torch.allclose(results[0], expected, atol=1e-5) and torch.equal(results[0], results[1])


def test_a3c_refuses_state_normalisation():
    with pytest.raises(ValueError, match="AgentDiscreteA3C has no if_state_norm"):
        train_and_evaluate(Arguments(agent="AgentDiscreteA3C", env="CartPole-v1", if_state_norm=True, cwd="/nonexistent"))

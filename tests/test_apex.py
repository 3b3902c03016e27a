"""Ape-X DQN: its actors' epsilons, the priorities its explorers compute, both loops, and the settings it refuses."""
import gymnasium as gym
import pytest
import torch
import torch.nn as nn

import AgentRun
from AgentRun import Arguments, make_env, train_and_evaluate
from AgentZoo import AgentApeX, PrioritizedReplayBuffer, RefusedError
from envs import CounterEnv

# eps_i = 0.4^(1 + 7 i / (N - 1)), by hand: N = 4 gives the exponents 1, 10/3, 17/3 and 8
EPSILONS = {1: [0.4], 2: [0.4, 0.00065536], 4: [0.4, 0.0471556, 0.0055591, 0.00065536],
            8: [0.4, 0.16, 0.064, 0.0256, 0.01024, 0.004096, 0.0016384, 0.00065536]}


@pytest.mark.parametrize("num_actors", [1, 2, 4, 8])
def test_each_actor_has_the_papers_epsilon(num_actors):
    agent = AgentApeX(16, 4, 2, device="cpu")
    agent.set_env_copies(0, num_actors)
    assert torch.allclose(agent.explore_rates((num_actors,)), torch.tensor(EPSILONS[num_actors]), rtol=1e-4)
    agent = AgentApeX(16, 4, 2, device="cpu")  # told nothing, the rows of a batch are the actors
    assert torch.allclose(agent.explore_rates((num_actors,)), torch.tensor(EPSILONS[num_actors]), rtol=1e-4)
    if num_actors == 8:  # the second of two explorers of 4 copies each: actors 4 to 7
        agent.set_env_copies(4, 8)
        assert torch.allclose(agent.explore_rates((4,)), torch.tensor(EPSILONS[8][4:]), rtol=1e-4)


def test_each_env_copy_acts_with_its_own_epsilon():
    """The rows that act at random are those whose uniform draw falls below their own epsilon (the same draws, seeded),
    and over many steps each copy's share of random actions is eps_i / 2 (half of them pick the greedy one too)."""
    agent = AgentApeX(16, 4, 2, device="cpu")
    agent.set_env_copies(0, 8)
    state = torch.randn(8, 4).numpy()
    greedy = agent.select_action(state, deterministic=True)
    torch.manual_seed(35)
    action = agent.select_action(state)
    torch.manual_seed(35)
    if_random = torch.rand(8) < torch.tensor(EPSILONS[8])  # select_action's draws, in its order
    expected = torch.where(if_random, torch.randint(2, (8,)), torch.as_tensor(greedy))
    assert if_random.tolist() == [True, True, False, False, False, True, False, False]  # row 5: eps 0.004
    assert action.tolist() == expected.tolist()

    agent.set_env_copies(0, 4)  # four copies, 4000 steps: 800, 94, 11 and 1.3 random non-greedy actions expected
    state, steps = state[:4], 4000
    greedy = agent.select_action(state, deterministic=True)
    other = sum((agent.select_action(state) != greedy).astype(int) for _ in range(steps))
    expected = torch.tensor(EPSILONS[4]) / 2 * steps
    assert abs(other[0] - expected[0]) < 4 * expected[0] ** 0.5 and abs(other[1] - expected[1]) < 4 * expected[1] ** 0.5
    assert other[0] > other[1] > other[3] and other[2] < 30 and other[3] < 10


class TwoActionQ(nn.Module):
    """Q(s, .) = (s, 2 s) of a one-number state: values to compute TD errors by hand."""

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return state[..., :1] * torch.tensor([1.0, 2.0])


def test_explorer_priorities_by_hand_and_stored_in_place_of_the_largest():
    """CounterEnv (state t, reward 1, terminates at t = 3), 3-step returns with gamma 0.9, greedy (epsilon 0) on
    Q(s, .) = (s, 2 s): actions 0, 1, 1, 0 from states 0, 1, 2, 0. TD errors |R + discount * max_a Q(s', a) - Q(s, a)|:
    t0 |1 + 0.9 + 0.81 - 0| = 2.71 (terminated within 3 steps: discount 0); t1 |1 + 0.9 - 2| = 0.1; t2 |1 - 4| = 3;
    t3, the horizon's last step, one step on: |1 + 0.9 * max(1, 2) - 0| = 2.8."""
    agent = AgentApeX(16, 1, 2, device="cpu", gamma=0.9, reward_scale=1.0, explore_rate=0.0)
    agent.cri = agent.act = TwoActionQ()
    env = gym.wrappers.TimeLimit(CounterEnv(terminate_at=3), max_episode_steps=10)
    trajectory = agent.explore_env(env, 4)
    assert len(trajectory) == 6 and trajectory[1].flatten().tolist() == [0, 1, 1, 0]
    assert torch.allclose(trajectory[-1], torch.tensor([2.71, 0.1, 3.0, 2.8]))

    buffer = PrioritizedReplayBuffer(8, 1, 2, if_discrete=True)
    idx = buffer.extend(*trajectory)
    priorities = torch.tensor([1.8187863, 0.2511902, 1.9331824, 1.8547907], dtype=torch.float64)  # (|td| + 1e-6)^0.6
    assert torch.allclose(buffer.sum_tree[0][idx], priorities) and torch.allclose(buffer.sum_tree[-1][0], priorities.sum())
    buffer.extend(*trajectory[:5])  # a trajectory without TD errors (every other agent's): the largest priority so far
    assert torch.allclose(buffer.sum_tree[0][4:8], priorities.max().expand(4))

    small = PrioritizedReplayBuffer(3, 1, 2, if_discrete=True)  # a trajectory longer than the buffer keeps its newest
    small.extend(*trajectory)
    assert torch.allclose(small.sum_tree[0][:3], priorities[1:]) and small.rewards.tolist()[0] == pytest.approx(1.9)


@pytest.mark.slow
def test_two_explorer_processes_and_their_epsilons(tmp_path, monkeypatch):
    """A multiprocess run of two explorers of two copies each (forked, so that they record what they were told):
    explorer w's copies are the actors 2 w and 2 w + 1 of N = 4; the run learns past break_step (target_return is out of
    reach: a lucky run that solves CartPole early would stop before it)."""
    original = AgentRun.Explorer.in_process.__func__

    def recording(cls, args, env_info, step, worker, env_copies):
        explorer = original(cls, args, env_info, step, worker, env_copies)
        torch.save(explorer.agent.explore_rates((args.num_envs,)), tmp_path / f"epsilons_{worker}.pt")
        return explorer

    monkeypatch.setattr(AgentRun.Explorer, "in_process", classmethod(recording))
    result = train_and_evaluate(Arguments(agent="AgentApeX", env="CartPole-v1", cwd=str(tmp_path / "run"), num_envs=2,
                                          break_step=2048, target_return=float("inf"), start_method="fork"))
    assert result["stop_reason"] == "reached break_step 2048" and result["step"] >= 2048
    assert (tmp_path / "run" / "recorder.csv").is_file()
    epsilons = torch.cat([torch.load(tmp_path / f"epsilons_{worker}.pt") for worker in (0, 1)])
    assert torch.allclose(epsilons, torch.tensor(EPSILONS[4]), rtol=1e-4)


@pytest.mark.learning
def test_serial_run_learns_with_the_explorers_priorities(tmp_path):
    args = Arguments(agent="AgentApeX", env="CartPole-v1", cwd=str(tmp_path / "run"), if_multiprocess=False,
                     break_step=2048, target_return=float("inf"))
    result = train_and_evaluate(args)
    assert result["stop_reason"] == "reached break_step 2048" and result["step"] >= 2048
    assert (tmp_path / "run" / "recorder.csv").is_file()
    assert (args.num_workers, args.num_envs) == (1, 8)  # a serial run: one explorer of 8 copies, whatever the default


def test_defaults_and_refused_settings():
    env_info = make_env("CartPole-v1")[1]
    args = Arguments(agent="AgentApeX", env="CartPole-v1")
    args.resolve(env_info)
    assert (args.if_multiprocess, args.num_workers, args.n_step, args.if_per, args.explore_rate) == (True, 2, 3, True, 0.4)
    with pytest.raises(RefusedError, match=r"if_per=False is not accepted: .*pass if_per=True"):
        Arguments(agent="AgentApeX", env="CartPole-v1", if_per=False).resolve(env_info)
    with pytest.raises(RefusedError, match=r"if_noisy=True is not accepted: AgentApeX has no if_noisy .* own settings"):
        Arguments(agent="AgentApeX", env="CartPole-v1", if_noisy=True).resolve(env_info)
    with pytest.raises(RefusedError, match=r"num_workers=2 is not accepted with if_multiprocess=False.*num_workers=1"):
        Arguments(agent="AgentApeX", env="CartPole-v1", if_multiprocess=False, num_workers=2).resolve(env_info)
    with pytest.raises(RefusedError, match=r"explore_rate=1.5 is not accepted: .* in \[0, 1\]"):
        Arguments(agent="AgentApeX", env="CartPole-v1", explore_rate=1.5).resolve(env_info)

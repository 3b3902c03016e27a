"""Issue 44's tools, each off or equal to the former behaviour by default: PPO's target_kl, SAC's fixed temperature, the
actor's own learning rate, export=<cwd>, and the progress note of each printed row."""
import json
import os

import gymnasium as gym
import numpy as np
import pytest
import torch

from AgentRun import Arguments, parse_overrides, make_env
from AgentZoo import (AgentACKTR, AgentDDPG, AgentDiscreteSAC, AgentInterSAC, AgentPPO, AgentRainbow, AgentSAC, ReplayBuffer,
                      RolloutBuffer)
from extras import tools


def pendulum_rollout(agent: AgentPPO, steps: int = 64) -> RolloutBuffer:
    env = gym.vector.SyncVectorEnv([lambda: gym.wrappers.RescaleAction(gym.make("Pendulum-v1"), np.float32(-1),
                                                                       np.float32(1))] * 2,
                                   autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    buffer = RolloutBuffer()
    buffer.extend(*agent.explore_env(env, steps))
    return buffer


def actor_steps(agent) -> int:
    state = agent.act_optimizer.state_dict()["state"]
    return int(state[0]["step"]) if state else 0


def test_target_kl_stops_the_rounds_epochs_once_the_kl_passes_it():
    torch.manual_seed(0)
    agent = AgentPPO(32, 3, 1, device="cpu", target_kl=1e-9)  # passed as soon as the policy has moved
    stats = agent.update_net(pendulum_rollout(agent), batch_size=16, epochs=4)  # 128 samples: 32 minibatches
    assert actor_steps(agent) == 1  # the first minibatch's KL is 0 (the policy that acted); the second's is past it
    assert stats["epochs_done"] == 16 / 128
    assert stats["approx_kl_start"] == pytest.approx(0, abs=1e-6) and stats["approx_kl"] == stats["approx_kl_start"]
    unbounded = AgentPPO(32, 3, 1, device="cpu", target_kl=10.0)
    stats = unbounded.update_net(pendulum_rollout(unbounded), batch_size=16, epochs=4)
    assert actor_steps(unbounded) == 32 and stats["epochs_done"] == 4 and stats["approx_kl"] > 0


def test_without_target_kl_ppo_takes_every_epoch_and_still_reports_the_kl():
    agent = AgentPPO(32, 3, 1, device="cpu")
    stats = agent.update_net(pendulum_rollout(agent), batch_size=16, epochs=4)
    assert actor_steps(agent) == 32 and stats["approx_kl"] > 0 and "epochs_done" not in stats


def filled_buffer(state_dim: int, action_dim: int, if_discrete: bool, size: int = 256) -> ReplayBuffer:
    buffer = ReplayBuffer(size, state_dim, action_dim, if_discrete=if_discrete)
    actions = torch.randint(action_dim, (size, 1)) if if_discrete else torch.rand(size, action_dim) * 2 - 1
    buffer.extend(torch.randn(size, state_dim), actions, torch.randn(size), torch.full((size,), 0.99),
                  torch.randn(size, state_dim))
    return buffer


@pytest.mark.parametrize("agent_class, action_dim, if_discrete", [(AgentSAC, 1, False), (AgentDiscreteSAC, 2, True)])
def test_a_fixed_temperature_stays_at_alpha_init_and_survives_a_checkpoint(agent_class, action_dim, if_discrete, tmp_path):
    fixed = agent_class(32, 3, action_dim, device="cpu", alpha_init=0.05, if_tune_alpha=False)
    tuned = agent_class(32, 3, action_dim, device="cpu", alpha_init=0.05)
    for agent in (fixed, tuned):
        stats = agent.update_net(filled_buffer(3, action_dim, if_discrete), batch_size=32, replay_ratio=0.25)
    assert fixed.alpha_optimizer is None and stats["alpha"] != pytest.approx(0.05, abs=1e-7)
    assert fixed.log_alpha.exp().item() == pytest.approx(0.05) and not fixed.log_alpha.requires_grad
    fixed.save_or_load_agent(str(tmp_path), if_save=True)
    resumed = agent_class(32, 3, action_dim, device="cpu", alpha_init=0.05, if_tune_alpha=False)
    resumed.save_or_load_agent(str(tmp_path), if_save=False)
    assert torch.equal(resumed.log_alpha, fixed.log_alpha)


@pytest.mark.parametrize("agent_class", [AgentDDPG, AgentSAC, AgentInterSAC, AgentPPO, AgentACKTR])
def test_the_actor_takes_its_own_learning_rate_and_the_critic_learning_rate(agent_class):
    agent = agent_class(32, 3, 1, device="cpu", learning_rate=1e-3, actor_learning_rate=3e-4)
    assert {group["lr"] for group in agent.act_optimizer.param_groups} == {3e-4}
    assert {group["lr"] for group in agent.cri_optimizer.param_groups} == {1e-3}
    default = agent_class(32, 3, 1, device="cpu", learning_rate=1e-3)
    assert {group["lr"] for group in default.act_optimizer.param_groups} == {1e-3}


def resolved(**fields) -> Arguments:
    args = Arguments(**fields)
    args.resolve(make_env(args.env)[1])
    return args


def test_the_knobs_come_from_the_command_line_and_are_refused_where_they_mean_nothing():
    overrides = parse_overrides(["target_kl=0.015", "if_tune_alpha=False", "actor_learning_rate=3e-4"])
    assert overrides == {"target_kl": 0.015, "if_tune_alpha": False, "actor_learning_rate": 3e-4}
    assert resolved(agent="AgentPPO", env="Pendulum-v1", target_kl=0.015).target_kl == 0.015
    assert resolved(agent="AgentSAC", env="Pendulum-v1").if_tune_alpha is True
    with pytest.raises(ValueError, match=r"target_kl=0.015 is not accepted: AgentA2C has no target_kl \(only .*AgentPPO"):
        resolved(agent="AgentA2C", env="Pendulum-v1", target_kl=0.015)
    with pytest.raises(ValueError, match=r"actor_learning_rate=0.001 is not accepted: AgentTRPO has no actor_learning_rate"):
        resolved(agent="AgentTRPO", env="Pendulum-v1", actor_learning_rate=1e-3)
    with pytest.raises(ValueError, match=r"actor_learning_rate=0.001 is not accepted: AgentDQN has no"):
        resolved(agent="AgentDQN", env="CartPole-v1", actor_learning_rate=1e-3)
    with pytest.raises(ValueError, match=r"target_kl=-0.1 is not accepted: target_kl must be a number > 0"):
        resolved(agent="AgentPPO", env="Pendulum-v1", target_kl=-0.1)
    with pytest.raises(ValueError, match=r"if_tune_alpha=False is not accepted: AgentDDPG has no if_tune_alpha"):
        resolved(agent="AgentDDPG", env="Pendulum-v1", if_tune_alpha=False)



EXPORT_CHECK = """import sys, torch
policy = torch.jit.load(sys.argv[1])
assert not any(name.startswith("Agent") for name in sys.modules)
print(policy(torch.load(sys.argv[2])).tolist())
"""


@pytest.mark.parametrize("agent, env, extra", [("AgentPPO", "Pendulum-v1", dict(if_state_norm=True, break_step=4096)),
                                               ("AgentDiscretePPO", "CartPole-v1", dict(break_step=4096)),
                                               ("AgentRainbow", "CartPole-v1", dict(break_step=1500, random_steps=1000))])
@pytest.mark.slow
def test_an_exported_actor_acts_with_torch_alone_as_select_action(agent, env, extra, tmp_path):
    """export=<cwd> writes the best actor as TorchScript: loaded in a fresh process that imports torch and nothing of the
    library, it takes select_action's deterministic actions, state normalisation included (Rainbow: noisy layers at
    their mean)."""
    import os
    import subprocess
    import sys

    import AgentRun

    cwd = str(tmp_path / "run")
    AgentRun.train_and_evaluate(Arguments(agent=agent, env=env, cwd=cwd, eval_gap=0, if_multiprocess=False, **extra))
    paths = AgentRun.main([f"export={cwd}"])
    config = tools.read_run(cwd, "export")
    env_info = make_env(env)[1]
    agent_ = tools.saved_agent(cwd, config, env_info, device="cpu")
    if agent == "AgentPPO":
        assert not torch.equal(agent_.act.state_norm.std, torch.ones(3))  # statistics that the export must carry
    states = torch.randn(16, env_info.state_dim) * 3
    torch.save(states, tmp_path / "states.pt")
    out = subprocess.run([sys.executable, "-c", EXPORT_CHECK, paths["torchscript"], str(tmp_path / "states.pt")],
                         capture_output=True, text=True, cwd=tmp_path,  # where the library is not importable
                         env={key: value for key, value in os.environ.items() if key != "PYTHONPATH"})
    assert out.returncode == 0, out.stderr[-2000:]
    expected = agent_.select_action(states.numpy(), deterministic=True)
    np.testing.assert_allclose(np.array(json.loads(out.stdout)), expected, rtol=1e-5, atol=1e-6)


def test_export_refuses_a_directory_without_a_run(tmp_path):
    import AgentRun

    with pytest.raises(FileNotFoundError, match=r"export needs .*config.json \(the run's settings\)"):
        AgentRun.main([f"export={tmp_path}"])
    with pytest.raises(ValueError, match=r"export= takes no other key=value"):
        AgentRun.main([f"export={tmp_path}", "seed=1"])


def test_each_printed_row_tells_the_speed_and_the_time_left(tmp_path, capsys):
    import re

    from AgentRun import train_and_evaluate

    train_and_evaluate(Arguments(agent="AgentDiscretePPO", env="CartPole-v1", cwd=str(tmp_path / "run"), eval_gap=0,
                                 break_step=6144, target_return=1e9))
    rows = [line for line in capsys.readouterr().out.splitlines() if re.match(r"\s+\d+\s+[\d.]+\s", line)]
    assert len(rows) == 3  # one per round of 2048 steps
    notes = [re.search(r"  ([\d,]+) steps/s, (\d+) min left$", row) for row in rows]
    assert all(notes) and all(int(note[1].replace(",", "")) > 0 for note in notes)
    assert notes[-1][2] == "0"  # break_step reached


def test_replay_takes_episodes_the_exploring_policy_the_last_actor_and_no_gif(tmp_path):
    """replay=<cwd> episodes=3 deterministic=False render=none: three episodes of the exploring policy, no GIF; the
    deterministic replay of the same envs differs; a human window is refused without a display."""
    import os

    import AgentRun

    cwd = str(tmp_path / "run")
    AgentRun.train_and_evaluate(Arguments(agent="AgentPPO", env="Pendulum-v1", cwd=cwd, eval_gap=0, break_step=2048,
                                          if_multiprocess=False))
    torch.manual_seed(0)
    explored = AgentRun.main([f"replay={cwd}", "episodes=3", "deterministic=False", "render=none"])
    assert explored["gif"] is None and explored["frames"] == 0 and not os.path.exists(os.path.join(cwd, "replay.gif"))
    deterministic = tools.replay(cwd, episodes=3, render="none")
    assert explored["avg_return"] != deterministic["avg_return"]  # the same envs and seeds, other actions
    assert deterministic["avg_return"] == tools.replay(cwd, episodes=3, render="none")["avg_return"]  # it repeats
    with pytest.raises(ValueError, match=r"replay= takes no other key=value than episodes=, deterministic=, render="):
        AgentRun.main([f"replay={cwd}", "seed=1"])
    with pytest.raises(ValueError, match=r"render='window' is not accepted: one of gif, human, none"):
        AgentRun.main([f"replay={cwd}", "render=window"])
    with pytest.raises(ValueError, match=r"episodes=0 is not accepted"):
        tools.replay(cwd, episodes=0)
    if not os.environ.get("DISPLAY"):
        with pytest.raises(ValueError, match=r"render='human' needs a display"):
            tools.replay(cwd, render="human")
    # actor=last: the last checkpoint's actor (where the run stopped), not the best evaluation's
    config, env_info = AgentRun.read_config(os.path.join(cwd, "config.json")), AgentRun.make_env("Pendulum-v1")[1]
    last = tools.saved_agent(cwd, config, env_info, device="cpu", actor="last").act.state_dict()
    saved = torch.load(os.path.join(cwd, "checkpoint", "act.pt"), weights_only=True)
    assert all(torch.equal(last[name], saved[name]) for name in saved)
    assert AgentRun.main([f"replay={cwd}", "episodes=1", "render=none", "actor=last"])["avg_length"] == 200
    with pytest.raises(ValueError, match=r"actor='worst' is not accepted: 'best' \(actor.pt"):
        tools.replay(cwd, actor="worst")


class PartsEnv(gym.Env):
    """Observations of a Box and a Discrete part, whose action 1 pays 1 when the Discrete part is 2."""

    def __init__(self, observation_space):
        self.observation_space, self.action_space = observation_space, gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.sample = self.observation_space.sample()
        return self.sample, {}

    def step(self, action):
        return self.sample, 0.0, False, False, {}


@pytest.mark.parametrize("observation_space, flat, one_hot", [
    (gym.spaces.Dict({"position": gym.spaces.Box(-1, 1, (2,)), "door": gym.spaces.Discrete(3)}), 5, slice(0, 3)),
    (gym.spaces.Tuple((gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(3, start=1))), 5, slice(2, 5)),
    (gym.spaces.Discrete(4), 4, slice(0, 4)),
    (gym.spaces.Dict({"inner": gym.spaces.Tuple((gym.spaces.MultiBinary(2), gym.spaces.Discrete(2)))}), 4, slice(2, 4)),
])
def test_dict_tuple_and_discrete_observations_are_flattened_with_one_hot_parts(observation_space, flat, one_hot):
    """gymnasium's flatten: parts side by side (a Dict's in the order of its sorted keys), a Discrete part one-hot."""
    from AgentRun import make_vector_env

    env, env_info = make_vector_env(gym.wrappers.TimeLimit(PartsEnv(observation_space), max_episode_steps=5))
    assert env_info.state_dim == flat and env.observation_space.shape == (flat,)
    state = env.reset(seed=0)[0]
    np.testing.assert_array_equal(state, gym.spaces.flatten(observation_space, env.unwrapped.sample))
    assert state[one_hot].sum() == 1 and set(np.unique(state[one_hot])) <= {0, 1}


def test_a_dqn_trains_on_a_dict_observation_from_the_command_line(tmp_path):
    from AgentRun import train_and_evaluate

    env = gym.wrappers.TimeLimit(PartsEnv(gym.spaces.Dict({"position": gym.spaces.Box(-1, 1, (2,)),
                                                           "door": gym.spaces.Discrete(3)})), max_episode_steps=5)
    result = train_and_evaluate(Arguments(agent="AgentDQN", env=env, cwd=str(tmp_path / "run"), break_step=1024,
                                          random_steps=256, eval_gap=0, target_return=1e9))
    assert result["step"] == 1024


@pytest.mark.parametrize("agent, env, extra, columns", [
    ("AgentDQN", "CartPole-v1", dict(break_step=1500, random_steps=1000), ["epsilon", "mean_q"]),
    ("AgentSAC", "Pendulum-v1", dict(break_step=1200, random_steps=1000), ["alpha", "mean_q"]),
    ("AgentPPO", "Pendulum-v1", dict(break_step=4096), ["approx_kl", "approx_kl_start", "entropy", "entropy_start",
                                                         "clip_fraction", "clip_fraction_start", "explained_variance"]),
    ("AgentTRPO", "Pendulum-v1", dict(break_step=4096), ["explained_variance"]),
])
@pytest.mark.slow
def test_recorder_rows_hold_what_the_field_reads_to_debug_a_run(agent, env, extra, columns, tmp_path):
    """Every row: the evaluation's min, max and mean episode length beside its mean; each family's own diagnostics
    (epsilon, alpha, the off-policy critic's mean Q; PPO's approximate KL, clip fraction and entropy at the round's first minibatch and over it; the
    on-policy critic's explained variance)."""
    import csv

    from AgentRun import train_and_evaluate

    cwd = tmp_path / "run"
    train_and_evaluate(Arguments(agent=agent, env=env, cwd=str(cwd), eval_gap=0, target_return=1e9,
                                 if_multiprocess=False, **extra))
    rows = list(csv.DictReader(open(cwd / "recorder.csv")))
    assert rows
    for row in rows:
        values = {name: float(value) for name, value in row.items()}
        assert all(np.isfinite(values[name]) for name in ["min_return", "max_return", "avg_length", *columns])
        assert values["min_return"] <= values["avg_return"] <= values["max_return"] and values["avg_length"] > 0
    if agent == "AgentPPO":
        assert float(rows[0]["approx_kl_start"]) == pytest.approx(0, abs=1e-6) and float(rows[-1]["entropy"]) > 0
    if agent in ("AgentPPO", "AgentTRPO"):  # at most 1; a critic that learns explains more of the returns than at first
        assert all(float(row["explained_variance"]) <= 1 for row in rows)
    if agent == "AgentDQN":
        assert float(rows[-1]["epsilon"]) == 0.1


def test_mean_q_is_the_critics_mean_value_of_the_batch_in_the_envs_reward_units():
    sac = AgentSAC(32, 3, 1, device="cpu", reward_scale=0.5)
    state, action = torch.randn(16, 3), torch.rand(16, 1) * 2 - 1
    q1, q2 = sac.cri.get_q_heads(state, action)
    assert sac.batch_mean_q((state, action)) == pytest.approx(((q1 + q2) / 2).mean().item() / 0.5, rel=1e-5)
    rainbow = AgentRainbow(32, 3, 2, device="cpu")  # noisy layers at their mean: no random numbers drawn
    batch = (state, torch.randint(2, (16, 1)))
    torch.manual_seed(0)
    first = rainbow.batch_mean_q(batch), torch.rand(1)
    torch.manual_seed(0)
    assert (rainbow.batch_mean_q(batch), torch.rand(1)) == first and rainbow.cri.training
    rainbow.cri.eval()
    assert first[0] == pytest.approx(rainbow.cri(state).gather(1, batch[1]).mean().item() / rainbow.reward_scale, rel=1e-5)


def fake_run(path, seed: int, returns: list[float], lr: float = 1e-3):
    """A run directory as plot= reads it: config.json and recorder.csv rows at steps 100, 200, ..."""
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"agent": "AgentSAC", "env": "Pendulum-v1", "seed": seed,
                                                  "learning_rate": lr, "target_return": -200.0}))
    lines = ["step,seconds,avg_return,alpha"] + [f"{100 * (i + 1)},{i + 1.0},{value},{0.1 * i}"
                                                for i, value in enumerate(returns)]
    (path / "recorder.csv").write_text("\n".join(lines) + "\n")


def test_the_interquartile_mean_cuts_a_quarter_from_each_end():
    from extras.tools import interquartile_mean

    assert interquartile_mean(np.array([1.0, 2.0, 3.0, 4.0, 100.0])) == 3.0  # 5 seeds: the middle three
    assert interquartile_mean(np.array([1.0, 2.0, 3.0, 4.0])) == 2.5  # 4 seeds: the middle two


def test_plot_options_select_smooth_and_summarise_the_seeds(tmp_path):
    """plot= value=, x=, smooth=, select=, exclude=, labels=, stat=iqm: the curves seed_curves draws, by hand."""
    import AgentRun

    for seed in range(5):
        fake_run(tmp_path / "runs" / f"a_{seed}", seed, [float(seed)] * 4)  # flat curves at 0 .. 4
        fake_run(tmp_path / "runs" / f"b_{seed}", seed, [-10.0, -10.0, 10.0, 10.0], lr=3e-4)
    runs = tools.find_runs([str(tmp_path / "runs")], select="a_", exclude="a_4")
    assert sorted(path[-3:] for _, _, path in runs) == ["a_0", "a_1", "a_2", "a_3"]
    members = [(config, rows) for config, rows, _ in tools.find_runs([str(tmp_path / "runs")], select="a_")]
    x, centre, low, high = tools.seed_curves(members, "step", "avg_return", 1, "iqm")
    assert x[-1] == 400 and np.allclose(centre, 2.0)  # the middle three of 0 .. 4
    assert np.all(low <= centre) and np.all(centre <= high) and np.all(low >= 0) and np.all(high <= 4)
    b_members = [(config, rows) for config, rows, _ in tools.find_runs([str(tmp_path / "runs")], select="b_")]
    x, centre, _, _ = tools.seed_curves(b_members, "step", "avg_return", 2, "median")
    seen = ~np.isnan(centre)  # the median's x starts at 0, before the first smoothed row (step 200)
    assert x[seen][0] >= 200 and centre[seen][0] == pytest.approx(-10.0, abs=0.5) and centre[-1] == 10.0
    assert np.interp(300, x[seen], centre[seen]) == pytest.approx(0.0, abs=0.5)  # a moving average of two rows
    path = AgentRun.main([f"plot={tmp_path / 'runs'}", "value=alpha", "x=seconds", "smooth=2", "stat=iqm",
                          "labels=slow,fast"])
    assert os.path.isfile(path)
    with pytest.raises(ValueError, match=r"labels= names 1 configs, but the runs make 2"):
        tools.plot_runs([str(tmp_path / "runs")], labels="one")
    with pytest.raises(ValueError, match=r"value='obj_critic' is no recorder.csv column of these runs"):
        tools.plot_runs([str(tmp_path / "runs")], value="obj_critic")
    with pytest.raises(ValueError, match=r"plot= takes x=both\|step\|seconds"):
        tools.plot_runs([str(tmp_path / "runs")], stat="mean")
    with pytest.raises(ValueError, match=r"plot= found no runs under .* selected by 'c_'"):
        tools.plot_runs([str(tmp_path / "runs")], select="c_")


def linear_widths_and_activations(net: torch.nn.Module) -> tuple[list[int], set[type]]:
    layers = [module for module in net.modules() if isinstance(module, torch.nn.Linear)]
    return [layer.out_features for layer in layers], {type(module) for module in net.modules()
                                                      if isinstance(module, (torch.nn.ReLU, torch.nn.Tanh, torch.nn.ELU))}


@pytest.mark.parametrize("agent, env", [("AgentSAC", "Pendulum-v1"), ("AgentInterSAC", "Pendulum-v1"),
                                        ("AgentTD3", "Pendulum-v1"), ("AgentPPO", "Pendulum-v1"),
                                        ("AgentD3QN", "CartPole-v1"), ("AgentRainbow", "CartPole-v1"),
                                        ("AgentDiscreteSAC", "CartPole-v1"), ("AgentDiscreteMAPPO", "simple_spread_v3"),
                                        ("AgentQTRAN", "simple_spread_v3")])
def test_net_dims_and_activation_shape_every_mlp(agent, env):
    """Spinning Up's (64, 32) tanh: every hidden Linear of actor and critic is 64 then 32 wide, every activation Tanh."""
    from AgentRun import build_agent

    args = resolved(agent=agent, env=env, net_dims="64,32", activation="tanh")
    built = build_agent(args, make_env(env)[1], device="cpu")
    for net in (built.act, built.cri):
        widths, activations = linear_widths_and_activations(net)
        assert activations == {torch.nn.Tanh}, (agent, net)
        assert 64 in widths and 32 in widths and 128 not in widths and 256 not in widths, (agent, widths)


@pytest.mark.slow
def test_a_shaped_run_resumes_and_replays_with_the_same_networks(tmp_path):
    import AgentRun

    cwd = str(tmp_path / "run")
    AgentRun.main(["agent=AgentSAC", "env=Pendulum-v1", f"cwd={cwd}", "net_dims=400x300", "activation=elu",
                   "break_step=1300", "random_steps=1000", "eval_gap=0",
                   "replay_ratio=0.03125"])  # few updates: the shapes are what it checks
    config = json.loads(open(os.path.join(cwd, "config.json")).read())
    assert config["net_dims"] == [400, 300] and config["activation"] == "elu"
    AgentRun.resume(cwd, break_step=1600)  # the checkpoint's networks load into networks of the same shape
    assert tools.replay(cwd, episodes=1, render="none")["avg_length"] == 200
    widths, activations = linear_widths_and_activations(
        tools.saved_agent(cwd, config, make_env("Pendulum-v1")[1], device="cpu").act)
    assert widths[:2] == [400, 300] and activations == {torch.nn.ELU}


@pytest.mark.parametrize("fields, message", [
    (dict(net_dims="0,5"), r"net_dims='0,5' is not accepted: the hidden layers' widths, positive integers"),
    (dict(net_dims="a"), r"net_dims='a' is not accepted"),
    (dict(net_dims=(64.5, 32)), r"net_dims=\(64.5, 32\) is not accepted"),
    (dict(activation="swish"), r"activation='swish' is not accepted: one of relu, tanh, elu, gelu"),
])
def test_a_bad_network_shape_is_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        resolved(agent="AgentSAC", env="Pendulum-v1", **fields)

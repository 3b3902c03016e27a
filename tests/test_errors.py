import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import AgentRun
from AgentRun import Arguments, make_vector_env, parse_overrides, train_and_evaluate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class SpaceEnv(gym.Env):
    """An env that only declares its spaces: enough for the checks that run before any step."""

    def __init__(self, observation_space, action_space):
        self.observation_space, self.action_space = observation_space, action_space


def test_unknown_environment_id():
    with pytest.raises(ValueError, match=r"unknown environment id 'NoSuchEnv-v0'.*CartPole-v1"):
        make_vector_env("NoSuchEnv-v0")


def test_env_of_wrong_type():
    with pytest.raises(TypeError, match="gymnasium id or a gymnasium.Env instance .or a PettingZoo parallel env., got int"):
        make_vector_env(3)


def test_continuous_agent_on_discrete_actions(tmp_path):
    args = Arguments(agent="AgentSAC", env="CartPole-v1", cwd=str(tmp_path / "run"))
    with pytest.raises(ValueError, match=r"AgentSAC is for Box action spaces, but CartPole-v1 has a Discrete .*AgentDQN"):
        train_and_evaluate(args)
    assert not os.path.exists(tmp_path / "run")  # refused before anything was written


def test_discrete_agent_on_continuous_actions(tmp_path):
    args = Arguments(agent="AgentD3QN", env="Pendulum-v1", cwd=str(tmp_path / "run"))
    with pytest.raises(ValueError, match=r"AgentD3QN is for Discrete action spaces, but Pendulum-v1 has a Box .*AgentSAC"):
        train_and_evaluate(args)


@pytest.mark.parametrize("observation_space", [
    gym.spaces.Box(0, 255, (64, 64, 3), np.uint8),  # an image of a size no encoder takes (tests/test_pixels.py: those
    gym.spaces.Box(0, 255, (84, 84), np.uint8),  # taken, 84x84, 96x96 and 10x10 with their channels)
    gym.spaces.Box(0.0, 1.0, (84, 84, 3), np.float32),  # images are uint8 or bool, scaled inside the network
    gym.spaces.Dict({"position": gym.spaces.Text(5)}),  # parts that do not flatten (issue 44: Dict, Tuple and Discrete
    gym.spaces.Tuple((gym.spaces.Box(-1, 1, (2,)), gym.spaces.Text(3))),  # observations of Box and Discrete parts are
    # flattened, tests/test_research_knobs.py)
])
def test_observation_space_that_is_not_a_flat_box(observation_space):
    env = SpaceEnv(observation_space, gym.spaces.Discrete(2))
    with pytest.raises(ValueError, match=r"observation space .* is not supported.* the agents take .*Box"):
        make_vector_env(env)


def test_action_space_with_infinite_bounds():
    env = SpaceEnv(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-np.inf, np.inf, (2,)))
    with pytest.raises(ValueError, match="infinite bounds"):
        make_vector_env(env)


def test_unknown_agent():
    with pytest.raises(ValueError, match=r"unknown agent 'AgentXYZ'; AgentZoo has .*AgentSAC"):
        Arguments(agent="AgentXYZ").get_agent_class()


@pytest.mark.parametrize("base", ["AgentBase", "AgentOffPolicy", "AgentOnPolicy"])
def test_a_shared_base_is_no_agent_to_train(base):
    """The bases that agents share hold no update rule of their own: refused by name, and never offered."""
    with pytest.raises(ValueError, match=rf"unknown agent '{base}'; AgentZoo has AgentA2C, .*AgentSAC") as error:
        Arguments(agent=base).get_agent_class()
    offered = str(error.value).partition("AgentZoo has")[2]
    assert "OnPolicy" not in offered and "OffPolicy" not in offered and "AgentBase" not in offered


def test_unknown_key_names_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown key 'learning_rat'; Arguments has .*learning_rate"):
        parse_overrides(["learning_rat=0.1"])


@pytest.mark.parametrize("old, new", [("target_step", "steps_per_round"), ("max_memo", "buffer_size"),
                                      ("net_dim", "net_dims")])
def test_a_renamed_field_is_refused_with_its_new_name(old, new):
    message = rf"{old}= is not accepted: it was renamed {new}= \(the same value\); pass {new}=512"
    with pytest.raises(ValueError, match=message):
        parse_overrides([f"{old}=512"])
    with pytest.raises(ValueError, match=message):
        Arguments(agent="AgentPPO", env="Pendulum-v1", **{old: 512})
    with pytest.raises(ValueError, match=message):
        AgentRun.run__demo(**{old: 512})
    assert new in AgentRun.ARGUMENT_NAMES and old not in Arguments().to_dict()


def test_repeat_times_is_refused_with_the_two_names_it_became():
    """It meant gradient steps per explored step off-policy (and ACER's replayed rollouts), epochs on-policy."""
    message = (r"repeat_times= is not accepted: it was renamed replay_ratio= or epochs= \(the same value\) "
               r"\(replay_ratio: off-policy agents and AgentACER; epochs: on-policy\); pass replay_ratio=2 or epochs=2")
    with pytest.raises(ValueError, match=message):
        parse_overrides(["repeat_times=2"])
    with pytest.raises(ValueError, match=message):
        Arguments(agent="AgentPPO", env="Pendulum-v1", repeat_times=2)
    with pytest.raises(ValueError, match=message):
        AgentRun.run__demo(repeat_times=2)
    assert {"replay_ratio", "epochs"} <= AgentRun.ARGUMENT_NAMES and "repeat_times" not in Arguments().to_dict()


def test_override_without_equals_sign():
    with pytest.raises(ValueError, match=r"expected key=value, got 'seed'"):
        parse_overrides(["seed"])


def test_overrides_are_typed():
    assert parse_overrides(["seed=3", "gamma=0.9", "if_remove=True", "cwd=/tmp/a", "target_return=None"]) == {
        "seed": 3, "gamma": 0.9, "if_remove": True, "cwd": "/tmp/a", "target_return": None}


@pytest.mark.parametrize("item, message", [
    ("seed=1.5", "seed takes an integer"),
    ("gamma=abc", "gamma takes a number or None"),
    ("if_remove=maybe", "if_remove takes True or False"),
])
def test_override_of_the_wrong_type(item, message):
    with pytest.raises(ValueError, match=message):
        parse_overrides([item])


@pytest.mark.parametrize("field, value, accepted", [
    ("gamma", 1.5, r"in \(0, 1\]"), ("gamma", 0.0, r"in \(0, 1\]"), ("learning_rate", -1e-3, "> 0"),
    ("batch_size", 0, "> 0"), ("net_dims", -8, "> 0"), ("buffer_size", 0, "> 0"), ("eval_times", 0, "> 0"),
    ("soft_update_tau", 2.0, r"in \(0, 1\]"), ("eval_gap", -1.0, ">= 0"), ("batch_size", 32.5, "integer"),
    ("random_steps", -1, ">= 0"), ("random_steps", 100.5, "integer"),
    ("seed", 1.5, "integer"), ("eval_times", 2.5, "integer"),  # integer fields by their annotation
    ("num_workers", 0, ">= 1"), ("num_workers", 2.0, "integer"),
])
def test_bad_values_are_refused(field, value, accepted, tmp_path):
    args = Arguments(agent="AgentSAC", env="Pendulum-v1", cwd=str(tmp_path / "run"), **{field: value})
    with pytest.raises(ValueError, match=rf"{field}={value!r} is not accepted: {field} must be .*{accepted}"):
        train_and_evaluate(args)


@pytest.mark.parametrize("agent, env, field, value, accepted", [
    ("AgentDQN", "CartPole-v1", "explore_rate", 1.5, r"in \[0, 1\]"), ("AgentTD3", "Pendulum-v1", "policy_noise", -0.1, ">= 0"),
    ("AgentDDPG", "Pendulum-v1", "explore_noise", -0.1, ">= 0"), ("AgentSAC", "Pendulum-v1", "alpha_init", 0.0, "> 0"),
    ("AgentTD3", "Pendulum-v1", "random_beta", -1.0, ">= 0"),
    ("AgentPPO", "Pendulum-v1", "ratio_clip", 1.0, r"in \(0, 1\)"), ("AgentDiscretePPO", "CartPole-v1", "lambda_gae", 1.5,
                                                                     r"in \[0, 1\]"),
    ("AgentDiscreteA2C", "CartPole-v1", "entropy_coef", -0.01, ">= 0"),
    ("AgentDQN", "CartPole-v1", "n_step", 0, ">= 1"), ("AgentSAC", "Pendulum-v1", "n_step", 2.5, "integer"),
    ("AgentC51", "CartPole-v1", "num_atoms", 1, ">= 2"), ("AgentRainbow", "CartPole-v1", "v_min", 10.0, "below v_max=10.0"),
    ("AgentRainbow", "CartPole-v1", "v_max", float("inf"), "finite"),
    ("AgentACKTR", "Pendulum-v1", "kl_clip", 0.0, "> 0"), ("AgentDiscreteACKTR", "CartPole-v1", "damping", -0.01, "> 0"),
])
def test_bad_values_of_agent_hyperparameters_are_refused(agent, env, field, value, accepted, tmp_path):
    args = Arguments(agent=agent, env=env, cwd=str(tmp_path / "run"), **{field: value})
    with pytest.raises(ValueError, match=rf"{field}={value!r} is not accepted: {field} must be .*{accepted}"):
        train_and_evaluate(args)


@pytest.mark.parametrize("agent, field, users", [
    ("AgentSAC", "explore_noise", "AgentDDPG, AgentInterAC, AgentMADDPG"),  # SAC explores with its own stochastic policy
    ("AgentPPO", "soft_update_tau", "AgentACER, AgentApeX, AgentC51"),  # PPO has no target network
    ("AgentDDPG", "entropy_coef", "AgentA2C"),
    ("AgentPPO", "random_beta", "AgentDDPG, AgentInterAC, AgentInterSAC"),  # no random warm-up
    ("AgentA2C", "ratio_clip", "AgentDiscreteMAPPO, AgentDiscretePPO"),  # A2C's objective has no ratio to clip
    ("AgentPPO", "buffer_size", "AgentACER, AgentApeX, AgentC51"),  # no replay buffer
    ("AgentA2C", "batch_size", "AgentApeX, AgentC51, AgentCOMA"),  # one step on the whole rollout
    ("AgentA2C", "replay_ratio", "AgentACER, AgentApeX, AgentC51"),  # neither replays nor repeats an epoch
    ("AgentA2C", "epochs", "AgentCOMA, AgentDiscreteMAPPO, AgentDiscretePPO"),
    ("AgentSAC", "epochs", "AgentCOMA, AgentDiscreteMAPPO, AgentDiscretePPO"),  # its knob is replay_ratio
    ("AgentPPO", "if_save_buffer", "AgentACER, AgentApeX, AgentC51"),  # no replay buffer to leave out
    ("AgentPPO", "if_per", "AgentApeX, AgentC51, AgentD3QN"),  # prioritized replay is for off-policy agents
    ("AgentPPO", "n_step", "AgentApeX, AgentC51, AgentD3QN"),  # PPO's GAE already mixes n-step returns
    ("AgentSAC", "if_noisy", "AgentC51, AgentD3QN, AgentDQN"),  # noisy layers are for agents with a Q-network
])
def test_hyperparameter_of_another_agent_is_refused(agent, field, users, tmp_path):
    """Rather than quietly ignored: a typo of agent, or a knob that does nothing for this one."""
    args = Arguments(agent=agent, env="Pendulum-v1", cwd=str(tmp_path / "run"), **{field: 0.1})
    with pytest.raises(ValueError, match=rf"{field}=0.1 is not accepted: {agent} has no {field} \(only {users}.* have "
                                         rf"it\); {agent}'s own settings are .*learning_rate"):
        train_and_evaluate(args)
    assert not os.path.exists(tmp_path / "run")


def test_cwd_with_an_earlier_run_is_not_mixed(tmp_path):
    cwd = tmp_path / "run"
    cwd.mkdir()
    (cwd / "recorder.csv").write_text("step\n")
    with pytest.raises(FileExistsError, match=r"holds an earlier run's files; resume it with .*resume=.*if_remove=True"):
        train_and_evaluate(Arguments(agent="AgentSAC", env="Pendulum-v1", cwd=str(cwd)))
    assert (cwd / "recorder.csv").read_text() == "step\n"


@pytest.mark.slow
def test_command_line_refuses_unknown_key():
    result = subprocess.run([sys.executable, "AgentRun.py", "no_such_key=1"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "unknown key 'no_such_key'; Arguments has" in result.stderr and "break_step" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_command_line_keeps_the_traceback_of_a_bug_and_prints_refused_input_alone(tmp_path):
    """A shape error in an edited agent is a bug: `python AgentRun.py` shows its traceback. Refused input (here a cwd
    with an earlier run) is one line that says what is accepted."""
    broken_agent = ("import runpy, sys, torch, AgentZoo\n"
                    "def update_net(self, buffer, batch_size, replay_ratio):\n"
                    "    return torch.zeros(2, 3) @ torch.zeros(2, 3)\n"
                    "AgentZoo.AgentDQN.update_net = update_net\n"
                    "sys.argv = ['AgentRun.py'] + sys.argv[1:]\n"
                    "runpy.run_path('AgentRun.py', run_name='__main__')\n")
    cwd = str(tmp_path / "run")
    command = [sys.executable, "-c", broken_agent, "agent=AgentDQN", "env=CartPole-v1", f"cwd={cwd}", "break_step=512"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "Traceback" in result.stderr and "in update_net" in result.stderr and "cannot be multiplied" in result.stderr
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)  # cwd now holds a run
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"AgentRun.py: cwd {cwd!r} holds an earlier run's files; resume it with")


def test_workers_in_the_serial_loop_are_refused(tmp_path):
    args = Arguments(agent="AgentSAC", env="Pendulum-v1", cwd=str(tmp_path / "run"), num_workers=2, if_multiprocess=False)
    with pytest.raises(ValueError, match=r"num_workers=2 is not accepted with if_multiprocess=False: the explorers are "
                                         r"processes of a multiprocess run; pass if_multiprocess=True"):
        train_and_evaluate(args)


def test_random_steps_of_an_on_policy_agent_is_refused(tmp_path):
    args = Arguments(agent="AgentPPO", env="Pendulum-v1", cwd=str(tmp_path / "run"), random_steps=1000)
    with pytest.raises(ValueError, match=r"random_steps=1000 is not accepted: AgentPPO has no random_steps \(only "
                                         r"AgentApeX, AgentC51, AgentD3QN, .*AgentTD3, AgentTQC, AgentVDN have it\)"):
        train_and_evaluate(args)


def test_break_step_within_the_random_warm_up_is_refused(tmp_path):
    """A run that would stop before learning starts: said so, instead of quietly running past break_step."""
    args = Arguments(agent="AgentTD3", env="Pendulum-v1", cwd=str(tmp_path / "run"), break_step=5000)
    with pytest.raises(ValueError, match=r"break_step=5000 is not accepted: AgentTD3 explores at random for its first "
                                         r"random_steps=10000 steps.*smaller random_steps"):
        train_and_evaluate(args)


def test_env_without_a_time_limit_is_refused():
    """Evaluation runs each episode to its end, which an env without a time limit might never reach."""
    from envs import CounterEnv

    with pytest.raises(ValueError, match=r"CounterEnv has no time limit, so an evaluation episode might never end; wrap "
                                         r"it in gymnasium.wrappers.TimeLimit\(env, max_episode_steps=N\)"):
        make_vector_env(CounterEnv(terminate_at=1000))
    make_vector_env(gym.wrappers.TimeLimit(CounterEnv(terminate_at=1000), max_episode_steps=100))  # accepted


class StartEnv(gym.Env):
    """Discrete(3, start=-1): actions -1, 0, 1; records the actions it is given."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(3, start=-1)

    def __init__(self):
        self.received = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        assert self.action_space.contains(action), action
        self.received.append(int(action))
        return np.zeros(2, np.float32), 0.0, False, False, {}


def test_discrete_actions_are_shifted_to_a_space_that_does_not_start_at_zero():
    """The agents' actions are 0..n-1; a Discrete(n, start) env gets them shifted by start, not off by start."""
    inner = StartEnv()
    env, env_info = make_vector_env(gym.wrappers.TimeLimit(inner, max_episode_steps=10))
    assert env_info.if_discrete and env_info.action_dim == 3 and env.action_space == gym.spaces.Discrete(3)
    env.reset(seed=0)
    for action in (0, 1, 2):
        env.step(np.int64(action))
    assert inner.received == [-1, 0, 1]


def test_command_line_is_a_function(tmp_path):
    """main(argv) is what `python AgentRun.py ...` runs: key=value overrides of run__demo(), or replay= (with its own
    options), export=, resume=, plot= or grid= (tests/test_grid.py)."""
    with pytest.raises(ValueError, match=r"one of replay=, export=, resume=, plot= and grid= at a time, got replay=a resume=b"):
        AgentRun.main(["replay=a", "resume=b"])
    with pytest.raises(ValueError, match=r"replay= takes no other key=value"):
        AgentRun.main(["replay=a", "seed=1"])
    with pytest.raises(ValueError, match=r"unknown key 'no_such_key'"):
        AgentRun.main(["no_such_key=1"])
    cwd = str(tmp_path / "run")
    result = AgentRun.main(["agent=AgentDQN", "env=CartPole-v1", f"cwd={cwd}", "break_step=512", "eval_gap=0"])
    assert result["stop_reason"] == "reached break_step 512"
    assert AgentRun.main([f"resume={cwd}", "break_step=1024"])["stop_reason"] == "reached break_step 1024"


@pytest.mark.parametrize("key", ["cwd", "if_resume", "if_remove"])
def test_resume_refuses_the_keys_it_sets_itself(key, tmp_path):
    """resume= continues the run in its own directory: cwd=, if_resume= and if_remove= beside it are refused by name,
    as replay= and export= refuse keys they do not take (not a TypeError)."""
    with pytest.raises(AgentRun.RefusedError, match=rf"resume= continues the run in {tmp_path}.*{key}= is not accepted"):
        AgentRun.main([f"resume={tmp_path}", f"{key}={tmp_path / 'other' if key == 'cwd' else True}"])


def test_gymnasium_robotics_env_without_the_package_names_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "gymnasium_robotics", None)  # import fails as where it is not installed
    monkeypatch.delitem(gym.envs.registry, "FetchReach-v4", raising=False)  # as if it had never registered its ids
    with pytest.raises(ValueError, match=r"FetchReach-v4 is a gymnasium-robotics env: pip install gymnasium-robotics "
                                         r"'mujoco<3.4'"):
        make_vector_env("FetchReach-v4")

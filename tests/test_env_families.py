"""The optional env families of extras/ (AgentRun.ENV_FAMILIES): each id reaches its module, and each module's envs pass
gymnasium's own env checker, their wrappers included (a spec that remakes them); a family's package is imported only
when one of its ids is made."""
import subprocess
import sys

import pytest
from gymnasium.utils.env_checker import check_env

from AgentRun import ENV_FAMILIES, env_family, make_env


@pytest.mark.parametrize("env_id, module, package", [
    ("CarRacing-v3", "extras.pixels", None), ("MinAtar/Breakout-v1", "extras.pixels", "minatar"),
    ("ALE/Pong-v5", "extras.pixels", "ale_py"), ("CartPoleNoVel-v1", "extras.no_velocity", None),
    ("simple_spread_v3", "extras.teams", "mpe2"), ("FetchReach-v4", "extras.goals", "gymnasium_robotics")])
def test_each_family_makes_envs_that_pass_gymnasiums_env_checker(env_id, module, package):
    if package is not None:
        pytest.importorskip(package)
    family = env_family(env_id)
    assert family.__name__ == module
    env = family.make(env_id)
    check_env(env, skip_render_check=True)
    if module == "extras.goals":  # the flat observations the agents take, and the hindsight replay's record of ends
        check_env(family.GoalObservation(env, if_record_ends=True), skip_render_check=True)
    env.close()


@pytest.mark.slow
def test_gymnasiums_ids_reach_no_family_and_no_family_is_imported_before_its_first_id():
    assert all(env_family(env_id) is None for env_id in ("CartPole-v1", "Pendulum-v1", "LunarLander-v3", "Ant-v5"))
    code = ("import sys, AgentRun; AgentRun.make_env('CartPole-v1'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('extras', 'ale_py', 'minatar', 'mpe2', "
            "'pettingzoo', 'gymnasium_robotics', 'envpool', 'matplotlib')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
    assert len(ENV_FAMILIES) == 4


def test_the_velocity_masked_tasks_keep_their_base_tasks_target_and_limit():
    env, env_info = make_env("PendulumNoVel-v1")
    assert env_info.target_return == -200.0 and env.spec.max_episode_steps == 200

"""Env steps per second on one core (issues 42 and 45): gymnasium's vector env as our explorer builds it
(AgentRun.make_vector_env: the same wrappers, autoreset in the same step) against EnvPool's C++ vector env (`pip install
envpool`, an optional package) of the same task id and version, both stepping `num_envs` copies with uniform random
actions for `seconds` each, EnvPool on one thread. Beside each rate, whether the two are the same task: the random
policy's mean episode return and length over the episodes each finished (alone where EnvPool lacks the task).

    python benchmarks/env_speed.py envs=LunarLanderContinuous-v3,HalfCheetah-v5,ALE/Pong-v5 num_envs=8 seconds=20

ALE/Pong-v5 is set up in EnvPool as make_atari_env does it in gymnasium: 84x84 grey frames, 4 stacked, frame skip 4 (the
max of the last two frames), up to 30 no-op starts, sticky actions 0.25, full games (no life-loss ends), raw scores,
27,000 steps an episode.
"""
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from AgentRun import make_vector_env  # noqa: E402
from extras.pixels import ATARI_MAX_FRAMES  # noqa: E402

ENVPOOL_SETTINGS = {"ALE/Pong-v5": ("Pong-v5", dict(img_height=84, img_width=84, stack_num=4, gray_scale=True,
                                                    frame_skip=4, noop_max=30, repeat_action_probability=0.25,
                                                    episodic_life=False, reward_clip=False, zero_discount_on_life_loss=False,
                                                    max_episode_steps=ATARI_MAX_FRAMES // 4))}


def random_actions(space, num_envs: int, generator: np.random.Generator) -> np.ndarray:
    """num_envs uniform actions of one copy's space (Box, Discrete, or a team's MultiDiscrete), drawn alike for both
    backends."""
    if hasattr(space, "n"):
        return generator.integers(space.n, size=num_envs)
    if hasattr(space, "nvec"):
        return generator.integers(space.nvec, size=(num_envs, *space.shape))
    return generator.uniform(space.low, space.high, (num_envs, *space.shape)).astype(space.dtype)


def run(env, space, num_envs: int, seconds: float, if_envpool: bool) -> dict:
    """Steps env with random actions for `seconds`: transitions per second, and the mean return and length of the
    episodes that ended. EnvPool resets a copy on the step after its episode ends (that step is no transition, its
    action ignored), gymnasium here in the same step; EnvPool takes its seed when made."""
    generator = np.random.default_rng(0)
    env.reset() if if_envpool else env.reset(seed=0)
    returns, lengths = [], []
    episode_return, episode_length = np.zeros(num_envs), np.zeros(num_envs, int)
    was_done = np.zeros(num_envs, bool)
    transitions, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        _, reward, terminated, truncated, _ = env.step(random_actions(space, num_envs, generator))
        real = ~was_done if if_envpool else np.ones(num_envs, bool)
        episode_return += np.where(real, reward, 0.0)
        episode_length += real
        transitions += int(real.sum())
        done = (terminated | truncated) & real
        returns += episode_return[done].tolist()
        lengths += episode_length[done].tolist()
        episode_return[done], episode_length[done] = 0.0, 0
        was_done = done
    elapsed = time.perf_counter() - start
    return {"steps/s": transitions / elapsed, "episodes": len(returns),
            "mean return": statistics.fmean(returns) if returns else float("nan"),
            "mean length": statistics.fmean(lengths) if lengths else float("nan")}


def main(argv: list[str]):
    options = dict(item.split("=", 1) for item in argv)
    num_envs, seconds = int(options.get("num_envs", 8)), float(options.get("seconds", 20))
    try:
        import envpool
    except ImportError:
        raise SystemExit("EnvPool is an optional package: pip install envpool") from None
    print(f"| env | backend | copies | steps/s | episodes | random policy's mean return | mean length |")
    print("|---|---|---|---|---|---|---|")
    for env_id in options.get("envs", "LunarLanderContinuous-v3,HalfCheetah-v5,ALE/Pong-v5").split(","):
        ours = make_vector_env(env_id, num_envs)[0]
        backends = [("gymnasium", ours, ours.single_action_space, False)]
        pool_id, settings = ENVPOOL_SETTINGS.get(env_id, (env_id, {}))
        if pool_id in envpool.list_all_envs():  # (MinAtar's games are not: their rows are the random policy's returns)
            pool = envpool.make_gymnasium(pool_id, num_envs=num_envs, batch_size=num_envs, num_threads=1, seed=0,
                                          **settings)
            backends.append(("envpool", pool, pool.action_space, True))
        for backend, env, space, if_envpool in backends:
            result = run(env, space, num_envs, seconds, if_envpool)
            print(f"| {env_id} | {backend} | {num_envs} | {result['steps/s']:,.0f} | {result['episodes']} | "
                  f"{result['mean return']:.1f} | {result['mean length']:.0f} |", flush=True)
            env.close()


if __name__ == "__main__":
    main(sys.argv[1:])

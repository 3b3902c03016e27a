"""What an agent's exploring and updating cost, each agent on its defaults and its own explored data, one torch thread:
steps explored per second with its policy (its serial loop's Explorer, past the random warm-up), and the time of an
update: on-policy, one round's update_net (its epochs over the rollout); off-policy, a gradient step on one batch
(R2D2's batch is sequences: burn_in + seq_len steps each), timed over `seconds` seconds of wall clock.

`pairs=` (the default: all three) sets a recurrent agent beside its feed-forward twin (issue 43): AgentRecurrentPPO /
AgentPPO on PendulumNoVel-v1, AgentDiscreteRecurrentPPO / AgentDiscretePPO and AgentR2D2 / AgentD3QN on
CartPoleNoVel-v1. `runs=Agent@env,...` measures any others, e.g. on pixels (issue 42); `Agent@env@key=value@...` adds
settings to the run's defaults.

    python benchmarks/update_cost.py                     # all three pairs
    python benchmarks/update_cost.py pairs=R2D2 seconds=20
    python benchmarks/update_cost.py runs=AgentDQN@MinAtar/Breakout-v1,AgentDiscretePPO@MinAtar/Breakout-v1
    python benchmarks/update_cost.py runs=AgentR2D2@CartPoleNoVel-v1@recurrent_cell=gru,AgentR2D2@CartPoleNoVel-v1
"""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from AgentRun import Arguments, Explorer, Learner, parse_overrides, make_env  # noqa: E402

PAIRS = {"PPO": ("PendulumNoVel-v1", "AgentRecurrentPPO", "AgentPPO"),
         "DiscretePPO": ("CartPoleNoVel-v1", "AgentDiscreteRecurrentPPO", "AgentDiscretePPO"),
         "R2D2": ("CartPoleNoVel-v1", "AgentR2D2", "AgentD3QN")}


def update_cost(agent: str, env: str, seconds: float, settings: tuple[str, ...] = ()) -> str:
    with tempfile.TemporaryDirectory() as cwd:
        args = Arguments(agent=agent, env=env, cwd=cwd, if_multiprocess=False, **parse_overrides(list(settings)))
        env_info = make_env(env)[1]
        args.resolve(env_info)
        learner = Learner(args, env_info, if_restore=False)
        explorer = Explorer(args, learner.agent, 0, 0, args.num_envs)
        while True:  # explore past the random warm-up (off-policy) and one round more
            trajectory = explorer.explore(learner.step)
            learner.store(trajectory, args.num_envs)
            if learner.ready():
                break
        explored, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:  # the policy's own steps, stored as the loop stores them
            trajectory = explorer.explore(learner.step)
            learner.store(trajectory, args.num_envs)
            explored += explorer.horizon * args.num_envs
        name = " ".join((agent, *settings))
        explore = f"{name:26s} {env}: {explored / (time.perf_counter() - start):7.0f} steps/s explored; "
        agent_ = learner.agent
        if agent_.if_off_policy:
            batch = args.batch_size * (getattr(args, "burn_in", 0) + getattr(args, "seq_len", 1)
                                       if agent_.if_recurrent else 1)
            steps, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds:
                learner.buffer.add_size = 64  # 64 gradient steps a call (replay_ratio 1)
                agent_.update_net(learner.buffer, args.batch_size, 1.0)
                steps += 64
            elapsed = time.perf_counter() - start
            return explore + (f"{elapsed / steps * 1e3:7.2f} ms per gradient step on a batch of "
                    f"{args.batch_size} ({batch} steps trained), {elapsed / steps / batch * 1e6:6.1f} us per step")
        calls, start = 0, time.perf_counter()
        samples = trajectory[0].shape[0] * trajectory[0].shape[1]
        while time.perf_counter() - start < seconds:
            learner.learn(trajectory)
            calls += 1
        elapsed = time.perf_counter() - start
        return explore + (f"{elapsed / calls * 1e3:7.1f} ms per round's update ({samples} steps, "
                f"epochs {args.epochs}), {elapsed / calls / samples * 1e6:6.1f} us per step")


def main(pairs: str = ",".join(PAIRS), runs: str = "", seconds: str = "30"):
    measured = [run.split("@") for run in runs.split(",")] if runs else \
        [(agent, PAIRS[pair][0]) for pair in pairs.split(",") for agent in PAIRS[pair][1:]]
    for agent, env, *settings in measured:
        print(update_cost(agent, env, float(seconds), tuple(settings)), flush=True)


if __name__ == "__main__":
    main(**dict(arg.split("=", 1) for arg in sys.argv[1:]))

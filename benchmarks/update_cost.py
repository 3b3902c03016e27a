"""What a recurrent agent's update costs against its feed-forward twin's (issue 43), each on its defaults and its own
explored data: AgentRecurrentPPO / AgentPPO on PendulumNoVel-v1, AgentDiscreteRecurrentPPO / AgentDiscretePPO and
AgentR2D2 / AgentD3QN on CartPoleNoVel-v1. An on-policy update is one round's update_net (its epochs over the rollout);
an off-policy one is a gradient step on one batch (R2D2's batch is sequences: burn_in + seq_len steps each). Each agent
explores `rounds` rounds with its serial loop's Explorer and Learner (off-policy: past the random warm-up), then its
updates are timed over `seconds` seconds of wall clock at one torch thread.

    python benchmarks/update_cost.py                     # all three pairs
    python benchmarks/update_cost.py pairs=R2D2 seconds=20
"""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from AgentRun import Arguments, Explorer, Learner, prepare_env  # noqa: E402

PAIRS = {"PPO": ("PendulumNoVel-v1", "AgentRecurrentPPO", "AgentPPO"),
         "DiscretePPO": ("CartPoleNoVel-v1", "AgentDiscreteRecurrentPPO", "AgentDiscretePPO"),
         "R2D2": ("CartPoleNoVel-v1", "AgentR2D2", "AgentD3QN")}


def update_cost(agent: str, env: str, seconds: float) -> str:
    with tempfile.TemporaryDirectory() as cwd:
        args = Arguments(agent=agent, env=env, cwd=cwd, if_multiprocess=False)
        env_info = prepare_env(env)[1]
        args.resolve(env_info)
        learner = Learner(args, env_info, if_restore=False)
        explorer = Explorer(args, learner.agent, 0, 0, args.num_envs)
        while True:  # explore past the random warm-up (off-policy) and one round more
            trajectory = explorer.explore(learner.step)
            learner.store(trajectory, args.num_envs)
            if learner.ready():
                break
        agent_ = learner.agent
        if agent_.if_off_policy:
            batch = args.batch_size * (getattr(args, "burn_in", 0) + getattr(args, "seq_len", 1)
                                       if agent_.if_recurrent else 1)
            steps, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds:
                learner.buffer.add_size = 64  # 64 gradient steps a call (repeat_times 1)
                agent_.update_net(learner.buffer, args.batch_size, 1.0)
                steps += 64
            elapsed = time.perf_counter() - start
            return (f"{agent:26s} {env}: {elapsed / steps * 1e3:7.2f} ms per gradient step on a batch of "
                    f"{args.batch_size} ({batch} steps trained), {elapsed / steps / batch * 1e6:6.1f} us per step")
        calls, start = 0, time.perf_counter()
        samples = trajectory[0].shape[0] * trajectory[0].shape[1]
        while time.perf_counter() - start < seconds:
            learner.learn(trajectory)
            calls += 1
        elapsed = time.perf_counter() - start
        return (f"{agent:26s} {env}: {elapsed / calls * 1e3:7.1f} ms per round's update ({samples} steps, "
                f"repeat_times {args.repeat_times}), {elapsed / calls / samples * 1e6:6.1f} us per step")


def main(pairs: str = ",".join(PAIRS), seconds: str = "30"):
    for pair in pairs.split(","):
        env, recurrent, twin = PAIRS[pair]
        for agent in (recurrent, twin):
            print(update_cost(agent, env, float(seconds)), flush=True)


if __name__ == "__main__":
    main(**dict(arg.split("=", 1) for arg in sys.argv[1:]))

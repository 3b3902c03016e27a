"""Whether a change of the library's code leaves its runs as they were: serial runs of agents of every family (and the
optional env families: pixels, goal envs, teams, masks, velocity-masked tasks, EnvPool) at one seed, evaluated after
every round (eval_gap=0), whose recorder.csv are compared column by column, all but seconds (issue 62: a refactor
reproduces today's records exactly).

    python benchmarks/same_records.py out=/tmp/before        # at the commit before the change
    python benchmarks/same_records.py out=/tmp/after         # after it
    python benchmarks/same_records.py compare=/tmp/before,/tmp/after

`only=AgentSAC,AgentPPO` runs a part of the list.
"""
import csv
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RUNS = [  # agent, env, break_step, extra settings: every family, short enough to run the list in a few minutes
    ("AgentDQN", "CartPole-v1", 3000, ()), ("AgentDoubleDQN", "CartPole-v1", 3000, ()),
    ("AgentD3QN", "CartPole-v1", 3000, ()), ("AgentC51", "CartPole-v1", 3000, ()),
    ("AgentRainbow", "CartPole-v1", 3000, ()), ("AgentDiscreteSAC", "CartPole-v1", 3000, ()),
    ("AgentDDPG", "Pendulum-v1", 1500, ("random_steps=1000",)), ("AgentTD3", "Pendulum-v1", 1500, ("random_steps=1000",)),
    ("AgentSAC", "Pendulum-v1", 1500, ("random_steps=1000",)), ("AgentModSAC", "Pendulum-v1", 1500, ("random_steps=1000",)),
    ("AgentTQC", "Pendulum-v1", 1500, ("random_steps=1000",)),
    ("AgentInterSAC", "Pendulum-v1", 1500, ("random_steps=1000",)),
    ("AgentInterAC", "Pendulum-v1", 1500, ("random_steps=1000",)),
    ("AgentPPO", "Pendulum-v1", 8192, ()), ("AgentDiscretePPO", "CartPole-v1", 8192, ()),
    ("AgentA2C", "Pendulum-v1", 4096, ()), ("AgentDiscreteA2C", "CartPole-v1", 4096, ()),
    ("AgentVPG", "Pendulum-v1", 4096, ()), ("AgentTRPO", "Pendulum-v1", 4096, ()),
    ("AgentDiscreteTRPO", "CartPole-v1", 4096, ()), ("AgentACKTR", "Pendulum-v1", 4096, ()),
    ("AgentACER", "CartPole-v1", 4096, ()),
    ("AgentRecurrentPPO", "PendulumNoVel-v1", 4096, ()), ("AgentR2D2", "CartPoleNoVel-v1", 2048, ()),
    ("AgentApeX", "CartPole-v1", 3000, ("if_multiprocess=False",)),
    ("AgentQMIX", "simple_spread_v3", 2000, ()), ("AgentDiscreteMAPPO", "simple_spread_v3", 4096, ()),
    ("AgentDiscreteMADDPG", "simple_spread_v3", 2000, ("random_steps=1000",)), ("AgentCOMA", "simple_spread_v3", 2000, ()),
    ("AgentDQN", "MinAtar/Breakout-v1", 1500, ()), ("AgentDiscretePPO", "Taxi-v4", 4096, ("if_action_mask=True",)),
    ("AgentTD3", "FetchReach-v4", 1000, ("random_steps=500",)),
    ("AgentDiscretePPO", "CartPole-v1", 4096, ("env_backend=envpool",)),
]


def run_all(out: str, only: str | None = None):
    for agent, env, steps, extra in RUNS:
        if only and agent not in only.split(","):
            continue
        cwd = os.path.join(out, f"{agent}_{env.replace('/', '-')}_{'_'.join(extra).replace('=', '-')}".rstrip("_"))
        command = [sys.executable, os.path.join(ROOT, "AgentRun.py"), f"agent={agent}", f"env={env}", "seed=0",
                   f"break_step={steps}", "eval_gap=0", "eval_times=2", "target_return=1e9", f"cwd={cwd}",
                   "if_remove=True", *(item for item in extra if not item.startswith("if_multiprocess"))]
        command.append("if_multiprocess=False")
        result = subprocess.run(command, capture_output=True, text=True)
        print(f"{os.path.basename(cwd):60s} {'ok' if result.returncode == 0 else result.stderr.strip()[-300:]}",
              flush=True)


def read(path: str) -> list[dict]:
    with open(path) as f:
        return [{key: value for key, value in row.items() if key != "seconds"} for row in csv.DictReader(f)]


def compare(before: str, after: str) -> int:
    differ = 0
    for name in sorted(os.listdir(before)):
        a, b = (os.path.join(root, name, "recorder.csv") for root in (before, after))
        if not os.path.isfile(b):
            print(f"{name:60s} missing in {after}")
            differ += 1
        elif read(a) != read(b):
            print(f"{name:60s} differs")
            differ += 1
        else:
            print(f"{name:60s} same ({len(read(a))} rows)")
    return differ


if __name__ == "__main__":
    options = dict(arg.split("=", 1) for arg in sys.argv[1:])
    if "compare" in options:
        sys.exit(1 if compare(*options["compare"].split(",")) else 0)
    run_all(options["out"], options.get("only"))

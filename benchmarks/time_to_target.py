"""Time to target (shared/BENCH.md): wall-clock seconds from the start of training until the deterministic
policy's mean return over 8 evaluation episodes first reaches the task's target, evaluation included.

    python benchmarks/time_to_target.py                                   # the whole suite, with the SB3 peer
    python benchmarks/time_to_target.py tasks=CartPole-v1,Pendulum-v1 seeds=0,1,2 max_time=600
    python benchmarks/time_to_target.py agent=AgentPPO env=LunarLanderContinuous-v3 loops=serial,mp
    python benchmarks/time_to_target.py agent=AgentSAC env=LunarLanderContinuous-v3 loops=mp,mp2  # default explorers (1; Ape-X 2), 2
    python benchmarks/time_to_target.py agent=AgentPPO env=LunarLanderContinuous-v3 loops=ddp1,ddp2  # torchrun ranks
    python benchmarks/time_to_target.py agent=AgentD3QN env=MinAtar/Breakout-v1 break_step=100000 seeds=0,1,2,3,4
    python benchmarks/time_to_target.py agent=AgentR2D2 env=CartPoleNoVel-v1 settings="recurrent_cell=gru" peer=False
    python benchmarks/time_to_target.py tasks=HalfCheetah-v5 peers=SAC fixed_time=True max_time=900 seeds=0,1,2,3,4
    python benchmarks/time_to_target.py table=8cb90c0 tasks=CartPole-v1,Pendulum-v1  # a table of BENCHMARKS.md
    python benchmarks/time_to_target.py table=7e4dc4a tasks=LunarLander-v3 agents=AgentD3QN,AgentRainbow
    python benchmarks/time_to_target.py table=cb55f33 tasks=MinAtar/Breakout-v1 budget=True  # a fixed budget's table
    python benchmarks/time_to_target.py headline=8cb90c0                  # README's speed table

The suite runs each of our agents on each task of its action type, and the Stable-Baselines3 algorithm of
each agent's family with the rl-baselines3-zoo hyperparameters (benchmarks/peer_sb3.py), seed by seed, in
one invocation, so that the machine's load hits both alike. Each run is a fresh process with defaults; its
row (date, commit, agent, env, seed, steps, seconds, solved, loop, best_return and last_return: the run's best and
last evaluation mean) is
appended to History/benchmarks.csv, and a markdown table of medians, spreads, failures and ratios of medians is
printed for BENCHMARKS.md;
`table=<commit>` prints the same table from the rows of History/benchmarks.csv measured at that commit, and
`headline=<commit>` from the same rows README.md's table: per task, our fastest agent and SB3's fastest
(headline_rank), each one's solved seeds, median and slowest seconds, and the ratio of the medians. `tasks=` and
`agents=` narrow both; a comma list of commits takes the rows of each (a peer added later beside rows of ours, where
the library's files are those ours ran).
`break_step=N` stops our runs after N env steps: a fixed budget of steps, for a task without a target such as
MinAtar's, where the row's last_return is the result, and the table printed is the budget's (`table=<commit>
budget=True` prints it again): steps, seconds, best and last returns. The peer has no such stop, so it needs
`peer=False`.
`keep=<dir>` keeps our runs' directories under dir (benchmarks/reward_terms.py reads their actors).
`fixed_time=True` runs ours and the peer for max_time each whatever the return (a target of +inf), as the MuJoCo
tasks are measured, and prints the budget's table. `peers=SAC,PPO` names the SB3 algorithms that run beside (by
default each agent's family's; either only where the zoo has hyperparameters for the task); with `agents=none` the
peers run alone (a seed of theirs that an invocation left out).
`settings="key=value;..."` adds settings to our runs' defaults, and its rows name the agent with them
(`AgentR2D2[recurrent_cell=gru]`), so that a variant's rows stay apart from the default's.
A run that stops without reaching the target counts as a failure (an infinite time in the median); so does one that
crashes (its row's loop is "crashed"), and the invocation goes on with the next run.
"""
import contextlib
import csv
import datetime
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from peer_sb3 import ZOO  # the (family, task) pairs that have zoo hyperparameters

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HISTORY = os.path.join(ROOT, "History", "benchmarks.csv")
STOP_LINE = re.compile(r"Stop: (?P<reason>.*) at step (?P<steps>\d+) after (?P<seconds>[\d.]+) s; "
                       r"best evaluation mean (?P<best>-?(?:inf|[\d.]+))(?:; last (?P<last>-?(?:inf|[\d.]+)))?")


def git_commit() -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!History"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    return commit + ("-dirty" if dirty else "")


SUITE = {  # the benchmark tasks (shared/BENCH.md, and Acrobot-v1) and our agents of each one's action type
    "CartPole-v1": ["AgentDQN", "AgentDoubleDQN", "AgentD3QN", "AgentC51", "AgentRainbow", "AgentApeX", "AgentDiscreteSAC",
                    "AgentDiscretePPO", "AgentDiscreteA2C", "AgentDiscreteA3C", "AgentDiscreteVPG", "AgentDiscreteTRPO",
                    "AgentDiscreteACKTR", "AgentACER"],
    "Acrobot-v1": ["AgentD3QN", "AgentRainbow", "AgentDiscreteSAC", "AgentACER"],
    "Pendulum-v1": ["AgentDDPG", "AgentTD3", "AgentSAC", "AgentModSAC", "AgentTQC", "AgentInterSAC", "AgentInterAC", "AgentPPO",
                    "AgentVPG", "AgentTRPO", "AgentACKTR"],
    "LunarLander-v3": ["AgentD3QN", "AgentRainbow", "AgentApeX", "AgentDiscreteSAC", "AgentDiscretePPO"],
    "LunarLanderContinuous-v3": ["AgentTD3", "AgentSAC", "AgentModSAC", "AgentTQC", "AgentInterSAC", "AgentInterAC", "AgentPPO",
                                 "AgentTRPO"],
    "FetchReach-v4": ["AgentDDPG", "AgentTD3", "AgentSAC"],  # goal env: hindsight replay (needs gymnasium-robotics)
    # its reward needs exploration that keeps a direction: the pink random warm-up (random_beta) of the off-policy agents
    "MountainCarContinuous-v0": ["AgentDDPG", "AgentTD3", "AgentSAC", "AgentModSAC", "AgentTQC", "AgentInterSAC", "AgentInterAC"],
    "BipedalWalker-v3": ["AgentDDPG", "AgentTD3", "AgentSAC", "AgentModSAC", "AgentTQC", "AgentInterSAC", "AgentPPO", "AgentA2C", "AgentVPG",
                         "AgentTRPO", "AgentACKTR", "AgentA3C"],
}
# Taxi's mask of legal actions (info["action_mask"]; issue 44), for our agents and sb3-contrib's MaskablePPO alike
SUITE["Taxi-v4"] = ["AgentDiscreteSAC", "AgentDQN", "AgentDiscretePPO"]
# MuJoCo (issue 45; gymnasium[mujoco], mujoco<3.4): a fixed wall-clock budget each (fixed_time=True); our best
# off-policy agent (ModSAC: the only off-policy walker of BipedalWalker-v3) and best on-policy one (TRPO: 5/5 there)
SUITE |= {env_id: ["AgentModSAC", "AgentTRPO"] for env_id in ("HalfCheetah-v5", "Walker2d-v5", "Ant-v5")}
# the velocity-masked tasks (issue 43): the recurrent agents, and a feed-forward agent of each family that fails them
SUITE |= {"CartPoleNoVel-v1": ["AgentDiscreteRecurrentPPO", "AgentR2D2", "AgentDiscretePPO", "AgentD3QN"],
          "PendulumNoVel-v1": ["AgentRecurrentPPO", "AgentPPO", "AgentSAC"],
          "LunarLanderNoVel-v3": ["AgentDiscreteRecurrentPPO", "AgentR2D2", "AgentDiscretePPO", "AgentD3QN"],
          "LunarLanderContinuousNoVel-v3": ["AgentRecurrentPPO", "AgentPPO", "AgentSAC"]}
# pixels (issue 42): CarRacing-v3's return at a fixed wall-clock budget (fixed_time=True), the continuous agent that
# takes its frames beside the zoo's PPO entry
SUITE["CarRacing-v3"] = ["AgentPPO"]
TASK_SETTINGS = {"Taxi-v4": ["if_action_mask=True"]}  # the settings our runs of a task add to their defaults
MASKED_PEERS = {"PPO": "MaskablePPO"}  # a family's peer on a task with masks
FAMILY = {"AgentDQN": "DQN", "AgentDoubleDQN": "DQN", "AgentD3QN": "DQN", "AgentDiscretePPO": "PPO", "AgentPPO": "PPO",
          "AgentDiscreteA2C": "A2C", "AgentA2C": "A2C", "AgentDDPG": "DDPG", "AgentTD3": "TD3", "AgentSAC": "SAC",
          "AgentModSAC": "SAC", "AgentInterSAC": "SAC", "AgentInterAC": "DDPG",
          "AgentDiscreteA3C": "A2C",  # SB3 has no A3C: A2C is its synchronous version
          "AgentC51": "QRDQN", "AgentRainbow": "QRDQN",  # distributional: sb3-contrib's QR-DQN
          "AgentDiscreteSAC": "DQN",  # SB3's SAC has no discrete actions
          "AgentApeX": "DQN",  # SB3 has no Ape-X: DQN is the learner it distributes
          "AgentVPG": "A2C", "AgentDiscreteVPG": "A2C",  # SB3 has no VPG; A2C is its plain policy gradient
          "AgentTRPO": "TRPO", "AgentDiscreteTRPO": "TRPO",  # sb3-contrib's
          "AgentACKTR": "A2C", "AgentDiscreteACKTR": "A2C",  # no ACKTR in SB3 or sb3-contrib: the loop it preconditions
          "AgentACER": "A2C",  # nor ACER: the actor-critic it adds replay to
          "AgentRecurrentPPO": "RecurrentPPO", "AgentDiscreteRecurrentPPO": "RecurrentPPO",  # sb3-contrib's
          "AgentR2D2": "RecurrentPPO"}  # no R2D2 in SB3 or sb3-contrib: their recurrent agent
PEER_PREFIX = "SB3-"


def peer_family(agent: str, env: str) -> str:
    """The SB3 algorithm that runs beside our agent on env: its family's, the masked one on a task with masks."""
    family = FAMILY.get(agent, "")
    return MASKED_PEERS.get(family, family) if env in TASK_SETTINGS else family


def run_once(name: str, env: str, seed: int, loop: str, max_time: float, settings: tuple = (),
             if_fixed_time: bool = False, keep: str | None = None) -> dict:
    """One run as a fresh process: our agent `name` in the serial or mp loop, the mp loop with N explorers ("mpN",
    num_workers=N), N data-parallel learners under torchrun ("ddpN") or its default loop ("default"), or the peer
    SB3-<algo> ("sb3"); our runs add `settings` ("key=value") to their defaults. With if_fixed_time every run goes on
    for max_time whatever its return (a target of +inf). Returns steps, seconds, solved, the loop that ran, and the
    best and last evaluation means. keep: a folder where our run's directory stays (<keep>/<agent>_<env>_<seed>/run),
    for a look at its actors afterwards (benchmarks/reward_terms.py); else a temporary one."""
    kept = None if keep is None else os.path.join(keep, f"{name}_{env.replace('/', '-')}_{seed}")
    with tempfile.TemporaryDirectory() if kept is None else contextlib.nullcontext(kept) as cwd:
        if loop == "sb3":
            command = [sys.executable, "benchmarks/peer_sb3.py", f"algo={name.removeprefix(PEER_PREFIX)}", f"env={env}",
                       f"seed={seed}", f"max_time={max_time}"] + (["target=inf"] if if_fixed_time else [])
        elif loop.startswith("ddp"):
            command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={loop[3:]}",
                       "AgentRun.py", f"agent={name}", f"env={env}", f"seed={seed}", f"cwd={cwd}/run", f"max_time={max_time}"]
        else:
            command = [sys.executable, "AgentRun.py", f"agent={name}", f"env={env}", f"seed={seed}", f"cwd={cwd}/run",
                       f"max_time={max_time}"] + ([] if loop == "default" else [f"if_multiprocess={loop != 'serial'}"])
            command += [f"num_workers={int(loop[2:])}"] if loop[2:].isdigit() else []
            command += TASK_SETTINGS.get(env, []) + list(settings) + (["target_return=inf"] if if_fixed_time else [])
        out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=max_time + 300)
        match = STOP_LINE.search(out.stdout)
        if out.returncode != 0 or match is None:
            raise RuntimeError(f"{' '.join(command)} failed (exit {out.returncode}):\n{out.stderr[-2000:]}")
        steps, seconds, solved = int(match["steps"]), float(match["seconds"]), match["reason"].startswith("reached target_return")
        last_return = None if match["last"] is None else float(match["last"])  # the peer's stop line says it
        if loop != "sb3":
            with open(os.path.join(cwd, "run", "recorder.csv")) as f:
                rows = list(csv.DictReader(f))
            last_return = float(rows[-1]["avg_return"]) if rows else None
        if solved and loop != "sb3":  # the row of the evaluation that reached the target, not the stop after it
            with open(os.path.join(cwd, "run", "config.json")) as f:  # (the last plot and checkpoint); the peer
                target = json.load(f)["target_return"]  # stops at once
            row = next(row for row in rows if float(row["avg_return"]) >= target)
            steps, seconds = int(row["step"]), round(float(row["seconds"]), 1)
    best_return = float(match["best"])
    ran = (loop if loop == "sb3" or loop[2:].isdigit() or loop.startswith("ddp") else "mp" if "| multiprocess:" in out.stdout
           else "async" if "| asynchronous:" in out.stdout else "serial")
    return {"steps": steps, "seconds": seconds, "solved": solved, "loop": ran, "best_return": best_return,
            "last_return": last_return}


def plan_runs(options: dict) -> list[tuple[str, str, str]]:
    """(env, name, loop) of every run of one seed."""
    if "agent" in options:
        loops = options.get("loops", "default").split(",")
        unknown = [loop for loop in loops if loop not in ("default", "serial", "mp") and not re.fullmatch(r"(mp|ddp)[1-9]\d*", loop)]
        if unknown:
            raise SystemExit(f"loops={','.join(unknown)} is not accepted: default, serial, mp, mpN (N explorers) or ddpN "
                             f"(N ranks under torchrun)")
        return [(options["env"], options["agent"], loop) for loop in loops]
    plan = []
    for env in options.get("tasks", ",".join(SUITE)).split(","):
        agents = [agent for agent in SUITE[env] if "agents" not in options or agent in options["agents"].split(",")]
        plan += [(env, agent, "default") for agent in agents]
        if options.get("peer", "True") == "True":
            # a family without zoo hyperparameters for the task (A2C on Pendulum-v1) has no peer there
            families = options["peers"].split(",") if "peers" in options else {peer_family(agent, env) for agent in agents}
            plan += [(env, PEER_PREFIX + family, "sb3") for family in sorted(families) if (family, env) in ZOO]
    return plan


def median_seconds(rows: list[dict]) -> float:
    return statistics.median(row["seconds"] if row["solved"] else math.inf for row in rows)


def seconds_cell(rows: list[dict]) -> str:
    """Median seconds to target and, in brackets, the slowest seed's, or how many seeds missed the target within
    the time budget (a failure is an infinite time in the median)."""
    solved = [row["seconds"] for row in rows if row["solved"]]
    median, failed = median_seconds(rows), len(rows) - len(solved)
    slowest = f"{max(solved):.0f}" if not failed else f"{failed} failed within {max(r['seconds'] for r in rows):.0f} s"
    return f"{median:.1f} ({slowest})" if math.isfinite(median) else f"failed ({slowest})"


def return_cell(rows: list[dict], key: str = "best_return") -> str:
    """The median over seeds of each run's best (or last) evaluation mean and, in brackets, the worst seed's ("-" for
    rows recorded before the column was)."""
    values = [row[key] for row in rows if row.get(key) is not None]
    return f"{statistics.median(values):.1f} ({min(values):.1f})" if len(values) == len(rows) else "-"


def ratio_cell(rows: list[dict], peer_rows: list[dict] | None) -> str:
    """The ratio of the peer's median seconds to ours (above 1: we are faster; "> N" where the peer failed in most
    seeds: its runs stopped at the time budget, N times our median; "-" without a peer or where ours failed)."""
    median = median_seconds(rows)
    if peer_rows is None or not math.isfinite(median):
        return "-"
    peer_median = median_seconds(peer_rows)
    if math.isfinite(peer_median):
        return f"{peer_median / median:.1f}x"
    return f"> {min(row['seconds'] for row in peer_rows if not row['solved']) / median:.1f}x"


def print_table(results: dict):
    """A markdown table, one row per agent of ours: solved seeds, median and slowest seconds to target, median steps,
    the best and the last evaluation mean (median and worst seed), and the peer of its family beside it with
    ratio_cell."""
    print("| task | agent | loop | solved | median s (slowest) | median steps | best return (worst) | last return (worst) | "
          "SB3 peer | peer median s (slowest) | peer / ours |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (env, name, loop), rows in results.items():
        if loop == "sb3":
            continue
        solved = [row for row in rows if row["solved"]]
        steps = f"{statistics.median(r['steps'] for r in solved):.0f}" if solved else "-"
        peer = PEER_PREFIX + peer_family(name, env)
        peer_rows = results.get((env, peer, "sb3"))
        peer_cells = (peer, seconds_cell(peer_rows)) if peer_rows is not None else ("-", "-")
        print(f"| {env} | {name} | {rows[0]['loop']} | {len(solved)}/{len(rows)} | {seconds_cell(rows)} | {steps} | "
              f"{return_cell(rows)} | {return_cell(rows, 'last_return')} | {peer_cells[0]} | {peer_cells[1]} | "
              f"{ratio_cell(rows, peer_rows)} |")


def print_budget_table(results: dict):
    """For runs on a fixed budget (break_step=, or a task without a target): per agent, the median steps and seconds
    (the slowest seed's) the runs took, and their best and last evaluation means (median and worst seed)."""
    print("| task | agent | loop | seeds | median steps | median s (slowest) | best return (worst) | last return (worst) |")
    print("|---|---|---|---|---|---|---|---|")
    for (env, name, loop), rows in results.items():
        seconds = [row["seconds"] for row in rows]
        print(f"| {env} | {name} | {rows[0]['loop']} | {len(rows)} | {statistics.median(r['steps'] for r in rows):.0f} | "
              f"{statistics.median(seconds):.1f} ({max(seconds):.0f}) | {return_cell(rows)} | "
              f"{return_cell(rows, 'last_return')} |")


def headline_rank(runner: tuple[str, list[dict]]) -> tuple[float, float, float]:
    """The fastest runner is the one that failed the smallest share of its seeds (a user does not pick a seed), then
    the least median seconds to target (a failed seed infinitely slow), then the highest median best return, which
    decides where all fail: the one that came nearest the target."""
    rows = runner[1]
    best = [row["best_return"] for row in rows if row["best_return"] is not None]
    return (sum(not row["solved"] for row in rows) / len(rows), median_seconds(rows),
            -statistics.median(best) if best else math.inf)


def print_headline(results: dict):
    """A markdown table, one row per task: our fastest agent and the peer's fastest (headline_rank), each with its
    solved seeds and seconds_cell, and ratio_cell of the two."""
    print("| task | our fastest | solved | median s (slowest) | SB3 fastest | solved | median s (slowest) | SB3 / ours |")
    print("|---|---|---|---|---|---|---|---|")
    for env in dict.fromkeys(env for env, _, _ in results):
        cells, fastest = [], []
        for if_peer in (False, True):
            runners = [(name, rows) for (task, name, loop), rows in results.items() if task == env and (loop == "sb3") == if_peer]
            name, rows = min(runners, key=headline_rank, default=("-", None))
            cells.append(f"{name} | {sum(row['solved'] for row in rows)}/{len(rows)} | {seconds_cell(rows)}" if rows
                         else "- | - | -")
            fastest.append(rows)
        print(f"| {env} | {cells[0]} | {cells[1]} | {ratio_cell(*fastest) if fastest[0] else '-'} |")


def history_results(commit: str, tasks: list[str], agents: list[str] | None = None) -> dict:
    """The rows of History/benchmarks.csv measured at commit (or any of a comma list) on tasks (of our `agents` and
    every peer, where given), grouped as main() groups a run's, in the order of tasks and of SUITE's agents."""
    results, commits = {}, commit.split(",")
    with open(HISTORY, newline="") as f:
        for row in csv.DictReader(f):
            if row["commit"] in commits and row["env"] in tasks and (
                    agents is None or row["agent"] in agents or row["agent"].startswith(PEER_PREFIX)):
                # several explorers are a loop apart; any other run of ours ran in its default loop or the one named
                loop = ("sb3" if row["agent"].startswith(PEER_PREFIX) else row["loop"]
                        if row["loop"][2:].isdigit() or row["loop"].startswith("ddp") else "default")
                results.setdefault((row["env"], row["agent"], loop), []).append(
                    {"steps": int(row["steps"]), "seconds": float(row["seconds"]), "solved": row["solved"] == "True",
                     "loop": row["loop"], **{key: float(row[key]) if row.get(key) else None
                                             for key in ("best_return", "last_return")}})
    if not results:
        raise SystemExit(f"no rows of commit {commit!r} in {HISTORY}")
    order = {(env, name): i for i, (env, name) in enumerate((env, name) for env in SUITE for name in SUITE[env])}
    return dict(sorted(results.items(), key=lambda item: (tasks.index(item[0][0]), item[0][2] == "sb3",
                                                          order.get(item[0][:2], 0), item[0][1])))


def main(argv: list[str]):
    options = dict(item.split("=", 1) for item in argv)
    if "table" in options or "headline" in options:
        commit = options.get("table", options.get("headline"))
        results = history_results(commit, options.get("tasks", ",".join(SUITE)).split(","),
                                  options["agents"].split(",") if "agents" in options else None)
        seeds = sorted({len(rows) for rows in results.values()})
        print(f"Time to target at commit {commit}, {' or '.join(map(str, seeds))} seeds per row\n")
        if "table" not in options:
            return print_headline(results)
        return print_budget_table(results) if options.get("budget") == "True" else print_table(results)
    seeds = [int(s) for s in options.get("seeds", "0,1,2").split(",")]
    max_time = float(options.get("max_time", 1800))
    commit, date = git_commit(), datetime.date.today().isoformat()
    plan = plan_runs(options)
    variant = tuple(options["settings"].split(";")) if options.get("settings") else ()
    settings = variant + ((f"break_step={int(options['break_step'])}",) if "break_step" in options else ())
    if settings and any(loop == "sb3" for _, _, loop in plan):
        raise SystemExit("break_step= and settings= change our agents only (the peer runs its zoo entry to the target, "
                         "max_time or its zoo steps): pass peer=False with them")
    if_fixed_time = options.get("fixed_time") == "True"
    label = lambda name: name + (f"[{';'.join(variant)}]" if variant else "")  # a variant's rows: agent and settings
    results = {(env, label(name), loop): [] for env, name, loop in plan}
    for seed in seeds:  # seed by seed through every runner, so that a change in the machine's load hits all alike
        for env, name, loop in plan:
            start = time.perf_counter()
            try:
                result = run_once(name, env, seed, loop, max_time, settings, if_fixed_time, options.get("keep"))
            except (RuntimeError, subprocess.TimeoutExpired) as error:  # that seed's failure; the others still run
                print(f"{label(name)} {env} seed {seed} crashed: {error}", file=sys.stderr, flush=True)
                result = {"steps": 0, "seconds": round(time.perf_counter() - start, 1), "solved": False, "loop": "crashed",
                          "best_return": None, "last_return": None}
            results[env, label(name), loop].append(result)
            with open(HISTORY, "a", newline="") as f:
                csv.writer(f).writerow([date, commit, label(name), env, seed, result["steps"], f"{result['seconds']:.1f}",
                                        result["solved"], result["loop"],
                                        *("" if result[key] is None else result[key]
                                          for key in ("best_return", "last_return"))])
            print(f"{label(name)} {env} seed {seed} {loop}: {result}", flush=True)
    print(f"\nTime to target, seeds {','.join(map(str, seeds))}, commit {commit}, {date}\n")
    print_budget_table(results) if "break_step" in options or if_fixed_time else print_table(results)


if __name__ == "__main__":
    main(sys.argv[1:])

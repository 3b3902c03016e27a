"""Multi-agent agents on mpe2's simple_spread_v3 (3 agents, 25-step episodes; a random team returns -80): each agent
trains for a fixed step budget, seed by seed, each run a fresh process with the defaults. Appends one row per run to
History/benchmarks.csv: the seconds and steps until the evaluation mean (8 episodes, the team's summed reward) first
reached `target` (solved: whether it did within the budget; else the run's last ones), and the best and the last
evaluation mean (best_return, last_return). Then prints, per agent, the median and the worst seed of each.

    python benchmarks/multi_agent.py agents=AgentVDN,AgentQMIX seeds=0,1,2,3,4 break_step=100000 target=-50
    python benchmarks/multi_agent.py agents=AgentMADDPG,AgentMAPPO continuous=True    # continuous_actions=True
    python benchmarks/multi_agent.py table=<commit> target=-50    # the same table from the rows of that commit

No Stable-Baselines3 peer exists for these; BENCHMARKS.md compares with published numbers instead (with their caveats).
"""
import csv
import datetime
import os
import statistics
import subprocess
import sys
import tempfile

from time_to_target import HISTORY, ROOT, git_commit


def run_once(agent: str, env: str, seed: int, break_step: int, target: float, if_continuous: bool) -> dict:
    with tempfile.TemporaryDirectory() as cwd:
        command = [sys.executable, "AgentRun.py", f"agent={agent}", f"env={env}", f"seed={seed}", f"cwd={cwd}/run",
                   f"break_step={break_step}"]
        if if_continuous:  # an env made with keywords: through the Python API, as BENCHMARKS.md says
            command = [sys.executable, "-c", f"import AgentRun, extras.teams; AgentRun.train_and_evaluate("
                       f"AgentRun.Arguments(agent={agent!r}, env=extras.teams.make({env!r}, continuous_actions=True), "
                       f"seed={seed}, "
                       f"cwd={cwd + '/run'!r}, break_step={break_step}))"]
        out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed (exit {out.returncode}):\n{out.stderr[-2000:]}")
        with open(os.path.join(cwd, "run", "recorder.csv")) as f:
            rows = list(csv.DictReader(f))
    returns = [float(row["avg_return"]) for row in rows]
    reached = next((row for row in rows if float(row["avg_return"]) >= target), None)
    return {"best_return": round(max(returns), 1), "last_return": round(returns[-1], 1), "solved": reached is not None,
            "steps": int((reached or rows[-1])["step"]), "seconds": round(float((reached or rows[-1])["seconds"]), 1)}


def print_table(label: str, results: dict[str, list[dict]], target: str):
    print(f"\n{label}: median (worst seed) over {len(next(iter(results.values())))} seeds\n"
          f"| agent | best evaluation return | last evaluation return | seconds to {target} |\n|---|---|---|---|")
    for agent, rows in results.items():
        cell = lambda key: (f"{statistics.median(float(row[key]) for row in rows):.1f} "
                            f"({min(float(row[key]) for row in rows):.1f})")
        solved = sorted(float(row["seconds"]) for row in rows if str(row["solved"]) == "True")
        if 2 * len(solved) > len(rows):  # a median among the solved; the slowest, or that some failed
            median = statistics.median(solved + [float("inf")] * (len(rows) - len(solved)))
            seconds = f"{median:.1f} ({'failed' if len(solved) < len(rows) else solved[-1]}), {len(solved)}/{len(rows)}"
        else:
            seconds = f"{len(solved)}/{len(rows)}" + (f" ({', '.join(map(str, solved))} s)" if solved else "")
        print(f"| `{agent}` | {cell('best_return')} | {cell('last_return')} | {seconds} |")


def table(commit: str, target: str):
    """The tables of every multi-agent env measured at commit, from History/benchmarks.csv (the rows keep whether
    their run reached its target, not the target: `target` only names it)."""
    with open(HISTORY, newline="") as f:
        rows = [row for row in csv.DictReader(f) if row["commit"] == commit and row["best_return"]]
    if not rows:
        raise SystemExit(f"no multi-agent rows of commit {commit!r} in {HISTORY}")
    for label in dict.fromkeys(row["env"] for row in rows):
        results = {}
        for row in rows:
            if row["env"] == label:
                results.setdefault(row["agent"], []).append(row)
        print_table(label, results, target)


def main(argv: list[str]):
    options = dict(item.split("=", 1) for item in argv)
    if "table" in options:
        return table(options["table"], options.get("target", "target"))
    target = float(options.get("target", -50))
    env, if_continuous = options.get("env", "simple_spread_v3"), options.get("continuous", "False") == "True"
    label = f"{env}(continuous_actions=True)" if if_continuous else env  # its name in History/benchmarks.csv
    break_step = int(options.get("break_step", 100_000))
    seeds = [int(seed) for seed in options.get("seeds", "0,1,2,3,4").split(",")]
    commit, results = git_commit(), {}
    for agent in options.get("agents", "AgentVDN,AgentQMIX").split(","):
        for seed in seeds:
            row = run_once(agent, env, seed, break_step, target, if_continuous)
            results.setdefault(agent, []).append(row)
            print(f"{agent} seed {seed}: best {row['best_return']}, last {row['last_return']}, target {target} "
                  f"{'at ' + str(row['seconds']) + ' s' if row['solved'] else 'not reached'}", flush=True)
            with open(HISTORY, "a", newline="") as f:
                csv.writer(f).writerow([datetime.date.today().isoformat(), commit, agent, label, seed, row["steps"],
                                        row["seconds"], row["solved"], "serial", row["best_return"], row["last_return"]])
    print_table(f"{label}, {break_step} steps", results, f"{target:g}")


if __name__ == "__main__":
    main(sys.argv[1:])

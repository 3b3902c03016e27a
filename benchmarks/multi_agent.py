"""Multi-agent agents on mpe2's simple_spread_v3 (3 agents, 25-step episodes; a random team returns -80): each agent
trains for a fixed step budget, seed by seed, each run a fresh process with the defaults. Prints, per agent, the
median and the worst seed of the best and the last evaluation mean (8 episodes, the team's summed reward), and the
seconds until the evaluation mean first reached `target`; appends one row per run to History/benchmarks.csv with
those seconds (solved: whether the target was reached within the budget).

    python benchmarks/multi_agent.py agents=AgentVDN,AgentQMIX seeds=0,1,2,3,4 break_step=100000 target=-50

No Stable-Baselines3 peer exists for these; README compares with published numbers instead (with their caveats).
"""
import csv
import datetime
import os
import statistics
import subprocess
import sys
import tempfile

from time_to_target import HISTORY, ROOT, git_commit


def run_once(agent: str, env: str, seed: int, break_step: int, target: float) -> dict:
    with tempfile.TemporaryDirectory() as cwd:
        command = [sys.executable, "AgentRun.py", f"agent={agent}", f"env={env}", f"seed={seed}", f"cwd={cwd}/run",
                   f"break_step={break_step}"]
        out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed (exit {out.returncode}):\n{out.stderr[-2000:]}")
        with open(os.path.join(cwd, "run", "recorder.csv")) as f:
            rows = list(csv.DictReader(f))
    returns = [float(row["avg_return"]) for row in rows]
    reached = next((row for row in rows if float(row["avg_return"]) >= target), None)
    return {"best": max(returns), "last": returns[-1], "solved": reached is not None,
            "steps": int((reached or rows[-1])["step"]), "seconds": round(float((reached or rows[-1])["seconds"]), 1)}


def main(argv: list[str]):
    options = dict(item.split("=", 1) for item in argv)
    env = options.get("env", "simple_spread_v3")
    break_step, target = int(options.get("break_step", 100_000)), float(options.get("target", -50))
    seeds = [int(seed) for seed in options.get("seeds", "0,1,2,3,4").split(",")]
    commit, results = git_commit(), {}
    for agent in options.get("agents", "AgentVDN,AgentQMIX").split(","):
        for seed in seeds:
            result = results.setdefault(agent, []) + [run_once(agent, env, seed, break_step, target)]
            results[agent] = result
            row = result[-1]
            print(f"{agent} seed {seed}: best {row['best']:.1f}, last {row['last']:.1f}, target {target} "
                  f"{'at ' + str(row['seconds']) + ' s' if row['solved'] else 'not reached'}", flush=True)
            with open(HISTORY, "a", newline="") as f:
                csv.writer(f).writerow([datetime.date.today().isoformat(), commit, agent, env, seed, row["steps"],
                                        row["seconds"], row["solved"], "serial"])
    print(f"\n{env}, {break_step} steps, seeds {seeds}: median (worst seed)\n| agent | best return | last return | "
          f"seconds to {target} |\n|---|---|---|---|")
    for agent, rows in results.items():
        cell = lambda key: f"{statistics.median(row[key] for row in rows):.1f} ({min(row[key] for row in rows):.1f})"
        solved = [row["seconds"] for row in rows if row["solved"]]
        seconds = (f"{statistics.median(row['seconds'] if row['solved'] else float('inf') for row in rows):.1f} "
                   f"({max(solved):.1f}), {len(solved)}/{len(rows)}" if solved else f"0/{len(rows)}")
        print(f"| {agent} | {cell('best')} | {cell('last')} | {seconds} |")


if __name__ == "__main__":
    main(sys.argv[1:])

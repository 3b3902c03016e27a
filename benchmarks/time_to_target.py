"""Time to target (shared/BENCH.md): wall-clock seconds from the start of training until the deterministic
policy's mean return over 8 evaluation episodes first reaches the task's target, evaluation included.

    python benchmarks/time_to_target.py agent=AgentPPO env=LunarLanderContinuous-v3 seeds=0,1,2 loops=serial,mp

Each run is a fresh `python AgentRun.py` process with the agent's defaults; its row (date, commit, agent,
env, seed, steps, seconds, solved, loop) is appended to History/benchmarks.csv, and a table of medians
and spreads is printed. A run that stops without reaching the target counts as a failure.
"""
import csv
import datetime
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HISTORY = os.path.join(ROOT, "History", "benchmarks.csv")
STOP_LINE = re.compile(r"Stop: (?P<reason>.*) at step (?P<steps>\d+) after (?P<seconds>[\d.]+) s")


def git_commit() -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    return commit + ("-dirty" if dirty else "")


def run_once(agent: str, env: str, seed: int, loop: str, max_time: float) -> dict:
    with tempfile.TemporaryDirectory() as cwd:
        command = [sys.executable, "AgentRun.py", f"agent={agent}", f"env={env}", f"seed={seed}", f"cwd={cwd}/run",
                   f"max_time={max_time}", f"if_multiprocess={loop == 'mp'}"]
        out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=max_time + 300)
    match = STOP_LINE.search(out.stdout)
    if out.returncode != 0 or match is None:
        raise RuntimeError(f"{' '.join(command)} failed (exit {out.returncode}):\n{out.stderr[-2000:]}")
    return {"steps": int(match["steps"]), "seconds": float(match["seconds"]),
            "solved": match["reason"].startswith("reached target_return")}


def main(argv: list[str]):
    options = dict(item.split("=", 1) for item in argv)
    agent, env = options["agent"], options["env"]
    seeds = [int(s) for s in options.get("seeds", "0,1,2").split(",")]
    loops = options.get("loops", "serial").split(",")
    max_time = float(options.get("max_time", 1800))
    commit, date = git_commit(), datetime.date.today().isoformat()
    results = {loop: [] for loop in loops}
    for seed in seeds:
        for loop in loops:  # interleaved, so that a change in the machine's load hits both loops alike
            result = run_once(agent, env, seed, loop, max_time)
            results[loop].append(result)
            with open(HISTORY, "a", newline="") as f:
                csv.writer(f).writerow([date, commit, agent, env, seed, result["steps"], f"{result['seconds']:.1f}",
                                        result["solved"], loop])
            print(f"{agent} {env} seed {seed} {loop}: {result}", flush=True)

    print(f"\n{agent} on {env}, seeds {seeds}, commit {commit}")
    print(f"{'loop':>8} {'solved':>7} {'median s':>9} {'min-max s':>13} {'median steps':>13}")
    for loop, rows in results.items():
        solved = [row for row in rows if row["solved"]]
        seconds = [row["seconds"] for row in solved]
        spread = f"{min(seconds):.0f}-{max(seconds):.0f}" if seconds else "-"
        median = f"{statistics.median(seconds):.0f}" if seconds else "-"
        steps = f"{statistics.median(row['steps'] for row in solved):.0f}" if solved else "-"
        print(f"{loop:>8} {len(solved):>4}/{len(rows):<2} {median:>9} {spread:>13} {steps:>13}")


if __name__ == "__main__":
    main(sys.argv[1:])

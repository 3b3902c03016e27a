"""What the serial loop costs apart from the path a run takes (issue 62, "no slower"): checkouts of two commits run the
same fixed-step serial run, alternating in pairs, so the machine's drift falls on both alike; each run's wall and CPU
seconds, and the Python calls a step (cProfile's count at 2 x steps less that at steps: the fixed calls cancel), a
count the machine's noise does not touch. Each checkout is imported from its own directory (a commit older than this
script works too).

    python benchmarks/loop_cost.py repos=/work/base,/work/main repeats=8
    python benchmarks/loop_cost.py repos=/work/base,/work/main agent=AgentSAC env=Pendulum-v1 steps=8192
"""
import json
import os
import statistics
import subprocess
import sys

RUN = """
import contextlib, cProfile, io, json, pstats, sys, time
sys.path.insert(0, ".")
from AgentRun import Arguments, train_and_evaluate
settings, steps, if_count = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "count"
args = Arguments(**settings, break_step=steps, eval_gap=1e9, eval_times=1, target_return=1e9, if_multiprocess=False,
                 cwd=sys.argv[4], if_remove=True)
profile = cProfile.Profile() if if_count else None
wall, cpu = time.perf_counter(), time.process_time()
with contextlib.redirect_stdout(io.StringIO()):
    if profile: profile.enable()
    train_and_evaluate(args)
    if profile: profile.disable()
print(json.dumps({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                  "calls": pstats.Stats(profile).total_calls if profile else None}))
"""


def run(repo: str, settings: dict, steps: int, if_count: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", RUN, json.dumps(settings), str(steps), "count" if if_count else "time",
                          os.path.join("/tmp", f"loop_cost_{os.getpid()}")], cwd=repo, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"the run in {repo} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(repos: str, repeats: str = "8", steps: str = "65536", agent: str = "AgentPPO",
         env: str = "LunarLanderContinuous-v3", seed: str = "0"):
    repos, repeats, steps = repos.split(","), int(repeats), int(steps)
    settings = {"agent": agent, "env": env, "seed": int(seed)}
    seconds = {repo: [] for repo in repos}
    for i in range(repeats):
        for repo in repos if i % 2 == 0 else repos[::-1]:
            seconds[repo].append(run(repo, settings, steps, False))
            print(f"{repo}: {seconds[repo][-1]['wall']:.2f} s wall, {seconds[repo][-1]['cpu']:.2f} s CPU", flush=True)
    for repo in repos:
        count = run(repo, settings, 2 * steps, True)["calls"] - run(repo, settings, steps, True)["calls"]
        walls = [r["wall"] for r in seconds[repo]]
        print(f"{repo}: {steps} steps in {statistics.median(walls):.2f} s (median of {repeats}; min {min(walls):.2f}), "
              f"CPU {statistics.median(r['cpu'] for r in seconds[repo]):.2f} s; {count / steps:.1f} Python calls a step")
    first, second = repos[0], repos[-1]
    ratios = sorted(b["wall"] / a["wall"] for a, b in zip(seconds[first], seconds[second]))
    print(f"{second} / {first}, run by run: median {statistics.median(ratios):.3f} ({ratios[0]:.2f}-{ratios[-1]:.2f})")


if __name__ == "__main__":
    main(**dict(arg.split("=", 1) for arg in sys.argv[1:]))

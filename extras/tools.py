"""The research tools of AgentRun.py's command line: replay= (and its GIF), export=, grid= and plot=; a run's figure."""
import concurrent.futures
import csv
import itertools
import json
import math
import os
import subprocess
import sys
import typing
import warnings

import gymnasium as gym
import numpy as np
import torch

from matplotlib.figure import Figure  # the object API: no pyplot, no global backend switch

import AgentRun
from AgentNet import is_image
from AgentRun import (AGENT_CLASSES, ARGUMENT_NAMES, EnvInfo, MissingRunError, agent_settings, build_agent,
                      env_from_config, parse_overrides, make_env, read_config, run_episodes)
from AgentZoo import AgentBase, RefusedError, load_weights


def read_run(cwd: str, command: str) -> dict:
    """config.json of the run in cwd, which must have evaluated at least once (actor.pt), for replay= and export=."""
    config_path, actor_path = os.path.join(cwd, "config.json"), os.path.join(cwd, "actor.pt")
    for path, what in ((config_path, "the run's settings"), (actor_path, "the saved actor")):
        if not os.path.isfile(path):
            raise MissingRunError(f"{command} needs {path} ({what}); is {cwd!r} the cwd of a run that has evaluated at "
                                  f"least once?")
    return read_config(config_path)


def saved_agent(cwd: str, config: dict, env_info: EnvInfo, device=None, actor: str = "best") -> AgentBase:
    """The agent of config.json, its hyperparameters as trained, acting with the best actor (actor.pt) or the last
    checkpoint's (actor="last": checkpoint/act.pt, the policy where the run stopped); weights_only loads."""
    path = os.path.join(cwd, "actor.pt") if actor == "best" else os.path.join(AgentRun.find_checkpoint(cwd), "act.pt")
    agent = build_agent(config, env_info, device)
    agent.act.load_state_dict(load_weights(path, agent.device))
    return agent


REPLAY_RENDERS = {"gif": "rgb_array", "human": "human", "none": None}  # replay's render= and the env's render_mode
REPLAY_OPTIONS = {"episodes": (int,), "deterministic": (bool,), "render": (str,),
                  "actor": (str,)}  # replay='s key=value, typed


def replay(cwd: str, episodes: int | None = None, deterministic: bool = True, render: str = "gif",
           actor: str = "best") -> dict:
    """Load config.json and actor.pt (weights_only) from a finished or running cwd, run `episodes` episodes (the run's
    eval_times by default) of the deterministic policy (deterministic=False: the exploring one), print mean and std of
    return and length, and show the first episode: render="gif" writes replay.gif into cwd, "human" opens the env's
    window (where a display exists), "none" neither (Spinning Up's test_policy takes the same choices). actor="last"
    plays the last checkpoint's actor instead of the best evaluated one."""
    if actor not in ("best", "last"):
        raise RefusedError(f"actor={actor!r} is not accepted: 'best' (actor.pt, the best evaluation's) or 'last' (the "
                           f"last checkpoint's)")
    if render not in REPLAY_RENDERS:
        raise RefusedError(f"render={render!r} is not accepted: one of {', '.join(REPLAY_RENDERS)}")
    if render == "human" and sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or
                                                                      os.environ.get("WAYLAND_DISPLAY")):
        raise RefusedError("render='human' needs a display, and this machine has none (DISPLAY is unset); use "
                           "render=gif (replay.gif in cwd) or render=none")
    if episodes is not None and episodes < 1:
        raise RefusedError(f"episodes={episodes} is not accepted: episodes must be an integer > 0")
    config = read_run(cwd, "replay")
    try:  # the first episode is shown
        prepared = [make_env(env_from_config(config["env"], config.get("frame_stack"),
                                                render_mode=REPLAY_RENDERS[render] if i == 0 else None),
                                if_action_mask=bool(config.get("if_action_mask")))
                    for i in range(episodes or config["eval_times"])]
    except gym.error.Error as error:
        raise RefusedError(f"replay makes the env config.json records ({config['env']!r}), which gymnasium cannot make "
                           f"({error}); replay works for runs of registered environments") from None
    envs, env_info = [env for env, _ in prepared], prepared[0][1]
    agent = saved_agent(cwd, config, env_info, actor=actor)
    for i, env in enumerate(envs):
        env.reset(seed=config["seed"] + i)

    frames = [] if render == "gif" else None
    results = run_episodes(envs, agent, frames, deterministic)
    for env in envs:  # a renderer freed now, not by the interpreter's exit (mujoco's EGL context raises then)
        env.close()
    returns, lengths, successes = np.array(results).T
    gif_path = os.path.join(cwd, "replay.gif") if render == "gif" else None
    if gif_path is not None:
        write_gif(frames, gif_path, title=f"{config['agent']} on {env_info.env_name}: return {returns[0]:.1f}")
    print(f"{config['agent']} on {env_info.env_name}, {actor} actor, {len(results)} episodes: "
          f"return {returns.mean():.1f} +- {returns.std():.1f}, "
          f"length {lengths.mean():.0f} +- {lengths.std():.0f}" + ("" if np.isnan(successes).all() else
          f", success rate {successes.mean():.2f}") + (f"; first episode in {gif_path}" if gif_path else ""))
    return {"avg_return": float(returns.mean()), "std_return": float(returns.std()),
            "avg_length": float(lengths.mean()), "success_rate": float(successes.mean()), "gif": gif_path,
            "frames": len(frames or [])}


def write_gif(frames: list[np.ndarray], path: str, title: str, max_frames: int = 250, fps: int = 30):
    """An animated GIF of every k-th frame (at most max_frames), at half the env's resolution under a title line;
    Pillow (matplotlib's own dependency) directly: a third of the time matplotlib's writer took (UPDATE_LOG)."""
    from PIL import Image, ImageDraw, ImageFont

    frames = frames[::-(-len(frames) // max_frames)]  # ceil division: the stride that fits
    height, width = frames[0].shape[0] // 2, frames[0].shape[1] // 2
    font, band = ImageFont.load_default(size=10), 14
    images = []
    for frame in frames:
        image = Image.new("RGB", (width, height + band), "white")
        image.paste(Image.fromarray(frame).reduce(2), (0, band))
        ImageDraw.Draw(image).text((width // 2, 2), title, fill="black", font=font, anchor="mt")
        images.append(image)
    images[0].save(path, save_all=True, append_images=images[1:], duration=1000 / fps, loop=0)


def export(cwd: str) -> dict[str, str]:
    """The best actor of the run in cwd as one module that acts without this library, states (batch, state_dim) float32
    -> the actions select_action(deterministic=True) takes (Box ones in [-1, 1], before the env's rescaling; Discrete
    ones as indices), state normalisation included: cwd/actor_torchscript.pt (torch.jit.load, also from C++; TorchScript
    is deprecated in torch but loads there) and, where the onnx package is installed, cwd/actor.onnx. Returns the
    paths by format."""
    config = read_run(cwd, "export")
    env_info = make_env(env_from_config(config["env"]), if_action_mask=bool(config.get("if_action_mask")),
                           frame_stack=config.get("frame_stack"))[1]
    policy = saved_agent(cwd, config, env_info, device="cpu").policy_module().eval()
    shape = env_info.state_dim if is_image(env_info.state_dim) else (env_info.state_dim * env_info.num_agents,)
    example = torch.zeros(2, *shape, dtype=env_info.state_dtype)  # a batch of the env's observations
    paths = {"torchscript": os.path.join(cwd, "actor_torchscript.pt")}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit's: the format this export promises
        torch.jit.trace(policy, example).save(paths["torchscript"])
    try:
        import onnx  # noqa: F401  (optional: only to write the ONNX file)
    except ImportError:
        print("export: no ONNX file without the onnx package (pip install onnx)")
    else:
        paths["onnx"] = os.path.join(cwd, "actor.onnx")
        torch.onnx.export(policy, (example,), paths["onnx"], input_names=["state"], output_names=["action"],
                          dynamic_axes={"state": {0: "batch"}, "action": {0: "batch"}})
    print(f"{config['agent']} on {env_info.env_name}: the best actor in " + ", ".join(paths.values()))
    return paths


def grid_runs(argv: list[str]) -> tuple[dict, list[dict]]:
    """['key=v1,v2', 'key=v', ...] -> (every setting of the grid as given, the runs: one dict of typed overrides per
    combination of the comma lists, in the order given, the last key varying fastest)."""
    spec = dict(item.partition("=")[::2] for item in argv)
    for key in ("cwd", "if_resume", "if_remove"):
        if key in spec:
            raise RefusedError(f"{key}= is not accepted in a grid: each run's cwd is <grid>/<the settings that vary>, "
                               f"and a grid started again skips finished runs and resumes the others; "
                               f"keys that may vary: "
                               f"{', '.join(sorted(ARGUMENT_NAMES - {'cwd', 'if_resume', 'if_remove'}))}")
    lists = {key: [parse_overrides([f"{key}={text}"])[key] for text in value.split(",")] for key, value in spec.items()}
    runs = [dict(zip(lists, values)) for values in itertools.product(*lists.values())]
    return spec, runs


def run_name(run: dict, varying: list[str]) -> str:
    """The run's directory under the grid: the settings that vary, key=value joined by '_', or 'run' if none does."""
    return "_".join(f"{key}={run[key]}" for key in varying) or "run"


def summarise_run(cwd: str) -> dict:
    """From a finished run's config.json and recorder.csv: solved, steps and seconds of the first evaluation at the
    target (empty if none), and the best evaluation mean."""
    with open(os.path.join(cwd, "config.json")) as f:
        target = json.load(f)["target_return"]
    rows = read_recorder(cwd)
    first = next((row for row in rows if row["avg_return"] >= target), None)
    return {"solved": first is not None, "steps_to_target": "" if first is None else int(first["step"]),
            "seconds_to_target": "" if first is None else round(first["seconds"], 1),
            "best_return": round(max((row["avg_return"] for row in rows), default=-math.inf), 1)}


def read_recorder(cwd: str) -> list[dict[str, float]]:
    path = os.path.join(cwd, "recorder.csv")
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return [{key: float(value) for key, value in row.items()} for row in csv.DictReader(f)]


def run_in_grid(run: dict, cwd: str) -> dict:
    """One run of the grid as a fresh `python AgentRun.py` process (an agent's own child processes need one that is
    not a daemon), its output in cwd/stdout.txt: a new run, or resume= where a killed grid left a checkpoint.
    Returns summarise_run's row, or one with the error of a run that failed."""
    items = [f"{key}={value}" for key, value in run.items()]
    os.makedirs(cwd, exist_ok=True)
    if os.path.isdir(os.path.join(cwd, "checkpoint")):
        items = [f"resume={cwd}"] + [item for item in items if not item.startswith("env=")]  # config.json has the env
    else:
        items += [f"cwd={cwd}", "if_remove=True"]  # what a run killed before its first checkpoint left
    with open(os.path.join(cwd, "stdout.txt"), "w") as out:
        process = subprocess.run([sys.executable, os.path.abspath(AgentRun.__file__), *items], stdout=out,
                                 stderr=subprocess.PIPE, text=True)
    if process.returncode != 0:
        lines = process.stderr.strip().splitlines() or [f"exit code {process.returncode}"]
        return {"solved": False, "steps_to_target": "", "seconds_to_target": "", "best_return": "", "error": lines[-1]}
    summary = summarise_run(cwd)
    with open(os.path.join(cwd, "summary.json"), "w") as f:  # marks the run finished for a grid started again
        json.dump(summary, f)
    return summary


def run_grid(grid_dir: str, argv: list[str], workers: int | None = None) -> list[dict]:
    """Run every combination of the comma lists in argv (python AgentRun.py agent=AgentSAC,AgentTD3 seed=0,1,2
    grid=<dir>), `workers` at a time (default: the cores over num_threads), each in <grid_dir>/<settings that vary>.
    A grid started again skips the runs that finished and resumes the others. Prints a line as each run ends and a
    median table per config, writes summary.csv and comparison.png into grid_dir, and returns the summary rows."""
    spec, runs = grid_runs(argv)
    varying = [key for key, value in spec.items() if "," in value]
    spec_path = os.path.join(grid_dir, "grid.json")
    if os.path.exists(spec_path):
        with open(spec_path) as f:
            earlier = json.load(f)
        if earlier != spec:
            raise RefusedError(f"{grid_dir!r} holds another grid ({' '.join(f'{k}={v}' for k, v in earlier.items())}); "
                               f"start that one again to finish it, or choose another grid directory")
    os.makedirs(grid_dir, exist_ok=True)
    with open(spec_path, "w") as f:
        json.dump(spec, f, indent=2)
    threads = int(spec.get("num_threads", 1)) if "," not in spec.get("num_threads", "") else 1
    workers = workers or max(1, (os.cpu_count() or 1) // threads)

    rows = [None] * len(runs)
    to_run = []
    for i, run in enumerate(runs):
        cwd = os.path.join(grid_dir, run_name(run, varying))
        if os.path.exists(os.path.join(cwd, "summary.json")):
            with open(os.path.join(cwd, "summary.json")) as f:
                rows[i] = {key: run[key] for key in varying} | json.load(f)
        else:
            to_run.append((i, run, cwd))
    print(f"grid {grid_dir}: {len(runs)} runs, {len(runs) - len(to_run)} finished before, {workers} at a time",
          flush=True)
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:  # each thread waits on one run's process
        futures = {pool.submit(run_in_grid, run, cwd): (i, run) for i, run, cwd in to_run}
        for done, future in enumerate(concurrent.futures.as_completed(futures), start=len(runs) - len(to_run) + 1):
            i, run = futures[future]
            rows[i] = {key: run[key] for key in varying} | future.result()
            outcome = (f"failed: {rows[i]['error']}" if "error" in rows[i] else
                       f"solved at step {rows[i]['steps_to_target']} in {rows[i]['seconds_to_target']} s"
                       if rows[i]["solved"] else f"not solved, best {rows[i]['best_return']}")
            print(f"[{done}/{len(runs)}] {run_name(run, varying)}: {outcome}", flush=True)

    columns = varying + ["solved", "steps_to_target", "seconds_to_target", "best_return", "error"]
    with open(os.path.join(grid_dir, "summary.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, columns, restval="")
        writer.writeheader()
        writer.writerows(rows)
    print_grid_table(rows, [key for key in varying if key != "seed"])
    if any(read_recorder(os.path.join(grid_dir, run_name(run, varying))) for run in runs):
        plot_runs([grid_dir])
    return rows


def print_grid_table(rows: list[dict], config_keys: list[str]):
    """One line per config (the settings that vary, seeds pooled): solved runs, median and slowest seconds to the
    target (a run that missed it counts as infinitely slow), median best return."""
    configs = {}
    for row in rows:
        configs.setdefault(tuple(row[key] for key in config_keys), []).append(row)
    print(f"{' '.join(config_keys) or 'config':<40} {'solved':>7} {'median s':>9} {'slowest s':>9} {'median best':>12}")
    for config, group in configs.items():
        seconds = [row["seconds_to_target"] if row["solved"] else math.inf for row in group]
        best = [row["best_return"] for row in group if row["best_return"] != ""]
        print(f"{' '.join(map(str, config)) or 'all':<40} {sum(row['solved'] for row in group):>3}/{len(group):<3} "
              f"{np.median(seconds):>9.1f} {max(seconds):>9.1f} {np.median(best) if best else math.nan:>12.1f}")


def agent_default(agent: str, key: str) -> typing.Any:
    """The value the agent named `agent` gives the setting `key`, or None (not one of its settings, or unknown
    agent)."""
    return agent_settings(AGENT_CLASSES[agent]).get(key) if agent in AGENT_CLASSES else None


def group_runs(runs: list[tuple[dict, typing.Any]]) -> dict[str, list]:
    """(config.json, anything) pairs -> {label: the pairs of that config}, a config being every setting but the seed
    and the limits, the label naming the settings that differ between configs, an agent's own defaults left out (an
    agent that varies brings its learning rate along)."""
    ignored = {"seed", "cwd", "if_resume", "if_remove", "max_time", "break_step"}  # what does not make another config
    keys = sorted({key for config, _ in runs for key in config} - ignored)
    varying = [key for key in keys if len({json.dumps(config.get(key)) for config, _ in runs}) > 1
               and not all(config.get(key) == agent_default(config["agent"], key) for config, _ in runs)]
    groups = {}
    for config, value in runs:
        groups.setdefault(" ".join(f"{key}={config.get(key)}" for key in varying) or config["agent"],
                          []).append((config, value))
    return groups


# what a run's figure draws in its bottom panel, of the columns its rows hold: each family's diagnostics
DIAGNOSTICS = ("alpha", "epsilon", "mean_q", "action_std", "entropy", "approx_kl", "clip_fraction",
               "explained_variance")


def draw_run(history: list[dict], title: str, path: str):
    """A run's figure (AgentRun.Evaluator.plot) as a PNG at path: the evaluation mean and its spread over the
    exploration return, the evaluation episode length shaded behind; the objectives; the DIAGNOSTICS it logs."""
    steps = np.array([row["step"] for row in history])
    column = lambda name: np.array([row.get(name, math.nan) for row in history], dtype=float)
    avg_return, std_return = column("avg_return"), column("std_return")
    diagnostics = [name for name in DIAGNOSTICS if name in history[-1]]
    fig = Figure(figsize=(8, 8 if diagnostics else 6))
    panels = 2 + bool(diagnostics)
    axes = fig.subplots(panels, 1, sharex=True, gridspec_kw={"height_ratios": [2, 1, 1][:panels]})
    ax_return, ax_objective = axes[:2]
    ax_length = ax_return.twinx()
    ax_length.fill_between(steps, 0, column("avg_length"), color="grey", alpha=0.2)
    ax_length.set_ylabel("evaluation episode length", color="grey")
    ax_return.set_zorder(ax_length.get_zorder() + 1)  # returns drawn over the grey area
    ax_return.patch.set_visible(False)
    ax_return.plot(steps, column("explore_return"), color="royalblue", label="exploration return")
    ax_return.plot(steps, avg_return, color="red", label="evaluation mean")
    ax_return.fill_between(steps, avg_return - std_return, avg_return + std_return, color="red", alpha=0.2)
    ax_return.set_ylabel("episode return")
    ax_return.legend(loc="upper left")
    ax_return.grid(alpha=0.3)
    ax_objective.plot(steps, column("obj_critic"), color="green", label="obj_critic")
    ax_objective.set_ylabel("obj_critic", color="green")
    if "obj_actor" in history[-1]:
        ax_actor = ax_objective.twinx()
        ax_actor.plot(steps, column("obj_actor"), color="darkgreen", linestyle="--", label="obj_actor")
        ax_actor.set_ylabel("obj_actor (dashed)", color="darkgreen")
    for name in diagnostics:
        axes[2].plot(steps, column(name), label=name)
    if diagnostics:
        axes[2].set_yscale("symlog", linthresh=1e-3)
        axes[2].legend(loc="upper left", fontsize=7)
        axes[2].grid(alpha=0.3)
    axes[-1].set_xlabel("environment steps")
    fig.suptitle(f"{title}: {history[-1]['episodes']} episodes, {steps[-1]} steps, {int(history[-1]['seconds'])} s")
    fig.savefig(path, dpi=80)


PLOT_OPTIONS = {"value": (str,), "x": (str,), "smooth": (int,), "select": (str,), "exclude": (str,), "labels": (str,),
                "stat": (str,)}  # plot='s key=value, typed
PLOT_STATS = {"median": "median over seeds, band from min to max",
              "iqm": "interquartile mean over seeds, band its 95% stratified-bootstrap interval"}


def find_runs(dirs: list[str], select: str | None = None, exclude: str | None = None) -> list[tuple[dict, list, str]]:
    """(config.json, recorder rows, path) of every run under dirs (a directory with both, at least one row) whose path
    holds `select` and not `exclude` (substrings; None: any)."""
    runs = []
    for top in dirs:
        for path, _dirs, files in sorted(os.walk(top)):
            if "config.json" in files and "recorder.csv" in files and (select is None or select in path) \
                    and (exclude is None or exclude not in path):
                with open(os.path.join(path, "config.json")) as f:
                    config = json.load(f)
                if rows := read_recorder(path):
                    runs.append((config, rows, path))
    if not runs:
        raise RefusedError(f"plot= found no runs under {', '.join(dirs)}"
                           + (f" selected by {select!r}" if select else "")
                           + (f" without {exclude!r}" if exclude else "")
                           + ": a run is a directory with config.json and a recorder.csv of at least one evaluation "
                           "(a cwd of python AgentRun.py, or a grid's directory)")
    return runs


def interquartile_mean(values: np.ndarray) -> np.ndarray:
    """The mean of the middle half along axis 0, a quarter cut from each end (scipy's trim_mean(values, 0.25), the
    IQM of Agarwal et al., NeurIPS 2021)."""
    cut = int(0.25 * len(values))
    return np.sort(values, axis=0)[cut:len(values) - cut].mean(axis=0)


def seed_curves(members: list, x_name: str, value: str, smooth: int, stat: str, repeats: int = 2000
                ) -> tuple[np.ndarray, ...]:
    """x (200 points) and the centre, low and high curves of one config's seeds: each seed's `value` (a moving average
    of `smooth` rows) interpolated onto x within the range it covers; stat "median" with min and max, or "iqm" with its
    95% interval from `repeats` bootstrap resamples of the seeds (rliable's stratified bootstrap for one task, here in
    numpy; x then spans only where every seed has a value, so that every resample has all of them)."""
    starts = [rows[min(smooth, len(rows)) - 1][x_name] for _, rows in members]
    ends = [rows[-1][x_name] for _, rows in members]
    x = np.linspace(0, max(ends), 200) if stat == "median" else np.linspace(max(starts), min(ends), 200)
    kernel = np.ones(smooth) / smooth
    curves = np.array([np.interp(x, [row[x_name] for row in rows][smooth - 1:],
                                 np.convolve([row.get(value, math.nan) for row in rows], kernel, "valid"),
                                 left=np.nan, right=np.nan) for _, rows in members])  # (seeds, 200)
    if stat == "iqm":
        resamples = curves[np.random.default_rng(0).integers(len(curves), size=(repeats, len(curves)))]
        boot = np.array([interquartile_mean(sample) for sample in resamples])  # (repeats, 200)
        return x, interquartile_mean(curves), *np.percentile(boot, [2.5, 97.5], axis=0)
    with warnings.catch_warnings():  # an x where no seed has data yet: an all-NaN column
        warnings.simplefilter("ignore", RuntimeWarning)
        return x, np.nanmedian(curves, 0), np.nanmin(curves, 0), np.nanmax(curves, 0)


def plot_runs(dirs: list[str], value: str = "avg_return", x: str = "both", smooth: int = 1, select: str | None = None,
              exclude: str | None = None, labels: str | None = None, stat: str = "median") -> str:
    """One PNG comparing every run found under dirs (find_runs; select and exclude by path substrings): a recorder
    column (`value`, the evaluation mean return by default) against environment steps and seconds (x="both") or one of
    them, one colour per config (the settings, seed aside; group_runs), named by `labels` (a comma list, in the legend's
    order) where given, each seed smoothed over `smooth` rows; the centre and band of its seeds (seed_curves: stat
    "median" or "iqm"); the targets dashed where the value is the return. Written as <dirs[0]>/comparison.png."""
    if x not in ("both", "step", "seconds") or stat not in PLOT_STATS or smooth < 1:
        raise RefusedError(f"plot= takes x=both|step|seconds, stat={'|'.join(PLOT_STATS)} and smooth= an integer > 0; "
                           f"got x={x!r}, stat={stat!r}, smooth={smooth}")
    runs = find_runs(dirs, select, exclude)
    if all(value not in rows[0] for _, rows, _ in runs):
        raise RefusedError(f"value={value!r} is no recorder.csv column of these runs; "
                           f"they have {', '.join(runs[0][1][0])}")
    groups = group_runs([(config, rows) for config, rows, _ in runs])
    names = labels.split(",") if labels else list(groups)
    if len(names) != len(groups):
        raise RefusedError(f"labels= names {len(names)} configs, but the runs make {len(groups)}: {', '.join(groups)}")
    x_names = ("step", "seconds") if x == "both" else (x,)
    fig = Figure(figsize=(6 * len(x_names), 5))
    axes = np.atleast_1d(fig.subplots(1, len(x_names), sharey=True))
    for ax, x_name in zip(axes, x_names, strict=True):
        for i, (name, members) in enumerate(zip(names, groups.values(), strict=True)):
            points, centre, low, high = seed_curves(members, x_name, value, smooth, stat)
            ax.plot(points, centre, color=f"C{i % 10}", label=f"{name} ({len(members)} seeds)")
            ax.fill_between(points, low, high, color=f"C{i % 10}", alpha=0.2)
        for target in sorted({config["target_return"] for config, _, _ in runs}) if value == "avg_return" else ():
            ax.axhline(target, color="black", linestyle="--", linewidth=1)
        ax.set_xlabel("environment steps" if x_name == "step" else "seconds")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("evaluation mean return" if value == "avg_return" else value)
    axes[0].legend(loc="lower right", fontsize=8)
    fig.suptitle(f"{len(runs)} runs in {', '.join(dirs)}: {PLOT_STATS[stat]}")
    path = os.path.join(dirs[0], "comparison.png")
    fig.savefig(path, dpi=80)
    print(f"comparison of {len(runs)} runs in {path}")
    return path

"""Where a run's time goes, and how close it is to its floor (issue 45). One run of our agent in the serial loop (the
reference loop, in this process), its wall clock split by timers around the loop's calls into: stepping the env (the
explorer env's step), acting (the rest of exploring: the policy's forward, noise, building the trajectory), storing it
(Learner.store), gradient updates (Learner.learn), evaluation (Evaluator.evaluate_and_save: the episodes, the csv row,
the plot when due), checkpoints (Learner.save), and the rest (overhead: the loop, the banner, building nets and envs).
Two costs a process pays once are their own parts, outside the overhead: torch.optim's import of torch._dynamo at the
first optimizer (about 1 s here; every torch.optim user pays it, SB3 included, before the recorder's clock starts), and
the figure drawn at the stop (Evaluator.finish: matplotlib's import and one draw, after the target).

Beside it, the floor: the env's own steps per second on one core (the explorer's vector env, uniform random actions,
for `floor_seconds`: env_speed.run) times the steps the run made, plus bare torch's gradient steps per second for the
same networks and batch (each of the agent's actor and critic: a forward of a random batch, a squared loss, backward
and a fused Adam step) times the gradient steps the run made with each (counted at AgentZoo.optimizer_step). The ratio of the run's
time to the floor is how far the loop is from the cost of its env and its networks.

    python benchmarks/time_split.py agent=AgentPPO env=LunarLanderContinuous-v3 seed=0 max_time=300
    python benchmarks/time_split.py agent=AgentSAC env=Pendulum-v1 seed=0

Any other key=value is passed to the run (AgentRun's Arguments). Seconds are the run's to its stop: to the target,
one evaluation, the final plot and checkpoint past time_to_target.py's seconds to target.
"""
import collections
import inspect
import os
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import AgentRun  # noqa: E402
import AgentZoo  # noqa: E402
import env_speed  # noqa: E402  (benchmarks/, this script's folder)
from AgentRun import Arguments, Evaluator, Explorer, Learner, make_vector_env, train_and_evaluate  # noqa: E402

PARTS = ("env step", "acting", "store", "updates", "evaluation", "checkpoints", "torch.optim's import", "final figure")


class Timers:
    """Seconds spent in each part, from wrappers around the calls that make them."""

    def __init__(self):
        self.seconds = collections.Counter()

    def wrap(self, owner, name: str, part: str):
        """Time owner.name (a class's method or an object's) as `part`."""
        function = getattr(owner, name)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[part] += time.perf_counter() - start
        setattr(owner, name, timed)


def profiled_run(args: Arguments) -> tuple[dict, Timers, collections.Counter, list]:
    """The run with its parts timed; also the gradient steps per optimizer, and the learner's agent."""
    timers, steps_per_optimizer, agents = Timers(), collections.Counter(), []
    make_explore_env = AgentRun.make_explore_env

    def timed_explore_env(run_args):  # the explorer's env, its step timed
        env = make_explore_env(run_args)
        timers.wrap(env, "step", "env step")
        return env
    AgentRun.make_explore_env = timed_explore_env
    for owner, name, part in ((Explorer, "explore", "exploring"), (Learner, "store", "store"),
                              (Learner, "learn", "updates"), (Evaluator, "evaluate_and_save", "evaluation"),
                              (Learner, "save", "checkpoints"), (Evaluator, "finish", "final figure")):
        timers.wrap(owner, name, part)
    optimizer_step = AgentZoo.optimizer_step

    def counted_step(optimizer, *rest, **kwargs):
        steps_per_optimizer[optimizer] += 1
        return optimizer_step(optimizer, *rest, **kwargs)
    AgentZoo.optimizer_step = counted_step
    learner_init = Learner.__init__

    def kept_init(self, *rest, **kwargs):
        learner_init(self, *rest, **kwargs)
        agents.append(self.agent)
    Learner.__init__ = kept_init
    start = time.perf_counter()
    if "torch._dynamo" not in sys.modules:  # what the run's first optimizer would import (torch._compile)
        import torch._dynamo  # noqa: F401
    timers.seconds["torch.optim's import"] = time.perf_counter() - start
    result = train_and_evaluate(args)
    timers.seconds["total"] = time.perf_counter() - start
    timers.seconds["acting"] = timers.seconds.pop("exploring") - timers.seconds["env step"]
    return result, timers, steps_per_optimizer, agents


def env_floor(env_id: str, num_envs: int, seconds: float) -> float:
    """The env's steps per second on one core: num_envs copies in the explorer's vector env, random actions
    (env_speed.run; a plain explorer's env of one copy steps a little faster than a vector env of one)."""
    env = make_vector_env(env_id, num_envs)[0]
    return env_speed.run(env, env.single_action_space, num_envs, seconds, if_envpool=False)["steps/s"]


def bare_step_seconds(module: torch.nn.Module, agent, batch_size: int, seconds: float) -> float | None:
    """Seconds per bare torch gradient step of module on a random batch: forward, a squared loss of its outputs,
    backward, a fused Adam step. None for a network whose forward takes more than a state and an action, or other
    shapes (a team's networks take every agent's observations), or gives no gradient."""
    inputs = {"state": torch.randn(batch_size, *np.atleast_1d(agent.state_dim)),
              "action": torch.randn(batch_size, agent.action_dim)}
    names = list(inspect.signature(module.forward).parameters)
    if not set(names) <= set(inputs):
        return None
    try:
        outputs = module(*(inputs[name] for name in names))
    except RuntimeError:  # shapes other than (batch, state_dim) and (batch, action_dim)
        return None
    if not all(output.requires_grad for output in (outputs if isinstance(outputs, tuple) else (outputs,))):
        return None  # a discrete actor's forward is its greedy action: its update goes through other methods
    optimizer = AgentZoo.new_adam(module.parameters(), 1e-4, torch.device("cpu"))
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        outputs = module(*(inputs[name] for name in names))
        loss = sum(output.square().mean() for output in (outputs if isinstance(outputs, tuple) else (outputs,)))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        calls += 1
    return (time.perf_counter() - start) / calls


def main(argv: list[str]):
    options = dict(item.split("=", 1) for item in argv)
    floor_seconds = float(options.pop("floor_seconds", 10))
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as cwd:
        args = Arguments(**AgentRun.parse_overrides([f"{k}={v}" for k, v in options.items()] + [f"cwd={cwd}/run"]))
        args.if_multiprocess = False  # one process: its timers see every part
        result, timers, steps_per_optimizer, agents = profiled_run(args)
    agent, seconds = agents[0], timers.seconds
    seconds["overhead"] = seconds["total"] - sum(seconds[part] for part in PARTS)
    print(f"\n{args.agent.__name__} on {args.env}, seed {args.seed}: {result['stop_reason']} at step {result['step']} "
          f"after {seconds['total']:.1f} s\n")
    print("| part | seconds | share |")
    print("|---|---|---|")
    for part in PARTS + ("overhead", "total"):
        print(f"| {part} | {seconds[part]:.1f} | {seconds[part] / seconds['total']:.0%} |")
    env_rate = env_floor(args.env, args.num_envs, floor_seconds)
    floor = {"env": result["step"] / env_rate}
    lines = [f"env: {env_rate:,.0f} steps/s on one core x {result['step']} steps = {floor['env']:.1f} s"]
    for name, optimizer in (("actor", agent.act_optimizer), ("critic", agent.cri_optimizer)):
        module = agent.act if name == "actor" else agent.cri
        if optimizer is None or not steps_per_optimizer[optimizer]:
            continue
        batch = args.batch_size or args.steps_per_round  # A2C, ACER and the like step once on the whole rollout
        per_step = bare_step_seconds(module, agent, batch, floor_seconds)
        if per_step is None:
            lines.append(f"{name}: {steps_per_optimizer[optimizer]} gradient steps; no bare floor (its forward takes "
                         f"other inputs or gives no gradient)")
            continue
        floor[name] = steps_per_optimizer[optimizer] * per_step
        lines.append(f"{name}: {steps_per_optimizer[optimizer]} gradient steps x {per_step * 1e3:.3f} ms (bare, batch "
                     f"{batch}) = {floor[name]:.1f} s")
    total_floor = sum(floor.values())
    print("\nThe floor: " + "; ".join(lines))
    loop = seconds["total"] - seconds["torch.optim's import"] - seconds["final figure"]
    print(f"floor {total_floor:.1f} s; the run {seconds['total']:.1f} s, {seconds['total'] / total_floor:.1f}x its "
          f"floor; without torch.optim's import and the final figure {loop:.1f} s, {loop / total_floor:.1f}x")


if __name__ == "__main__":
    main(sys.argv[1:])

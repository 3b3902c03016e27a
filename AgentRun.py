"""Train an agent: `python AgentRun.py [key=value ...]` runs run__demo() with Arguments fields overridden, e.g.
`python AgentRun.py agent=AgentSAC env=Pendulum-v1 break_step=20000 cwd=/tmp/run seed=1`. A round's roles (Explorer,
Learner, Recorder) are written once; the loops differ only in how the roles talk: train_serial (the reference),
train_multiprocess (queues), train_async (A3C, shared memory), train_distributed (torchrun, all_reduce). The core
comes first, in reading order, to the line `the core ends here`; the checks, the plumbing and the other loops follow."""
import contextlib
import copy
import csv
import dataclasses
import importlib
import io
import json
import math
import multiprocessing as mp
import os
import queue
import re
import shutil
import signal
import sys
import textwrap
import threading
import time
import traceback
import typing

import gymnasium as gym
import numpy as np
import torch
import torch.distributed as dist

import AgentZoo
from AgentNet import ImageEncoder, NetShape, is_image, net_shape, trunk_width
from AgentZoo import (AgentBase, FrameStackPrioritizedReplayBuffer, FrameStackReplayBuffer, HindsightReplayBuffer,
                      PrioritizedReplayBuffer, RefusedError, ReplayBuffer, RecurrentRolloutBuffer, RolloutBuffer,
                      SegmentReplayBuffer, SequenceReplayBuffer, load_weights)


# ---- the user's surface: the demos, the run's arguments ----
def run__demo(**overrides) -> dict:
    """PPO on LunarLanderContinuous-v3, the fastest default agent there (BENCHMARKS.md); returns how the run stopped."""
    args = Arguments(agent="AgentPPO", env="LunarLanderContinuous-v3", seed=0)
    return train_and_evaluate(dataclasses.replace(args, **overrides))


def run__off_policy_demo(**overrides) -> dict:
    """InterSAC on the same task: it solved every seed of 0-4 (History/UPDATE_LOG.md, 2026-11-28)."""
    args = Arguments(agent="AgentInterSAC", env="LunarLanderContinuous-v3", seed=0)
    return train_and_evaluate(dataclasses.replace(args, **overrides))


class MissingRunError(RefusedError, FileNotFoundError):
    """A run directory, or a file of one, that resume or replay needs and does not find."""


class RunExistsError(RefusedError, FileExistsError):
    """A cwd that holds an earlier run's files, which a new run would mix with."""


class RefusedTypeError(RefusedError, TypeError):
    """An argument of a type the library does not take."""


@dataclasses.dataclass
class Arguments:
    """Every knob of a run; None takes the agent's default (AgentZoo train_defaults, hyper_defaults) or the env's."""

    agent: str | type = "AgentSAC"  # an agent class of AgentZoo, or its name
    env: str | gym.Env = "LunarLanderContinuous-v3"  # a gymnasium id or an Env instance: flat Box observations, a
    #   goal env's Dict (extras.goals) or images (extras.pixels: ALE/<Game>-v5, MinAtar/<Game>-v1, CarRacing-v3)
    cwd: str | None = None  # working directory for outputs; None -> ./{AgentName}_{EnvName}_{seed}
    seed: int = 0  # seeds torch, numpy and the environments
    num_threads: int = 1  # torch threads, > 0; small networks on a small CPU run fastest on one
    net_dims: int | tuple | str | None = None  # each MLP's hidden widths: n (two layers of n, > 0), "400,300",
    #   "400x300" or a tuple
    activation: str | None = None  # after each hidden layer: relu, tanh, elu or gelu (AgentNet.NetShape); None: relu
    recurrent_cell: str | None = None  # recurrent agents' memory cell, lstm or gru (AgentNet.RecurrentCore); None: gru
    batch_size: int | None = None  # transitions per gradient step (R2D2: sequences), > 0
    learning_rate: float | None = None  # Adam step size of every network (the critic's if actor_learning_rate), > 0
    actor_learning_rate: float | None = None  # the actor's step size (actor-critic agents), > 0; None: learning_rate
    gamma: float | None = None  # discount factor, 0 < gamma <= 1
    reward_scale: float | None = None  # rewards are multiplied by this before learning, > 0
    soft_update_tau: float | None = None  # target <- tau*online + (1-tau)*target, 0 < tau <= 1
    buffer_size: int | None = None  # replay capacity in transitions (ACER: rollouts; R2D2: sequences), > 0
    steps_per_round: int | None = None  # environment steps explored between two updates (all envs together), > 0
    replay_ratio: float | None = None  # gradient steps per explored step (off-policy; ACER: replays per rollout), > 0
    epochs: float | None = None  # on-policy: passes over each rollout (PPO's minibatches; VPG's and TRPO's critic), > 0
    num_envs: int | None = None  # environments the explorer steps side by side (a vector env where > 1), > 0
    env_backend: str = "gymnasium"  # explorer's envs: gymnasium or envpool (extras.envpool_backend); eval: gymnasium
    random_steps: int | None = None  # off-policy: steps of uniformly random actions before learning starts, >= 0
    n_step: int | None = None  # off-policy: rewards summed before the bootstrap (n-step returns), >= 1
    if_per: bool | None = None  # off-policy: True samples by priority (PrioritizedReplayBuffer), False uniformly
    her_k: int | None = None  # goal env: hindsight goals per kept one (HindsightReplayBuffer), >= 0; None: 4 (else 0)
    # the hyperparameters of some agents only; an agent refuses one it does not have (as PPO refuses random_steps)
    explore_rate: float | None = None  # DQN family: epsilon, the chance of a random action, in [0, 1] (ApeX: its base)
    if_noisy: bool | None = None  # DQN family: True explores with noisy layers (AgentNet.NoisyLinear), epsilon 0
    num_atoms: int | None = None  # C51, Rainbow: atoms of each action's return distribution, >= 2
    v_min: float | None = None  # C51, Rainbow: the smallest atom, < v_max (returns in units of reward_scale)
    v_max: float | None = None  # C51, Rainbow: the largest atom, > v_min
    explore_noise: float | None = None  # DDPG, TD3: std of the exploration noise on actions in [-1, 1], >= 0
    noise_beta: float | None = None  # DDPG, TD3, SAC, MADDPG: colour of the exploration noise, its power spectrum
    #   1/f^noise_beta along an episode (AgentZoo.ColoredNoise): 0 white, 1 pink, 2 red; >= 0
    random_beta: float | None = None  # DDPG, TD3, SAC, MADDPG: colour of the random warm-up's actions, >= 0
    policy_noise: float | None = None  # TD3: std of the target policy smoothing noise, >= 0
    noise_clip: float | None = None  # TD3: the smoothing noise is clipped to [-noise_clip, noise_clip], >= 0
    alpha_init: float | None = None  # SAC: the entropy temperature alpha it starts from (then tuned), > 0
    if_tune_alpha: bool | None = None  # SAC: True tunes alpha toward the target entropy; False keeps it at alpha_init
    lambda_gae: float | None = None  # PPO, A2C, VPG, TRPO: GAE's lambda (COMA: its critic's TD(lambda)), in [0, 1]
    ratio_clip: float | None = None  # PPO: the policy ratio is clipped to [1 - ratio_clip, 1 + ratio_clip], in (0, 1)
    target_kl: float | None = None  # PPO: a round's epochs stop past this approx. KL (Spinning Up), > 0; None: never
    seq_len: int | None = None  # recurrent PPO, R2D2: steps of a learning sequence (truncated BPTT), >= 1; recurrent
    #   PPO: a divisor of steps_per_round // num_envs; R2D2: replayed sequences overlap by half
    burn_in: int | None = None  # R2D2: steps before a replayed sequence that only refresh its stored memory, >= 0
    entropy_coef: float | None = None  # PPO, A2C, VPG, TRPO: weight of the entropy bonus, >= 0
    max_kl: float | None = None  # TRPO: the trust region, the largest mean KL(old || new policy) of a step, > 0
    kl_clip: float | None = None  # ACKTR: each step's KL trust region (Fisher); ACER: KL(average || new) per state; > 0
    rho_clip: float | None = None  # ACER: c, the truncation of the importance weights in the policy gradient, > 0
    damping: float | None = None  # ACKTR: added to the Kronecker-factored Fisher before inverting it, > 0
    common_reward: bool | None = None  # team agents: True learns the sum of the agents' rewards (EPyMARL's), False
    #   each agent its own (MADDPG, MAPPO only); None: False for MADDPG, MAPPO (competitive envs), else True
    lambda_opt: float | None = None  # QTRAN: weight of L_opt, the factorisation's equality at the greedy action, >= 0
    lambda_nopt: float | None = None  # QTRAN: weight of L_nopt, its inequality at the actions taken, >= 0
    if_state_norm: bool | None = None  # True: states standardised by their running mean and std (AgentNet.StateNorm)
    if_clip_reward: bool | None = None  # image agents: True learns from the rewards' signs (DQN paper); evaluation
    #   and recorder.csv report the raw score; None: True on ALE/ ids (not R2D2's), else False
    frame_stack: int | None = None  # ALE/ ids: the last frames a state stacks, >= 1; None: 4 (the DQN paper's); 1
    #   leaves motion to a recurrent agent's memory (R2D2); other envs' states stay as they come
    if_action_mask: bool | None = None  # discrete agents but ACER and teams: True appends the env's mask of legal
    #   actions (info["action_mask"] or a Dict's) to states; an illegal one is never taken nor bootstrapped from
    break_step: int = 2 ** 22  # stop after this many env steps, > 0 (why 2^22: History/UPDATE_LOG.md, 2026-11-25)
    max_time: float = 24 * 3600.0  # stop after this many seconds, > 0
    target_return: float | None = None  # stop once the evaluation mean reaches this; None -> the env's
    eval_gap: float = 1.0  # min seconds between evaluations (longer: Evaluator.eval_share), >= 0; 0: after every round
    eval_times: int = 8  # episodes per evaluation, deterministic policy, > 0
    save_gap: float = 60.0  # seconds between checkpoints into cwd/checkpoint (also written at every stop), > 0
    if_save_buffer: bool | None = None  # False: checkpoints leave out the replay buffer, which a resume refills
    if_multiprocess: bool | None = None  # True: explorer and learner processes (train_multiprocess); None: the
    #   agent's default, the loop measured faster for it on 2 cores (AgentPPO, AgentApeX: True; others: False)
    num_workers: int | None = None  # explorer processes of a multiprocess run (AgentA3C: its workers), >= 1, each
    #   with num_envs envs; > 1 implies if_multiprocess. None: 1 if serial, else the agent's (1; A3C, ApeX: 2)
    dist_backend: str | None = None  # under torchrun: 'gloo' (CPU) or 'nccl' (CUDA); None: nccl with CUDA, else gloo
    start_method: str | None = None  # multiprocessing's: spawn, fork, forkserver; None: the platform's, spawn with CUDA
    if_resume: bool = False  # True continues the run in cwd from its checkpoint (python AgentRun.py resume=<cwd>)
    if_remove: bool = False  # True deletes an earlier run's files in cwd; False refuses to mix with them
    if_tensorboard: bool = False  # True: also each evaluation's scalars in cwd for TensorBoard (needs tensorboard)
    target_step: dataclasses.InitVar[None] = None  # renamed (RENAMED): refused with the new name
    max_memo: dataclasses.InitVar[None] = None
    net_dim: dataclasses.InitVar[None] = None
    repeat_times: dataclasses.InitVar[None] = None

    def __post_init__(self, target_step, max_memo, net_dim, repeat_times):
        refuse_renamed({"target_step": target_step, "max_memo": max_memo, "net_dim": net_dim,
                        "repeat_times": repeat_times})

    def get_agent_class(self) -> type:
        if isinstance(self.agent, type) and issubclass(self.agent, AgentBase):
            return self.agent
        if self.agent in AGENT_CLASSES:
            return AGENT_CLASSES[self.agent]
        raise RefusedError(f"unknown agent {self.agent!r}; AgentZoo has {', '.join(AGENT_CLASSES)}")

    def resolve(self, env_info: "EnvInfo"):
        """Fill the fields left at None and check every value (check_torchrun: as given); writes nothing."""
        self.agent = agent_for(self, env_info)
        if torchrun_world() is not None:
            check_torchrun(self)
        fill_defaults(self, env_info)
        check_values(self)
        check_options(self, env_info)
        choose_loop(self)

    def prepare_cwd(self):
        """Refuse to mix with an earlier run's files (unless if_resume or if_remove); write config.json as used."""
        if_earlier_run = any(os.path.exists(os.path.join(self.cwd, name))
                             for name in ("recorder.csv", "config.json", "checkpoint"))
        if self.if_resume:
            if not if_earlier_run:
                raise MissingRunError(f"if_resume=True, but cwd {self.cwd!r} holds no run to resume")
        elif if_earlier_run and not self.if_remove:
            raise RunExistsError(f"cwd {self.cwd!r} holds an earlier run's files; resume it with "
                                 f"`python AgentRun.py resume={self.cwd}` (if_resume=True), delete them with "
                                 f"if_remove=True, or choose another cwd")
        elif if_earlier_run:
            shutil.rmtree(self.cwd)
        os.makedirs(self.cwd, exist_ok=True)
        with open(os.path.join(self.cwd, "config.json"), "w") as f:
            json.dump(self.to_dict(), f, indent=2)

    def to_dict(self) -> dict:
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        agent = self.agent.__name__ if isinstance(self.agent, type) else self.agent
        return fields | {"agent": agent, "env": env_to_config(self.env)}


# ---- the run: train_and_evaluate and the serial loop, the reference ----
def train_and_evaluate(args: Arguments) -> dict:
    """Train until target_return, a limit, a `stop` file or Ctrl-C, in the loop that suits; returns how it stopped."""
    env_info = make_env(args.env, if_action_mask=bool(args.if_action_mask), frame_stack=args.frame_stack)[1]
    args.resolve(env_info)
    world = torchrun_world()
    if world is None:
        args.prepare_cwd()
        loop = train_async if args.agent.if_async else train_multiprocess if args.if_multiprocess else train_serial
        stop_reason, step, recorder = loop(args, env_info)
    else:
        stop_reason, step, recorder = train_distributed(args, env_info, *world)
        if recorder is None:  # a rank other than 0: rank 0 records and reports
            return {"stop_reason": stop_reason, "step": step}
    evaluator = recorder.evaluator
    seconds = time.time() - evaluator.start_time
    print(f"Stop: {stop_reason} at step {step} after {seconds:.1f} s; best evaluation mean "
          f"{evaluator.best_return:.1f}; outputs in {args.cwd}; resume with python AgentRun.py resume={args.cwd}")
    return {"stop_reason": stop_reason, "step": step, "seconds": seconds,
            "best_return": evaluator.best_return, "if_solved": evaluator.best_return >= args.target_return}


def train_serial(args: Arguments, env_info: "EnvInfo") -> tuple[str, int, "Recorder"]:
    """The reference loop, the three roles in one process; returns the stop reason, step and recorder."""
    learner = Learner(args, env_info)
    recorder = Recorder(args, env_info, learner.step, learner.run_state["evaluator"])
    learner.recorder_state = recorder.state_dict
    explorer = Explorer(args, learner.agent, learner.step, 0, args.num_envs)
    print_banner(args, env_info, learner.step, f"device {learner.agent.device}")
    stop_reason = None
    try:
        while stop_reason is None:
            trajectory = explorer.explore(learner.step)
            learner.store(trajectory, args.num_envs)
            returns = explorer.new_returns()
            learner.episodes += len(returns)
            recorder.keep(returns)
            stats = learner.learn(trajectory)
            stop_reason = recorder.end_round(learner.agent, learner.step, learner.episodes, stats)
            if stop_reason is not None:
                recorder.finish()  # before the last checkpoint, which records the plot's name
            learner.save_when_due(stop_reason is not None)
    except KeyboardInterrupt:
        recorder.finish()
        learner.save()  # the round in flight is lost; everything before it is in the checkpoint
        stop_reason = "Ctrl-C"
    return stop_reason, learner.step, recorder


# ---- the round's three roles, written once: explorer, learner, recorder ----
class Explorer:
    """The round's first role: steps the exploring env with the agent (random in an off-policy warm-up), reports ended
    episodes' returns. A process's explorer acts with a CPU copy (in_process) taking newer weights (refresh)."""

    def __init__(self, args: Arguments, agent: AgentBase, step: int, index: int, env_copies: int):
        """The explorer `index` of those whose env_copies env copies take steps_per_round steps a round together."""
        self.args, self.agent, self.episodes_seen = args, agent, 0
        self.env = make_explore_env(args)
        self.horizon = max(1, args.steps_per_round // env_copies)
        # seeded after earlier explorers' copies, as a vector env's; a resume starts new episodes (env state is lost)
        agent.last_state = self.env.reset(seed=args.seed + step + index * args.num_envs)[0]
        agent.set_env_copies(index * args.num_envs, env_copies)

    @classmethod
    def in_process(cls, args: Arguments, env_info: "EnvInfo", step: int, worker: int, env_copies: int) -> "Explorer":
        """The explorer of a process of its own: one thread, a CPU copy of the agent, a noise stream of its own."""
        torch.set_num_threads(1)
        torch.manual_seed(args.seed + step + 1 + worker)
        return cls(args, build_agent(args, env_info, device="cpu"), step, worker, env_copies)

    def explore(self, step: int, horizon: int | None = None) -> tuple[torch.Tensor, ...]:
        """horizon steps (default: the round's) of each env copy from `step`; random actions while step < random_steps
        cover the action space before the policy narrows it (TD3 paper, section 6.1); her_k appends episode ends."""
        if self.agent.if_off_policy and step < self.args.random_steps:
            trajectory = self.agent.explore_env(self.env, horizon or self.horizon, if_random=True)
        else:
            trajectory = self.agent.explore_env(self.env, horizon or self.horizon)
        if self.args.her_k:
            trajectory += (pop_not_done(self.env),)
        return trajectory

    def refresh(self, weights: dict):
        """Act with the learner's newer actor, its state normalisation included."""
        self.agent.act.load_state_dict(weights)

    def new_returns(self) -> list[float]:
        """Returns of the episodes ended since the last call (make_explore_env keeps all of a round's)."""
        count = episode_count(self.env)
        new, self.episodes_seen = count - self.episodes_seen, count
        return [float(value) for value in list(self.env.return_queue)[-new:]] if new else []


class Learner:
    """The round's second role: the agent, its buffer, the step and episode counts (restored on resume: start_state).
    Under torchrun one of `world` learners: batch_size / world samples each, gradients averaged (optimizer_step)."""

    def __init__(self, args: Arguments, env_info: "EnvInfo", device=None, if_restore: bool = True, world: int = 1):
        torch.set_num_threads(args.num_threads)
        torch.manual_seed(args.seed)
        self.args, self.world = args, world
        self.agent = build_agent(args, env_info, device)
        self.buffer = build_buffer(args, env_info, self.agent.device)
        self.run_state = start_state(args, self.agent, self.buffer) if if_restore else dict(NEW_RUN)
        self.step, self.episodes = self.run_state["step"], self.run_state["episodes"]
        self.batch_size = None if args.batch_size is None else args.batch_size // world
        # update_net's third argument: the agent's epochs (on-policy), or its replay_ratio (ACER's replayed rollouts;
        # off-policy: gradient steps per explored step of all ranks, ReplayBuffer.add_size counting this rank's)
        self.update_ratio = args.replay_ratio * world if args.agent.if_off_policy else args.epochs or args.replay_ratio
        self.recorder_state: typing.Callable[[], dict] | None = None
        self.last_save_time = time.time()

    def store(self, trajectory: tuple[torch.Tensor, ...], env_copies: int):
        """Check a round's trajectory (check_finite), add it to the buffer and count its steps (every rank's)."""
        check_finite(trajectory, self.step, env_copies, None if self.recorder_state is None else self.save)
        self.buffer.extend(*trajectory)  # both buffers move it to the learner's device
        shape = trajectory[0].shape  # off-policy (steps * envs, ...); on-policy (steps, envs, ...)
        self.step += (shape[0] if self.agent.if_off_policy else shape[0] * shape[1]) * self.world

    def ready(self) -> bool:
        """Learn this round? On-policy always; off-policy once past random_steps with a batch in the buffer."""
        args = self.args
        return not args.agent.if_off_policy or (self.step >= args.random_steps
                                                and self.buffer.cur_len >= args.batch_size)

    def learn(self, trajectory: tuple[torch.Tensor, ...], if_ready: bool | None = None) -> dict | None:
        """update_net once ready (if_ready: the ranks' answer): its stats, else None with add_size
        zeroed so the first update trains on one round (TD3 paper). Then the state norm takes the
        round's states: the update must see the rollout's inputs."""
        stats = None
        if (self.ready() if if_ready is None else if_ready):
            stats = self.agent.update_net(self.buffer, self.batch_size, self.update_ratio)
        else:
            self.buffer.add_size = 0
        self.agent.update_state_norm(trajectory[0])
        return stats

    def save(self):
        """A checkpoint: agent, buffer (unless if_save_buffer=False), counts, recorder and RNG states."""
        save_checkpoint(self.args.cwd, self.agent, self.buffer if self.args.if_save_buffer else None,
                        {"step": self.step, "episodes": self.episodes, "evaluator": self.recorder_state(),
                         "rng": {"cpu": torch.get_rng_state(),  # a resumed run draws what it would have drawn
                                 "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}})
        self.last_save_time = time.time()

    def save_when_due(self, if_stop: bool):
        """A checkpoint at the stop, and every save_gap seconds."""
        if if_stop or time.time() - self.last_save_time >= self.args.save_gap:
            self.save()


class Recorder:
    """The round's third role: evaluates when due (Evaluator), keeps exploration returns, decides the stop."""

    def __init__(self, args: Arguments, env_info: "EnvInfo", step: int, state: dict | None):
        self.args, self.returns = args, []
        self.evaluator = build_evaluator(args, env_info, step, state)
        self.state_dict, self.finish = self.evaluator.state_dict, self.evaluator.finish

    def keep(self, returns: list[float]):
        """The returns of exploration episodes, for the next row's explore_return."""
        self.returns += returns

    def end_round(self, agent: AgentBase, step: int, episodes: int, stats: dict | None,
                  weights: torch.nn.Module | None = None) -> str | None:
        """Why the run stops after this round, or None; evaluates when due and at the stop, once learning began."""
        reason = round_stop_reason(self.args, step, self.evaluator.start_time)
        if stats is not None and (reason is not None or self.evaluator.is_due()):
            reason = self.evaluate(agent, step, episodes, stats, weights) or reason
        return reason

    def evaluate(self, agent: AgentBase, step: int, episodes: int, stats: dict,
                 weights: torch.nn.Module | dict | None = None) -> str | None:
        """One row of agent's actor (weights loaded first if given); the stop reason if it reached target_return."""
        if weights is not None:
            agent.act.load_state_dict(weights if isinstance(weights, dict) else weights.state_dict())
        explore_return = float(np.mean(self.returns)) if self.returns else math.nan
        self.returns = []
        avg_return = self.evaluator.evaluate_and_save(agent, step, episodes, explore_return, stats)
        if avg_return >= self.args.target_return:
            return f"reached target_return {self.args.target_return} (evaluation mean {avg_return:.1f})"
        return None


def round_stop_reason(args: Arguments, step: int, start_time: float) -> str | None:
    """Why the run stops after a round, or None: a `stop` file in cwd (removed, so that a resume
    goes on), break_step, or max_time since start_time (over all of the run's sessions)."""
    path = os.path.join(args.cwd, "stop")
    if os.path.exists(path):
        os.remove(path)
        return "found the file `stop` in cwd"
    if step >= args.break_step:
        return f"reached break_step {args.break_step}"
    if time.time() - start_time >= args.max_time:
        return f"reached max_time {args.max_time} s"
    return None


def check_finite(trajectory: tuple[torch.Tensor, ...], step: int, num_envs: int,
                 save: typing.Callable[[], None] | None):
    """Stop at a NaN or infinite value (observation, reward, action), which would poison every network; save() first
    (None: another process checkpoints). Off-policy (horizon * num_envs, ...), on-policy (horizon, num_envs, ...)."""
    # the step dimensions: the shortest shape (rewards', discounts'); states add one dimension, images three
    lead_shape = min((tensor.shape for tensor in trajectory), key=len)
    # the per-step tensors; a recurrent rollout's start memories come from states of rounds already checked
    per_step = [tensor for tensor in trajectory if tensor.shape[:len(lead_shape)] == lead_shape]
    finite = torch.stack([torch.isfinite(tensor).reshape(*lead_shape, -1).all(-1) for tensor in per_step]).all(0)
    if not finite.all():
        first = int(torch.nonzero(~finite.flatten())[0])  # index in (horizon,) or (horizon * num_envs,) order
        if save is not None:
            save()
        saved = ("the run is saved as it was before that round" if save is not None else
                 "the run's last checkpoint stands (written every save_gap seconds)")
        raise RefusedError(f"the environment returned a NaN or infinite observation or reward (or the agent a NaN "
                           f"action) at step {step + first + 1} (env {first % num_envs}); {saved}, the bad "
                           f"transitions are not in the buffer")


def build_agent(settings: "Arguments | dict", env_info: "EnvInfo", device=None) -> AgentBase:
    """The agent of resolved Arguments or of a run's config.json, its hyperparameters as set (None: the agent's
    default), for env_info's env (a team's agent is told its size), on device (None: cuda when there is one)."""
    get = settings.get if isinstance(settings, dict) else lambda name: getattr(settings, name, None)
    agent_class = Arguments(agent=get("agent")).get_agent_class()
    hyperparameters = {name: get(name) for name in agent_class.hyper_defaults if get(name) is not None}
    team = {"num_agents": env_info.num_agents} if agent_class.if_multi_agent else {}
    return agent_class(network_shape(settings), env_info.state_dim, env_info.action_dim, device=device, **team,
                       **hyperparameters)


def build_buffer(args: Arguments, env_info: "EnvInfo", device) -> ReplayBuffer | RolloutBuffer:
    if args.agent.if_off_policy and args.agent.if_recurrent:  # R2D2's sequences, each with the memory at its start
        shape = net_shape(network_shape(args))
        width = trunk_width(shape, env_info.state_dim)  # the core's memory: an image encoder's width on frames
        return SequenceReplayBuffer(args.buffer_size, env_info.state_dim, width, args.num_envs * args.num_workers,
                                    args.seq_len, args.burn_in, args.gamma, args.n_step, device,  # a round's env copies
                                    memory_rows=NetShape.memory_rows[shape.cell], state_dtype=env_info.state_dtype)
    if args.agent.if_off_policy:
        sizes = (args.buffer_size, env_info.state_dim, env_info.action_dim, env_info.if_discrete, device)
        if args.her_k:  # relabelled rewards come from the learner's own copy of the env
            feedback = make_env(make_twin_env(args.env))[0].get_wrapper_attr("feedback")
            return HindsightReplayBuffer(*sizes, goal_dim=env_info.goal_dim, feedback=feedback, her_k=args.her_k,
                                         num_envs=args.num_envs * args.num_workers,  # a round's env copies
                                         reward_scale=args.reward_scale, gamma=args.gamma)
        if is_image(env_info.state_dim):  # each frame stored once, a round's env copies each a stream of frames
            return (FrameStackPrioritizedReplayBuffer if args.if_per else FrameStackReplayBuffer)(
                *sizes, state_dtype=env_info.state_dtype, num_envs=args.num_envs * args.num_workers, n_step=args.n_step,
                stack=env_info.frame_stack)
        num_rewards = env_info.num_agents if args.agent.if_agent_rewards else 1
        return (PrioritizedReplayBuffer if args.if_per else ReplayBuffer)(
            *sizes, num_agents=env_info.num_agents, num_rewards=num_rewards, state_dtype=env_info.state_dtype)
    if args.buffer_size is not None:  # an on-policy agent with a replay (ACER) keeps whole rollouts
        return SegmentReplayBuffer(args.buffer_size, device)
    return RecurrentRolloutBuffer(device) if args.agent.if_recurrent else RolloutBuffer(device)


class Evaluator:
    """Evaluates the deterministic policy: prints a row, appends it to recorder.csv, keeps the best as actor.pt."""

    eval_share = 0.1  # evaluations are spaced so that they take at most this share of the run's time
    plot_gap = 60.0  # seconds between redraws (one costs 0.2-0.4 s here: under 1% of a run); finish() draws the rest

    def __init__(self, cwd: str, eval_envs: list[gym.Env], eval_gap: float, title: str, if_tensorboard: bool,
                 limits: tuple[int, float, int]):
        self.cwd, self.eval_envs, self.eval_gap, self.title = cwd, eval_envs, eval_gap, title
        if if_tensorboard:  # optional: imported only when asked for, so the library does not need it
            from torch.utils.tensorboard import SummaryWriter
        self.writer = SummaryWriter(cwd) if if_tensorboard else None
        self.start_time = self.session_start = time.time()
        self.best_return = -math.inf
        self.best_actor = None  # a CPU copy of the best actor's weights: actor.pt, and part of every checkpoint
        self.history = []  # one dict per evaluation: the recorder.csv row, the mean episode length, the episodes so far
        self.plot_path, self.if_legend_printed = None, False
        self.last_eval_time, self.eval_seconds = -math.inf, 0.0  # when the last evaluation ended; its episodes' seconds
        # the first redraw after plot_gap: a run that ends sooner is drawn once, by finish()
        self.last_plot_time, self.plotted_rows = self.start_time, 0
        self.limits = limits  # (break_step, max_time, the step this session began at) for each row's progress note

    def state_dict(self) -> dict:
        return {"seconds": time.time() - self.start_time, "best_return": self.best_return,
                "best_actor": self.best_actor, "history": self.history, "plot_path": self.plot_path}

    def load_state_dict(self, state: dict | None):
        """Carry on a resumed run (None: fresh, or an old multiprocess checkpoint from before its first evaluation);
        recorder.csv and actor.pt are rewritten from it: steps keep increasing, actor.pt stays the best row's."""
        if state is not None:
            self.start_time = time.time() - state["seconds"]
            self.best_return, self.best_actor = state["best_return"], state["best_actor"]
            self.history = state["history"]
            # the file name only: a copied run directory's resume must not delete its original's plot
            self.plot_path = state["plot_path"] and os.path.join(self.cwd, os.path.basename(state["plot_path"]))
            self.plotted_rows = len(self.history)
        recorder_path, actor_path = os.path.join(self.cwd, "recorder.csv"), os.path.join(self.cwd, "actor.pt")
        if self.history:
            columns = [name for name in self.history[0] if name != "episodes"]  # plot-only
            with open(recorder_path + ".tmp", "w", newline="") as f:
                csv.writer(f).writerows([columns] + [[row[name] for name in columns] for row in self.history])
            os.replace(recorder_path + ".tmp", recorder_path)
        elif os.path.exists(recorder_path):
            os.remove(recorder_path)
        if self.best_actor is not None:
            save_atomically(self.best_actor, actor_path)
        elif os.path.exists(actor_path):
            os.remove(actor_path)

    def is_due(self) -> bool:
        """Whether the wait after the last evaluation has passed; eval_gap=0: after every round, reproducibly."""
        return self.eval_gap == 0 or (time.time() - self.last_eval_time
                                      >= self.wait_seconds(self.eval_gap, self.eval_seconds))

    @classmethod
    def wait_seconds(cls, eval_gap: float, eval_seconds: float) -> float:
        """eval_gap, or longer so that evaluating takes at most eval_share of the run (slow episodes)."""
        return max(eval_gap, eval_seconds * (1 - cls.eval_share) / cls.eval_share)

    def evaluate_and_save(self, agent: AgentBase, step: int, episodes: int, explore_return: float,
                          stats: dict[str, float]) -> float:
        """One evaluation row after `episodes` exploration episodes; returns the evaluation mean."""
        start = time.time()
        returns, lengths, successes = zip(*run_episodes(self.eval_envs, agent))
        self.eval_seconds = time.time() - start
        avg_return, std_return = float(np.mean(returns)), float(np.std(returns))
        if avg_return > self.best_return:
            self.best_return, self.best_actor = avg_return, cpu_state_dict(agent.act)
            save_atomically(self.best_actor, os.path.join(self.cwd, "actor.pt"))
        row = {"step": step, "seconds": time.time() - self.start_time, "avg_return": avg_return,
               "std_return": std_return, "explore_return": explore_return, "min_return": float(np.min(returns)),
               "max_return": float(np.max(returns)), "avg_length": float(np.mean(lengths))}
        if not np.isnan(successes).all():  # a goal env: the share of episodes that ended at their goal
            row["success_rate"] = float(np.mean(successes))
        row |= stats
        path = os.path.join(self.cwd, "recorder.csv")
        lines = [row.values()] if os.path.exists(path) else [row, row.values()]  # a resumed run appends to its rows
        with open(path, "a", newline="") as f:  # a new file: the names first
            csv.writer(f).writerows(lines)
        if not self.if_legend_printed:  # once per process, a resumed one too
            print(" ".join(f"{name:>12}" for name in row))
            self.if_legend_printed = True
        break_step, max_time, session_step = self.limits  # this session's rate, the time left
        rate = (step - session_step) / max(time.time() - self.session_start, 1e-9)
        left = min(max_time - row["seconds"], (break_step - step) / rate if rate > 0 else math.inf)
        left_text = f"{left / 60:.0f} min" if left < 6000 else f"{left / 3600:.1f} h"
        print(f"{step:>12d} {row['seconds']:>12.1f} " + " ".join(f"{value:>12.4g}" for value in list(row.values())[2:])
              + f"  {rate:,.0f} steps/s, {left_text} left")
        self.history.append(row | {"episodes": episodes})
        if self.writer is not None:
            for name, value in list(row.items())[1:]:
                self.writer.add_scalar(name, value, step)
            self.writer.flush()
        if time.time() - self.last_plot_time >= self.plot_gap:
            self.plot()
        self.last_eval_time = time.time()
        return avg_return

    def finish(self):
        """At the stop: draw the rows the plot does not show yet."""
        if self.plotted_rows < len(self.history):
            self.plot()

    def plot(self):
        """Redraw plot_<Episode>E_<Step>T_<Sec>s.png (extras.tools.draw_run), replacing the last."""
        last = self.history[-1]
        path = os.path.join(self.cwd, f"plot_{last['episodes']}E_{last['step']}T_{int(last['seconds'])}s.png")
        importlib.import_module("extras.tools").draw_run(self.history, self.title, path)
        if self.plot_path not in (None, path) and os.path.exists(self.plot_path):  # gone if killed after a redraw
            os.remove(self.plot_path)  # one plot in cwd, the newest
        self.plot_path = path
        self.last_plot_time, self.plotted_rows = time.time(), len(self.history)


def run_episodes(envs: list[gym.Env], agent: AgentBase, frames: list | None = None, deterministic: bool = True
                 ) -> list[tuple[float, int, float]]:
    """One episode in each env side by side: (return, length, info["is_success"] or NaN) per env; frames: envs[0]'s."""
    states = [env.reset()[0] for env in envs]
    returns, lengths, successes = [0.0] * len(envs), [0] * len(envs), [math.nan] * len(envs)
    running = list(range(len(envs)))
    agent.reset_memory(len(envs))  # a recurrent agent's episodes each start from a zero memory
    while running:
        if frames is not None and running[0] == 0:
            frames.append(envs[0].render())
        actions = agent.select_action(np.stack([states[i] for i in running]), deterministic=deterministic)
        still_running = []
        for i, action in zip(running, actions, strict=True):
            states[i], reward, terminated, truncated, info = envs[i].step(action)
            returns[i] += float(reward)
            lengths[i] += 1
            if not (terminated or truncated):
                still_running.append(i)
            elif "is_success" in info:
                successes[i] = float(info["is_success"])
        agent.keep_memory([running.index(i) for i in still_running])
        running = still_running
    return list(zip(returns, lengths, successes))


def build_evaluator(args: Arguments, env_info: "EnvInfo", step: int, state: dict | None) -> Evaluator:
    """An Evaluator whose envs are seeded after every explorer's env copies; restores a resumed run's state."""
    eval_envs = [make_env(make_twin_env(args.env), if_action_mask=bool(args.if_action_mask),
                             frame_stack=args.frame_stack)[0] for _ in range(args.eval_times)]
    world = torchrun_world()
    explore_copies = args.num_envs * args.num_workers * (1 if world is None else world[1])
    for i, eval_env in enumerate(eval_envs):
        eval_env.reset(seed=args.seed + step + explore_copies + i)
    evaluator = Evaluator(args.cwd, eval_envs, args.eval_gap, f"{args.agent.__name__} on {env_info.env_name}",
                          args.if_tensorboard, limits=(args.break_step, args.max_time, step))
    if args.if_resume:
        evaluator.load_state_dict(state)
    return evaluator


def cpu_state_dict(net: torch.nn.Module) -> dict:
    """A CPU copy of net's weights, to keep or send. Never the tensors: a queue would share their memory, so
    the receiver would read live (half-updated) parameters and a kept best actor would change with training."""
    return {name: tensor.detach().to("cpu", copy=True) for name, tensor in net.state_dict().items()}


def save_atomically(obj, path: str):
    """torch.save aside, then rename: a reader (replay of a running cwd) or a kill never meets a half-written file."""
    torch.save(obj, path + ".tmp")
    os.replace(path + ".tmp", path)


def print_banner(args: Arguments, env_info: "EnvInfo", step: int, where: str):
    """The run's start: agent, env, loop, cwd, and every setting as the run uses it (config.json holds the same)."""
    print(f"{args.agent.__name__} on {env_info.env_name} | {where} | cwd {args.cwd} | "
          f"target_return {args.target_return}" + (f" | resumed at step {step}" if args.if_resume else ""))
    settings = " ".join(f"{name}={value}" for name, value in args.to_dict().items()
                        if value is not None and name not in ("agent", "env", "cwd", "target_return"))
    print(textwrap.fill(settings, width=120, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False),
          flush=True)


# ---- the multiprocess loop: the roles in processes, trajectories and weights through queues ----
def train_multiprocess(args: Arguments, env_info: "EnvInfo") -> tuple[str, int, Recorder]:
    """Explorers and a learner in processes of their own, this one records; a failed child stops the run, named."""
    run_state = start_state(args)
    step = run_state["step"]
    channels, explorers, learner = build_children(args, env_info, step)
    children = [*explorers, learner]
    torch.set_num_threads(1)
    recorder = Recorder(args, env_info, step, run_state["evaluator"])
    eval_agent = build_agent(args, env_info, device="cpu")  # evaluates the learner's weights
    state_path = os.path.join(args.cwd, RECORDER_STATE)
    save_atomically(recorder.state_dict(), state_path)  # the resumed one, if resumed: no newer one from before
    stop_reason = None
    with children_started(children) as ctrl_c:
        print_banner(args, env_info, step,
                     "multiprocess: " + ", ".join(f"{child.name} pid {child.pid}" for child in children))
        try:
            while stop_reason is None and not ctrl_c:
                raise_if_failed(children, channels.errors)
                try:
                    report = channels.reports.get(timeout=0.2)
                except queue.Empty:
                    continue
                except SENDER_LEFT:  # the learner died after sending it: raise_if_failed names it
                    learner.join(timeout=10)
                    continue
                step, stop_reason = report.step, report.stop_reason
                recorder.keep(report.returns)
                # the newest round when due, and the last
                if report.weights is not None and (stop_reason is not None or recorder.evaluator.is_due()):
                    stop_reason = recorder.evaluate(eval_agent, step, report.episodes, report.stats,
                                                    report.weights) or stop_reason
                    save_atomically(recorder.state_dict(), state_path)
            stop_reason = stop_reason or "Ctrl-C"
        finally:
            try:
                recorder.finish()
                save_atomically(recorder.state_dict(), state_path)  # for the learner's final checkpoint
            finally:
                terminated = stop_children(children, channels)
    raise_if_failed([child for child in children if child not in terminated], channels.errors)
    if learner in terminated:  # the explorers have nothing to save; the learner had
        raise RuntimeError(f"the learner did not leave within {CHILD_EXIT_SECONDS} s of the stop ({stop_reason}) and "
                           f"was terminated before it finished its final checkpoint: that checkpoint is lost, and "
                           f"resume continues from the last periodic one (written every save_gap={args.save_gap} s)")
    return stop_reason, step, recorder


CHILD_EXIT_SECONDS = 60.0  # how long the children get to leave after the stop; the learner writes its final checkpoint

# The recorder's state, which the learner copies into each checkpoint: a file, not a queue, since a
# process killed while writing to a pipe leaves half an item that its reader waits on forever.
RECORDER_STATE = "recorder_state.pt"


class Channels(typing.NamedTuple):
    """What a multiprocess run's processes share. Each queue of one item holds the newest (put_newest);
    items stay small (CPU tensors go as handles to shared memory), so each is written to the pipe whole."""
    stop: typing.Any  # an Event: the run is stopping
    errors: typing.Any  # a Queue of (child name, traceback) from children that raised
    weights: tuple  # learner -> each explorer (a Queue each): a CPU copy of the newest actor
    trajectories: tuple  # each explorer (a Queue each) -> learner: (trajectory, returns of the episodes it ended)
    reports: typing.Any  # learner -> recorder: the newest LearnerReport


class LearnerReport(typing.NamedTuple):
    """What the learner sends the recorder after each round of a multiprocess run (the newest replaces the last)."""
    step: int  # environment steps taken, all sessions of the run
    episodes: int  # exploration episodes finished, all sessions
    returns: list  # the returns of the episodes of the rounds since the recorder's last read (put_newest)
    stats: dict | None  # the round's update_net stats; None before learning starts
    weights: dict | None  # a CPU copy of the actor to evaluate; None before learning starts (nothing to evaluate)
    stop_reason: str | None  # why the learner stops after this round (a limit, the stop file), or None


def build_children(args: Arguments, env_info: "EnvInfo", step: int) -> tuple[Channels, list, typing.Any]:
    """The channels, the explorer processes and the learner process of a run at `step`, not started yet."""
    ctx = mp.get_context(start_method_for(args.start_method))
    one_per_worker = lambda: tuple(ctx.Queue(1) for _ in range(args.num_workers))
    channels = Channels(ctx.Event(), ctx.Queue(), one_per_worker(), one_per_worker(), ctx.Queue(1))
    names = ["explorer"] if args.num_workers == 1 else [f"explorer {worker}" for worker in range(args.num_workers)]
    explorers = [ctx.Process(target=run_child, name=name, daemon=True,
                             args=(explorer_process, channels, args, env_info, step, worker))
                 for worker, name in enumerate(names)]
    learner = ctx.Process(target=run_child, name="learner", daemon=True,
                          args=(learner_process, channels, args, env_info))
    return channels, explorers, learner


# steps of each env between an off-policy explorer's looks for newer weights (within a round too: fresher weights)
REFRESH_STEPS = 32


def explorer_process(channels: Channels, args: Arguments, env_info: "EnvInfo", start_step: int, worker: int):
    """Off-policy: take the newest weights every REFRESH_STEPS steps without waiting. On-policy: wait for the weights
    trained on the last round, so each is learned from the policy that acted (History/UPDATE_LOG.md, 2026-11-26)."""
    explorer = Explorer.in_process(args, env_info, start_step, worker, args.num_envs * args.num_workers)
    weights_queue, trajectories = channels.weights[worker], channels.trajectories[worker]
    trajectories.cancel_join_thread()  # at exit, do not wait for the learner to read what it no longer needs
    if_wait = not args.agent.if_off_policy  # for the weights trained on its last rollout
    chunk_steps = explorer.horizon if if_wait else REFRESH_STEPS
    step = start_step  # of all the workers, which explore in step (a round is one of each)
    while True:
        if if_wait or step == start_step:  # the first round's weights; on-policy, every round's
            weights = get_until_stopped(weights_queue, channels.stop)
            if weights is None:
                break
            explorer.refresh(weights)
        chunks = []
        for chunk_start in range(0, explorer.horizon, chunk_steps):
            steps = min(chunk_steps, explorer.horizon - chunk_start)
            chunks.append(explorer.explore(step, steps))
            step += steps * args.num_envs * args.num_workers
            weights = None if if_wait else receive(weights_queue, channels.stop)  # the newest, if any came since
            if weights is not None:
                explorer.refresh(weights)
        trajectory = tuple(torch.cat(parts) for parts in zip(*chunks))  # the chunks one after another along the steps
        if (not put_until_stopped(trajectories, (trajectory, explorer.new_returns()), channels.stop)
                or is_stopping(channels.stop)):
            break


def merge_trajectories(trajectories: list[tuple[torch.Tensor, ...]], if_off_policy: bool, num_envs: int
                       ) -> tuple[torch.Tensor, ...]:
    """One round's worker trajectories as one vector env's of num_envs * num_workers copies, worker
    by worker: on-policy (T, N, ...) along N; off-policy (T * N, ...) in step-then-env order."""
    if len(trajectories) == 1:
        return trajectories[0]
    if not if_off_policy:
        return tuple(torch.cat(parts, dim=1) for parts in zip(*trajectories))
    return tuple(torch.cat([part.unflatten(0, (-1, num_envs)) for part in parts], dim=1).flatten(0, 1)
                 for parts in zip(*trajectories))


def learner_process(channels: Channels, args: Arguments, env_info: "EnvInfo"):
    """A multiprocess run's learner: learns each round, sends weights and reports, writes every checkpoint."""
    learner = Learner(args, env_info)
    learner.recorder_state = lambda: load_weights(os.path.join(args.cwd, RECORDER_STATE), "cpu")
    start_time = time.time() - (learner.run_state["evaluator"] or {"seconds": 0.0})["seconds"]  # of all sessions
    print(f"learner: device {learner.agent.device}" + (f", resumed at step {learner.step}" if args.if_resume else ""),
          flush=True)
    for weights_queue in channels.weights:
        weights_queue.cancel_join_thread()  # stale weights left unread by a stopped explorer may be dropped
        put_newest(weights_queue, cpu_state_dict(learner.agent.act))
    stop_reason = None
    while stop_reason is None:
        items = [get_until_stopped(trajectories, channels.stop) for trajectories in channels.trajectories]
        if None in items:
            break
        trajectory = merge_trajectories([item[0] for item in items], args.agent.if_off_policy, args.num_envs)
        returns = [value for item in items for value in item[1]]
        learner.store(trajectory, args.num_envs * args.num_workers)
        learner.episodes += len(returns)
        stats = learner.learn(trajectory)
        weights = None if stats is None else cpu_state_dict(learner.agent.act)  # the explorers take the statistics too
        for weights_queue in channels.weights if weights is not None else ():
            put_newest(weights_queue, weights)
        stop_reason = round_stop_reason(args, learner.step, start_time)
        put_newest(channels.reports,
                   LearnerReport(learner.step, learner.episodes, returns, stats, weights, stop_reason))
        learner.save_when_due(False)
    while not is_stopping(channels.stop):  # the recorder evaluates the last weights, then stops the run
        time.sleep(0.05)
    if mp.parent_process().is_alive():  # a killed run keeps its last periodic checkpoint, as a serial one does
        learner.save()


# ---- environments: a gymnasium env, its facts, the explorer's vector env ----
@dataclasses.dataclass
class EnvInfo:
    env_name: str
    state_dim: int | tuple[int, ...]  # a flat state's length, or an image's shape (AgentNet.ImageEncoder)
    action_dim: int  # number of actions if discrete, else the action vector's length
    if_discrete: bool
    target_return: float  # the spec's reward_threshold; +inf (never stop on return) if it has none
    goal_dim: int = 0  # a goal env's goal length (its states end with achieved_goal, desired_goal); 0: not a goal env
    # a team (MultiAgentEnv): state_dim and action_dim are each agent's; the env's are num_agents side by side
    if_multi_agent: bool = False
    num_agents: int = 1
    state_dtype: torch.dtype = torch.float32  # how the buffers store states: float32, or an image's own (uint8, bool)
    frame_stack: int = 1  # frames an image state stacks (FrameStackObservation); replay stores each frame once


# ids that declare no reward_threshold (why these: README.md; History/UPDATE_LOG.md, 2026-11-24)
TARGET_RETURN_WITHOUT_THRESHOLD = {"Pendulum-v1": -200.0, "FetchReach-v4": -5.0}

# optional env families, each a module of extras/ imported on first use (env_family): id pattern ->
# module, which makes the env (make) and registers its ids with gymnasium (register)
ENV_FAMILIES = {r"ALE/|MinAtar/|CarRacing-": "extras.pixels",  # frames: ale-py, minatar, gymnasium's box2d
                r"mpe2/|(simple\w*|collect_treasure)_v\d+$": "extras.teams",  # PettingZoo's particle envs (mpe2)
                r"Fetch|HandManipulate|HandReach|PointMaze|AntMaze|Adroit|FrankaKitchen": "extras.goals",  # robotics
                r"\w+NoVel-v\d+$": "extras.no_velocity"}  # the velocity-masked benchmark tasks

GOAL_KEYS = {"observation", "achieved_goal", "desired_goal"}  # a goal env's Dict observation (extras.goals)

# the other optional adapters, each chosen by a field or by the env given: what chooses it -> module of extras/
ADAPTERS = {"goal_env": "extras.goals",  # a Dict observation of GOAL_KEYS; her_k's relabelling
            "if_action_mask": "extras.masks", "env_backend=envpool": "extras.envpool_backend",
            "pettingzoo": "extras.teams"}  # a PettingZoo parallel env; whether a team's agents compete


def adapter(chooser: str):
    """The module of extras/ that ADAPTERS names, imported on first use."""
    return importlib.import_module(ADAPTERS[chooser])


# the entry points that the config.json of a run before 2026-11-28 records, where its family moved to extras/
MOVED_ENTRY_POINTS = {"AgentRun:MultiAgentEnv": "extras.teams:MultiAgentEnv",
                      "AgentRun:make_no_velocity_env": "extras.no_velocity:make_no_velocity_env"}


def env_family(env_id: str):
    """The module of extras/ that makes env_id (ENV_FAMILIES), imported; None for an id gymnasium makes alone."""
    module = next((name for pattern, name in ENV_FAMILIES.items() if re.match(pattern, env_id)), None)
    return None if module is None else importlib.import_module(module)


def make_twin_env(env: str | gym.Env) -> str | gym.Env:
    """A second, independent env for evaluation: the same id, or a new instance of an instance's spec."""
    if isinstance(env, str):
        return env
    return gym.make(env.spec) if getattr(env, "spec", None) is not None else copy.deepcopy(env)


def make_env(env: str | gym.Env, if_record_ends: bool = False, if_action_mask: bool = False,
                frame_stack: int | None = None) -> tuple[gym.Env, EnvInfo]:
    """Make the env, check its spaces, flatten structured observations, take Box actions in [-1, 1] (agent_actions)."""
    if frame_stack is not None and not (isinstance(env, str) and env.startswith("ALE/")):
        raise RefusedError(f"frame_stack={frame_stack!r} is not accepted for "
                           f"{env if isinstance(env, str) else 'an env instance'}: it sets how many frames the states "
                           f"of an ALE/<Game>-v5 id stack (an instance comes stacked as it was made; MinAtar's grids "
                           f"are one frame already); leave frame_stack None")
    if isinstance(env, str):
        env = make_env_of_id(env, frame_stack)
    if not isinstance(env, gym.Env) and hasattr(env, "possible_agents"):  # a PettingZoo env: a MultiAgentEnv
        env = adapter("pettingzoo").from_pettingzoo(env)
    if not isinstance(env, gym.Env):
        raise RefusedTypeError(f"env must be a gymnasium id or a gymnasium.Env instance (or a PettingZoo parallel "
                               f"env), got {type(env).__name__}")
    spec, unwrapped = env.spec, env.unwrapped  # no spec: a team's PettingZoo name, else the class's
    env_name = spec.id if spec is not None else (
        unwrapped.name if hasattr(unwrapped, "possible_agents") else type(unwrapped).__name__)
    goal_dim = 0
    if isinstance(env.observation_space, gym.spaces.Dict) and set(env.observation_space.spaces) == GOAL_KEYS:
        env = adapter("goal_env").GoalObservation(env, if_record_ends)
        goal_dim = env.goal_dim
    elif if_action_mask:
        env = adapter("if_action_mask").ActionMaskObservation(env, env_name)
    elif isinstance(env.observation_space, FLATTENED_SPACES):  # Discrete parts one-hot
        check_flattenable(env.observation_space, env_name)
        env = gym.wrappers.FlattenObservation(env)
    obs_space = env.observation_space
    num_agents = len(getattr(env.unwrapped, "possible_agents", [None]))  # a MultiAgentEnv's team, side by side
    state_dim = observation_shape(obs_space, env_name, num_agents)
    env, if_discrete, action_dim = agent_actions(env, env_name, num_agents)
    inner = env  # a TimeLimit wrapper ends its episodes, or a PettingZoo env's max_cycles
    while isinstance(inner, gym.Wrapper) and not isinstance(inner, gym.wrappers.TimeLimit):
        inner = inner.env
    if not isinstance(inner, gym.wrappers.TimeLimit) and getattr(inner, "max_cycles", None) is None:
        raise RefusedError(f"{env_name} has no time limit, so an evaluation episode might never end; wrap it in "
                           f"gymnasium.wrappers.TimeLimit(env, max_episode_steps=N), or register it with "
                           f"max_episode_steps")
    threshold = spec.reward_threshold if spec is not None else None
    if threshold is None:
        threshold = TARGET_RETURN_WITHOUT_THRESHOLD.get(env_name, math.inf)
    stack_size = env.get_wrapper_attr("stack_size") if env.has_wrapper_attr("stack_size") else 1
    return env, EnvInfo(env_name, state_dim, action_dim, if_discrete, float(threshold), goal_dim,
                        hasattr(env.unwrapped, "possible_agents"), num_agents,
                        torch.from_numpy(np.empty(0, obs_space.dtype)).dtype if is_image(state_dim) else torch.float32,
                        stack_size if is_image(state_dim) else 1)


def make_env_of_id(env_id: str, frame_stack: int | None = None) -> gym.Env:
    """The env of an id: an optional family's (ENV_FAMILIES) or gymnasium's; an unknown id refused."""
    family = env_family(env_id)
    if family is not None:
        return family.make(env_id, frame_stack)
    try:
        return gym.make(env_id)
    except gym.error.Error as error:
        raise RefusedError(f"unknown environment id {env_id!r} ({error}); pass a registered gymnasium id such as "
                           f"CartPole-v1, Pendulum-v1, LunarLander-v3 or LunarLanderContinuous-v3 "
                           f"(gymnasium.pprint_registry() lists them all), an mpe2 id such as simple_spread_v3, "
                           f"a gymnasium.Env instance, or a PettingZoo parallel env") from None


def observation_shape(obs_space: gym.spaces.Space, env_name: str, num_agents: int) -> int | tuple[int, ...]:
    """state_dim of an observation space: a flat Box's length (each agent's), or an image's shape; else refused."""
    accepted = ("the agents take flat Box observations of shape (state_dim,), Dict, Tuple and Discrete ones of Box and "
                "Discrete parts (flattened), a goal env's Dict, or uint8 or bool images")
    if isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1:
        return obs_space.shape[0] // num_agents
    if not (isinstance(obs_space, gym.spaces.Box) and obs_space.dtype in (np.uint8, np.bool_) and num_agents == 1):
        raise RefusedError(f"{env_name}: observation space {obs_space} is not supported; {accepted}")
    try:
        ImageEncoder.layout(obs_space.shape)
    except ValueError as error:
        raise RefusedError(f"{env_name}: observation space {obs_space} is not supported; {accepted}: {error}") from None
    return tuple(obs_space.shape)


# observation spaces made flat Box ones by gymnasium's flatten utilities (Discrete parts one-hot)
FLATTENED_SPACES = (gym.spaces.Dict, gym.spaces.Tuple, gym.spaces.Discrete, gym.spaces.MultiDiscrete,
                    gym.spaces.MultiBinary)


def check_flattenable(space: gym.spaces.Space, env_name: str):
    """Refuse an observation space with parts that gymnasium's flatten utilities cannot make a flat Box of."""
    def parts(space):
        children = space.spaces.values() if isinstance(space, gym.spaces.Dict) else \
            space.spaces if isinstance(space, gym.spaces.Tuple) else None
        return [space] if children is None else [leaf for child in children for leaf in parts(child)]
    leaves = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
    other = [leaf for leaf in parts(space) if not isinstance(leaf, leaves)]
    if other:
        raise RefusedError(f"{env_name}: observation space {space} is not supported: its parts {other} cannot be "
                           f"flattened; the agents take Box, Discrete, MultiDiscrete and MultiBinary parts")


def agent_actions(env: gym.Env, env_name: str, num_agents: int) -> tuple[gym.Env, bool, int]:
    """The env taking the agents' actions (Discrete from 0, Box in [-1, 1]), if_discrete and action_dim (per agent)."""
    action_space = env.action_space
    if isinstance(action_space, gym.spaces.MultiDiscrete) and hasattr(env.unwrapped, "possible_agents"):
        return env, True, int(action_space.nvec[0])  # each agent's actions 0..n-1 (MultiAgentEnv)
    if isinstance(action_space, gym.spaces.Discrete):
        action_dim = int(action_space.n)
        if action_space.start != 0:  # the agents' actions are 0..n-1
            start = int(action_space.start)
            env = gym.wrappers.TransformAction(env, lambda action: action + start, gym.spaces.Discrete(action_dim))
        return env, True, action_dim
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
        if not (np.all(np.isfinite(action_space.low)) and np.all(np.isfinite(action_space.high))):
            raise RefusedError(f"{env_name}: action space {action_space} has infinite bounds; they must be finite "
                               f"so that the agents' [-1, 1] actions can be rescaled to them")
        if not is_unit_box(action_space):
            env = gym.wrappers.RescaleAction(env, np.float32(-1), np.float32(1))  # float32: a float64 Box warns
        return env, False, action_space.shape[0] // num_agents
    raise RefusedError(f"{env_name}: action space {action_space} is not supported; "
                       f"the agents take Discrete or flat Box action spaces")


def is_unit_box(space: gym.spaces.Box) -> bool:
    """Whether a Box's bounds are the agents' [-1, 1] already, so that their actions need no rescaling."""
    return bool(np.all(space.low == -1) and np.all(space.high == 1))


def make_vector_env(env: str | gym.Env, num_envs: int | None = None, if_record_ends: bool = False,
                    returns_kept: int = 100, if_action_mask: bool = False, frame_stack: int | None = None
                    ) -> tuple[gym.Env, EnvInfo]:
    """A prepared env and its EnvInfo; with num_envs a vector env (same-step autoreset); keeps returns_kept returns."""
    single, env_info = make_env(env, if_record_ends, if_action_mask, frame_stack)
    if num_envs is None:
        return gym.wrappers.RecordEpisodeStatistics(single, buffer_length=returns_kept), env_info
    copies = [single] + [make_env(make_twin_env(env), if_record_ends, if_action_mask, frame_stack)[0]
                         for _ in range(num_envs - 1)]
    vector_env = gym.vector.SyncVectorEnv([lambda one=one: one for one in copies],
                                          autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    return gym.wrappers.vector.RecordEpisodeStatistics(vector_env, buffer_length=returns_kept), env_info


def make_explore_env(args: "Arguments") -> gym.Env:
    """The explorer's env: plain for off-policy with num_envs=1 (cheapest), else vector; keeps a round's returns."""
    if args.env_backend == "envpool":
        env = adapter("env_backend=envpool").EnvPoolVectorEnv(args.env, args.num_envs)
        if isinstance(env.single_action_space, gym.spaces.Box) and not is_unit_box(env.single_action_space):
            env = gym.wrappers.vector.RescaleAction(env, np.float32(-1), np.float32(1))  # as agent_actions does
        return gym.wrappers.vector.RecordEpisodeStatistics(env, buffer_length=max(100, args.steps_per_round))
    if_plain = args.agent.if_off_policy and not args.agent.if_recurrent and args.num_envs == 1
    return make_vector_env(args.env, None if if_plain else args.num_envs,
                     if_record_ends=bool(args.her_k), returns_kept=max(100, args.steps_per_round),
                     if_action_mask=bool(args.if_action_mask), frame_stack=args.frame_stack)[0]


def pop_not_done(env) -> torch.Tensor:
    """GoalObservation's record since the last call, (steps * num_envs,) step-then-env: 1 where the episode went on."""
    if hasattr(env, "num_envs"):
        return torch.tensor(env.unwrapped.call("pop_not_done"), dtype=torch.float32).T.flatten()  # (N, T) -> (T * N,)
    return torch.tensor(env.get_wrapper_attr("pop_not_done")(), dtype=torch.float32)


def episode_count(env: gym.Env) -> int:
    """Episodes the env has finished, as an int: a weights_only checkpoint refuses numpy integers."""
    return int(env.episode_count)


# ---- checkpoints ----
CHECKPOINT_VERSION = 2  # the layout of run_state.pt; a checkpoint of another layout is refused rather than misread

NEW_RUN = {"step": 0, "episodes": 0, "evaluator": None}  # the run state of a run that starts (start_state)


def save_checkpoint(cwd: str, agent: AgentBase, buffer: ReplayBuffer | RolloutBuffer | None, run_state: dict):
    """cwd/checkpoint/: the agent, the buffer's filled part (None: left out) and run_state. Written aside and
    renamed, so a kill leaves one complete checkpoint (`checkpoint`, or `checkpoint.old` between the renames)."""
    final, aside, old = (os.path.join(cwd, name) for name in ("checkpoint", "checkpoint.tmp", "checkpoint.old"))
    shutil.rmtree(aside, ignore_errors=True)
    os.makedirs(aside)
    agent.save_or_load_agent(aside, if_save=True)
    # an on-policy rollout is discarded after each update anyway; ACER's replayed ones are not
    if_buffer_saved = isinstance(buffer, (ReplayBuffer, SegmentReplayBuffer))
    if if_buffer_saved:
        torch.save(buffer.state_dict(), os.path.join(aside, "buffer.pt"))
    torch.save(run_state | {"version": CHECKPOINT_VERSION, "if_buffer_saved": if_buffer_saved},
               os.path.join(aside, "run_state.pt"))
    if os.path.isdir(final):
        shutil.rmtree(old, ignore_errors=True)
        os.rename(final, old)
    os.rename(aside, final)
    shutil.rmtree(old, ignore_errors=True)


def find_checkpoint(cwd: str) -> str:
    path = next((os.path.join(cwd, name) for name in ("checkpoint", "checkpoint.old")
                 if os.path.isdir(os.path.join(cwd, name))), None)
    if path is None:
        raise MissingRunError(f"no checkpoint in {cwd!r} to resume from (cwd/checkpoint is written every save_gap "
                              f"seconds and at every stop)")
    return path


def read_run_state(cwd: str) -> dict:
    """The counters, recorder state and RNG states of cwd's checkpoint (a weights_only load)."""
    path = os.path.join(find_checkpoint(cwd), "run_state.pt")
    run_state = load_weights(path, "cpu")
    if run_state.get("version") != CHECKPOINT_VERSION:
        raise RefusedError(f"{path} was written by another version of AgentRun.py (checkpoint layout "
                           f"{run_state.get('version', 1)}, this one reads {CHECKPOINT_VERSION}); resume it with the "
                           f"version that wrote it, or start a new run")
    return run_state


def load_checkpoint(cwd: str, agent: AgentBase, buffer) -> dict:
    """Restore the agent and the buffer from cwd's checkpoint (weights_only loads) and return run_state."""
    run_state, path = read_run_state(cwd), find_checkpoint(cwd)
    agent.save_or_load_agent(path, if_save=False)
    if run_state["if_buffer_saved"]:
        buffer.load_state_dict(load_weights(os.path.join(path, "buffer.pt"), buffer.device))
    elif isinstance(buffer, (ReplayBuffer, SegmentReplayBuffer)):
        print(f"resume: {path} holds no replay buffer (if_save_buffer=False); it refills from new exploration, "
              f"and learning waits until it holds batch_size transitions", flush=True)
    if agent.if_recurrent:  # the explorer starts new episodes (Explorer), and a memory is its episode's
        print(f"resume: {type(agent).__name__}'s memories are not in the checkpoint; every env copy's restarts at zero "
              f"with its next episode, which the resumed explorer starts now", flush=True)
    return run_state


def start_state(args: Arguments, agent: AgentBase | None = None, buffer=None) -> dict:
    """Step 0, or the checkpoint's run_state; given an agent and buffer, restores them and the RNG states."""
    if not args.if_resume:
        return dict(NEW_RUN)
    if agent is None:
        return read_run_state(args.cwd)
    run_state = load_checkpoint(args.cwd, agent, buffer)
    torch.set_rng_state(run_state["rng"]["cpu"])
    cuda = run_state["rng"]["cuda"]  # resumed on a machine of other GPUs, they draw anew
    if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda)
    return run_state


# ==== the core ends here: what follows serves it (checks, plumbing) or other loops ====
# ---- after the core: resolving and refusing the arguments ----
ARGUMENT_NAMES = {f.name for f in dataclasses.fields(Arguments)}

# 2026-11-28; repeat_times meant two things: replay_ratio (off-policy agents, ACER) and epochs (on-policy)
RENAMED = {"target_step": ("steps_per_round",), "max_memo": ("buffer_size",), "net_dim": ("net_dims",),
           "repeat_times": ("replay_ratio", "epochs")}


def read_config(path: str) -> dict:
    """A run's config.json, a run's from before the renames (RENAMED) under the new names."""
    with open(path) as f:
        config = json.load(f)
    agent_class = AGENT_CLASSES.get(config.get("agent"))
    for old, names in RENAMED.items():
        if old in config:
            new = next((name for name in names if agent_class and name in agent_settings(agent_class)), names[0])
            value = config.pop(old)
            config[new] = value if config.get(new) is None else config[new]  # net_dims' widths win over net_dim
    return config


def refuse_renamed(given: dict):
    """Refuse a field by its old name (RENAMED), naming the new one(s)."""
    for old, value in given.items():
        if value is not None:
            names = RENAMED[old]
            which = "" if len(names) == 1 else " (replay_ratio: off-policy agents and AgentACER; epochs: on-policy)"
            raise RefusedError(f"{old}= is not accepted: it was renamed {' or '.join(f'{n}=' for n in names)} (the "
                               f"same value){which}; pass {' or '.join(f'{n}={value}' for n in names)}")


# the agents a run takes: AgentZoo's AgentBase subclasses but the shared bases, which no task trains
AGENT_CLASSES = {name: obj for name, obj in sorted(vars(AgentZoo).items())
                 if isinstance(obj, type) and issubclass(obj, AgentBase)
                 and obj not in (AgentBase, AgentZoo.AgentOffPolicy, AgentZoo.AgentOnPolicy)}


def agent_settings(agent_class: type) -> dict:
    """The Arguments an agent class gives defaults for: its loop settings and its hyperparameters."""
    return agent_class.train_defaults | agent_class.hyper_defaults


# the settings of any AgentZoo agent; fill_defaults refuses those the chosen agent lacks
AGENT_KNOBS = {name for cls in AGENT_CLASSES.values() for name in agent_settings(cls)} & ARGUMENT_NAMES


def agent_for(args: Arguments, env_info: "EnvInfo") -> type:
    """The agent class, refused (naming those that suit) for another kind of env: team, action space, images."""
    agent_class, env_name = args.get_agent_class(), env_info.env_name
    suitable = [name for name, cls in AGENT_CLASSES.items() if cls.if_multi_agent == env_info.if_multi_agent
                and cls.if_discrete == env_info.if_discrete]
    if agent_class.if_multi_agent != env_info.if_multi_agent:
        team = f"multi-agent env ({env_info.num_agents} agents)" if env_info.if_multi_agent else "single-agent env"
        why = f"is a {'multi' if agent_class.if_multi_agent else 'single'}-agent agent, but {env_name} is a {team}"
    elif agent_class.if_discrete != env_info.if_discrete:
        why = (f"is for {'Discrete' if agent_class.if_discrete else 'Box'} action spaces, but {env_name} has a "
               f"{'Discrete' if env_info.if_discrete else 'Box'} action space")
    elif is_image(env_info.state_dim) and not agent_class.if_image_states:  # images come single-agent only
        why = f"does not take image observations, but {env_name}'s are images of shape {env_info.state_dim}"
        suitable = [name for name in suitable if AGENT_CLASSES[name].if_image_states]
    else:
        return agent_class
    raise RefusedError(f"{agent_class.__name__} {why}; use one of {', '.join(suitable)}")


def fill_defaults(args: Arguments, env_info: "EnvInfo"):
    """Fill the None fields from the agent or the env, but if_multiprocess; refuse another agent's setting."""
    own_settings = agent_settings(args.agent)
    for name in sorted(AGENT_KNOBS - set(own_settings)):
        if getattr(args, name) is not None:
            users = ", ".join(agent for agent, cls in AGENT_CLASSES.items() if name in agent_settings(cls))
            raise RefusedError(f"{name}={getattr(args, name)!r} is not accepted: {args.agent.__name__} has no "
                               f"{name} (only {users} have it); {args.agent.__name__}'s own settings are "
                               f"{', '.join(sorted(own_settings))}")
    if args.common_reward is None and own_settings.get("common_reward") and env_info.if_multi_agent and \
            adapter("pettingzoo").is_competing_team(env_info.env_name):
        selfish = ", ".join(name for name, cls in AGENT_CLASSES.items() if cls.if_agent_rewards)
        raise RefusedError(f"{args.agent.__name__} learns one value of the team's common reward, the sum of every "
                           f"agent's; the agents of {env_info.env_name} compete (adversaries against the "
                           f"others), so that sum would train each side to help the other: pass "
                           f"common_reward=True to learn it anyway, or use an agent that learns from each "
                           f"agent's own reward ({selfish})")
    if args.her_k is None and "her_k" in own_settings and not env_info.goal_dim:  # relabelling needs goals
        args.her_k = 0
    if args.if_noisy and args.explore_rate is None:  # NoisyNet-DQN explores without epsilon (arXiv:1706.10295)
        args.explore_rate = 0.0
    if args.if_multiprocess is False and args.num_workers is None:  # a serial run's one explorer (AgentApeX: 2)
        args.num_workers = 1
    if args.if_clip_reward is None and own_settings.get("if_clip_reward", False) is None:  # Atari's: DQN's clip
        args.if_clip_reward = env_info.env_name.startswith("ALE/")
    if_image_replay = args.buffer_size is None and args.agent.if_off_policy and is_image(env_info.state_dim)
    for name, value in own_settings.items():
        if name in ARGUMENT_NAMES and name != "if_multiprocess" and getattr(args, name) is None:
            setattr(args, name, value)
    if if_image_replay:  # R2D2's sequences: burn_in + seq_len states and as many bootstrap states each
        states = 2 * (args.burn_in + args.seq_len) if args.agent.if_recurrent else 0
        args.buffer_size = replay_capacity(env_info, own_settings["buffer_size"], states)
    if args.target_return is None:
        args.target_return = env_info.target_return
    if args.cwd is None:
        args.cwd = f"./{args.agent.__name__}_{env_info.env_name}_{args.seed}"


def check_values(args: Arguments):
    ranges = {  # what the refusal says a number must be: (its test, the fields it applies to)
        "> 0": (lambda v: v > 0, "num_threads batch_size learning_rate actor_learning_rate target_kl reward_scale "
                "buffer_size steps_per_round replay_ratio epochs num_envs break_step max_time eval_times save_gap "
                "alpha_init max_kl kl_clip damping rho_clip"),
        ">= 0": (lambda v: v >= 0, "random_steps eval_gap explore_noise noise_beta random_beta policy_noise "
                 "noise_clip entropy_coef burn_in lambda_opt lambda_nopt her_k"),
        ">= 1": (lambda v: v >= 1, "num_workers seq_len frame_stack n_step"), ">= 2": (lambda v: v >= 2, "num_atoms"),
        "in (0, 1]": (lambda v: 0 < v <= 1, "gamma soft_update_tau"),
        "in [0, 1]": (lambda v: 0 <= v <= 1, "explore_rate lambda_gae"),
        "in (0, 1)": (lambda v: 0 < v < 1, "ratio_clip"),
        "(finite)": (math.isfinite, "v_max"),  # before v_min, which is compared with it
        f"below v_max={args.v_max}": (lambda v: math.isfinite(v) and v < args.v_max, "v_min"),
    }
    for accepted, (test, names) in ranges.items():
        for name in names.split():
            value = getattr(args, name)
            if value is None:  # still None after the defaults: this agent does not use it (PPO: buffer_size)
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or not test(value):
                raise RefusedError(f"{name}={value!r} is not accepted: {name} must be a number {accepted}")
    for field in dataclasses.fields(args):  # the fields annotated int (or None) take integers only
        kinds, value = typing.get_args(field.type) or (field.type,), getattr(args, field.name)
        if set(kinds) - {type(None)} == {int} and value is not None and (
                isinstance(value, bool) or not isinstance(value, int)):
            raise RefusedError(f"{field.name}={value!r} is not accepted: {field.name} must be an integer")
    if args.agent.if_multi_agent:  # VDN, QMIX, QTRAN, COMA: a common reward only
        args.agent.check_common_reward(args.common_reward)


def check_options(args: Arguments, env_info: "EnvInfo"):
    """The checks beyond a number's range: names, packages, settings that must agree with others or the env."""
    args.net_dims = parse_widths(args.net_dims)
    for name, names in (("activation", NetShape.activations), ("recurrent_cell", NetShape.cells)):
        if getattr(args, name) not in (None, *names):
            raise RefusedError(f"{name}={getattr(args, name)!r} is not accepted: one of {', '.join(names)}")
    if args.start_method not in (None, *mp.get_all_start_methods()):
        raise RefusedError(f"start_method={args.start_method!r} is not accepted: "
                           f"None or one of {mp.get_all_start_methods()}")
    if args.if_tensorboard:
        try:
            import torch.utils.tensorboard  # noqa: F401  (only to fail here, before anything is written)
        except ImportError:
            raise RefusedError("if_tensorboard=True needs the tensorboard package (pip install tensorboard); "
                               "without it, recorder.csv and the plot hold the same numbers") from None
    if args.env_backend not in ("gymnasium", "envpool"):
        raise RefusedError(f"env_backend={args.env_backend!r} is not accepted: 'gymnasium' or 'envpool'")
    if args.env_backend == "envpool":
        adapter("env_backend=envpool").check_arguments(args, env_info)
    if args.her_k:
        adapter("goal_env").check_arguments(args, env_info)
    if args.if_state_norm and is_image(env_info.state_dim):
        raise RefusedError(f"if_state_norm=True is not accepted with image observations ({env_info.env_name}: "
                           f"{env_info.state_dim}): the image encoder scales pixels inside the network; it accepts "
                           f"flat Box observations (state_dim,); pass if_state_norm=False")
    if_rollout_cut = args.seq_len is not None and not args.agent.if_off_policy  # R2D2's sequences overlap instead
    if if_rollout_cut and (args.steps_per_round // args.num_envs) % args.seq_len:
        raise RefusedError(f"seq_len={args.seq_len} is not accepted with steps_per_round={args.steps_per_round} "
                           f"and num_envs={args.num_envs}: it must divide steps_per_round // num_envs = "
                           f"{args.steps_per_round // args.num_envs}, the steps of each env copy's rollout, so "
                           f"that the learning sequences are whole")
    if args.agent.if_explorer_priorities and not args.if_per:
        raise RefusedError(f"if_per={args.if_per} is not accepted: {args.agent.__name__}'s explorers compute the "
                           f"priorities that its learner replays by (PrioritizedReplayBuffer); pass if_per=True or "
                           f"leave it None, or use AgentD3QN for uniform replay")
    if args.agent.if_off_policy and args.break_step <= args.random_steps:
        raise RefusedError(f"break_step={args.break_step} is not accepted: {args.agent.__name__} explores at "
                           f"random for its first random_steps={args.random_steps} steps and learns only after "
                           f"them; pass a break_step above random_steps, or a smaller random_steps")


def choose_loop(args: Arguments):
    """None -> the agent's faster loop; True if num_workers > 1; refuses a serial loop the agent cannot run."""
    if args.if_multiprocess is False and args.agent.if_async:
        raise RefusedError(f"if_multiprocess=False is not accepted: {args.agent.__name__} learns in num_workers "
                           f"processes of its own (train_async); pass if_multiprocess=True, or leave it None")
    if args.if_multiprocess is False and args.num_workers > 1:
        raise RefusedError(f"num_workers={args.num_workers} is not accepted with if_multiprocess=False: the "
                           f"explorers are processes of a multiprocess run; pass if_multiprocess=True (or leave "
                           f"it None), or num_workers=1")
    if args.if_multiprocess is None:
        args.if_multiprocess = agent_settings(args.agent).get("if_multiprocess", False)
    args.if_multiprocess = args.if_multiprocess or args.num_workers > 1


REPLAY_FRAME_BYTES = 8 * 2 ** 30  # what a default replay of images may hold: 8 GiB of frames


def replay_capacity(env_info: "EnvInfo", default: int, states_per_entry: int = 0) -> int:
    """Default replay capacity on images: the agent's, or the largest power of 2 whose frames fit
    REPLAY_FRAME_BYTES (History/UPDATE_LOG.md, 2026-11-26 and 2026-11-27)."""
    state = math.prod(env_info.state_dim) * env_info.state_dtype.itemsize
    entry = states_per_entry * state if states_per_entry else state // env_info.frame_stack
    return min(default, 2 ** int(math.log2(REPLAY_FRAME_BYTES / entry)))


def network_shape(settings: "Arguments | dict") -> "int | NetShape":
    """The agents' net_dim from Arguments or config.json: net_dims' int, or a NetShape of its widths, activation and
    recurrent cell where any is more than one width."""
    get = settings.get if isinstance(settings, dict) else lambda name: getattr(settings, name)
    net_dims, activation, cell = (get(name) for name in ("net_dims", "activation", "recurrent_cell"))
    if isinstance(net_dims, int) and activation is None and cell is None:
        return net_dims
    widths = (net_dims, net_dims) if isinstance(net_dims, int) else tuple(net_dims)
    return NetShape(widths, activation or "relu", cell or "lstm")


def parse_overrides(argv: list[str]) -> dict:
    """['key=value', ...] -> {key: value typed as its Arguments field}; refuses unknown keys and bad values."""
    fields = {f.name: f for f in dataclasses.fields(Arguments)}
    overrides = {}
    for item in argv:
        key, sep, text = item.partition("=")
        if not sep:
            raise RefusedError(f"expected key=value, got {item!r}; keys: {', '.join(fields)}")
        if key in RENAMED:
            refuse_renamed({key: text})
        if key not in fields:
            raise RefusedError(f"unknown key {key!r}; Arguments has {', '.join(fields)}")
        types = typing.get_args(fields[key].type) or (fields[key].type,)
        overrides[key] = parse_value(key, text, types)
    return overrides


def parse_widths(net_dims: int | tuple | list | str | None) -> int | tuple[int, ...] | None:
    """net_dims as a positive int, or a tuple of them from "400,300" or "400x300", a list (config.json) or a tuple."""
    if net_dims is None or isinstance(net_dims, int) and not isinstance(net_dims, bool) and net_dims > 0:
        return net_dims
    if isinstance(net_dims, (int, float)):
        raise RefusedError(f"net_dims={net_dims!r} is not accepted: net_dims must be an integer > 0 (two layers of "
                           f"it) or the widths of the hidden layers, e.g. net_dims=400,300")
    parts = re.split(r"[,x]", net_dims) if isinstance(net_dims, str) else list(net_dims)
    try:
        widths = tuple(int(part) for part in parts)
    except (TypeError, ValueError):
        widths = ()
    if not widths or any(width <= 0 for width in widths) or any(isinstance(part, (bool, float)) for part in parts):
        raise RefusedError(f"net_dims={net_dims!r} is not accepted: the hidden layers' widths, positive integers, e.g. "
                           f"net_dims=400,300 (or 400x300)")
    return widths


def parse_value(key: str, text: str, types: tuple) -> typing.Any:
    if text == "None" and type(None) in types:
        return None
    if bool in types:
        if text not in ("True", "true", "1", "False", "false", "0"):
            raise RefusedError(f"{key}={text!r} is not accepted: {key} takes True or False")
        return text in ("True", "true", "1")
    for kind in (int, float):
        if kind in types:
            try:
                return kind(text)
            except ValueError:
                if str in types:  # net_dims: an int or widths such as 400,300
                    return text
                raise RefusedError(f"{key}={text!r} is not accepted: {key} takes "
                                   f"{'an integer' if kind is int else 'a number'}"
                                   f"{' or None' if type(None) in types else ''}") from None
    return text


# ---- the processes' plumbing: start, stop, queues that a stop cannot block ----
# what fetching a tensor's shared memory raises once its sender has left (FileNotFoundError) or while it leaves
SENDER_LEFT = (OSError, EOFError)


def start_method_for(requested: str | None) -> str | None:
    """None -> spawn with CUDA (a forked child cannot use it), else the platform's; fork refused once CUDA is up."""
    if requested is None:
        return "spawn" if torch.cuda.is_available() or torch.cuda.is_initialized() else None
    if requested == "fork" and torch.cuda.is_initialized():
        raise RefusedError("start_method='fork' is not accepted: CUDA is initialised in this process and a forked "
                           "child cannot use it; use 'spawn' or 'forkserver' (or None, which picks spawn here)")
    return requested


@contextlib.contextmanager
def children_started(children: list, signums: tuple = (signal.SIGINT,)):
    """Start the children with SIGINT ignored (no Ctrl-C mid-import); in the block each of signums appends to the
    yielded list instead of raising, which could leave a queue's put half-done and hang the stop. Under torchrun
    (no children; SIGINT and SIGTERM) rank 0 stops the job at the round's end: no rank is left in a collective."""
    pressed, if_main = [], threading.current_thread() is threading.main_thread()  # a list: Event.set takes a lock
    previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in signums} if if_main else {}
    try:
        for child in children:
            child.start()
        for signum, handler in previous.items():
            if handler is not signal.SIG_IGN:
                signal.signal(signum, lambda received, frame: pressed.append(received))
        yield pressed
    finally:
        for signum, handler in previous.items():  # None: a handler set outside Python, which getsignal cannot return
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)


def run_child(target, channels: Channels, *target_args):
    """A child's entry: SIGINT is the parent's, SIGTERM ends it (an inherited SDL handler would not); errors go up."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        target(channels, *target_args)
    except BaseException:
        channels.errors.put((mp.current_process().name, traceback.format_exc()))
        sys.exit(1)


def stop_children(children: list, channels: Channels) -> list:
    """Set stop, wait for the children (the learner checkpoints), terminate or kill the rest; returns those."""
    channels.stop.set()
    for child in children:  # the learner writes its last checkpoint before it leaves
        child.join(timeout=CHILD_EXIT_SECONDS)
    terminated = [child for child in children if child.is_alive()]
    for child in terminated:
        child.terminate()
        child.join(timeout=10)
        if child.is_alive():
            child.kill()
            child.join()
    return terminated


def raise_if_failed(children: list, error_queue):
    """Name every failed child and what it raised (a learner's death can fail an explorer's next receipt)."""
    failed = [child for child in children if child.exitcode not in (None, 0)]
    if not failed:
        return
    messages = []
    while True:
        try:
            messages.append("{} raised:\n{}".format(*error_queue.get(timeout=0.5)))
        except queue.Empty:
            break
    hows = [f"the {child.name} process " + (f"was killed by signal {-child.exitcode}" if child.exitcode < 0
                                             else f"exited with code {child.exitcode}") for child in failed]
    raise RuntimeError("; ".join(hows) + "; the run stopped" + ("\n" + "\n".join(messages) if messages else ""))


def put_newest(q, item):
    """Replace what the one-item queue holds (readers want the newest, not a backlog); never blocks. A LearnerReport
    takes in the returns of the one it replaces, unread, so that every episode counts."""
    while True:
        with contextlib.suppress(queue.Empty):
            unread = q.get_nowait()
            if isinstance(item, LearnerReport):
                item = item._replace(returns=unread.returns + item.returns)
        with contextlib.suppress(queue.Full):
            return q.put_nowait(item)


def is_stopping(stop_event) -> bool:
    """The run is stopping, or (in a child) the parent is gone (killed), so that no child outlives it."""
    parent = mp.parent_process()
    return stop_event.is_set() or (parent is not None and not parent.is_alive())


def receive(q, stop_event, timeout: float | None = None):
    """The next item within timeout (None: no wait), else None; None too once stopping if its sender left."""
    try:
        return q.get(timeout=timeout) if timeout is not None else q.get_nowait()
    except queue.Empty:
        return None
    except SENDER_LEFT:
        if is_stopping(stop_event):
            return None
        raise


def get_until_stopped(q, stop_event):
    """The next item, or None once the run stops: no process waits forever on one that has stopped."""
    while not is_stopping(stop_event):
        item = receive(q, stop_event, timeout=0.2)
        if item is not None:
            return item
    return None


def put_until_stopped(q, item, stop_event) -> bool:
    while not is_stopping(stop_event):
        with contextlib.suppress(queue.Full):
            q.put(item, timeout=0.2)
            return True
    return False


# ---- a run's env in config.json, and back ----
def env_to_config(env: str | gym.Env) -> str | dict:
    """What config.json records of the env: the id, an instance's spec, or (no spec) why env_from_config refuses."""
    if isinstance(env, str):
        return env
    if not isinstance(env, gym.Env):
        return {"id": None, "class": f"{type(env).__module__}.{type(env).__qualname__}",
                "reason": "it is a PettingZoo env instance; train with its mpe2 id (simple_spread_v3), or with "
                          "extras.teams.make(id, **kwargs) for other settings"}
    if env.spec is None:
        reason = "it has no gymnasium spec (its class is not registered)"
    else:
        try:
            return json.loads(env.spec.to_json())
        except ValueError as error:  # kwargs that JSON cannot hold
            reason = str(error)
    return {"id": None, "class": f"{type(env.unwrapped).__module__}.{type(env.unwrapped).__qualname__}",
            "reason": reason}


def env_from_config(value: str | dict, frame_stack: int | None = None, **kwargs) -> str | gym.Env:
    """The env config.json recorded: the id, or the instance remade from its id as registered here, with only kwargs
    (render_mode etc. on top) and time limit from the file: a shared run directory must not name code to run."""
    if isinstance(value, str):
        if not kwargs:
            return value
        family = env_family(value)
        return gym.make(value, **kwargs) if family is None else family.make(value, frame_stack, **kwargs)
    if value["id"] is None:
        raise RefusedError(f"config.json records an env instance of {value['class']}, which cannot be rebuilt: "
                           f"{value['reason']}; register it (gymnasium.register) and train with its id, or resume from "
                           f"Python with the instance: AgentRun.resume(cwd, env=<the instance>)")
    env_id, family = value["id"], env_family(value["id"])
    if family is not None:  # mpe2, gymnasium-robotics: the family registers its ids with gymnasium
        family.register(env_id)
    if env_id not in gym.registry:
        raise RefusedError(f"config.json records env id {env_id!r}, which is not registered in this process; "
                           f"register it (gymnasium.register) before resume or replay, as the run that trained did")
    registered = json.loads(gym.spec(env_id).to_json())
    recorded = {"entry_point": value.get("entry_point"), "additional_wrappers": value.get("additional_wrappers") or []}
    if recorded["entry_point"] in MOVED_ENTRY_POINTS:  # a run recorded before its family moved to extras/
        recorded["entry_point"] = MOVED_ENTRY_POINTS[recorded["entry_point"]]
    differ = [f"{name} {recorded[name]!r} (registered: {registered.get(name) or []!r})" for name in recorded
              if recorded[name] != (registered.get(name) or [])]
    if differ:
        raise RefusedError(f"config.json records env {env_id!r} with {' and '.join(differ)}: resume and replay "
                           f"rebuild an env from this process's registry only, so that a run directory cannot name "
                           f"code to run; if you trust that code, register the env with it (gymnasium.register("
                           f"{env_id!r}, entry_point=..., additional_wrappers=...)) and resume from Python, or pass "
                           f"the instance: AgentRun.resume(cwd, env=<the instance>)")
    return gym.make(env_id, max_episode_steps=value.get("max_episode_steps"), **(value.get("kwargs") or {}) | kwargs)


# ---- the asynchronous loop (A3C): shared memory ----
def train_async(args: Arguments, env_info: "EnvInfo") -> tuple[str, int, Recorder]:
    """A3C's loop: num_workers processes explore and step shared CPU networks lock-free; this one counts and records."""
    learner = Learner(args, env_info, device="cpu")  # the shared agent, which it checkpoints
    learner.agent.share()
    recorder = Recorder(args, env_info, learner.step, learner.run_state["evaluator"])
    learner.recorder_state = recorder.state_dict
    eval_agent = build_agent(args, env_info, device="cpu")  # evaluates copies of the shared actor
    ctx = mp.get_context(start_method_for(args.start_method))
    channels = Channels(ctx.Event(), ctx.Queue(), (), (), ctx.Queue())
    steps_begun = ctx.Value("q", learner.step)  # stops the workers at break_step however far the recorder lags
    workers = [ctx.Process(target=run_child, name=f"worker {worker}", daemon=True,
                           args=(async_worker_process, channels, args, env_info, learner.step, worker, learner.agent,
                                 steps_begun))
               for worker in range(args.num_workers)]
    stop_reason = None
    with children_started(workers) as ctrl_c:
        print_banner(args, env_info, learner.step,
                     "asynchronous: " + ", ".join(f"{child.name} pid {child.pid}" for child in workers))
        try:
            while stop_reason is None and not ctrl_c:
                raise_if_failed(workers, channels.errors)
                report = receive(channels.reports, channels.stop, timeout=0.2)
                if report is None:
                    continue
                transitions, returns, stats = report
                learner.step, learner.episodes = learner.step + transitions, learner.episodes + len(returns)
                recorder.keep(returns)
                stop_reason = recorder.end_round(eval_agent, learner.step, learner.episodes, stats, learner.agent.act)
                learner.save_when_due(False)
            stop_reason = stop_reason or "Ctrl-C"
        finally:
            terminated = stop_children(workers, channels)
            # count the reports not read yet (whole ones only: a killed writer can leave half of one in the pipe)
            while (all(child.exitcode == 0 for child in workers)
                   and (report := receive(channels.reports, channels.stop))):
                learner.step, learner.episodes = learner.step + report[0], learner.episodes + len(report[1])
            recorder.finish()
            learner.save()  # the workers are gone (one killed mid-step may have left that step half-done)
    raise_if_failed([child for child in workers if child not in terminated], channels.errors)
    return stop_reason, learner.step, recorder


def async_worker_process(channels: Channels, args: Arguments, env_info: "EnvInfo", start_step: int, worker: int,
                         shared: AgentBase, steps_begun):
    """A3C's worker (Algorithm S3): explore, step the shared networks, report, until stopped or break_step begun."""
    explorer = Explorer.in_process(args, env_info, start_step, worker, args.num_envs)  # a rollout is one A2C update's
    explorer.agent.attach(shared)
    buffer = RolloutBuffer()
    transitions, step = explorer.horizon * args.num_envs, start_step  # step: this worker's own, for error messages
    while not is_stopping(channels.stop):
        with steps_begun.get_lock():
            if steps_begun.value >= args.break_step:
                break
            steps_begun.value += transitions
        trajectory = explorer.explore(step)
        check_finite(trajectory, step, args.num_envs, save=lambda: None)  # the recorder saves at the stop this causes
        buffer.extend(*trajectory)
        stats = explorer.agent.update_net(buffer)
        step += transitions
        channels.reports.put((transitions, explorer.new_returns(), stats))
    channels.reports.close()  # the last report reaches the pipe before the worker leaves: its steps are counted
    channels.reports.join_thread()


# ---- data-parallel learners (torch.distributed, under torchrun): all_reduce ----
def torchrun_world() -> tuple[int, int] | None:
    """(rank, world size) under torchrun, else None: a plain `python AgentRun.py` never touches torch.distributed."""
    if "TORCHELASTIC_RUN_ID" not in os.environ:
        return None
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])


def check_torchrun(args: Arguments):
    """Refuse what train_distributed (one process a rank, plain gradient steps) cannot run, on the values as given."""
    name, world = args.agent.__name__, torchrun_world()[1]
    if args.agent.if_recurrent:
        raise RefusedError(f"{name} is not accepted under torchrun yet: its memories per env copy run in the serial "
                           f"and multiprocess loops only; run python AgentRun.py")
    if not args.agent.if_data_parallel:
        parallel = ", ".join(agent for agent, cls in AGENT_CLASSES.items() if cls.if_data_parallel)
        raise RefusedError(f"{name} is not accepted under torchrun: its steps are not plain gradient steps that the "
                           f"ranks could average (a line search, Fisher factors, or A3C's own workers); use one of "
                           f"{parallel}, or python AgentRun.py")
    if args.if_multiprocess or (args.num_workers or 1) > 1:
        raise RefusedError(f"if_multiprocess={args.if_multiprocess}, num_workers={args.num_workers} is not accepted "
                           f"under torchrun: each rank is one learner that explores in its own process; leave "
                           f"if_multiprocess and num_workers at None, or run python AgentRun.py")
    args.if_multiprocess = False
    batch_size = args.batch_size if args.batch_size is not None else args.agent.train_defaults.get("batch_size")
    if batch_size is not None and batch_size % world:
        raise RefusedError(f"batch_size={batch_size} is not accepted with {world} ranks: each rank takes "
                           f"batch_size / world size samples of every batch; pass a multiple of {world}")
    if args.dist_backend not in (None, "gloo", "nccl"):
        raise RefusedError(f"dist_backend={args.dist_backend!r} is not accepted: 'gloo', 'nccl' or None")
    if args.dist_backend == "nccl" and not torch.cuda.is_available():
        raise RefusedError("dist_backend='nccl' is not accepted: NCCL needs CUDA, and torch sees no GPU here; "
                           "pass dist_backend='gloo' (or None, which picks gloo without CUDA)")


def train_distributed(args: Arguments, env_info: "EnvInfo", rank: int, world: int) -> tuple[str, int, Recorder | None]:
    """One of `world` data-parallel learners (torchrun --nproc_per_node=N AgentRun.py ...): each rank explores its share
    and updates on batch_size / world samples, gradients averaged; rank 0 records, checkpoints, decides the stop."""
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group(args.dist_backend or ("nccl" if torch.cuda.is_available() else "gloo"))
    try:
        if rank == 0:
            args.prepare_cwd()
        learner = Learner(args, env_info, if_restore=rank == 0, world=world)  # one seed: the same initial networks
        # equal gradient steps on all ranks, or all_reduce falls out of step: rank 0's unlearned steps don't count
        learner.buffer.add_size = 0
        counts = [(learner.step, learner.episodes)]
        dist.broadcast_object_list(counts, src=0)
        learner.step, learner.episodes = counts[0]
        broadcast_agent(learner.agent, rank)  # rank 0's, restored on resume
        recorder = Recorder(args, env_info, learner.step, learner.run_state["evaluator"]) if rank == 0 else None
        if recorder is None:  # exploration noise of its own (rank 0 draws as the serial loop, or as its checkpoint)
            torch.manual_seed(args.seed + learner.step + rank)
        else:
            learner.recorder_state = recorder.state_dict
        explorer = Explorer(args, learner.agent, learner.step, rank, args.num_envs * world)
        print_banner(args, env_info, learner.step,
                     f"rank {rank} of {world} pid {os.getpid()}, device {learner.agent.device}")
        stop_reason = None
        with children_started([], (signal.SIGINT, signal.SIGTERM)) as interrupted:
            while stop_reason is None:
                stop_reason = distributed_round(learner, explorer, recorder, interrupted)
        return stop_reason, learner.step, recorder
    finally:
        dist.destroy_process_group()


def distributed_round(learner: Learner, explorer: Explorer, recorder: Recorder | None, interrupted: list) -> str | None:
    """train_serial's round on every rank, agreeing in one all_reduce (not ready, episodes, interrupted: summed over the
    ranks) before learning; rank 0 records and decides the stop for all."""
    trajectory = explorer.explore(learner.step)
    learner.store(trajectory, learner.args.num_envs)
    returns = explorer.new_returns()
    total = torch.tensor([int(not learner.ready()), len(returns), int(len(interrupted) > 0)],
                         device=learner.agent.device)
    dist.all_reduce(total)
    not_ready, episodes, if_interrupted = total.tolist()
    learner.episodes += episodes
    stats = learner.learn(trajectory, if_ready=not_ready == 0)  # every rank's states: one all_reduce
    stop_reason = None
    if recorder is not None:
        recorder.keep(returns)  # rank 0's episodes
        stop_reason = recorder.end_round(learner.agent, learner.step, learner.episodes, stats)
        stop_reason = "Ctrl-C" if if_interrupted else stop_reason
        if stop_reason is not None:
            recorder.finish()
        learner.save_when_due(stop_reason is not None)
    decided = [stop_reason]
    dist.broadcast_object_list(decided, src=0)
    return decided[0]


def broadcast_agent(agent: AgentBase, rank: int):
    """Make every rank's agent rank 0's (which alone loads a resumed checkpoint), loaded weights_only."""
    payload = [None]
    if rank == 0:
        file = io.BytesIO()
        torch.save({name: part.state_dict() if hasattr(part, "state_dict") else part
                    for name, part in agent.parts().items()}, file)
        payload = [file.getvalue()]
    dist.broadcast_object_list(payload, src=0)
    if rank != 0:
        state = torch.load(io.BytesIO(payload[0]), map_location=agent.device, weights_only=True)
        for name, part in agent.parts().items():
            if isinstance(part, torch.Tensor):
                with torch.no_grad():
                    part.copy_(state[name])
            else:
                part.load_state_dict(state[name])


# ---- entry points ----
def resume(cwd: str, /, **overrides) -> dict:
    """Continue the run in cwd from its checkpoint with its config.json, overrides (e.g. max_time) on top."""
    fixed = [key for key in ("cwd", "if_resume", "if_remove") if key in overrides]
    if fixed:
        raise RefusedError(f"resume= continues the run in {cwd} from its checkpoint: "
                           f"{', '.join(f'{key}=' for key in fixed)} is not accepted beside it; copy the directory "
                           f"and resume the copy to continue elsewhere")
    config_path = os.path.join(cwd, "config.json")
    if not os.path.isfile(config_path):
        raise MissingRunError(f"resume needs {config_path}, the settings of the run to continue")
    config = read_config(config_path)
    if "env" not in overrides:  # an instance that config.json cannot rebuild can be passed again
        config["env"] = env_from_config(config["env"])
    if "recurrent_cell" not in config and Arguments(agent=config["agent"]).get_agent_class().if_recurrent:
        config["recurrent_cell"] = "lstm"  # a run of a recurrent agent from before recurrent_cell: its networks' cell
    return train_and_evaluate(Arguments(**(config | overrides | {"cwd": cwd, "if_resume": True, "if_remove": False})))


def main(argv: list[str]) -> dict | list | str:
    """The command line: `replay=<cwd> [episodes=<n>] [deterministic=False] [render=gif|human|none] [actor=last]`,
    `export=<cwd>`, `plot=<dir>[,<dir>...] [value= x= smooth= select= exclude= labels= stat=]`, `resume=<cwd>
    [key=value ...]`, `grid=<dir> [workers=<n>] [key=v1,v2,... ...]` (extras.tools), or `[key=value ...]` for
    run__demo()."""
    commands = [item for item in argv if item.startswith(("replay=", "export=", "resume=", "plot=", "grid="))]
    if len(commands) > 1:
        raise RefusedError(f"one of replay=, export=, resume=, plot= and grid= at a time, got {' '.join(commands)}")
    command, _, value = commands[0].partition("=") if commands else ("", "", "")
    rest = [item for item in argv if item not in commands]
    if command == "export" and rest:
        raise RefusedError("export= takes no other key=value")
    tools = importlib.import_module("extras.tools") if command in ("replay", "export", "plot", "grid") else None
    if command == "replay":
        return tools.replay(value, **parse_options(rest, tools.REPLAY_OPTIONS, "replay="))
    if command == "export":
        return tools.export(value)
    if command == "plot":
        return tools.plot_runs(value.split(","), **parse_options(rest, tools.PLOT_OPTIONS, "plot="))
    if command == "resume":
        return resume(value, **parse_overrides(rest))
    workers = [item for item in rest if item.startswith("workers=")]
    if workers and command != "grid":
        raise RefusedError("workers= is the number of runs a grid runs at a time: it needs grid=<dir>")
    if command == "grid":
        count = parse_value("workers", workers[-1].partition("=")[2], (int,)) if workers else None
        if count is not None and count < 1:
            raise RefusedError(f"workers={count} is not accepted: workers must be an integer > 0")
        return tools.run_grid(value, [item for item in rest if item not in workers], count)
    if any("," in item and not item.startswith("net_dims=") for item in rest):
        raise RefusedError(f"a comma list makes a grid of runs: name its directory with grid=<dir> "
                           f"(got {' '.join(item for item in rest if ',' in item)})")
    return run__demo(**parse_overrides(rest))


def parse_options(argv: list[str], options: dict[str, tuple], command: str) -> dict:
    """['key=value', ...] of a command's own options -> {key: typed value}; refuses any other key."""
    parsed = {}
    for item in argv:
        key, sep, text = item.partition("=")
        if not sep or key not in options:
            raise RefusedError(f"{command} takes no other key=value than {', '.join(f'{name}=' for name in options)}; "
                               f"got {item!r}")
        parsed[key] = parse_value(key, text, options[key])
    return parsed


if __name__ == "__main__":
    sys.modules.setdefault("AgentRun", sys.modules["__main__"])  # extras/ imports this module by name: the same one
    try:
        main(sys.argv[1:])
    except RefusedError as error:  # refused input: its message says what is accepted; a bug keeps its traceback
        sys.exit(f"AgentRun.py: {error}")
    if torchrun_world() is not None:
        # skip C++ static destructors: they aborted some exits (History/UPDATE_LOG.md, 2026-11-25)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

"""Agents and their replay buffers; one interface (README.md), continuous actions in [-1, 1], discrete ones integers:
    agent = AgentSAC(net_dim, state_dim, action_dim, device=None, **hyperparameters)
    action = agent.select_action(state, deterministic=False)  # np.ndarray in, np.ndarray out
    trajectory = agent.explore_env(env, horizon)               # tensors for buffer.extend
    stats = agent.update_net(buffer, batch_size, replay_ratio) # or epochs on-policy; a dict of floats
    agent.update_state_norm(trajectory[0])                     # if_state_norm: after the update
    agent.save_or_load_agent(cwd, if_save)"""
import contextlib
import math
import os
import pickle
from collections.abc import Callable
from copy import deepcopy

import numpy as np
import torch
import torch.nn as nn
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from AgentNet import (Actor, ActorDiscretePPO, ActorDiscreteRecurrentPPO, ActorEncoded, ActorPPO, ActorRecurrentPPO,
                      ActorSAC, ActorSACEncoded, COMACritic, Critic, CriticEncoded, CriticQuantiles,
                      CriticRecurrentValue, CriticTwin, CriticTwinEncoded, CriticValue, Greedy,
                      is_image, legal_only, QMixNet, QNet, QNetDist, QNetDistDuel, QNetDuel, QNetRecurrentDuel,
                      QNetTwin, QTranNet, StateNorm, TeamActor, TeamActorDiscrete, TeamActorDiscretePPO, TeamActorPPO,
                      TeamCritic, TeamCriticDiscrete, TeamCriticLocalDiscrete, TeamCriticValue, VDNNet)


# ---- helpers ----
class RefusedError(ValueError):
    """Refused input (a setting, env, file, run directory), saying what is accepted; AgentRun shows no traceback."""


@torch.no_grad()
def soft_update(target: nn.Module, online: nn.Module, tau: float):
    """target <- tau * online + (1 - tau) * target, parameter by parameter."""
    for t, o in zip(target.parameters(), online.parameters(), strict=True):
        t.lerp_(o, tau)


def optimizer_step(optimizer: torch.optim.Optimizer, objective: torch.Tensor, clip_grad_norm: float | None = None):
    """One gradient step; under torch.distributed (torchrun), with the mean of every rank's gradients."""
    optimizer.zero_grad(set_to_none=True)
    objective.backward()
    params = [p for group in optimizer.param_groups for p in group["params"]]
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        # one all_reduce of every gradient: each rank takes the same step, so the networks stay equal (as DDP)
        grads = [p.grad for p in params if p.grad is not None]  # the same ones on every rank
        flat = torch.cat([grad.flatten() for grad in grads])
        torch.distributed.all_reduce(flat)
        flat /= torch.distributed.get_world_size()
        for grad, mean in zip(grads, flat.split([grad.numel() for grad in grads])):
            grad.copy_(mean.view_as(grad))
    if clip_grad_norm is not None:
        nn.utils.clip_grad_norm_(params, clip_grad_norm)
    optimizer.step()


def new_adam(params, learning_rate: float, device: torch.device) -> torch.optim.Adam:
    """Adam with torch's fused kernel where it has one (CPU, CUDA): one kernel per step."""
    return torch.optim.Adam(params, learning_rate, fused=device.type in ("cpu", "cuda"))


def merged_moments(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Count, sum and sum of squares of rows (M, dim), float64, summed over torch.distributed ranks (StateNorm)."""
    rows = rows.to(torch.float64)
    count = torch.full((1,), rows.shape[0], dtype=torch.float64, device=rows.device)
    moments = torch.cat((count, rows.sum(dim=0), rows.square().sum(dim=0)))  # (1 + 2 * dim,)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.all_reduce(moments)
    return moments[0], *moments[1:].split(rows.shape[1])


def load_weights(path: str, device) -> dict | torch.Tensor:
    """torch.load with weights_only=True (never pickled code); any failure is refused with the path."""
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as error:
        raise RefusedError(f"{path} cannot be loaded: {type(error).__name__}: {error}") from None


def frozen_copy(net: nn.Module) -> nn.Module:
    """A target network: a deep copy that only soft_update changes."""
    return deepcopy(net).requires_grad_(False)


@contextlib.contextmanager
def eval_mode(net: nn.Module, if_eval: bool = True):
    """net in eval mode inside the block (NoisyLinear at its mean), training after; if_eval=False: as is."""
    if not if_eval:
        yield
        return
    net.eval()
    try:
        yield
    finally:
        net.train()


def check_same_step(agent, env):
    """Refuse vector envs that do not autoreset in the same step: final observations come in info["final_obs"]."""
    autoreset_mode = env.metadata.get("autoreset_mode")
    if getattr(autoreset_mode, "value", autoreset_mode) != "SameStep":
        raise RefusedError(f"{type(agent).__name__}.explore_env needs a gymnasium vector env with "
                           f"autoreset_mode=AutoresetMode.SAME_STEP, got {autoreset_mode}")


def final_observations(next_state: np.ndarray, info: dict) -> np.ndarray:
    """A vector env's next states (N, state_dim), ended episodes' final observations in place of the reset ones (to
    bootstrap); a single env's as they are (explore_env resets it after storing the step)."""
    if "_final_obs" not in info:
        return next_state
    final_state = next_state.copy()
    ended = np.flatnonzero(info["_final_obs"])
    final_state[ended] = np.stack(info["final_obs"][ended])
    return final_state


class ColoredNoise:
    """Standard normal draws (*shape) per step, power spectrum 1/f^beta (0 white, 1 pink, 2 red): it keeps a direction
    a while, as momentum tasks need (pink: Eberhard et al., ICLR 2023; Timmer and Koenig 1995); seq_len: an episode."""

    def __init__(self, beta: float, shape: tuple[int, ...], seq_len: int = 1000, device=None):
        self.beta, self.shape, self.seq_len, self.device = beta, shape, seq_len, device
        freqs = torch.fft.rfftfreq(seq_len, device=device)  # (seq_len // 2 + 1,), cycles per step
        freqs[0] = freqs[1]  # the mean takes the lowest frequency's weight, not an infinite one
        self.scale = freqs.pow(-beta / 2)
        # Parseval: a step's variance is the scales' two-sided power / seq_len; its root rescales steps to N(0, 1)
        power = self.scale.square()
        two_sided = power[0] + 2 * power[1:(seq_len + 1) // 2].sum() + (power[-1] if seq_len % 2 == 0 else 0)
        self.scale /= (two_sided / seq_len).sqrt()
        self.sequence, self.index = None, seq_len  # (*shape, seq_len), the next step's index in it

    def sample(self) -> torch.Tensor:
        """The next step's draws, (*shape)."""
        if self.index == self.seq_len:
            white = torch.randn(*self.shape, self.seq_len, device=self.device)
            spectrum = torch.fft.rfft(white, norm="ortho") * self.scale
            self.sequence, self.index = torch.fft.irfft(spectrum, n=self.seq_len, norm="ortho"), 0
        self.index += 1
        return self.sequence[..., self.index - 1]


def episode_length(env, default: int = 1000) -> int:
    """An env's episode time limit in steps (a vector env's copies'; PettingZoo's max_cycles), else default."""
    single = env.unwrapped.envs[0] if hasattr(env.unwrapped, "envs") else env  # (EnvPoolVectorEnv has the spec)
    limit = single.spec.max_episode_steps if single.spec is not None else None
    return limit or getattr(single.unwrapped, "max_cycles", None) or default


def n_step_returns(rewards: torch.Tensor, not_terminated: torch.Tensor, not_done: torch.Tensor, gamma: float,
                   n_step: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """n-step returns (Sutton and Barto, 7.1) of (T, N) tensors: per step t, sum_{j<k} gamma^j r_{t+j}, the bootstrap
    discount gamma^k * not_terminated_{t+k-1} and index t+k-1, (T, N) each; k <= n_step stops at episode ends
    (terminated: no bootstrap; truncated: from the final observation) and at T. Team rewards (T, N, num_agents) too."""
    horizon, returns = rewards.shape[0], rewards.clone()
    last = torch.arange(horizon, device=rewards.device).unsqueeze(1).expand(not_done.shape).clone()  # (T, N)
    going = not_done.bool()  # whether step t's episode goes on after step last[t]
    columns = (1,) * (rewards.dim() - not_done.dim())  # one per agent of a team's rewards
    for j in range(1, min(n_step, horizon)):
        going[horizon - j:] = False  # no j-th step after these in this trajectory
        returns[:horizon - j] += gamma ** j * going[:horizon - j].view(horizon - j, -1, *columns) * rewards[j:]
        last[:horizon - j] += going[:horizon - j]
        going[:horizon - j] &= not_done[j:].bool()
    steps = last - torch.arange(horizon, device=rewards.device).unsqueeze(1) + 1  # k, (T, N)
    return returns, gamma ** steps * not_terminated.gather(0, last), last


def project_distribution(probs: torch.Tensor, target_support: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
    """probs (B, num_atoms) on target_support (B, num_atoms) projected onto `support` (num_atoms,): C51's Algorithm 1
    (Bellemare et al. arXiv:1707.06887); upper = lower + 1 (not ceil) keeps p_j whole on an atom."""
    position = (target_support.clamp(support[0], support[-1]) - support[0]) / (support[1] - support[0])  # in atoms
    lower = position.floor().long()  # (B, num_atoms)
    upper_share = position - lower  # (B, num_atoms), in [0, 1)
    projected = torch.zeros_like(probs).scatter_add_(1, lower, probs * (1 - upper_share))
    return projected.scatter_add_(1, (lower + 1).clamp(max=support.shape[0] - 1), probs * upper_share)  # (B, num_atoms)


def value_rescale(x: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    """h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x (Pohlen et al. arXiv:1805.11593, section 3.2; R2D2's Q space):
    shrinks returns to about their root, so one learning rate suits any scale; invertible, unlike clipping."""
    return x.sign() * ((x.abs() + 1).sqrt() - 1) + eps * x


def value_rescale_inverse(x: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    """h^-1(x) = sign(x) (((sqrt(1 + 4 eps (|x| + 1 + eps)) - 1) / (2 eps))^2 - 1), value_rescale's exact
    inverse (Pohlen et al. arXiv:1805.11593, Proposition A.2)."""
    return x.sign() * ((((1 + 4 * eps * (x.abs() + 1 + eps)).sqrt() - 1) / (2 * eps)).square() - 1)


def sequence_priority(td_abs: torch.Tensor, mask: torch.Tensor, eta: float) -> torch.Tensor:
    """R2D2's sequence priority (arXiv:1810.06059, section 2.3): eta * max_t |td_t| + (1 - eta) * mean_t |td_t|
    over unmasked steps, (T, B) -> (B,); the max keeps one large error from being averaged away."""
    td_abs = torch.where(mask.bool(), td_abs, 0)  # a masked step's error counts in neither, whatever its value
    return eta * td_abs.amax(dim=0) + (1 - eta) * td_abs.sum(dim=0) / mask.sum(dim=0).clamp(min=1)


# ---- replay buffers ----
class ReplayBuffer:
    """Transitions (state, action, reward, discount, next_state) preallocated in a ring on the device; discount =
    gamma^k * not_terminated (AgentOffPolicy.as_transitions) is 0 only on termination, so truncations bootstrap. A
    team's holds every agent's state, action (and reward: num_rewards); images keep the env's dtype."""

    def __init__(self, max_len: int, state_dim: "int | tuple[int, ...]", action_dim: int, if_discrete: bool,
                 device=None, num_agents: int = 1, num_rewards: int = 1, state_dtype: torch.dtype = torch.float32):
        self.init_ring(max_len, device)
        action_dim = num_agents * (1 if if_discrete else action_dim)  # a team's
        state_shape = tuple(state_dim) if is_image(state_dim) else (num_agents * state_dim,)
        self.states = torch.empty((max_len, *state_shape), dtype=state_dtype, device=self.device)  # (N, *state_shape)
        self.actions = torch.empty((max_len, action_dim), dtype=torch.long if if_discrete else torch.float32,
                                   device=self.device)  # (N, 1) integers or (N, action_dim)
        reward_shape = (max_len,) if num_rewards == 1 else (max_len, num_rewards)  # a team's each agent's: num_rewards
        self.rewards = torch.empty(reward_shape, dtype=torch.float32, device=self.device)  # (N,) or (N, num_rewards)
        self.discounts = torch.empty(max_len, dtype=torch.float32, device=self.device)  # (N,)
        self.next_states = torch.empty_like(self.states)  # (N, *state_shape)
        self.tensors = (self.states, self.actions, self.rewards, self.discounts, self.next_states)
        self.unit_weight = torch.ones((), device=self.device)

    def init_ring(self, max_len: int, device):
        """The ring's capacity, device and counters, before any tensor is allocated."""
        self.max_len = max_len
        self.device = torch.device("cpu") if device is None else torch.device(device)
        self.pointer = 0  # where the next transition is written
        self.cur_len = 0  # how many transitions are stored, at most max_len
        self.add_size = 0  # how many were added since the last update; update_net trains on replay_ratio * this

    def extend(self, *trajectory: torch.Tensor) -> torch.Tensor:
        """Append a trajectory (explore_env's tuple), overwriting the oldest; returns the indices written, (size,)."""
        size = trajectory[0].shape[0]
        if size > self.max_len:  # only the newest max_len fit
            trajectory, size = tuple(t[-self.max_len:] for t in trajectory), self.max_len
        idx = torch.arange(self.pointer, self.pointer + size, device=self.device) % self.max_len  # (size,)
        for buf, new in zip(self.tensors, trajectory, strict=True):
            buf[idx] = new.to(self.device)
        self.pointer = (self.pointer + size) % self.max_len
        self.cur_len = min(self.cur_len + size, self.max_len)
        self.add_size += size
        return idx

    def sample(self, batch_size: int) -> tuple[tuple[torch.Tensor, ...], torch.Tensor, torch.Tensor]:
        """A uniform batch (states, actions, rewards, discounts, next_states), loss weights (1) and indices (B,)."""
        idx = torch.randint(self.cur_len, (batch_size,), device=self.device)
        return tuple(buf[idx] for buf in self.tensors), self.unit_weight, idx

    def update_priorities(self, idx: torch.Tensor, td_errors: torch.Tensor):
        """Uniform replay has no priorities (PrioritizedReplayBuffer has)."""

    def state_dict(self) -> dict:
        """The filled part only, as CPU copies (a view would save all of the storage)."""
        return {"pointer": self.pointer, "cur_len": self.cur_len, "add_size": self.add_size,
                "tensors": [buf[:self.cur_len].to("cpu", copy=True) for buf in self.tensors]}

    def load_state_dict(self, state: dict):
        self.pointer, self.cur_len, self.add_size = state["pointer"], state["cur_len"], state["add_size"]
        for buf, saved in zip(self.tensors, state["tensors"], strict=True):
            buf[:self.cur_len] = saved.to(self.device)


class PrioritizedReplayBuffer(ReplayBuffer):
    """Proportional prioritized replay (Schaul et al. arXiv:1511.05952, 3.3): P(i) = p_i / sum_k p_k, p_i = (|TD
    error_i| + eps)^alpha, loss weights (p_i / min_k p_k)^-beta (3.4), beta not annealed: runs stop at the target
    (History/UPDATE_LOG.md, 2026-11-23). Sums and minima in `fanout`-ary trees on the device, vectorised per level."""

    alpha, beta, eps = 0.6, 0.4, 1e-6  # the paper's proportional variant (Table 3); eps keeps every p_i above 0
    fanout = 32

    def init_ring(self, max_len: int, device):
        """The ring's, and sum and min trees over its max_len slots at priority 0, the largest priority so far at 1."""
        super().init_ring(max_len, device)
        sizes = [math.ceil(self.max_len / self.fanout) * self.fanout]  # the leaves, then each level up to the root
        while sizes[-1] > 1:
            nodes = sizes[-1] // self.fanout
            sizes.append(nodes if nodes == 1 else math.ceil(nodes / self.fanout) * self.fanout)
        # float64 sums: sampling descends by subtracting sums of up to 2^20 priorities
        self.sum_tree = [torch.zeros(size, dtype=torch.float64, device=self.device) for size in sizes]
        self.min_tree = [torch.full((size,), math.inf, dtype=torch.float64, device=self.device) for size in sizes]
        self.max_priority = torch.ones((), dtype=torch.float64, device=self.device)

    def extend(self, *trajectory: torch.Tensor) -> torch.Tensor:
        """extend at the largest priority so far, or at the priorities of trailing TD errors (size,) (Ape-X)."""
        idx = super().extend(*trajectory[:len(self.tensors)])
        if len(trajectory) > len(self.tensors):
            self.update_priorities(idx, trajectory[-1][-idx.shape[0]:].to(self.device))  # the newest, as extend keeps
        else:
            self.set_priorities(idx, self.max_priority.expand(idx.shape))  # new transitions are replayed at least once
        return idx

    def sample(self, batch_size: int) -> tuple[tuple[torch.Tensor, ...], torch.Tensor, torch.Tensor]:
        """Draws by priority, one per equal slice of their sum (appendix B.2.1), with importance weights, indices."""
        total = self.sum_tree[-1][0]
        mass = (torch.arange(batch_size, device=self.device) + torch.rand(batch_size, device=self.device,
                                                                          dtype=torch.float64)) * (total / batch_size)
        node = torch.zeros(batch_size, dtype=torch.long, device=self.device)
        for level in reversed(self.sum_tree[:-1]):  # from the root's children down to the leaves
            children = level.view(-1, self.fanout)[node]  # (B, fanout)
            upto = children.cumsum(dim=1)  # (B, fanout)
            child = (upto <= mass.unsqueeze(1)).sum(dim=1)  # (B,)
            # where rounding puts the mass at or past the sum, the last child that holds any (empty ones come last)
            child = torch.minimum(child, (children > 0).sum(dim=1) - 1)
            mass = mass - (upto - children).gather(1, child.unsqueeze(1)).squeeze(1)  # minus the children before it
            node = node * self.fanout + child
        idx = node  # (B,)
        weights = (self.sum_tree[0][idx] / self.min_tree[-1][0]).pow(-self.beta).float()  # (B,), at most 1
        return tuple(buf[idx] for buf in self.tensors), weights, idx

    def update_priorities(self, idx: torch.Tensor, td_errors: torch.Tensor):
        """p_i = (|TD error_i| + eps)^alpha (td_errors (B,), absolute). Errors <= 0 give eps^alpha: Rainbow's float32
        KL dips to -1e-6, and a NaN would spread through the sum tree. Non-finite errors are refused."""
        td_errors = td_errors.detach().double()
        if not torch.isfinite(td_errors).all():
            bad = torch.nonzero(~torch.isfinite(td_errors)).flatten()
            raise ValueError(f"non-finite TD errors {td_errors[bad].tolist()} for replay indices {idx[bad].tolist()}: "
                             f"the critic's loss diverged; priorities take finite errors >= 0 (a smaller "
                             f"learning_rate or reward_scale usually keeps them finite)")
        priorities = (td_errors.clamp(min=0) + self.eps).pow(self.alpha)
        self.set_priorities(idx, priorities)
        self.max_priority = torch.maximum(self.max_priority, priorities.max())

    def set_priorities(self, idx: torch.Tensor, priorities: torch.Tensor):
        """Write leaves idx, then recompute their ancestors level by level (a repeated index is harmless)."""
        node = idx
        self.sum_tree[0][node], self.min_tree[0][node] = priorities, priorities
        for level in range(1, len(self.sum_tree)):
            node = node // self.fanout
            self.sum_tree[level][node] = self.sum_tree[level - 1].view(-1, self.fanout)[node].sum(dim=1)
            self.min_tree[level][node] = self.min_tree[level - 1].view(-1, self.fanout)[node].amin(dim=1)

    def state_dict(self) -> dict:
        return super().state_dict() | {"priorities": self.sum_tree[0][:self.cur_len].to("cpu", copy=True),
                                       "max_priority": self.max_priority.cpu()}

    def load_state_dict(self, state: dict):
        super().load_state_dict(state)
        self.sum_tree[0][:self.cur_len] = self.min_tree[0][:self.cur_len] = state["priorities"].to(self.device)
        for level in range(1, len(self.sum_tree)):  # every node, level by level
            nodes = self.sum_tree[level - 1].shape[0] // self.fanout
            self.sum_tree[level][:nodes] = self.sum_tree[level - 1].view(-1, self.fanout).sum(dim=1)
            self.min_tree[level][:nodes] = self.min_tree[level - 1].view(-1, self.fanout).amin(dim=1)
        self.max_priority = state["max_priority"].to(self.device)


def equal_rows(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Whether a[i, j] == b[i, j] in every entry, (I, J) bool; byte entries compared 8 at a time where aligned."""
    a, b = a.flatten(2), b.flatten(2)
    aligned = lambda x: all(size % 8 == 0 for size in (*x.stride()[:-1], x.storage_offset(), x.shape[-1]))
    if a.element_size() == 1 and a.shape[-1] > 0 and aligned(a) and aligned(b):
        a, b = a.view(torch.int64), b.view(torch.int64)
    return (a == b).all(-1)


class FrameStacks:
    """Replay mixin for image states, stacks of an env copy's last S frames (FrameStackObservation; S = 1 for
    MinAtar, CarRacing): each frame stored once in a ring, transitions hold their frames' stamps (write counts),
    sampling gathers stacks, as rlpyt (Stooke & Abbeel arXiv:1909.01500); bytes: BENCHMARKS.md. Sharing is read from
    the contents, so stacks return bit for bit. extend takes step-then-env order; the ring grows (reserve) rather
    than overwrite a live frame. Checkpoints keep no last states: a resume starts new episodes."""

    def __init__(self, max_len: int, state_dim: tuple[int, ...], action_dim: int, if_discrete: bool, device=None,
                 num_agents: int = 1, num_rewards: int = 1, state_dtype: torch.dtype = torch.uint8, *, num_envs: int,
                 n_step: int, stack: int):
        self.stack, self.num_envs, self.n_step, self.state_shape = stack, num_envs, n_step, tuple(state_dim)
        # the state columns hold stamps: a state's S (a next state's S) and the transition's oldest
        super().__init__(max_len, (stack + 1,), action_dim, if_discrete, device, num_agents, num_rewards, torch.long)
        self.capacity = max_len + max_len // 16 + 2 * stack * num_envs
        frame_shape = self.state_shape[1:] if stack > 1 else self.state_shape  # S = 1: a frame is the whole image
        self.frames = torch.empty((self.capacity, *frame_shape), dtype=state_dtype, device=self.device)
        self.written = 0  # frames ever written: frame `stamp` is in slot stamp % capacity
        self.last = [None] * num_envs  # each copy's last next state and its stamps: the next round's first state

    def extend(self, *trajectory: torch.Tensor) -> torch.Tensor:
        """The transitions with their states as stamps (then any priorities), and the frames they add."""
        states, actions, rewards, discounts, next_states, *priorities = trajectory
        state_stamps, next_stamps, new = self.stamps(states, next_states)
        oldest = torch.minimum(state_stamps.amin(1), next_stamps.amin(1))[:, None]
        idx = super().extend(torch.cat((state_stamps, oldest), 1), actions, rewards, discounts,
                             torch.cat((next_stamps, oldest), 1), *priorities)
        if self.written + new.shape[0] > self.capacity:  # the ring wraps: keep what the live transitions read
            oldest = min([int(self.states[:self.cur_len, -1].min())] + [min(stamps) for _, stamps in self.last])
            self.reserve(self.written + new.shape[0] - oldest)
        slots = torch.arange(self.written, self.written + new.shape[0], device=self.device) % self.capacity
        self.frames[slots] = new.to(self.device)
        self.written += new.shape[0]
        return idx

    def stamps(self, states: torch.Tensor, next_states: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """State and next-state stamps, (T * N, S) each, and the new frames (W, ...) stamped from `written` on."""
        n, n_step = self.num_envs, self.n_step
        states, next_states = (x.cpu().reshape(-1, n, self.stack, *self.frames.shape[1:])
                               for x in (states, next_states))
        steps = states.shape[0]
        continues = equal_rows(states[1:, :, :-1], states[:-1, :, 1:]).T.tolist()  # (N, T - 1): state t + 1 of t
        # next state t is state t + n_step (none where the round is shorter than n_step)
        n_on = equal_rows(next_states[:max(0, steps - n_step)], states[n_step:]).T.tolist()
        sources = []  # each new frame's (stacks: 0 states, 1 next states; step; env; place in the stack)
        state_stamps, next_stamps = [], []  # (N, T, S) lists
        for env in range(n):
            def add(stacks: int, t: int, places, env=env) -> list[int]:
                sources.extend((stacks, t, env, place) for place in places)
                return list(range(self.written + len(sources) - len(places), self.written + len(sources)))

            state_stamps.append(self.state_rows(states[:, env], continues[env], self.last[env], add))
            next_stamps.append(self.next_rows(states[:, env], next_states[:, env], state_stamps[env], n_on[env], add))
            self.last[env] = (next_states[-1, env], next_stamps[env][-1])
        sources = torch.tensor(sources, dtype=torch.long).reshape(-1, 4)
        new = torch.empty((sources.shape[0], *states.shape[3:]), dtype=states.dtype)
        for stacks, tensor in enumerate((states, next_states)):
            rows = sources[:, 0] == stacks
            new[rows] = tensor[sources[rows, 1], sources[rows, 2], sources[rows, 3]]
        as_stamps = lambda rows: torch.tensor(rows, dtype=torch.long).transpose(0, 1).flatten(0, 1).to(self.device)
        return as_stamps(state_stamps), as_stamps(next_stamps), new

    def state_rows(self, states: torch.Tensor, continues: list[bool], last, add: Callable) -> list[list[int]]:
        """One copy's states (T, S, ...) as T lists of S stamps after its last next state `last` ((content, stamps)
        or None); continues[t]: state t + 1 continues t. add(stacks 0|1, t, places) adds frames, returns stamps."""
        s = self.stack
        before, stamps = last or (None, None)
        rows = []
        for t in range(states.shape[0]):
            if t > 0 and continues[t - 1]:
                stamps = stamps[1:] + add(0, t, [s - 1])
                rows.append(stamps)
                continue
            state = states[t]
            if t == 0 and before is not None and torch.equal(state, before):
                pass  # the last next state of the round before
            elif t == 0 and before is not None and torch.equal(state[:-1], before[1:]):
                stamps = stamps[1:] + add(0, t, [s - 1])
            elif torch.equal(state, state[-1:].expand_as(state)):  # an episode's first: its reset frame S times
                stamps = add(0, t, [s - 1]) * s
            else:
                stamps = add(0, t, range(s))
            rows.append(stamps)
        return rows

    def next_rows(self, states: torch.Tensor, next_states: torch.Tensor, state_rows: list[list[int]], n_on: list[bool],
                  add: Callable) -> list[list[int]]:
        """One env copy's next states (T, S, ...) as T lists of S stamps: the state k steps on where it is one
        (n_on[t]: k = n_step), else a final observation continuing a state between, else added whole."""
        steps, s, n_step = states.shape[0], self.stack, self.n_step
        finals, rows = {}, []  # the step whose state a final observation continues -> (its last frame's stamp, t)
        for t in range(steps):
            if t < steps - n_step and n_on[t]:
                rows.append(state_rows[t + n_step])
                continue
            next_state = next_states[t]
            k = next((k for k in range(1, n_step) if t + k < steps and torch.equal(next_state, states[t + k])), None)
            j = None if k is not None else next((j for j in range(t, min(t + n_step, steps))
                                                 if torch.equal(next_state[:-1], states[j, 1:])), None)
            if k is not None:
                rows.append(state_rows[t + k])
            elif j is not None:
                if j not in finals or not torch.equal(next_states[finals[j][1], -1], next_state[-1]):
                    finals[j] = (add(1, t, [s - 1])[0], t)
                rows.append(state_rows[j][1:] + [finals[j][0]])
            else:
                rows.append(add(1, t, range(s)))
        return rows

    def reserve(self, needed: int):
        """Grow the ring to hold `needed` frames (the oldest a live transition reads to the newest)."""
        if needed <= self.capacity:
            return
        capacity = max(needed, self.capacity + self.capacity // 8)
        stamps = torch.arange(max(0, self.written - self.capacity), self.written, device=self.device)
        frames = torch.empty((capacity, *self.frames.shape[1:]), dtype=self.frames.dtype, device=self.device)
        frames[stamps % capacity] = self.frames[stamps % self.capacity]
        self.frames, self.capacity = frames, capacity

    def sample(self, batch_size: int) -> tuple[tuple[torch.Tensor, ...], torch.Tensor, torch.Tensor]:
        """The buffer's sample with the states and next states stacked from their frames, (B, S, ...) each."""
        (states, actions, rewards, discounts, next_states), weights, idx = super().sample(batch_size)
        return (self.stacked(states), actions, rewards, discounts, self.stacked(next_states)), weights, idx

    def stacked(self, stamps: torch.Tensor) -> torch.Tensor:
        return self.frames[stamps[:, :-1] % self.capacity].reshape(-1, *self.state_shape)

    def state_dict(self) -> dict:
        """The transitions, and the frames they read, oldest first, in their own dtype."""
        oldest = int(self.states[:self.cur_len, -1].min()) if self.cur_len else self.written
        stamps = torch.arange(oldest, self.written, device=self.device)
        return super().state_dict() | {"frames": self.frames[stamps % self.capacity].to("cpu", copy=True),
                                       "written": self.written}

    def load_state_dict(self, state: dict):
        if "frames" not in state:
            raise RefusedError("the checkpoint's replay holds whole frame stacks (written before stacks were stored "
                               "frame by frame, 2026-11-26): resume it with the AgentRun.py that wrote it, or start a "
                               "new run")
        super().load_state_dict(state)
        self.written, self.last = state["written"], [None] * self.num_envs
        frames = state["frames"].to(self.device)
        self.reserve(frames.shape[0])
        self.frames[torch.arange(self.written - frames.shape[0], self.written,
                                 device=self.device) % self.capacity] = frames


class FrameStackReplayBuffer(FrameStacks, ReplayBuffer):
    """ReplayBuffer of images, each frame of their stacks stored once (FrameStacks)."""


class FrameStackPrioritizedReplayBuffer(FrameStacks, PrioritizedReplayBuffer):
    """PrioritizedReplayBuffer of images, each frame of their stacks stored once (FrameStacks)."""


class SequenceReplayBuffer(PrioritizedReplayBuffer):
    """R2D2's replay (Kapturowski et al., ICLR 2019, section 2.3): sequences of one env copy's steps with the
    explorer's memory at their first step, prioritized whole (max_len counts sequences). The k-th of an episode
    trains on seq_len steps from k * stride, stride = seq_len // 2 (the paper's 80 by 40), after burn_in steps;
    `mask` marks its episode's training steps; n-step returns stay inside (truncations bootstrap). extend takes
    step-then-env order, keeping each copy's last window - 1 steps; add_size counts explored steps."""

    alpha, beta = 0.9, 0.6  # priority and importance-sampling exponents of the R2D2 paper (Table 2)

    def __init__(self, max_len: int, state_dim: "int | tuple[int, ...]", width: int, num_envs: int, seq_len: int,
                 burn_in: int, gamma: float, n_step: int, device=None, memory_rows: int = 2,
                 state_dtype: torch.dtype = torch.float32):
        self.init_ring(max_len, device)
        self.num_envs, self.seq_len, self.burn_in, self.gamma, self.n_step = num_envs, seq_len, burn_in, gamma, n_step
        self.stride, self.window = max(1, seq_len // 2), burn_in + seq_len
        state_shape = tuple(state_dim) if is_image(state_dim) else (state_dim,)  # images in their dtype (ReplayBuffer)
        shapes = {"states": ((self.window, *state_shape), state_dtype), "actions": ((self.window,), torch.long),
                  "returns": ((self.window,), torch.float32),  # n-step returns of the rewards times reward_scale
                  "discounts": ((self.window,), torch.float32),  # gamma^k * not_terminated of their last step
                  "last": ((self.window,), torch.long),  # the index of that last step in the sequence
                  "boot_states": ((self.window, *state_shape), state_dtype),  # the state after it: the bootstrap's
                  "episode_start": ((self.window,), torch.float32),  # 1 where the memory is zeroed first
                  "mask": ((self.window,), torch.float32),  # 1 on the training steps of the sequence's episode
                  "memory": ((memory_rows, width), torch.float32)}  # the explorer's memory before the first step
        self.tensors = tuple(torch.zeros((max_len, *shape), dtype=dtype, device=self.device)  # (S, ...) each
                             for shape, dtype in shapes.values())
        # kept steps: at first window - 1 of each copy before any explored one, no episode's (step -1), never trained
        zeros = lambda *shape, dtype=torch.float32: torch.zeros((self.window - 1, num_envs, *shape), dtype=dtype,
                                                                device=self.device)
        ones = torch.ones((self.window - 1, num_envs), device=self.device)  # not_terminated, not_done
        self.tail = [zeros(*state_shape, dtype=state_dtype), zeros(1, dtype=torch.long), zeros(), ones, ones,
                     zeros(*state_shape, dtype=state_dtype), zeros(dtype=torch.long) - 1, zeros(memory_rows, width)]

    def extend(self, *trajectory: torch.Tensor) -> torch.Tensor:
        """Cut the sequences that the explored steps complete (cut) and store them at the largest priority so far."""
        stream = [torch.cat((kept, new.to(self.device).unflatten(0, (-1, self.num_envs))))  # (K, N, ...) each
                  for kept, new in zip(self.tail, trajectory, strict=True)]
        self.tail = [column[column.shape[0] - (self.window - 1):] for column in stream]
        idx = super().extend(*self.cut(*stream))
        self.add_size += trajectory[0].shape[0] - idx.shape[0]  # explored steps, not sequences
        return idx

    def cut(self, states, actions, rewards, not_terminated, not_done, next_states, episode_steps, memories
            ) -> tuple[torch.Tensor, ...]:
        """K steps of N copies (K, N, ...), the first window - 1 kept -> the S sequences whose anchor (index burn_in)
        is an episode's step k * stride and that end within them, (S, window, ...) in the order of `tensors`."""
        anchors = episode_steps[self.burn_in:episode_steps.shape[0] - self.seq_len + 1]  # (K - window + 1, N)
        first, env = torch.nonzero((anchors >= 0) & (anchors % self.stride == 0), as_tuple=True)  # (S,) each
        rows, column = first[:, None] + torch.arange(self.window, device=self.device), env[:, None]  # (S, window)
        offsets = torch.arange(self.window, device=self.device) - self.burn_in  # steps after the anchor
        # the anchor's episode goes on exactly where the episode step counts on from the anchor's
        mask = (episode_steps[rows, column] == anchors[first, env][:, None] + offsets) & (offsets >= 0)  # (S, window)
        returns, discounts, last = n_step_returns(rewards[rows, column].T, not_terminated[rows, column].T,
                                                  not_done[rows, column].T, self.gamma, self.n_step)  # (window, S) each
        boot_states = next_states[rows.gather(1, last.T), column]  # (S, window, *state_shape)
        return (states[rows, column], actions[rows, column].squeeze(-1), returns.T, discounts.T, last.T, boot_states,
                (episode_steps[rows, column] == 0).float(), mask.float(), memories[first, env])

    def state_dict(self) -> dict:
        return super().state_dict() | {"num_envs": self.num_envs, "window": self.window}

    def load_state_dict(self, state: dict):
        """The sequences and their priorities; the kept steps restart (a resumed run starts new episodes)."""
        for name in ("num_envs", "window"):
            if state[name] != getattr(self, name):
                setting = "num_envs" if name == "num_envs" else "seq_len + burn_in"
                raise RefusedError(f"{setting}={getattr(self, name)} is not accepted on resume: the saved sequence "
                                   f"replay was written with {setting}={state[name]}; resume with that, or "
                                   f"if_save_buffer=False")
        super().load_state_dict(state)


class HindsightReplayBuffer(ReplayBuffer):
    """Hindsight experience replay (Andrychowicz et al. arXiv:1707.01495), the "future" strategy (section 4.5) at
    sampling: with probability her_k / (her_k + 1) a goal becomes one achieved later in its episode, `feedback`
    recomputing reward and discount. One-step only; extend takes not_done (T * N,) too; indices t * N + env."""

    def __init__(self, max_len: int, state_dim: int, action_dim: int, if_discrete: bool, device=None, *,
                 goal_dim: int, feedback: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray | None]],
                 her_k: int, num_envs: int, reward_scale: float, gamma: float):
        super().__init__(max_len, state_dim, action_dim, if_discrete, device)
        self.achieved = slice(state_dim - 2 * goal_dim, state_dim - goal_dim)
        self.desired = slice(state_dim - goal_dim, state_dim)
        self.feedback, self.relabel_rate = feedback, her_k / (her_k + 1)
        self.num_envs, self.reward_scale, self.gamma = num_envs, reward_scale, gamma
        self.total = 0  # transitions ever written; slot = absolute index % max_len
        self.open_start = torch.arange(num_envs, device=self.device)  # absolute index of each copy's episode under way
        self.absolute = torch.empty(max_len, dtype=torch.long, device=self.device)  # each slot's absolute index
        self.episode_last = torch.empty(max_len, dtype=torch.long, device=self.device)  # its episode's last, so far
        self.tensors = self.tensors + (self.absolute, self.episode_last)

    def extend(self, *trajectory: torch.Tensor) -> torch.Tensor:
        *transitions, not_done = trajectory
        discounts, next_states = transitions[3], transitions[4]
        if (discounts == 0).any():  # a stored termination: a relabelled goal must recompute it
            first = int(torch.nonzero(discounts == 0)[0])
            goals = next_states[first:first + 1].cpu().numpy()
            if self.feedback(goals[:, self.achieved], goals[:, self.desired])[1] is None:
                raise RefusedError("her_k > 0 is not accepted for this goal env: it ended an episode by termination, "
                                   "but has no compute_terminated(achieved_goal, desired_goal, info), so a relabelled "
                                   "transition would keep the termination of the goal it was stored with (wrong both "
                                   "ways); give the env compute_terminated, or pass her_k=0")
        size, n = not_done.shape[0], self.num_envs
        ended = ~not_done.to(self.device, torch.bool).view(size // n, n)  # (T, N)
        step = torch.arange(size // n, device=self.device).unsqueeze(1).expand_as(ended)
        # the step at which each one's episode ends in this trajectory (the trajectory's last if it goes on)
        end_step = torch.where(ended, step, size // n - 1).flip(0).cummin(0).values.flip(0)
        columns = torch.arange(n, device=self.device)
        absolute = (self.total + step * n + columns).flatten()
        episode_last = (self.total + end_step * n + columns).flatten()
        oldest_kept = max(self.total - self.cur_len, self.total + size - self.max_len)
        for env in range(n):  # the episode under way before this trajectory ends with its first steps' episode
            first = max(int(self.open_start[env]), oldest_kept + (env - oldest_kept) % n)  # its oldest step kept
            earlier = torch.arange(first, max(first, self.total), n, device=self.device)
            self.episode_last[earlier % self.max_len] = episode_last[env]
        last_end = torch.where(ended, step, -1).amax(0)  # (N,), -1 where no episode ended
        self.open_start = torch.where(last_end >= 0, self.total + (last_end + 1) * n + columns, self.open_start)
        drop = max(0, size - self.max_len)  # a trajectory longer than the buffer keeps its newest max_len
        self.total += drop
        self.pointer = self.total % self.max_len
        idx = super().extend(*(tensor[drop:] for tensor in (*transitions, absolute, episode_last)))
        self.total += size - drop
        return idx

    def sample(self, batch_size: int) -> tuple[tuple[torch.Tensor, ...], torch.Tensor, torch.Tensor]:
        """ReplayBuffer.sample's batch with the relabelled goals, rewards and discounts."""
        (state, action, reward, discount, next_state, absolute, episode_last), weights, idx = super().sample(batch_size)
        relabel = torch.nonzero(torch.rand(batch_size, device=self.device) < self.relabel_rate).squeeze(1)  # (R,)
        if relabel.shape[0] > 0:
            start, last = absolute[relabel], episode_last[relabel]
            steps_on = torch.div(last - start, self.num_envs, rounding_mode="floor") + 1  # this one to the last, (R,)
            future = start + self.num_envs * (torch.rand(relabel.shape[0], device=self.device) * steps_on).long()
            goal = self.next_states[future % self.max_len, self.achieved]  # (R, goal_dim), achieved after step `future`
            state[relabel, self.desired] = goal
            next_state[relabel, self.desired] = goal
            rewards, terminated = self.feedback(next_state[relabel, self.achieved].cpu().numpy(), goal.cpu().numpy())
            reward[relabel] = torch.as_tensor(rewards, dtype=torch.float32, device=self.device) * self.reward_scale
            if terminated is not None:  # else termination does not depend on the goal: the stored discount stands
                not_terminated = torch.as_tensor(~np.asarray(terminated, bool), dtype=torch.float32, device=self.device)
                discount[relabel] = self.gamma * not_terminated.expand(relabel.shape[0])
        return (state, action, reward, discount, next_state), weights, idx

    def state_dict(self) -> dict:
        return super().state_dict() | {"total": self.total, "open_start": self.open_start.cpu(),
                                       "max_len": self.max_len, "num_envs": self.num_envs}

    def load_state_dict(self, state: dict):
        """A resume starts new episodes, so open ones end; refused for another capacity or number of env copies."""
        for name in ("max_len", "num_envs"):
            if state[name] != getattr(self, name):
                setting = "buffer_size" if name == "max_len" else "num_envs * num_workers"  # a round's env copies
                raise RefusedError(f"{setting}={getattr(self, name)} is not accepted on resume: the saved "
                                   f"hindsight replay was written with {setting}={state[name]}; resume with that, "
                                   f"or if_save_buffer=False")
        super().load_state_dict(state)
        self.total = state["total"]
        self.open_start = self.total + torch.arange(self.num_envs, device=self.device)  # new episodes from here


class RolloutBuffer:
    """The latest rollout as (horizon, num_envs, ...) tensors: on-policy agents learn only from their policy's."""

    def __init__(self, device=None):
        self.device = torch.device("cpu") if device is None else torch.device(device)
        self.add_size = 0  # transitions in the latest rollout

    def extend(self, states, actions, log_probs, rewards, not_terminated, not_done, next_states):
        """next_states[t]: on truncation the cut episode's final observation (info["final_obs"]), not the reset one."""
        # (T, N, state_dim) states and next states, (T, N, ...) actions, (T, N) each or a team's (T, N, num_agents)
        self.states, self.actions, self.log_probs = (x.to(self.device) for x in (states, actions, log_probs))
        self.rewards, self.not_terminated = rewards.to(self.device), not_terminated.to(self.device)
        self.not_done, self.next_states = not_done.to(self.device), next_states.to(self.device)
        self.add_size = states.shape[0] * states.shape[1]

    def get_advantages(self, values: torch.Tensor, next_values: torch.Tensor, gamma: float, lambda_gae: float
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """GAE(lambda) advantages and critic targets, (T, N) each (Schulman et al. arXiv:1506.02438, eq. 16): truncated
        steps bootstrap from next_values, terminated ones not; a team's (T, N, num_agents) gives every agent's."""
        columns = (1,) * (self.rewards.dim() - self.not_done.dim())  # one per agent of a team's rewards
        not_terminated, not_done = (flags.view(*flags.shape, *columns)
                                    for flags in (self.not_terminated, self.not_done))
        deltas = self.rewards + gamma * not_terminated * next_values - values  # (T, N) or (T, N, num_agents)
        advantages = torch.empty_like(deltas)
        gae = torch.zeros_like(deltas[0])  # (N,) or (N, num_agents)
        for t in reversed(range(deltas.shape[0])):
            gae = deltas[t] + gamma * lambda_gae * not_done[t] * gae
            advantages[t] = gae
        return advantages, advantages + values


class RecurrentRolloutBuffer(RolloutBuffer):
    """A recurrent agent's rollout: RolloutBuffer's, plus start memories and episode starts to replay from."""

    def extend(self, *rollout: torch.Tensor):
        *transitions, start_memory, episode_start = rollout
        super().extend(*transitions)
        self.start_memory = start_memory.to(self.device)  # (2, N, width): the actor's (h, c)
        self.episode_start = episode_start.to(self.device)  # (T, N) 1 where step t starts an episode: memory zeroed


class SegmentReplayBuffer(RolloutBuffer):
    """ACER's replay (arXiv:1611.01224, section 3): the newest whole rollouts with mu's log-probs, max_len in all."""

    names = ("states", "actions", "log_probs", "rewards", "not_terminated", "not_done", "next_states")

    def __init__(self, max_len: int, device=None):
        super().__init__(device)
        self.max_len = max_len
        self.rollouts: list[tuple[torch.Tensor, ...]] = []  # oldest first

    def extend(self, *rollout: torch.Tensor):
        super().extend(*rollout)
        capacity = max(1, self.max_len // self.add_size)  # rollouts; the current one at least
        self.rollouts = self.rollouts[max(0, len(self.rollouts) + 1 - capacity):] + [
            tuple(getattr(self, name) for name in self.names)]

    def sample(self) -> tuple[torch.Tensor, ...]:
        """A stored rollout chosen uniformly: (horizon, num_envs, ...) tensors in the order of extend."""
        return self.rollouts[int(torch.randint(len(self.rollouts), ()))]

    def state_dict(self) -> dict:
        return {name: torch.stack(column).cpu() for name, column in zip(self.names, zip(*self.rollouts))}

    def load_state_dict(self, state: dict):
        columns = [state[name].to(self.device) for name in self.names]  # (rollouts, horizon, num_envs, ...) each
        self.rollouts = [tuple(column[i] for column in columns) for i in range(columns[0].shape[0])]


def minibatches(tensors: tuple[torch.Tensor, ...], batch_size: int, epochs: float):
    """round(epochs) (>= 1) shuffled passes over `tensors` (T, ...), yielding aligned minibatches of batch_size."""
    for _ in range(max(1, round(epochs))):
        # one shuffled copy per epoch, cut into views: one gather per tensor and epoch
        perm = torch.randperm(tensors[0].shape[0], device=tensors[0].device)
        yield from zip(*(tensor[perm].split(batch_size) for tensor in tensors), strict=True)


# ---- base agents ----
class AgentBase:
    """What every agent shares: networks, acting, saving. Subclasses set if_off_policy, train_defaults and
    hyper_defaults, which fill the Arguments left at None: defaults come from the agent, never a per-task table."""

    if_off_policy: bool
    if_discrete = False
    train_defaults: dict
    hyper_defaults: dict
    act_class: type
    cri_class: type
    if_act_target = if_cri_target = False  # whether to keep frozen target copies of the actor and the critic
    if_act_optimizer = True  # False: something other than Adam moves the actor (TRPO's line search)
    if_async = False  # True: workers step shared networks without a learner (AgentA3C; AgentRun.train_async)
    if_data_parallel = True  # False: steps beyond gradients (line search, K-FAC): no rank averaging
    if_state_norm = False  # True: networks standardise states by running statistics (AgentNet.StateNorm)
    if_clip_reward = False  # True: learn reward signs (learned_reward), score raw; None: ALE/ only
    if_image_states = False  # True: its networks take images (state_dim an image's shape: AgentNet.ImageEncoder)
    if_multi_agent = False  # True: a team's agent (MultiAgent) on a PettingZoo env
    if_recurrent = False  # True: a memory per env copy, restarted per episode (reset_memory); not under torchrun
    if_explorer_priorities = False  # True: trajectories end with TD errors, the first priorities (AgentApeX)
    net_keywords = ()  # the hyperparameters that act_class and cri_class take (a team's num_agents)
    if_agent_rewards = False  # True: a team's agent with a value per agent, which can learn each agent's own reward
    actor_learning_rate = None  # the actor's step size; None: learning_rate (Spinning Up's pi_lr beside q_lr)
    extra_save_names: tuple[str, ...] = ()  # attributes a checkpoint holds beside the networks (parts): SAC's alpha

    def __init__(self, net_dim: int, state_dim: int, action_dim: int, device=None, **hyperparameters):
        unknown = sorted(set(hyperparameters) - set(self.hyper_defaults))
        if unknown:
            raise RefusedError(f"{type(self).__name__} got unknown hyperparameter(s) {unknown}; "
                               f"it accepts {sorted(self.hyper_defaults)}")
        for name, value in {**self.hyper_defaults, **hyperparameters}.items():
            setattr(self, name, value)
        self.net_dim, self.state_dim, self.action_dim = net_dim, state_dim, action_dim
        self.device = torch.device(device if device is not None else "cuda" if torch.cuda.is_available() else "cpu")
        self.last_state = None  # the state explore_env continues from; None starts a new episode

        self.act = self.act_target = self.cri = self.cri_target = None
        self.act_optimizer = self.cri_optimizer = None
        if self.if_state_norm and is_image(state_dim):
            raise RefusedError(f"if_state_norm=True is not accepted with image observations "
                               f"(shape {tuple(state_dim)}): their encoder scales pixels inside the network "
                               f"(AgentNet.ImageEncoder); it accepts flat Box observations (state_dim,); pass "
                               f"if_state_norm=False")
        self.init_networks()
        if self.if_state_norm:
            for module in self.state_takers():
                module.state_norm = StateNorm(state_dim).to(self.device)

    def init_networks(self):
        """Actor, critic, their frozen targets, one optimizer each (the actor none without if_act_optimizer)."""
        keywords = {name: getattr(self, name) for name in self.net_keywords}
        self.act = self.act_class(self.net_dim, self.state_dim, self.action_dim, **keywords).to(self.device)
        self.cri = self.cri_class(self.net_dim, self.state_dim, self.action_dim, **keywords).to(self.device)
        self.act_target = frozen_copy(self.act) if self.if_act_target else None
        self.cri_target = frozen_copy(self.cri) if self.if_cri_target else None
        if self.if_act_optimizer:
            self.act_optimizer = self.new_optimizer(self.act, self.actor_learning_rate or self.learning_rate)
        self.cri_optimizer = self.new_optimizer(self.cri, self.learning_rate)

    def new_optimizer(self, net: nn.Module, learning_rate: float) -> torch.optim.Optimizer:
        """The optimizer of the actor or the critic: Adam."""
        return new_adam(net.parameters(), learning_rate, self.device)

    def batch_shape(self, state: torch.Tensor) -> torch.Size:
        """The leading dimensions of states (..., state_dim) or images (..., *image_shape): the batch's."""
        return state.shape[:state.dim() - (len(self.state_dim) if is_image(self.state_dim) else 1)]

    def as_state_tensor(self, state) -> torch.Tensor:
        """States on the device: flat ones as float32, images in their own dtype (the networks scale them)."""
        return torch.as_tensor(state, dtype=None if is_image(self.state_dim) else torch.float32, device=self.device)

    @torch.no_grad()
    def select_action(self, state: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """state (state_dim,) or (batch, state_dim) -> action (action_dim,) or (batch, action_dim) in [-1, 1]."""
        state = self.as_state_tensor(state)
        return (self.act(state) if deterministic else self.explore_action(state)).cpu().numpy()

    def reset_memory(self, num_envs: int):
        """Zero a recurrent agent's acting memory for num_envs episodes side by side; nothing here."""

    def keep_memory(self, rows: list[int]):
        """Keep the acting memory's rows of the episodes that go on, in that order; nothing here."""

    def set_env_copies(self, first: int, total: int):
        """This explorer steps env copies first, first + 1, ... of the round's `total`; nothing here (AgentApeX's)."""

    def policy_module(self) -> nn.Module:
        """The deterministic policy as one module, as select_action(deterministic=True) (AgentRun.export)."""
        return self.act

    def extra_stats(self) -> dict[str, float]:
        """Values beside the objectives that the recorder should log (SAC: its temperature)."""
        return {}

    def learned_reward(self, reward, info: dict):
        """The env's reward, or its sign if if_clip_reward (Mnih et al. 2015: one learning rate for any scale)."""
        return np.sign(reward) if self.if_clip_reward else reward

    def state_takers(self) -> list[nn.Module]:
        """Every module of every network, targets included, that takes states (has a state_norm), each once."""
        nets = {id(part): part for part in self.parts().values() if isinstance(part, nn.Module)}.values()
        return [module for net in nets for module in net.modules() if hasattr(module, "state_norm")]

    @torch.no_grad()
    def update_state_norm(self, states: torch.Tensor):
        """if_state_norm: merge explored states (..., state_dim) of all ranks into every network's StateNorm alike."""
        if not self.if_state_norm:
            return
        norms = [module.state_norm for module in self.state_takers()]
        norms[0].update(*merged_moments(states.reshape(-1, self.state_dim).to(self.device)))
        for norm in norms[1:]:
            norm.load_state_dict(norms[0].state_dict())

    def parts(self) -> dict:
        """Every network, target, optimizer and extra tensor that a checkpoint holds, by name."""
        names = ("act", "act_target", "cri", "cri_target", "act_optimizer", "cri_optimizer") + self.extra_save_names
        return {name: getattr(self, name) for name in names  # DQN acts with its critic: one part
                if getattr(self, name) is not None and not (name == "act" and self.act is self.cri)}

    def save_or_load_agent(self, cwd: str, if_save: bool):
        """Every part (parts) as `<cwd>/<name>.pt` state_dicts; loads with weights_only=True."""
        for name, obj in self.parts().items():
            path = os.path.join(cwd, f"{name}.pt")
            if if_save:
                torch.save(obj.state_dict() if hasattr(obj, "state_dict") else obj.detach().cpu(), path)
            elif isinstance(obj, torch.Tensor):
                with torch.no_grad():
                    obj.copy_(load_weights(path, self.device))
            else:
                state_dict = load_weights(path, self.device)  # an unreadable file has its own error
                try:
                    obj.load_state_dict(state_dict)
                except (RuntimeError, ValueError, KeyError) as error:  # shapes or keys of another network or version
                    raise RefusedError(f"{path} does not fit {type(self).__name__}'s {name} (net_dim {self.net_dim}, "
                                       f"state_dim {self.state_dim}, action_dim {self.action_dim}): it was saved by "
                                       f"another agent, network size or library version: {error}") from None


class AgentOffPolicy(AgentBase):
    """Off-policy agents: a ReplayBuffer and DDPG's actor-critic update. Subclasses name their networks and override
    explore_action (how to explore), get_next_q (the bootstrap value), get_obj_critic, get_obj_actor, extra_update."""

    if_off_policy = True
    train_defaults = dict(net_dims=128, batch_size=128, buffer_size=2 ** 20, steps_per_round=256, replay_ratio=1.0,
                          num_envs=1, num_workers=1,
                          # random warm-up as the TD3 paper's (section 6.1); History/UPDATE_LOG.md, 2026-11-22
                          random_steps=10_000,
                          if_save_buffer=True,  # checkpoints hold the replay buffer's filled part
                          if_per=False,  # uniform replay; True: PrioritizedReplayBuffer
                          her_k=4,  # on a goal env, 4 hindsight goals per kept one: the HER paper's best (Figure 6)
                          # the serial loop: SAC learned no faster in processes (History/UPDATE_LOG.md, 2026-11-22)
                          if_multiprocess=False)
    # 2e-3 and 0.02 (batch 128): DDPG and SAC need fewer updates than at TD3's (History/UPDATE_LOG.md, 2026-11-23)
    hyper_defaults = dict(learning_rate=2e-3, gamma=0.99, reward_scale=1.0, soft_update_tau=0.02,
                          n_step=1,  # rewards summed before the bootstrap (n-step returns, n_step_returns)
                          if_state_norm=False)  # standardised states (AgentNet.StateNorm)
    criterion = nn.MSELoss(reduction="none")  # regression loss of the critic, per transition
    policy_delay = 1  # the actor steps once every policy_delay critic steps (TD3 sets 2)
    if_delay_targets = True  # targets and extra_update wait for the actor's steps (TD3); False: every step (ModSAC)
    if_act_target = True  # SAC bootstraps from its online actor and keeps no actor target
    if_cri_target = True
    critic_steps = 0  # across update_net calls: the actor and the targets follow every policy_delay of them
    noise = None  # the ColoredNoise stream of exploration (standard_noise)
    noise_steps = 1000  # its sequences' length: the explored env's episode length, set by explore_env

    def explore_env(self, env, horizon: int, if_random: bool = False) -> tuple[torch.Tensor, ...]:
        """Continue the last call's episodes for `horizon` steps (if_random: uniform warm-up) -> as_transitions; a
        vector env's N copies (autoreset in the same step) take one policy call, a single env is reset here."""
        self.noise_steps = max(2, episode_length(env))  # ColoredNoise's lowest non-zero frequency needs two steps
        num_envs = env.num_envs if hasattr(env, "num_envs") else None  # None: a single env
        if num_envs is not None:
            check_same_step(self, env)
        state = env.reset()[0] if self.last_state is None else self.last_state  # (state_dim,) or (N, state_dim)
        steps = []
        for _ in range(horizon):
            action = self.random_action(num_envs, state) if if_random else self.select_action(state)
            next_state, reward, terminated, truncated, info = env.step(action)
            done = np.logical_or(terminated, truncated)
            # a truncated episode still bootstraps from next_state, its final observation, not the reset one
            steps.append((state, action, self.learned_reward(reward, info), np.logical_not(terminated),
                          np.logical_not(done), final_observations(next_state, info)))
            state = env.reset()[0] if num_envs is None and done else next_state
        self.last_state = state
        columns = [np.stack(column) for column in zip(*steps)]  # (horizon, N, ...) each; a single env's (horizon, ...)
        return self.as_transitions(*(columns if num_envs else [column[:, None] for column in columns]))

    def as_transitions(self, states, actions, rewards, not_terminated, not_done, next_states
                       ) -> tuple[torch.Tensor, ...]:
        """Arrays (T, N, ...) -> the T * N transitions for ReplayBuffer.extend, step by step, env by env: n-step
        returns times reward_scale, discounts gamma^k * not_terminated, the states k steps on (n_step_returns);
        discrete actions (T * N, 1) or a team's (T * N, num_agents), as its rewards where agents learn their own."""
        as_tensor = lambda x, dtype=torch.float32: torch.as_tensor(x, dtype=dtype, device=self.device)
        rewards, discounts, last = n_step_returns(as_tensor(rewards) * self.reward_scale, as_tensor(not_terminated),
                                                  as_tensor(not_done), self.gamma, self.n_step)
        envs = torch.arange(last.shape[1], device=self.device)
        next_states = self.as_state_tensor(next_states)[last, envs]  # (T, N, ...)
        actions = as_tensor(actions, torch.long if self.if_discrete else torch.float32).reshape(*discounts.shape, -1)
        return tuple(t.flatten(0, 1) for t in (self.as_state_tensor(states), actions, rewards, discounts, next_states))

    def random_action(self, num_envs: int | None = None, state: np.ndarray | None = None) -> np.ndarray:
        """Uniform in [-1, 1], (action_dim,) or (num_envs, action_dim): the normal CDF of (coloured) standard_noise."""
        draws = self.standard_noise((*(() if num_envs is None else (num_envs,)), self.action_dim), self.random_beta)
        return torch.erf(draws / math.sqrt(2)).cpu().numpy()

    def standard_noise(self, shape: tuple[int, ...], beta: float) -> torch.Tensor:
        """One step's standard normal draws coloured by beta (ColoredNoise), a new stream if shape or beta change."""
        if self.noise is None or ((self.noise.shape, self.noise.beta, self.noise.seq_len)
                                  != (shape, beta, self.noise_steps)):
            self.noise = ColoredNoise(beta, shape, self.noise_steps, device=self.device)
        return self.noise.sample()

    def update_net(self, buffer: ReplayBuffer, batch_size: int, replay_ratio: float) -> dict[str, float]:
        """replay_ratio critic steps per transition added (the update-to-data ratio); the actor steps where
        is_actor_step says; extra_update and soft target updates follow the actor (if_delay_targets: TD3) or every
        critic step. Returns mean objectives (obj_actor NaN without an actor step), mean_q and extra_stats."""
        update_times = max(1, int(buffer.add_size * replay_ratio))
        buffer.add_size = 0
        sum_obj_critic = sum_obj_actor = torch.zeros((), device=self.device)
        actor_steps = 0
        for _ in range(update_times):
            batch, weights, idx = buffer.sample(batch_size)
            obj_critic, td_errors = self.get_obj_critic(batch, weights)
            optimizer_step(self.cri_optimizer, obj_critic)
            buffer.update_priorities(idx, td_errors)
            sum_obj_critic = sum_obj_critic + obj_critic.detach()  # summed on the device: no sync per step
            self.critic_steps += 1
            if_actor_step = self.is_actor_step(obj_critic)
            if if_actor_step and self.act_optimizer is not None:
                self.cri.requires_grad_(False)  # the actor's objective passes through the critic: no gradients for it
                obj_actor = self.get_obj_actor(batch)
                self.cri.requires_grad_(True)
                optimizer_step(self.act_optimizer, obj_actor)
                sum_obj_actor = sum_obj_actor + obj_actor.detach()
                actor_steps += 1
            if if_actor_step or not self.if_delay_targets:
                self.extra_update(batch)
                soft_update(self.cri_target, self.cri, self.soft_update_tau)
                if self.act_target is not None:
                    soft_update(self.act_target, self.act, self.soft_update_tau)
        stats = {"obj_critic": sum_obj_critic.item() / update_times}
        if self.act_optimizer is not None:
            stats["obj_actor"] = sum_obj_actor.item() / actor_steps if actor_steps else math.nan
        return stats | {"mean_q": self.batch_mean_q(batch)} | self.extra_stats()

    @torch.no_grad()
    def batch_mean_q(self, batch: tuple[torch.Tensor, ...]) -> float:
        """The critic's mean Q over the last batch and heads, in reward units: above any return is overestimation."""
        return torch.stack(self.get_q_heads(*batch[:2])).mean().item() / self.reward_scale

    def is_actor_step(self, obj_critic: torch.Tensor) -> bool:
        """Every policy_delay-th critic step, counted across calls, steps the actor too (TD3 paper, Algorithm 1)."""
        return self.critic_steps % self.policy_delay == 0

    def get_obj_critic(self, batch: tuple[torch.Tensor, ...], weights: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """Regress every Q head onto reward + discount * next_q, each loss times its weight; also returns each
        transition's absolute TD error (B,), averaged over the heads, for PrioritizedReplayBuffer."""
        state, action, reward, discount, next_state = batch
        with torch.no_grad():
            q_target = reward + discount * self.get_next_q(next_state)  # (B,)
        q_heads = self.get_q_heads(state, action)
        obj_critic = sum((self.criterion(q, q_target) * weights).mean() for q in q_heads)
        # a head of every agent's Q (MADDPG) is (num_agents, B): a transition's error is averaged over them too
        return obj_critic, torch.stack([(q.detach() - q_target).abs() for q in q_heads]).flatten(0, -2).mean(dim=0)

    def get_q_heads(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Every Q estimate of the critic for the actions taken, each (B,)."""
        return self.cri.get_q_heads(state, action)

    def get_next_q(self, next_state: torch.Tensor) -> torch.Tensor:
        """The bootstrap value of next_state from the target networks, (B,); the smallest head where there are two."""
        next_action = self.act_target(next_state)
        return torch.stack(self.cri_target.get_q_heads(next_state, next_action)).min(dim=0).values

    def get_obj_actor(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Deterministic policy gradient, max Q(s, pi(s)) (Silver et al. 2014; Lillicrap et al. arXiv:1509.02971)."""
        state = batch[0]
        return -self.cri(state, self.act(state)).mean()

    def extra_update(self, batch: tuple[torch.Tensor, ...]):
        """What else steps with the targets (SAC's temperature); nothing here."""


# ---- DQN family (discrete actions) ----
class ActionMasks:
    """Masks of legal actions for discrete agents (if_action_mask): states end with the env's mask (extras.masks);
    no illegal action is taken or bootstrapped from. First among the bases: AgentDQN(ActionMasks, AgentOffPolicy)."""

    if_action_mask = False

    def init_networks(self):
        super().init_networks()
        if self.if_action_mask and hasattr(self.act, "if_action_mask"):  # a categorical policy masks its own logits
            self.act.if_action_mask = True

    def legal(self, values: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """values (..., action_dim), illegal actions' at AgentNet.ILLEGAL (never a max) where states carry a mask."""
        return legal_only(values, state) if self.if_action_mask else values

    def uniform_action(self, shape: tuple[int, ...], state: torch.Tensor) -> torch.Tensor:
        """Uniformly random action indices of that shape: legal ones of state where the states carry a mask."""
        if self.if_action_mask:  # the largest of uniform draws, the illegal ones' at ILLEGAL
            return self.legal(torch.rand(*shape, self.action_dim, device=self.device), state).argmax(dim=-1)
        return torch.randint(self.action_dim, shape, device=self.device)

    def random_action(self, num_envs: int | None = None, state: np.ndarray | None = None) -> np.ndarray:
        """A uniformly random action index, () or (num_envs,): a legal one of state where the states carry a mask."""
        shape = () if num_envs is None else (num_envs,)
        if self.if_action_mask:
            state = torch.as_tensor(state, dtype=torch.float32, device=self.device)
            return self.uniform_action(shape, state).cpu().numpy()
        return torch.randint(self.action_dim, shape).numpy()


class AgentDQN(ActionMasks, AgentOffPolicy):
    """Deep Q-Network (Mnih et al. 2015) with a soft-updated target network, epsilon-greedy and the Huber loss."""

    if_discrete = True
    if_image_states = True  # the DQN family up to Rainbow: its Q-networks take images (AgentNet.state_mlp)
    # reward_scale 0.1 keeps Q where Huber is quadratic; 0.5 updates of 64 per step (History/UPDATE_LOG.md, 2026-11-23)
    hyper_defaults = AgentOffPolicy.hyper_defaults | dict(explore_rate=0.1,  # epsilon, the chance of a random action
                                                     learning_rate=1e-3, soft_update_tau=0.02, reward_scale=0.1,
                                                     if_noisy=False,  # noisy layers (NoisyLinear) explore instead
                                                     if_action_mask=False,
                                                     if_clip_reward=None)  # the rewards' signs; None: on ALE/ ids
    net_keywords = ("if_noisy",)  # the hyperparameters that cri_class takes
    # num_envs 8: one policy call acts for 8 envs, cheaper per transition (History/UPDATE_LOG.md, 2026-11-23)
    train_defaults = AgentOffPolicy.train_defaults | dict(batch_size=64, replay_ratio=0.5, num_envs=8,
                                                     random_steps=0)  # epsilon-greedy explores from the first step
    criterion = nn.SmoothL1Loss(reduction="none")
    cri_class = QNet

    def init_networks(self):
        """One Q-network (it is also the actor: argmax Q), its target and one optimizer."""
        keywords = {name: getattr(self, name) for name in self.net_keywords}
        self.cri = self.cri_class(self.net_dim, self.state_dim, self.action_dim, **keywords).to(self.device)
        self.act = self.cri
        self.cri_target = frozen_copy(self.cri)
        self.cri_optimizer = new_adam(self.cri.parameters(), self.learning_rate, self.device)

    @torch.no_grad()
    def select_action(self, state: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """state (state_dim,) or (B, state_dim) -> action () or (B,): greedy, or epsilon-greedy; legal ones only."""
        state = self.as_state_tensor(state)
        with eval_mode(self.cri, deterministic and self.if_noisy):  # a switch costs a fifth of a forward: only if noisy
            action = self.legal(self.cri(state), state).argmax(dim=-1)
        if not deterministic:
            action = self.epsilon_greedy(action, state)
        return action.cpu().numpy()

    def epsilon_greedy(self, action: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """Greedy actions (batch,), each replaced by a uniformly random legal one with probability explore_rates."""
        if_random = torch.rand(action.shape, device=self.device) < self.explore_rates(action.shape)
        return torch.where(if_random, self.uniform_action(action.shape, state), action)

    def explore_rates(self, shape: tuple[int, ...]) -> float | torch.Tensor:
        """epsilon of each action of an exploring batch: explore_rate (AgentApeX: one per env copy)."""
        return self.explore_rate

    def policy_module(self) -> nn.Module:
        """Greedy in the Q-values, in eval mode where it has noisy layers (at their mean), as select_action."""
        return Greedy(self.cri, self.if_action_mask)

    def extra_stats(self) -> dict[str, float]:
        """epsilon, the chance of a random action while exploring (0 with noisy layers)."""
        return {"epsilon": self.explore_rate}

    def batch_mean_q(self, batch: tuple[torch.Tensor, ...]) -> float:
        with eval_mode(self.cri):  # noisy layers at their mean: the diagnostic draws no random numbers
            return super().batch_mean_q(batch)

    def get_q_heads(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (self.cri(state).gather(1, action).squeeze(1),)  # Q(s, a) of the actions taken, (B,)

    def get_next_q(self, next_state: torch.Tensor) -> torch.Tensor:
        """max_a Q_target(s', a) over the legal actions, (B,)."""
        return self.legal(self.cri_target(next_state), next_state).max(dim=1).values


class AgentDoubleDQN(AgentDQN):
    """Double DQN (van Hasselt et al. arXiv:1509.06461): the target network values the online network's argmax,
    which curbs DQN's overestimation."""

    def get_next_q(self, next_state: torch.Tensor) -> torch.Tensor:
        """Q_target(s', argmax_a Q(s', a)), (B,) (Double DQN paper, eq. 4)."""
        next_action = self.legal(self.cri(next_state), next_state).argmax(dim=1, keepdim=True)  # (B, 1)
        return self.cri_target(next_state).gather(1, next_action).squeeze(1)


class AgentD3QN(AgentDoubleDQN):
    """Dueling double DQN: Double DQN's target with a dueling Q-network (arXiv:1511.06581)."""

    cri_class = QNetDuel


class AgentApeX(AgentD3QN):
    """Ape-X DQN (Horgan et al. arXiv:1803.00933): D3QN's 3-step target, replayed by the priorities its actors (the
    run's N env copies) compute; copy i explores with eps_i = explore_rate^(1 + 7 i / (N - 1)). Noisy layers and
    uniform replay are refused: epsilons explore, explorers' priorities drive replay."""

    hyper_defaults = {name: value for name, value in AgentD3QN.hyper_defaults.items() if name != "if_noisy"} | dict(
        explore_rate=0.4, n_step=3)  # explore_rate: the paper's epsilon, the base of every actor's eps_i
    # two explorer processes: faster than the serial loop on 2 cores (History/UPDATE_LOG.md, 2026-11-26)
    train_defaults = AgentD3QN.train_defaults | dict(if_per=True, num_workers=2, if_multiprocess=True)
    if_noisy = False  # no noisy layers: its epsilons explore
    if_explorer_priorities = True
    epsilon_alpha = 7.0  # the exponent's range in eps_i (the paper's alpha, section 4.1)
    env_copies: tuple[int, int] | None = None  # (first, total): which of the run's env copies its explorer steps

    def set_env_copies(self, first: int, total: int):
        self.env_copies = (first, total)

    def explore_rates(self, shape: tuple[int, ...]) -> torch.Tensor:
        """eps_i = explore_rate^(1 + epsilon_alpha * i / (N - 1)) of each action's env copy i (Ape-X paper, 4.1)."""
        count = math.prod(shape)
        first, total = self.env_copies or (0, count)
        index = torch.arange(first, first + count, dtype=torch.float32, device=self.device)
        return (self.explore_rate ** (1 + self.epsilon_alpha * index / max(1, total - 1))).reshape(shape)

    def as_transitions(self, *steps: np.ndarray) -> tuple[torch.Tensor, ...]:
        """AgentOffPolicy's transitions, then their absolute n-step TD errors (B,), the first priorities (Ape-X paper,
        Algorithm 1); the explorer has only the online weights, so its target is their max_a Q(s', a)."""
        transitions = super().as_transitions(*steps)
        state, action, reward, discount, next_state = transitions
        with torch.no_grad():
            next_q = self.legal(self.cri(next_state), next_state).max(dim=1).values  # (B,)
            q = self.get_q_heads(state, action)[0]  # (B,)
        return transitions + ((reward + discount * next_q - q).abs(),)


class AgentC51(AgentDQN):
    """C51 (Bellemare et al. arXiv:1707.06887): each action's return distribution on fixed atoms (QNetDist)."""

    # [-10, 10] holds the benchmark tasks' discounted returns at DQN's reward_scale 0.1
    hyper_defaults = AgentDQN.hyper_defaults | dict(num_atoms=51, v_min=-10.0, v_max=10.0)
    net_keywords = AgentDQN.net_keywords + ("num_atoms", "v_min", "v_max")
    cri_class = QNetDist

    def get_obj_critic(self, batch: tuple[torch.Tensor, ...], weights: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-entropy to the projected target of r + discount * z (C51 paper, Algorithm 1), times the weights;
        priorities by their KL (B,), as Rainbow's (section 3): same gradient, not ranked by the target's entropy."""
        state, action, reward, discount, next_state = batch
        rows = torch.arange(reward.shape[0], device=self.device)
        support = self.cri.support  # (num_atoms,)
        with torch.no_grad():
            next_probs = self.cri_target.get_log_probs(next_state).exp()  # (B, action_dim, num_atoms)
            next_dist = next_probs[rows, self.get_next_action(next_state, next_probs)]  # (B, num_atoms)
            target = project_distribution(next_dist, reward.unsqueeze(1) + discount.unsqueeze(1) * support, support)
        log_probs = self.cri.get_log_probs(state)[rows, action.squeeze(1)]  # (B, num_atoms)
        cross_entropy = -(target * log_probs).sum(dim=1)  # (B,)
        target_entropy = -(target * target.clamp(min=1e-12).log()).sum(dim=1)  # (B,); 0 log 0 = 0
        return (cross_entropy * weights).mean(), cross_entropy.detach() - target_entropy

    def get_next_action(self, next_state: torch.Tensor, next_probs: torch.Tensor) -> torch.Tensor:
        """argmax_a of the target network's mean return at next_state over the legal actions, (B,)."""
        return self.legal((next_probs * self.cri.support).sum(dim=-1), next_state).argmax(dim=-1)


class AgentRainbow(AgentC51):
    """Rainbow (Hessel et al. arXiv:1710.02298): C51, double Q, dueling noisy nets, prioritized 3-step replay."""

    # a quarter update per step: each costs several of D3QN's (History/UPDATE_LOG.md, 2026-11-23); not for all tasks
    hyper_defaults = AgentC51.hyper_defaults | dict(if_noisy=True, explore_rate=0.0, n_step=3)
    train_defaults = AgentC51.train_defaults | dict(if_per=True, replay_ratio=0.25)
    cri_class = QNetDistDuel

    def get_next_action(self, next_state: torch.Tensor, next_probs: torch.Tensor) -> torch.Tensor:
        """Double DQN (arXiv:1509.06461): the online network picks the action whose target distribution is used."""
        return self.legal(self.cri(next_state), next_state).argmax(dim=-1)


# ---- deterministic and stochastic actor-critics (continuous actions) ----
class AgentDDPG(AgentOffPolicy):
    """DDPG (Lillicrap et al. arXiv:1509.02971) with Gaussian noise instead of OU (no benefit in OU: TD3 paper, 6.1)."""

    hyper_defaults = AgentOffPolicy.hyper_defaults | dict(actor_learning_rate=None,  # None: learning_rate
                                                          explore_noise=0.1,  # action noise std, actions in [-1, 1]
                                                          noise_beta=0.0,  # its colour (ColoredNoise): 0 white, 1 pink
                                                          random_beta=1.0)  # the random warm-up's colour (AgentSAC)
    act_class, cri_class = Actor, Critic

    def explore_action(self, state: torch.Tensor) -> torch.Tensor:
        noise = self.standard_noise((*self.batch_shape(state), self.action_dim), self.noise_beta)
        return self.act.get_action(state, self.explore_noise, noise)


class AgentTD3(AgentDDPG):
    """TD3 (Fujimoto et al. arXiv:1802.09477): twin critics, delayed actor updates and target policy smoothing."""

    # policy_noise, noise_clip: the target smoothing noise's std and clip; explore_noise 0.2 (the paper's 0.1) and
    # random_beta 0 (pink lost LunarLanderContinuous, white MountainCar): History/UPDATE_LOG.md, 2026-11-23 and 11-25
    hyper_defaults = AgentDDPG.hyper_defaults | dict(explore_noise=0.2, policy_noise=0.2, noise_clip=0.5,
                                                     learning_rate=1e-3, soft_update_tau=5e-3, random_beta=0.0)
    train_defaults = AgentDDPG.train_defaults | dict(batch_size=256)
    policy_delay = 2
    cri_class = CriticTwin

    def get_next_q(self, next_state: torch.Tensor) -> torch.Tensor:
        """Target policy smoothing: bootstrap from a noisy target action (TD3 paper, eq. 14)."""
        next_action = self.act_target(next_state)
        noise = (torch.randn_like(next_action) * self.policy_noise).clamp(-self.noise_clip, self.noise_clip)
        next_action = (next_action + noise).clamp(-1.0, 1.0)
        return torch.stack(self.cri_target.get_q_heads(next_state, next_action)).min(dim=0).values


class AgentSAC(AgentOffPolicy):
    """SAC (Haarnoja et al. arXiv:1801.01290): twin critics, no actor target (it bootstraps from the online policy),
    alpha tuned toward a target entropy (arXiv:1812.05905, section 5)."""

    # pink warm-up: finds MountainCar's reward; pink policy: slower on LunarLander (History/UPDATE_LOG.md, 2026-11-25)
    hyper_defaults = AgentOffPolicy.hyper_defaults | dict(actor_learning_rate=None,  # None: learning_rate
                                                          alpha_init=0.2,  # initial entropy temperature
                                                          if_tune_alpha=True,  # False: alpha stays alpha_init
                                                          noise_beta=0.0,  # colour of the policy's noise (ColoredNoise)
                                                          random_beta=1.0)  # colour of the random warm-up's actions
    act_class, cri_class = ActorSAC, CriticTwin
    if_act_target = False
    extra_save_names = ("log_alpha", "alpha_optimizer")  # the temperature and its optimizer, in checkpoints

    def init_networks(self):
        super().init_networks()
        # alpha = exp(log_alpha) stays positive; its own optimizer, or none: a fixed alpha (Spinning Up's SAC)
        self.log_alpha = torch.tensor(np.log(self.alpha_init), dtype=torch.float32, device=self.device,
                                      requires_grad=self.if_tune_alpha)
        self.alpha_optimizer = (new_adam([self.log_alpha], self.learning_rate, self.device) if self.if_tune_alpha
                                else None)
        self.target_entropy = -float(self.action_dim)  # the heuristic of arXiv:1812.05905, section 5

    def explore_action(self, state: torch.Tensor) -> torch.Tensor:
        """A sample of the policy, its standard normal draws coloured along the steps by noise_beta."""
        return self.act.get_action(state, self.standard_noise((*self.batch_shape(state), self.action_dim),
                                                              self.noise_beta))

    def get_next_q(self, next_state: torch.Tensor) -> torch.Tensor:
        """Soft value of next_state: min of the target twins minus alpha * log pi (SAC paper, eq. 3). With n_step > 1
        the entropy terms of the steps between are left out: a transition keeps no log-probs of the actions taken."""
        next_action, next_log_prob = self.act.get_action_log_prob(next_state)
        next_q = torch.stack(self.cri_target.get_q_heads(next_state, next_action)).min(dim=0).values
        return next_q - self.log_alpha.exp() * next_log_prob

    def get_obj_actor(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Policy objective E[alpha * log pi(a|s) - min Q(s, a)] (SAC paper, eq. 7)."""
        state = batch[0]
        action, log_prob = self.act.get_action_log_prob(state)
        q = torch.stack(self.cri.get_q_heads(state, action)).min(dim=0).values
        return (self.log_alpha.exp().detach() * log_prob - q).mean()

    def extra_update(self, batch: tuple[torch.Tensor, ...]):
        """A temperature step toward the target entropy (arXiv:1812.05905, eq. 18); none for a fixed alpha."""
        if self.alpha_optimizer is None:
            return
        with torch.no_grad():
            log_prob = self.act.get_action_log_prob(batch[0])[1]
        optimizer_step(self.alpha_optimizer, -(self.log_alpha * (log_prob + self.target_entropy)).mean())

    def extra_stats(self) -> dict[str, float]:
        return {"alpha": self.log_alpha.exp().item()}


class AgentModSAC(AgentSAC):
    """SAC as ElegantRL's 2020 library modified it: an actor that waits while the critic is unreliable (is_actor_step),
    log alpha in [-16, 2], temperature and target steps every time. SAC's independent twin critics, not the 2020
    library's two heads on one trunk, which erred together: Ant-v5's Q diverged (History/UPDATE_LOG.md, 2026-11-28)."""

    if_delay_targets = False
    log_alpha_range = (-16.0, 2.0)  # alpha in [1e-7, 7.4]: a temperature that can neither vanish nor run away
    critic_average = 0.995  # the weight of the past in the running average of the critic's relative loss
    target_spread = torch.ones(())  # the variance of the last batch's bootstrap values (get_next_q)
    extra_save_names = AgentSAC.extra_save_names + ("actor_share",)

    def __init__(self, net_dim: int, state_dim: int, action_dim: int, device=None, **hyperparameters):
        # [relative-loss average, actor steps owed], saved for resumes; set first: the base's StateNorm reads parts
        self.actor_share = torch.tensor([math.sqrt(-math.log(0.5)), 1.0], dtype=torch.float64)
        super().__init__(net_dim, state_dim, action_dim, device, **hyperparameters)

    def is_actor_step(self, obj_critic: torch.Tensor) -> bool:
        """The "reliable lambda" = exp(-L^2), L a running average of the critic's loss relative to target_spread: the
        actor takes 1 / (2 - lambda) steps per critic step (a credit spreads them); on the raw loss lambda stayed
        near 0 (History/UPDATE_LOG.md, 2026-11-26). Averaged over data-parallel ranks so their actors step alike."""
        relative = obj_critic.detach() / 2 / self.target_spread.clamp(min=1e-8)  # two heads' losses summed
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(relative)
            relative /= torch.distributed.get_world_size()
        obj_critic_avg, actor_credit = self.actor_share.tolist()
        obj_critic_avg = self.critic_average * obj_critic_avg + (1 - self.critic_average) * relative.item()
        actor_credit += 1 / (2 - math.exp(-obj_critic_avg ** 2))
        if_step = actor_credit >= 1
        self.actor_share[0], self.actor_share[1] = obj_critic_avg, actor_credit - if_step
        return if_step

    def get_next_q(self, next_state: torch.Tensor) -> torch.Tensor:
        """SAC's soft value; its variance over the batch scales the loss is_actor_step reads (target_spread)."""
        next_q = super().get_next_q(next_state)
        self.target_spread = next_q.var()
        return next_q

    def extra_update(self, batch: tuple[torch.Tensor, ...]):
        super().extra_update(batch)
        with torch.no_grad():
            self.log_alpha.clamp_(*self.log_alpha_range)


class AgentTQC(AgentSAC):
    """Truncated Quantile Critics (Kuznetsov et al. arXiv:2005.04269): SAC whose quantile critics' target drops the
    largest pooled atoms, finer overestimation control than SAC's min of two heads; the actor maximises the mean."""

    # RL Zoo's TQC values: the family's 2e-3, 0.02 diverged on Hardcore (History/UPDATE_LOG.md, 2026-11-28)
    hyper_defaults = AgentSAC.hyper_defaults | dict(learning_rate=7.3e-4, soft_update_tau=0.01)
    cri_class = CriticQuantiles
    drop_per_critic = 2  # the largest atoms of the target mixture left out, per critic (the paper's d = 2, section 5)

    def get_next_q(self, next_state: torch.Tensor) -> torch.Tensor:
        """The truncated mixture of next_state's soft return: every target critic's atoms pooled and sorted, the
        drop_per_critic * num_critics largest left out, minus alpha * log pi (TQC paper, section 4): (B, kept)."""
        next_action, next_log_prob = self.act.get_action_log_prob(next_state)
        atoms = self.cri_target.get_quantiles(next_state, next_action).flatten(1).sort(dim=1).values  # (B, N * M)
        kept = atoms[:, :atoms.shape[1] - self.drop_per_critic * self.cri_target.num_critics]
        return kept - self.log_alpha.exp() * next_log_prob[:, None]

    def get_obj_critic(self, batch: tuple[torch.Tensor, ...], weights: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """Quantile Huber loss (kappa 1) of every critic's atoms against every kept target atom (TQC paper, section
        4; Dabney et al. arXiv:1710.10044, eq. 10), summed over critics; TD errors (B,) of the atoms' means."""
        state, action, reward, discount, next_state = batch
        with torch.no_grad():
            q_target = reward[:, None] + discount[:, None] * self.get_next_q(next_state)  # (B, K)
        quantiles = self.cri.get_quantiles(state, action)  # (B, N, M)
        fractions = (torch.arange(quantiles.shape[2], device=self.device)[:, None] + 0.5) / quantiles.shape[2]  # (M, 1)
        shape = (*quantiles.shape, q_target.shape[1])  # (B, N, M, K): every atom against every target atom, as views
        atom, target = quantiles[..., None].expand(shape), q_target[:, None, None, :].expand(shape)
        huber = nn.functional.huber_loss(atom, target, reduction="none")  # one fused kernel, faster on the CPU
        with torch.no_grad():  # |tau_m - 1{target - atom < 0}| in one pass over (B, N, M, K), not four
            asymmetry = torch.where(target < atom, 1 - fractions, fractions)
        loss = (asymmetry * huber).mean(dim=(2, 3)).sum(dim=1)  # (B,)
        td_errors = (quantiles.detach().mean(dim=(1, 2)) - q_target.mean(dim=1)).abs()
        return (loss * weights).mean(), td_errors


class SharedEncoder:
    """Mixin: the actor's first layer (or ImageEncoder) is also the critic's encoder, trained by the critic's loss
    alone, as SAC+AE (Yarats et al. arXiv:1910.01741), so each optimizer steps one objective; targets copy it."""

    if_image_states = True  # the encoder is the actor's ImageEncoder; the critic's trunk takes its features

    def init_networks(self):
        super().init_networks()
        depth = 1 if is_image(self.state_dim) else 2  # the ImageEncoder; or the first Linear and its activation
        self.cri.encoder = self.act.net[:depth]  # the same modules
        self.cri_target = frozen_copy(self.cri)
        self.act_optimizer = new_adam(self.act.net[depth:].parameters(), self.actor_learning_rate or self.learning_rate,
                                      self.device)
        self.cri_optimizer = self.new_optimizer(self.cri, self.learning_rate)


class AgentInterAC(SharedEncoder, AgentDDPG):
    """DDPG sharing one state encoder (SharedEncoder): the 2020 library's AgentInterAC, trained by the critic alone."""

    act_class, cri_class = ActorEncoded, CriticEncoded


class AgentInterSAC(SharedEncoder, AgentModSAC):
    """ModSAC with one state encoder shared by actor and critic (SharedEncoder), as the 2020 library's InterSAC."""

    act_class, cri_class = ActorSACEncoded, CriticTwinEncoded


class AgentDiscreteSAC(ActionMasks, AgentSAC):
    """SAC for discrete actions (Christodoulou arXiv:1910.07207): a categorical policy, twin Q-networks of every
    action, expectations over the policy; the entropy stays out of the critic's target (get_next_q)."""

    if_discrete = True
    if_image_states = True
    act_class, cri_class = ActorDiscretePPO, QNetTwin
    # random_steps 0: the initial policy is uniform, it explores
    # DQN's 8 envs, half an update per step: SAC's were slower on LunarLander-v3 (History/UPDATE_LOG.md, 2026-11-24)
    train_defaults = AgentSAC.train_defaults | dict(random_steps=0, num_envs=8, replay_ratio=0.5)
    hyper_defaults = {name: value for name, value in AgentSAC.hyper_defaults.items()  # no noise: it samples
                      if name not in ("noise_beta", "random_beta")} | dict(if_action_mask=False, if_clip_reward=None)
    # share of the uniform entropy log(action_dim): the paper's 0.98 ran alpha away (History/UPDATE_LOG.md, 2026-11-24)
    target_entropy_share = 0.6

    def init_networks(self):
        super().init_networks()
        self.target_entropy = self.target_entropy_share * math.log(self.action_dim)

    def explore_action(self, state: torch.Tensor) -> torch.Tensor:
        return self.act.get_action_log_prob(state)[0]

    def get_next_q(self, next_state: torch.Tensor) -> torch.Tensor:
        """sum_a pi(a|s') min Q_target(s', a), the paper's eq. 10 without the entropy reward (as SACLite, Yu et al.
        arXiv:2201.12434), which paid for not ending episodes (History/UPDATE_LOG.md, 2026-11-24)."""
        probs = self.act.get_log_probs(next_state).exp()  # (B, action_dim)
        return (probs * torch.minimum(*self.cri_target.get_q_values(next_state))).sum(dim=-1)

    def get_obj_actor(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """sum_a pi(a|s) (alpha log pi(a|s) - min Q(s, a)), averaged over the batch (the paper's eq. 12)."""
        log_probs = self.act.get_log_probs(batch[0])  # (B, action_dim)
        q = torch.minimum(*self.cri.get_q_values(batch[0]))  # (B, action_dim)
        return (log_probs.exp() * (self.log_alpha.exp().detach() * log_probs - q)).sum(dim=-1).mean()

    def extra_update(self, batch: tuple[torch.Tensor, ...]):
        """The temperature's step on the stepped policy's exact entropy (the paper's eq. 11); none if alpha is fixed."""
        if self.alpha_optimizer is None:
            return
        with torch.no_grad():
            log_probs = self.act.get_log_probs(batch[0])
            entropy = -(log_probs.exp() * log_probs).sum(dim=-1)  # (B,)
        optimizer_step(self.alpha_optimizer, (self.log_alpha * (entropy - self.entropy_target(batch[0]))).mean())

    def entropy_target(self, state: torch.Tensor) -> torch.Tensor | float:
        """target_entropy; with masks that share of each state's legal-action entropy (B,), so alpha cannot run up."""
        if not self.if_action_mask:
            return self.target_entropy
        return self.target_entropy_share * state[..., -self.action_dim:].sum(dim=-1).log()


# ---- on-policy agents: the rollout (AgentOnPolicy), then VPG, A2C and PPO (continuous and discrete) ----
class AgentOnPolicy(AgentBase):
    """On-policy agents: vector-env rollouts (RolloutBuffer), GAE advantages, a critic V(s), the policy-gradient
    surrogate; update_net differs: VPG, TRPO (actor once, critic in epochs), A2C (both once), PPO (epochs)."""

    if_off_policy = False
    if_image_states = True  # ActorPPO, ActorDiscretePPO and CriticValue take images (AgentNet.state_mlp)
    act_class, cri_class = ActorPPO, CriticValue
    # one step on a short rollout (A2C's); agents that step more than once on it add batch_size and epochs
    train_defaults = dict(net_dims=64, steps_per_round=256, num_envs=8, num_workers=1,
                          if_multiprocess=False)  # not measured faster in processes
    hyper_defaults = dict(learning_rate=1e-3, gamma=0.99, reward_scale=1.0,
                          actor_learning_rate=None,  # None: learning_rate
                          lambda_gae=0.95,  # GAE's lambda: 0 is the one-step TD error, 1 the Monte Carlo return
                          entropy_coef=0.0,  # weight of the entropy bonus; the Gaussian's learned std explores
                          if_state_norm=False,  # standardised states (AgentNet.StateNorm)
                          if_clip_reward=None)  # the rewards' signs (learned_reward); None: on ALE/ ids
    criterion = nn.MSELoss()  # regression loss of the critic onto the GAE returns
    max_grad_norm = 0.5  # gradient-norm clip of every step, as the PPO code behind the paper's results
    target_kl = None  # PPO's early stop of a round's epochs (AgentA2C.update_net); a PPO-family hyperparameter
    explained_variance = math.nan  # of the last rollout's returns by the critic (get_rollout_batch)

    def explore_action(self, state: torch.Tensor) -> torch.Tensor:
        return self.act.convert_action_for_env(self.act.get_action_log_prob(state)[0])

    @torch.no_grad()
    def explore_env(self, env, horizon: int) -> tuple[torch.Tensor, ...]:
        """Step a SAME_STEP vector env `horizon` times -> RolloutBuffer.extend's tensors, (horizon, num_envs, ...)."""
        check_same_step(self, env)
        state = env.reset()[0] if self.last_state is None else self.last_state  # (N, state_dim)
        rollout = [[] for _ in range(7)]
        for _ in range(horizon):
            state_t = self.as_state_tensor(state)
            action, log_prob = self.get_action_behaviour(state_t)
            next_state, reward, terminated, truncated, info = env.step(
                self.act.convert_action_for_env(action).cpu().numpy())
            self.end_step(terminated | truncated)
            for store, value in zip(rollout, (state_t, action, log_prob, self.learned_reward(reward, info),
                                              ~terminated, ~(terminated | truncated),
                                              final_observations(next_state, info)), strict=True):
                store.append(torch.as_tensor(value, device=self.device))
            state = next_state
        self.last_state = state

        states, actions, log_probs, rewards, not_terminated, not_done, next_states = map(torch.stack, rollout)
        return (states, actions, log_probs, rewards.float() * self.reward_scale, not_terminated.float(),
                not_done.float(), self.as_state_tensor(next_states))

    def get_action_behaviour(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A sampled action and what the rollout keeps of the policy that chose it: its log-prob, (N,) each."""
        return self.act.get_action_log_prob(state)

    def end_step(self, done: np.ndarray):
        """Which copies' episodes the last step ended, (N,) bool; nothing here (a recurrent agent zeroes memories)."""

    def get_log_prob_entropy(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """log pi(action|state) and the policy's entropy (a recurrent agent's state is a sequence index)."""
        return self.act.get_log_prob_entropy(state, action)

    @torch.no_grad()
    def get_rollout_batch(self, buffer: RolloutBuffer) -> tuple[torch.Tensor, ...]:
        """The rollout as T * N samples (states, actions, log-probs, advantages normalised per rollout, returns); the
        log-probs are the acting policy's, the learner's at the round's start in every loop, so ratios start at 1."""
        values, next_values = self.cri(buffer.states), self.cri(buffer.next_states)  # (T, N) each
        advantages, returns = buffer.get_advantages(values, next_values, self.gamma, self.lambda_gae)
        # the share of the returns' variance the critic explained before this round's steps (1: all; 0: the mean's)
        self.explained_variance = (1 - (returns - values).var() / returns.var().clamp(min=1e-8)).item()
        states, actions = buffer.states.flatten(0, 1), buffer.actions.flatten(0, 1)  # (T * N, ...)
        log_probs = buffer.log_probs.flatten(0, 1)
        returns, advantages = returns.flatten(0, 1), advantages.flatten(0, 1)  # (T * N,), a team's (T * N, num_agents)
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)  # normalised per rollout
        # a team's log-probs (T * N, num_agents): each agent's ratio on its own advantage (MAPPO) or the team's
        advantages = advantages.view(*advantages.shape,
                                     *(1,) * (log_probs.dim() - advantages.dim())).expand_as(log_probs)
        return states, actions, log_probs, advantages, returns

    def get_obj_critic(self, state: torch.Tensor, ret: torch.Tensor) -> torch.Tensor:
        """The critic's regression of V(state) onto the returns."""
        return self.criterion(self.cri(state), ret)

    def extra_stats(self) -> dict[str, float]:
        """The critic's explained variance of the last rollout's returns; the Gaussian's learned std."""
        stats = {} if math.isnan(self.explained_variance) else {"explained_variance": self.explained_variance}
        return stats | ({} if self.if_discrete else {"action_std": self.act.log_std.exp().mean().item()})

    def get_obj_actor(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Negated mean(pi / pi_old * A) + entropy bonus; at pi = pi_old, the policy gradient (TRPO paper, eq. 14)."""
        state, action, old_log_prob, advantage = batch
        log_prob, entropy = self.get_log_prob_entropy(state, action)
        return -((log_prob - old_log_prob).exp() * advantage + self.entropy_coef * entropy).mean()


class DiscreteOnPolicy(ActionMasks):
    """Categorical policy (AgentNet.ActorDiscretePPO), entropy bonus and action masks for on-policy agents; first
    among the bases. hyper_defaults: AgentOnPolicy's with discrete_defaults (a base adding more names its own)."""

    if_discrete = True
    act_class = ActorDiscretePPO
    # an entropy bonus (no learned std to explore with) and masks of legal actions (ActionMasks)
    discrete_defaults = dict(entropy_coef=0.01, if_action_mask=False)
    hyper_defaults = AgentOnPolicy.hyper_defaults | discrete_defaults


class AgentVPG(AgentOnPolicy):
    """Vanilla policy gradient (Williams 1992; learned baseline and GAE, as Spinning Up): one policy step on the
    rollout, then the critic fitted for `epochs` passes, so the next advantages rest on a converged baseline."""

    # one policy step per 512 transitions: the fastest rollout on Pendulum-v1 (History/UPDATE_LOG.md, 2026-11-23)
    train_defaults = AgentOnPolicy.train_defaults | dict(steps_per_round=512, batch_size=256, epochs=8)

    def update_net(self, buffer: RolloutBuffer, batch_size: int, epochs: float) -> dict[str, float]:
        """The actor's step (update_actor), then `epochs` passes of the critic's regression."""
        state, action, old_log_prob, advantage, ret = self.get_rollout_batch(buffer)
        obj_actor = self.update_actor((state, action, old_log_prob, advantage))
        obj_critic = self.fit_critic((state, ret), batch_size, epochs)
        return {"obj_critic": obj_critic, "obj_actor": obj_actor} | self.extra_stats()

    def fit_critic(self, batch: tuple[torch.Tensor, ...], batch_size: int, epochs: float) -> float:
        """`epochs` passes of critic_step over batch in minibatches of batch_size; returns the mean objective."""
        objectives = [self.critic_step(part) for part in minibatches(batch, batch_size, epochs)]
        return sum(objectives).item() / len(objectives)

    def critic_step(self, minibatch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """One step of the critic's optimizer on get_obj_critic of a minibatch; returns the objective, detached."""
        obj_critic = self.get_obj_critic(*minibatch)
        optimizer_step(self.cri_optimizer, obj_critic, self.max_grad_norm)
        return obj_critic.detach()

    def update_actor(self, batch: tuple[torch.Tensor, ...]) -> float:
        """One step of the actor's optimizer on get_obj_actor over the whole rollout; returns the objective."""
        obj_actor = self.get_obj_actor(batch)
        optimizer_step(self.act_optimizer, obj_actor, self.max_grad_norm)
        return obj_actor.item()


class AgentDiscreteVPG(DiscreteOnPolicy, AgentVPG):
    """VPG with a categorical policy: AgentVPG's update, DiscreteOnPolicy's actor and entropy bonus."""


class AgentA2C(AgentOnPolicy):
    """A2C (Mnih et al. arXiv:1602.01783, synchronous): one critic step, then one actor step, on the whole rollout."""

    def update_net(self, buffer: RolloutBuffer, batch_size: int | None = None, epochs: float | None = None
                   ) -> dict[str, float]:
        """round(epochs) epochs of minibatches (minibatch_plan), critic then actor, stopped once the approximate KL to
        the acting policy passes target_kl (Spinning Up's PPO; a host sync per minibatch). Returns the objectives, each
        get_step_stats value at the first minibatch (<name>_start) and its mean, and with target_kl epochs_done."""
        batch_size, epochs = self.minibatch_plan(buffer, batch_size, epochs)
        rollout = self.get_rollout_batch(buffer)
        sum_obj_critic = sum_obj_actor = torch.zeros((), device=self.device)
        sum_step_stats, first_step_stats, update_times = {}, {}, 0
        for state, action, log_prob, advantage, ret in minibatches(rollout, batch_size, epochs):
            step_stats = self.get_step_stats(state, action, log_prob)
            if self.target_kl is not None and step_stats["approx_kl"].item() > self.target_kl:
                break
            obj_critic = self.get_obj_critic(state, ret)
            optimizer_step(self.cri_optimizer, obj_critic, self.max_grad_norm)
            sum_step_stats = {name: sum_step_stats.get(name, 0) + value for name, value in step_stats.items()}
            first_step_stats = sum_step_stats if update_times == 0 else first_step_stats
            obj_actor = self.get_obj_actor((state, action, log_prob, advantage))
            optimizer_step(self.act_optimizer, obj_actor, self.max_grad_norm)
            sum_obj_critic, sum_obj_actor = sum_obj_critic + obj_critic.detach(), sum_obj_actor + obj_actor.detach()
            update_times += 1
        stats = {"obj_critic": sum_obj_critic.item() / update_times, "obj_actor": sum_obj_actor.item() / update_times}
        for name, total in sum_step_stats.items():
            stats |= {f"{name}_start": first_step_stats[name].item(), name: total.item() / update_times}
        if self.target_kl is not None:
            stats["epochs_done"] = update_times * batch_size / rollout[0].shape[0]
        return stats | self.extra_stats()

    def minibatch_plan(self, buffer: RolloutBuffer, batch_size: int | None, epochs: float | None
                       ) -> tuple[int, float]:
        """One step on the whole rollout, whatever batch_size and epochs say (a second would be off-policy)."""
        return buffer.add_size, 1

    def get_step_stats(self, state: torch.Tensor, action: torch.Tensor, old_log_prob: torch.Tensor
                       ) -> dict[str, torch.Tensor]:
        """Policy values before each actor step, () tensors by name, for update_net (PPO's); none here."""
        return {}


class AgentDiscreteA2C(DiscreteOnPolicy, AgentA2C):
    """A2C with a categorical policy: AgentA2C's update, DiscreteOnPolicy's actor and entropy bonus."""


class AgentPPO(AgentA2C):
    """PPO (Schulman et al. arXiv:1707.06347): A2C's steps in epochs of minibatches on the clipped surrogate."""

    # processes: serial was slower and solved no more BipedalWalker-v3 seeds (History/UPDATE_LOG.md, 2026-11-25)
    train_defaults = AgentA2C.train_defaults | dict(batch_size=256, steps_per_round=2048,
                                                    epochs=8,  # passes over each rollout
                                                    if_multiprocess=True)
    hyper_defaults = AgentA2C.hyper_defaults | dict(ratio_clip=0.2,  # the policy ratio is clipped to 1 +- ratio_clip
                                                    target_kl=None)  # stop a round's epochs past this KL; None: never

    def minibatch_plan(self, buffer: RolloutBuffer, batch_size: int, epochs: float) -> tuple[int, float]:
        """`epochs` passes over the rollout in minibatches of batch_size."""
        return batch_size, epochs

    @torch.no_grad()
    def get_step_stats(self, state: torch.Tensor, action: torch.Tensor, old_log_prob: torch.Tensor
                       ) -> dict[str, torch.Tensor]:
        """PPO's debug values before each actor step: clip_fraction (ratios outside 1 +- ratio_clip), approx_kl =
        mean((ratio - 1) - log ratio) (Schulman's k3: unbiased, >= 0; target_kl compares it), the mean entropy."""
        log_prob, entropy = self.get_log_prob_entropy(state, action)
        log_ratio = log_prob - old_log_prob
        ratio = log_ratio.exp()
        return {"clip_fraction": ((ratio - 1).abs() > self.ratio_clip).float().mean(),
                "approx_kl": ((ratio - 1) - log_ratio).mean(), "entropy": entropy.mean()}

    def get_obj_actor(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Clipped surrogate objective (PPO paper, eq. 7) plus the entropy bonus, negated for descent."""
        state, action, old_log_prob, advantage = batch
        log_prob, entropy = self.get_log_prob_entropy(state, action)
        ratio = (log_prob - old_log_prob).exp()  # pi_new(a|s) / pi_old(a|s), pi_old the policy that acted
        surrogate = torch.min(ratio * advantage, ratio.clamp(1 - self.ratio_clip, 1 + self.ratio_clip) * advantage)
        return -(surrogate + self.entropy_coef * entropy).mean()


class AgentDiscretePPO(DiscreteOnPolicy, AgentPPO):
    """PPO with a categorical policy for Discrete action spaces."""

    hyper_defaults = AgentPPO.hyper_defaults | DiscreteOnPolicy.discrete_defaults
    # the serial loop: faster than processes on CartPole-v1 (History/UPDATE_LOG.md, 2026-11-22)
    train_defaults = AgentPPO.train_defaults | dict(if_multiprocess=False)


# ---- recurrent agents (a recurrent cell's memory per env copy): the acting memory, recurrent PPO, R2D2 ----
def sequences(tensor: torch.Tensor, seq_len: int) -> torch.Tensor:
    """(T, N, ...) -> (T // seq_len * N, seq_len, ...): sequence k * N + n is copy n's k-th."""
    return tensor.unflatten(0, (-1, seq_len)).transpose(1, 2).flatten(0, 1)


class RecurrentActing:
    """Recurrent acting: select_action acts in E episodes from act_memory (reset_memory, keep_memory); a first base."""

    act_memory = None  # (2, E, width) the acting network's (h, c) of each episode that select_action acts in

    def acting_features(self, state: torch.Tensor) -> torch.Tensor:
        """The core's features (E, width) of state (E, state_dim), each from its episode's memory, carried on."""
        state_dims = len(self.state_dim) if is_image(self.state_dim) else 1  # (E, state_dim) or (E, *image_shape)
        if self.act_memory is None or state.dim() != 1 + state_dims or state.shape[0] != self.act_memory.shape[1]:
            raise RefusedError(f"{type(self).__name__}.select_action takes a batch (E, state_dim) of the E episodes "
                               f"that reset_memory(E) started (got shape {tuple(state.shape)}); call "
                               f"reset_memory(E) at their start, keep_memory(rows) when some end")
        no_start = torch.zeros((1, state.shape[0]), device=self.device)  # (1, E): reset_memory zeroed the new ones
        features, memories = self.act.core(state[None], self.act_memory, no_start)
        self.act_memory = memories[-1]
        return features[0]

    def reset_memory(self, num_envs: int):
        self.act_memory = self.act.core.zero_memory(num_envs, self.device)

    def keep_memory(self, rows: list[int]):
        self.act_memory = self.act_memory[:, rows]

    def policy_module(self) -> nn.Module:
        raise RefusedError(f"{type(self).__name__} is not accepted by export yet: its policy acts from a memory that "
                           f"states alone do not give; export takes the agents without memory (if_recurrent=False)")


class AgentRecurrentPPO(RecurrentActing, AgentPPO):
    """PPO with a GRU or LSTM before the actor and the critic (AgentNet.Recurrent), for partially observed envs
    (CartPoleNoVel-v1): memories carry across steps, zeroed at every episode start; learning replays whole sequences
    from recomputed memories (truncated BPTT, R2D2 arXiv:1810.06059). Refused: state norm, masks, torchrun, export."""

    if_recurrent = True
    act_class, cri_class = ActorRecurrentPPO, CriticRecurrentValue
    # serial: processes not measured faster; a GRU: more seeds solved, cheaper (BENCHMARKS.md, "An LSTM or a GRU")
    train_defaults = AgentPPO.train_defaults | dict(if_multiprocess=False, recurrent_cell="gru")
    hyper_defaults = ({name: value for name, value in AgentPPO.hyper_defaults.items() if name != "if_state_norm"}
                      | dict(seq_len=16))  # steps of a learning sequence; must divide steps_per_round // num_envs
    memory = None  # (rows, N, width) the actor's memory of each explored env copy (RecurrentCore)
    cri_memory = None  # (rows, N, width) the critic's memory after the last rollout it learned from, per env copy
    episode_start = None  # (N,) 1 where the next explored step starts an episode
    sequence_inputs = None  # this round's sequences (get_rollout_batch), which a minibatch's indices select

    @torch.no_grad()
    def select_action(self, state: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """state (E, state_dim) of the episodes reset_memory started -> action (E, ...), each from its memory."""
        features = self.acting_features(self.as_state_tensor(state))
        action = self.act(features) if deterministic else self.act.get_action_log_prob(features)[0]
        return self.act.convert_action_for_env(action).cpu().numpy()

    def explore_env(self, env, horizon: int) -> tuple[torch.Tensor, ...]:
        """AgentOnPolicy.explore_env's tensors, start memories (2, N, width) and episode starts (T, N)."""
        if self.memory is None or self.last_state is None:  # every copy starts a new episode
            self.memory = self.act.core.zero_memory(env.num_envs, self.device)
            self.episode_start = torch.ones(env.num_envs, device=self.device)
        start_memory, first_start = self.memory, self.episode_start
        rollout = super().explore_env(env, horizon)
        episode_start = torch.cat((first_start[None], 1 - rollout[5][:-1]))  # (T, N): a step after one that ended
        return (*rollout, start_memory, episode_start)

    def get_action_behaviour(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features, memories = self.act.core(state[None], self.memory, self.episode_start[None])
        self.memory = memories[-1]
        return self.act.get_action_log_prob(features[0])

    def end_step(self, done: np.ndarray):
        self.episode_start = torch.as_tensor(done, dtype=torch.float32, device=self.device)

    def minibatch_plan(self, buffer: RecurrentRolloutBuffer, batch_size: int, epochs: float
                       ) -> tuple[int, float]:
        """`epochs` passes over the rollout's sequences, batch_size // seq_len (at least one) per minibatch."""
        return max(1, batch_size // self.seq_len), epochs

    @torch.no_grad()
    def get_rollout_batch(self, buffer: RecurrentRolloutBuffer) -> tuple[torch.Tensor, ...]:
        """AgentOnPolicy.get_rollout_batch's values by sequence: (S,) sequence indices in place of states, then
        actions, log-probs, advantages and returns (S, seq_len, ...), S = T // seq_len * N; keeps the sequences'
        states, episode starts and first memories for the minibatches (sequence_inputs)."""
        num_steps, num_envs = buffer.rewards.shape
        if num_steps % self.seq_len:
            raise RefusedError(f"seq_len={self.seq_len} is not accepted with rollouts of {num_steps} steps per env "
                               f"copy (steps_per_round // num_envs): seq_len must divide it, so that sequences are "
                               f"whole")
        act_memories = self.act.core(buffer.states, buffer.start_memory, buffer.episode_start)[1]  # (T + 1, 2, N, W)
        if self.cri_memory is None or self.cri_memory.shape != buffer.start_memory.shape:  # a fresh learner: a rollout
            self.cri_memory = torch.zeros_like(buffer.start_memory)  # whose copies all start episodes (explore_env)
        cri_features, cri_memories = self.cri.core(buffer.states, self.cri_memory, buffer.episode_start)
        self.cri_memory = cri_memories[-1]  # the next rollout goes on from here (the same env copies, in order)
        values = self.cri(cri_features)  # (T, N)
        # V(next_states[t]) from the memory after step t (a truncated episode's final observation too), batched
        after = cri_memories[1:].transpose(0, 1).flatten(1, 2)  # (2, T * N, W)
        next_features = self.cri.core(buffer.next_states.flatten(0, 1)[None], after,
                                      torch.zeros((1, num_steps * num_envs), device=self.device))[0]
        next_values = self.cri(next_features[0]).view(num_steps, num_envs)  # (T, N)
        advantages, returns = buffer.get_advantages(values, next_values, self.gamma, self.lambda_gae)
        self.explained_variance = (1 - (returns - values).var() / returns.var().clamp(min=1e-8)).item()
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)  # normalised per rollout

        def first_memories(memories: torch.Tensor) -> torch.Tensor:  # (T + 1, 2, N, W) -> (S, 2, W) at each start
            return sequences(memories[:-1].transpose(1, 2), self.seq_len)[:, 0]

        self.sequence_inputs = (sequences(buffer.states, self.seq_len), sequences(buffer.episode_start, self.seq_len),
                                first_memories(act_memories), first_memories(cri_memories))
        return (torch.arange(self.sequence_inputs[0].shape[0], device=self.device),
                *(sequences(tensor, self.seq_len)
                  for tensor in (buffer.actions, buffer.log_probs, advantages, returns)))

    def features(self, net: nn.Module, index: torch.Tensor, memory_column: int) -> torch.Tensor:
        """net's core over sequences `index` (B,) from their first memories -> features (B, seq_len, W), with BPTT."""
        states, episode_start, *first_memory = (tensor[index] for tensor in self.sequence_inputs)
        memory = first_memory[memory_column].transpose(0, 1)  # (2, B, W)
        features = net.core(states.transpose(0, 1), memory, episode_start.transpose(0, 1))[0]  # (seq_len, B, W)
        return features.transpose(0, 1)

    def get_log_prob_entropy(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.act.get_log_prob_entropy(self.features(self.act, state, 0), action)

    def get_obj_critic(self, state: torch.Tensor, ret: torch.Tensor) -> torch.Tensor:
        return self.criterion(self.cri(self.features(self.cri, state, 1)), ret)


class AgentDiscreteRecurrentPPO(DiscreteOnPolicy, AgentRecurrentPPO):
    """Recurrent PPO with a categorical policy on the core's features (no action masks: the head sees features)."""

    act_class = ActorDiscreteRecurrentPPO
    hyper_defaults = AgentRecurrentPPO.hyper_defaults | dict(  # the entropy bonus, no masks (see above)
        entropy_coef=DiscreteOnPolicy.discrete_defaults["entropy_coef"])


class AgentR2D2(RecurrentActing, AgentD3QN):
    """R2D2 (Kapturowski et al., ICLR 2019) on one explorer: dueling double DQN with a recurrent core replaying
    sequences from stored memories after a burn-in (section 3), on n-step double-Q targets rescaled by h (value_rescale,
    2.3; so no reward clipping), masked to each episode. Refused: torchrun, state norm, action masks, export."""

    if_recurrent = True
    cri_class = QNetRecurrentDuel
    net_keywords = ()  # epsilon-greedy only: the recurrent Q-network has no noisy layers
    priority_eta = 0.9  # the paper's eta of the sequence priority (section 2.3)
    hyper_defaults = ({name: value for name, value in AgentD3QN.hyper_defaults.items()
                       if name not in ("if_noisy", "if_action_mask", "if_state_norm")}
                      # h replaces reward_scale and clipping (Pohlen et al. arXiv:1805.11593); n_step 5 (Table 2);
                      # 5e-4: DQN's 1e-3 left a CartPoleNoVel-v1 seed short (History/UPDATE_LOG.md, 2026-11-26)
                      | dict(reward_scale=1.0, n_step=5, learning_rate=5e-4, if_clip_reward=False,
                             seq_len=20,  # training steps of a replayed sequence (paper: 80)
                             burn_in=10))  # steps before them that only refresh the stored memory (paper: 40)
    # batch_size and buffer_size count sequences; replay is always prioritized sequences (no if_per, her_k);
    # a GRU: the LSTM's steps to target, cheaper per gradient step (BENCHMARKS.md, "Memory")
    train_defaults = ({name: value for name, value in AgentD3QN.train_defaults.items()
                       if name not in ("if_per", "her_k")} | dict(batch_size=32, buffer_size=2 ** 14,
                                                                 replay_ratio=1 / 32, recurrent_cell="gru"))
    memory = None  # (rows, N, width) the memory of each explored env copy (RecurrentCore)
    episode_steps = None  # (N,) the next explored step's index in its episode, 0 where it starts one

    @torch.no_grad()
    def select_action(self, state: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """state (E, state_dim) of the episodes reset_memory started -> action (E,), greedy or epsilon-greedy."""
        state = self.as_state_tensor(state)
        action = self.cri(self.acting_features(state)).argmax(dim=-1)
        return (action if deterministic else self.epsilon_greedy(action, state)).cpu().numpy()

    @torch.no_grad()
    def explore_env(self, env, horizon: int, if_random: bool = False) -> tuple[torch.Tensor, ...]:
        """Step the N copies horizon times, each from its memory; returns T * N steps in step-then-env order: states,
        actions (T * N, 1), rewards times reward_scale, not_terminated, not_done, next_states (final observations),
        episode step indices and received memories (T * N, 2, width), for SequenceReplayBuffer.extend."""
        check_same_step(self, env)
        if self.memory is None or self.last_state is None:  # every copy starts a new episode
            self.last_state = env.reset()[0] if self.last_state is None else self.last_state
            self.memory = self.cri.core.zero_memory(env.num_envs, self.device)
            self.episode_steps = torch.zeros(env.num_envs, dtype=torch.long, device=self.device)
        as_tensor = lambda x, dtype=torch.float32: torch.as_tensor(x, dtype=dtype, device=self.device)
        state, steps = self.as_state_tensor(self.last_state), []
        for _ in range(horizon):
            features, memories = self.cri.core(state[None], self.memory, (self.episode_steps == 0)[None])
            action = (as_tensor(self.random_action(env.num_envs, state), torch.long) if if_random else
                      self.epsilon_greedy(self.cri(features[0]).argmax(dim=-1), state))
            next_state, reward, terminated, truncated, info = env.step(action.cpu().numpy())
            final, next_tensor = final_observations(next_state, info), self.as_state_tensor(next_state)
            steps.append((state, action[:, None], as_tensor(self.learned_reward(reward, info)) * self.reward_scale,
                          as_tensor(~terminated), as_tensor(~(terminated | truncated)),
                          next_tensor if final is next_state else self.as_state_tensor(final),  # one copy: none ended
                          self.episode_steps, self.memory.transpose(0, 1)))
            self.memory = memories[-1]
            self.episode_steps = torch.where(as_tensor(terminated | truncated, torch.bool), 0, self.episode_steps + 1)
            state = next_tensor
        self.last_state = state.cpu().numpy()
        return tuple(torch.stack(column).flatten(0, 1) for column in zip(*steps))  # (T * N, ...) each

    def unroll(self, net: nn.Module, batch: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        """net's core over B sequences from their stored memories: burn-in without gradient (paper section 3), then
        the training steps -> features (seq_len, B, width) and the memory after each (seq_len, 2, B, width)."""
        states, episode_start, memory = batch[0].transpose(0, 1), batch[6].transpose(0, 1), batch[8].transpose(0, 1)
        if self.burn_in:
            with torch.no_grad():
                memory = net.core(states[:self.burn_in], memory, episode_start[:self.burn_in])[1][-1]  # (2, B, width)
        features, memories = net.core(states[self.burn_in:], memory, episode_start[self.burn_in:])
        return features, memories[1:]

    def get_obj_critic(self, batch: tuple[torch.Tensor, ...], weights: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """Q at the training steps regressed onto h(G + discount * h^-1(next_q)), averaged over unmasked steps, times
        the weights (B,); also each sequence's priority (sequence_priority of the rescaled TD errors)."""
        actions, returns, discounts, last, boot_states, _, mask = (tensor[:, self.burn_in:].transpose(0, 1)
                                                                  for tensor in batch[1:8])  # (seq_len, B, ...) each
        features, memories = self.unroll(self.cri, batch)
        q = self.cri(features).gather(-1, actions[..., None]).squeeze(-1)  # (seq_len, B)
        with torch.no_grad():
            next_q = self.get_next_q(boot_states, last - self.burn_in, memories, self.unroll(self.cri_target, batch)[1])
            q_target = value_rescale(returns + discounts * value_rescale_inverse(next_q))  # (seq_len, B)
        loss = torch.where(mask.bool(), self.criterion(q, q_target), 0).sum(dim=0) / mask.sum(dim=0)  # (B,)
        return (loss * weights).mean(), sequence_priority((q.detach() - q_target).abs(), mask, self.priority_eta)

    def get_next_q(self, boot_states: torch.Tensor, last: torch.Tensor, memories: torch.Tensor,
                   target_memories: torch.Tensor) -> torch.Tensor:
        """Double DQN's bootstrap value (arXiv:1509.06461, eq. 4) of the bootstrap states (seq_len, B, state_dim),
        each network from its own memory after step last (seq_len, B), one batched step -> (seq_len, B)."""
        next_action = self.cri(self.next_features(self.cri, boot_states, last, memories)).argmax(dim=-1, keepdim=True)
        next_q = self.cri_target(self.next_features(self.cri_target, boot_states, last, target_memories))
        return next_q.gather(-1, next_action).squeeze(-1)

    @staticmethod
    def next_features(net: nn.Module, boot_states: torch.Tensor, last: torch.Tensor, memories: torch.Tensor
                      ) -> torch.Tensor:
        """net's features (seq_len, B, width) of boot_states from the memories after step `last`, in one core step."""
        columns = torch.arange(last.shape[1], device=last.device)
        after = memories.permute(0, 2, 1, 3)[last, columns]  # (seq_len, B, 2, width)
        no_start = torch.zeros((1, last.numel()), device=last.device)
        features = net.core(boot_states.flatten(0, 1)[None], after.flatten(0, 1).transpose(0, 1), no_start)[0]
        return features[0].unflatten(0, last.shape)

    @torch.no_grad()
    def batch_mean_q(self, batch: tuple[torch.Tensor, ...]) -> float:
        """Mean Q of the actions taken at the last batch's unmasked training steps, in reward units (h^-1)."""
        actions, mask = (tensor[:, self.burn_in:].transpose(0, 1) for tensor in (batch[1], batch[7]))
        q = self.cri(self.unroll(self.cri, batch)[0]).gather(-1, actions[..., None]).squeeze(-1)  # (seq_len, B)
        return (value_rescale_inverse(q)[mask.bool()].mean() / self.reward_scale).item()


# ---- asynchronous advantage actor-critic (A3C) ----
class SharedStep:
    """An A3C worker's optimizer: its step hands the copy's gradients to the shared network and shared optimizer
    (A3C paper, Algorithm S3, lock-free). param_groups are the copy's, so optimizer_step clips those."""

    def __init__(self, net: nn.Module, shared_net: nn.Module, shared_optimizer: torch.optim.Optimizer):
        self.param_groups = [{"params": list(net.parameters())}]
        self.pairs = list(zip(net.parameters(), shared_net.parameters(), strict=True))
        self.shared_optimizer = shared_optimizer

    def zero_grad(self, set_to_none: bool = True):
        for param, _ in self.pairs:
            param.grad = None

    def step(self):
        for param, shared_param in self.pairs:
            shared_param.grad = param.grad  # this process's own .grad of the shared tensor: gradients are not shared
        self.shared_optimizer.step()


class AgentA3C(AgentA2C):
    """A3C (Mnih et al. arXiv:1602.01783, Algorithm S3): worker processes (AgentRun.train_async) step shared networks
    and optimizer statistics (shared RMSProp, section 4; Adam here) with A2C's gradients, lock-free."""

    if_async = True
    if_data_parallel = False  # its workers already share one model
    train_defaults = AgentA2C.train_defaults | dict(num_workers=2, if_multiprocess=True)  # its workers are processes
    # no if_state_norm: the workers' explored states would have to merge into shared statistics as well
    hyper_defaults = {name: value for name, value in AgentA2C.hyper_defaults.items() if name != "if_state_norm"}
    shared = None  # the shared agent of a worker (attach); None: this agent steps its own networks, as A2C does

    def share(self):
        """Put the networks and optimizer statistics in shared memory; missing statistics come from a zero-gradient
        step (Adam moves nothing), its count reset so the first real step is bias-corrected as the first."""
        for net, optimizer in ((self.act, self.act_optimizer), (self.cri, self.cri_optimizer)):
            if not optimizer.state:
                for param in net.parameters():
                    param.grad = torch.zeros_like(param)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                for state in optimizer.state.values():
                    state["step"].zero_()
            net.share_memory()
            for value in (value for state in optimizer.state.values() for value in state.values()):
                if isinstance(value, torch.Tensor):
                    value.share_memory_()

    def attach(self, shared: "AgentA3C"):
        """Make this agent a worker of `shared`: its optimizers step the shared networks, whose weights it takes."""
        self.shared = shared
        self.act_optimizer = SharedStep(self.act, shared.act, shared.act_optimizer)
        self.cri_optimizer = SharedStep(self.cri, shared.cri, shared.cri_optimizer)
        self.pull()

    def pull(self):
        """theta' <- theta: this worker's copy takes the shared weights (load_state_dict copies them)."""
        self.act.load_state_dict(self.shared.act.state_dict())
        self.cri.load_state_dict(self.shared.cri.state_dict())

    def update_net(self, buffer: RolloutBuffer, batch_size: int | None = None, epochs: float | None = None
                   ) -> dict[str, float]:
        """A2C's step of the rollout's gradients, applied to the shared networks; then this copy takes their weights."""
        stats = super().update_net(buffer)
        if self.shared is not None:
            self.pull()
        return stats


class AgentDiscreteA3C(DiscreteOnPolicy, AgentA3C):
    """A3C with a categorical policy: AgentA3C's workers, DiscreteOnPolicy's actor and entropy bonus."""

    hyper_defaults = AgentA3C.hyper_defaults | DiscreteOnPolicy.discrete_defaults


# ---- natural gradient (TRPO) ----
def flat_grad(output: torch.Tensor, params: list[torch.Tensor], **keywords) -> torch.Tensor:
    """d output / d params as one flat vector, in the order of parameters_to_vector."""
    return torch.cat([grad.flatten() for grad in torch.autograd.grad(output, params, **keywords)])


def fisher_vector_product(mean_kl: torch.Tensor, params: list[torch.Tensor], damping: float
                          ) -> Callable[[torch.Tensor], torch.Tensor]:
    """v -> (F + damping I) v, F the Hessian of mean_kl = KL(pi_old || pi_theta) at theta_old (TRPO paper,
    arXiv:1502.05477, Appendix C.1), by two backward passes; damping conditions a near-singular F (Martens 2010)."""
    grad_kl = flat_grad(mean_kl, params, create_graph=True)
    return lambda vector: flat_grad(grad_kl @ vector, params, retain_graph=True) + damping * vector


def conjugate_gradient(matrix_vector_product: Callable[[torch.Tensor], torch.Tensor], b: torch.Tensor,
                       iterations: int = 10, residual_tol: float = 1e-10) -> torch.Tensor:
    """x with A x = b, A symmetric positive definite known only as v -> A v (TRPO paper, Appendix C: F^-1 g
    without forming F); exact after n iterations for an n x n system, up to rounding."""
    x = torch.zeros_like(b)
    residual, direction = b.clone(), b.clone()  # r = b - A x, with x = 0
    residual_norm = residual @ residual
    for _ in range(iterations):
        if residual_norm < residual_tol:  # solved; or b = 0 (a zero gradient), where the step would be 0 / 0
            break
        product = matrix_vector_product(direction)
        step = residual_norm / (direction @ product)
        x += step * direction
        residual -= step * product
        new_residual_norm = residual @ residual
        direction = residual + (new_residual_norm / residual_norm) * direction
        residual_norm = new_residual_norm
    return x


@torch.no_grad()
def line_search(params: list[torch.Tensor], full_step: torch.Tensor, evaluate: Callable[[], tuple[float, float]],
                max_kl: float, backtrack_coef: float = 0.8, backtrack_iters: int = 10) -> int | None:
    """Move params to theta + backtrack_coef^j * full_step for the first j with KL <= max_kl and a better surrogate
    (evaluate() -> (surrogate, mean KL); TRPO paper, Appendix C). Returns j, or None with params back at theta."""
    old_params, old_surrogate = parameters_to_vector(params), evaluate()[0]
    for j in range(backtrack_iters):
        vector_to_parameters(old_params + backtrack_coef ** j * full_step, params)
        surrogate, kl = evaluate()
        if kl <= max_kl and surrogate > old_surrogate:
            return j
    vector_to_parameters(old_params, params)
    return None


class AgentTRPO(AgentVPG):
    """TRPO (Schulman et al. arXiv:1502.05477): VPG's loop, the policy stepped along the natural gradient to the
    trust region's edge, mean KL(pi_old || pi_new) <= max_kl, backtracked until inside and improving (Appendix C)."""

    # delta, the trust region's radius in mean KL; no actor_learning_rate: a line search steps the actor
    hyper_defaults = {name: value for name, value in AgentVPG.hyper_defaults.items()
                      if name != "actor_learning_rate"} | dict(max_kl=0.01)
    # a step bounded in KL wants a large batch: 1024 was slower on Pendulum-v1 (History/UPDATE_LOG.md, 2026-11-23)
    train_defaults = AgentVPG.train_defaults | dict(steps_per_round=2048)
    damping = 0.1  # added to the Fisher matrix's diagonal (fisher_vector_product)
    cg_iterations = 10  # conjugate-gradient products per step, the paper's (Appendix C)
    if_act_optimizer = False  # the actor moves by update_actor's line search; learning_rate is the critic's
    if_data_parallel = False  # the line search's steps are not gradients the ranks could average

    def update_actor(self, batch: tuple[torch.Tensor, ...]) -> float:
        """Conjugate-gradient x = F^-1 g, the step sqrt(2 max_kl / x.Fx) x, the line search; returns the objective."""
        state, params = batch[0], list(self.act.parameters())
        old_act = frozen_copy(self.act)
        gradient = flat_grad(-self.get_obj_actor(batch), params)  # of the surrogate, to ascend
        product = fisher_vector_product(self.act.get_kl(state, old_act).mean(), params, self.damping)
        direction = conjugate_gradient(product, gradient, self.cg_iterations)
        # the largest step along `direction` that the quadratic model of the KL keeps within max_kl
        full_step = (2 * self.max_kl / (direction @ product(direction)).clamp(min=1e-12)).sqrt() * direction
        evaluate = lambda: (-self.get_obj_actor(batch).item(), self.act.get_kl(state, old_act).mean().item())
        line_search(params, full_step, evaluate, self.max_kl)
        with torch.no_grad():
            return self.get_obj_actor(batch).item()


class AgentDiscreteTRPO(AgentTRPO, AgentDiscreteVPG):
    """TRPO with a categorical policy; AgentTRPO's hyper_defaults: no entropy bonus, as the paper's surrogate."""

    hyper_defaults = AgentTRPO.hyper_defaults | dict(if_action_mask=False)


# ---- Kronecker-factored natural gradient (ACKTR) ----
class KFAC(torch.optim.Optimizer):
    """Natural-gradient steps for nn.Linear networks, the Fisher as Kronecker factors (K-FAC, Martens and Grosse
    arXiv:1503.05671, sections 3, 5): G (x) A per layer, A = E[a a^T] (inputs with a bias 1), G = E[g g^T] (output
    gradients of model samples), running averages, inverted exactly by eigendecomposition. Other parameters (a
    log std) take the plain gradient (OpenAI baselines). step() moves by eta = min(lr, sqrt(2 kl_clip / x^T F x))
    along x = F^-1 g (ACKTR, Wu et al. arXiv:1708.05144, section 3.2); x^T F x = x^T g."""

    def __init__(self, net: nn.Module, lr: float, kl_clip: float, damping: float, stat_decay: float):
        self.layers = [module for module in net.modules() if type(module) is nn.Linear]
        for name, module in net.named_modules():
            if module is not net and type(module) is not nn.Linear and list(module.parameters(recurse=False)):
                raise RefusedError(f"K-FAC takes networks of nn.Linear layers and parameter-free activations; "
                                   f"{type(net).__name__}.{name} is a {type(module).__name__} (ACKTR accepts an "
                                   f"actor and a critic of nn.Linear layers, such as AgentNet's build_mlp)")
        super().__init__(net.parameters(), dict(lr=lr, kl_clip=kl_clip, damping=damping, stat_decay=stat_decay))

    def record_layer(self, layer: nn.Linear, inputs: tuple[torch.Tensor], output: torch.Tensor):
        """Forward hook during update_factors: keep the layer's input and, on backward, its output's gradient."""
        state = self.state[layer.weight]
        activation = inputs[0].detach().flatten(0, -2)  # (N, in)
        state["a"] = torch.cat((activation, torch.ones_like(activation[:, :1])), dim=1)  # (N, in + 1)
        output.register_hook(lambda grad: state.__setitem__("g", grad.detach().flatten(0, -2)))  # (N, out)

    def update_factors(self, fisher_loss_fn: Callable[[], torch.Tensor]):
        """fisher_loss_fn() -> the sum over a batch of -log p(y_n | x_n) for outputs y_n sampled from the model
        itself (a sum, so that each g is one sample's gradient); A and G move toward this batch's averages."""
        hooks = [layer.register_forward_hook(self.record_layer) for layer in self.layers]  # only here: a copy of the
        try:  # network (a target, a process's replica) must not carry hooks into this optimizer
            fisher_loss = fisher_loss_fn()
        finally:
            for hook in hooks:
                hook.remove()
        self.zero_grad(set_to_none=True)
        fisher_loss.backward()
        self.zero_grad(set_to_none=True)
        decay = self.defaults["stat_decay"]
        with torch.no_grad():
            for layer in self.layers:
                state = self.state[layer.weight]
                a, g = state.pop("a"), state.pop("g")
                batch_a, batch_g = a.T @ a / a.shape[0], g.T @ g / g.shape[0]
                if "A" not in state:  # the first batch is the average so far, not a decay from zero
                    state["A"], state["G"] = batch_a, batch_g
                else:
                    state["A"].lerp_(batch_a, 1 - decay)
                    state["G"].lerp_(batch_g, 1 - decay)

    @torch.no_grad()
    def step(self):
        group = self.param_groups[0]
        natural = {p: p.grad for p in group["params"] if p.grad is not None}  # plain gradient where no factors
        for layer in self.layers:
            state = self.state[layer.weight]
            if layer.weight.grad is None:
                continue
            if "A" not in state:
                raise RuntimeError("KFAC.step before update_factors: the Fisher's factors are not estimated yet")
            d_a, q_a = torch.linalg.eigh(state["A"])
            d_g, q_g = torch.linalg.eigh(state["G"])
            grad = torch.cat((layer.weight.grad, layer.bias.grad.unsqueeze(1)), dim=1)  # (out, in + 1)
            rotated = q_g.T @ grad @ q_a
            step = q_g @ (rotated / (d_g.clamp(min=0).unsqueeze(1) * d_a.clamp(min=0) + group["damping"])) @ q_a.T
            natural[layer.weight], natural[layer.bias] = step[:, :-1], step[:, -1]
        x_f_x = sum((natural[p] * p.grad).sum() for p in natural)
        eta = (2 * group["kl_clip"] / x_f_x.clamp(min=1e-12)).sqrt().clamp(max=group["lr"])
        for p, direction in natural.items():
            p.sub_(eta * direction)


class AgentACKTR(AgentA2C):
    """ACKTR (Wu et al. arXiv:1708.05144): A2C's loop, actor and critic stepped along K-FAC natural gradients in a
    trust region; the critic's Fisher is a unit-variance Gaussian's around V(s) (ACKTR section 3.1)."""

    if_image_states = False  # KFAC has Kronecker factors for nn.Linear layers only, none for convolutions
    hyper_defaults = AgentA2C.hyper_defaults | dict(learning_rate=0.25,  # eta_max, the largest step along F^-1 g
                                                    kl_clip=0.001,  # delta, the trust region of each step in KL
                                                    damping=0.01)  # added to the Kronecker-factored Fisher
    # TRPO's batch: A2C's 256 was slower on Pendulum-v1 and left a seed unsolved (History/UPDATE_LOG.md, 2026-11-24)
    train_defaults = AgentA2C.train_defaults | dict(steps_per_round=2048)
    max_grad_norm = None  # the trust region bounds the step; a clip before it would rescale the natural gradient
    if_data_parallel = False  # each rank's Kronecker factors would precondition the mean gradient differently
    stat_decay = 0.99  # the factors' running average, the baselines implementation's

    def new_optimizer(self, net: nn.Module, learning_rate: float) -> KFAC:
        return KFAC(net, learning_rate, self.kl_clip, self.damping, self.stat_decay)

    def update_net(self, buffer: RolloutBuffer, batch_size: int | None = None, epochs: float | None = None
                   ) -> dict[str, float]:
        """The factors from this rollout's states with outputs sampled from the networks, then A2C's step."""
        state = buffer.states.flatten(0, 1)
        with torch.no_grad():
            action = self.act.get_action_log_prob(state)[0]
        self.act_optimizer.update_factors(lambda: -self.act.get_log_prob_entropy(state, action)[0].sum())

        def critic_fisher_loss():  # -log N(y; V, 1) up to a constant, y ~ N(V, 1)
            value = self.cri(state)
            return 0.5 * (value - (value.detach() + torch.randn_like(value))).pow(2).sum()
        self.cri_optimizer.update_factors(critic_fisher_loss)
        return super().update_net(buffer)


class AgentDiscreteACKTR(DiscreteOnPolicy, AgentACKTR):
    """ACKTR with a categorical policy: AgentACKTR's update, DiscreteOnPolicy's actor and entropy bonus."""

    # kl_clip 0.004: the fastest of 0.0005-0.01 on CartPole-v1 (History/UPDATE_LOG.md, 2026-11-24)
    hyper_defaults = AgentACKTR.hyper_defaults | DiscreteOnPolicy.discrete_defaults | dict(kl_clip=0.004)
    # A2C's rollout: Pendulum-v1's 2048 steps were slower on CartPole-v1 (History/UPDATE_LOG.md, 2026-11-24)
    train_defaults = AgentACKTR.train_defaults | dict(steps_per_round=AgentA2C.train_defaults["steps_per_round"])


# ---- off-policy actor-critic with experience replay (ACER) ----
def retrace_targets(rewards: torch.Tensor, not_terminated: torch.Tensor, not_done: torch.Tensor,
                    next_values: torch.Tensor, q_taken: torch.Tensor, traces: torch.Tensor, gamma: float
                    ) -> torch.Tensor:
    """Retrace targets of segments (T, N) (Munos et al. arXiv:1606.02647; ACER paper, section 3.1, Algorithm 2):
    Q_ret[t] = r[t] + gamma * not_terminated[t] * (V(next_state[t]) + not_done[t] * traces[t+1] * (Q_ret[t+1] -
    Q(s[t+1], a[t+1]))), traces = min(1, pi / mu). The correction stops at episode ends (truncation bootstraps
    from the final observation's value, termination from nothing) and at the segment's end."""
    q_ret = torch.empty_like(rewards)
    correction = torch.zeros_like(rewards[0])  # traces[t+1] * (Q_ret[t+1] - Q[t+1]); nothing past the segment
    for t in reversed(range(rewards.shape[0])):
        q_ret[t] = rewards[t] + gamma * not_terminated[t] * (next_values[t] + not_done[t] * correction)
        correction = traces[t] * (q_ret[t] - q_taken[t])
    return q_ret


def trust_region_step(g: torch.Tensor, k: torch.Tensor, delta: float) -> torch.Tensor:
    """argmin_z |g - z|^2 / 2 s.t. k.z <= delta, row by row: z = g - max(0, (k.g - delta) / |k|^2) k (ACER paper,
    section 3.3), k the gradient of the KL to the average policy."""
    excess = ((k * g).sum(dim=-1, keepdim=True) - delta).clamp(min=0)
    return g - excess / k.pow(2).sum(dim=-1, keepdim=True).clamp(min=1e-12) * k


class AgentACER(DiscreteOnPolicy, AgentOnPolicy):
    """ACER for discrete actions (Wang et al. arXiv:1611.01224): categorical actor, critic Q(s, .), average policy
    (soft-updated copy). It learns from the new rollout, then replay_ratio replayed: Retrace targets, and the
    truncated, bias-corrected policy gradient (section 3.2) projected into the trust region (trust_region_step)."""

    if_image_states = False  # not yet tried on images
    if_act_target = True  # the average policy network
    cri_class = QNet
    train_defaults = AgentOnPolicy.train_defaults | dict(replay_ratio=4,  # rollouts replayed per new one
                                                         buffer_size=50_000,  # the paper's replay, in transitions
                                                         if_save_buffer=True)  # checkpoints hold the replayed rollouts
    # reward_scale 0.1 (DQN's): a Q critic moves slowly toward returns up to 100 (History/UPDATE_LOG.md, 2026-11-24)
    hyper_defaults = dict(learning_rate=1e-3, gamma=0.99, reward_scale=0.1, entropy_coef=0.01,
                          soft_update_tau=0.01,  # 1 - alpha: the average policy's step toward the actor
                          rho_clip=10.0,  # c, the truncation of the importance weight in the policy gradient
                          kl_clip=1.0,  # delta, the trust region of the linearised KL(average || new) per state
                          if_state_norm=False)

    def get_action_behaviour(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A sampled action (N,) and every action's log-prob (N, action_dim), for the bias correction."""
        return self.act.get_action_log_prob(state)[0], self.act.get_log_probs(state)

    def update_net(self, buffer: SegmentReplayBuffer, batch_size: int | None = None, replay_ratio: float = 4
                   ) -> dict[str, float]:
        """The new rollout on-policy, then round(replay_ratio) replayed ones (the paper's replay ratio)."""
        rollouts = [buffer.rollouts[-1]] + [buffer.sample() for _ in range(round(replay_ratio))]
        objectives = torch.stack([self.learn_rollout(rollout) for rollout in rollouts]).mean(dim=0)
        return {"obj_critic": objectives[0].item(), "obj_actor": objectives[1].item()}

    def learn_rollout(self, rollout: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """One step of the critic and of the actor on a rollout's segments; returns both objectives (2,)."""
        state, action, mu_log_probs, reward, not_terminated, not_done, next_state = rollout
        action = action.unsqueeze(-1)  # (T, N, 1)
        logits = self.act.get_logits(state)  # (T, N, action_dim): the statistics the trust region acts on
        log_pi = logits.log_softmax(dim=-1)
        q = self.cri(state)  # (T, N, action_dim)
        with torch.no_grad():
            pi = log_pi.exp()
            value = (pi * q).sum(dim=-1)  # V(s) = sum_a pi(a|s) Q(s, a), (T, N)
            next_value = (self.act.get_log_probs(next_state).exp() * self.cri(next_state)).sum(dim=-1)
            rho = (log_pi - mu_log_probs).exp()  # pi / mu of every action, (T, N, action_dim)
            rho_taken = rho.gather(-1, action).squeeze(-1)
            q_taken = q.gather(-1, action).squeeze(-1)
            q_ret = retrace_targets(reward, not_terminated, not_done, next_value, q_taken, rho_taken.clamp(max=1.0),
                                    self.gamma)
        obj_critic = 0.5 * (q_ret - q.gather(-1, action).squeeze(-1)).pow(2).mean()
        optimizer_step(self.cri_optimizer, obj_critic, self.max_grad_norm)

        # section 3.2 per state, summed so that autograd gives each state's gradient g with respect to its own logits
        with torch.no_grad():
            advantage_taken = rho_taken.clamp(max=self.rho_clip) * (q_ret - value)
            correction_weights = pi * (1 - self.rho_clip / rho).clamp(min=0) * (q.detach() - value.unsqueeze(-1))
        entropy = -(log_pi.exp() * log_pi).sum(dim=-1)  # not pi: the bonus needs the gradient that no_grad cut
        surrogate = (advantage_taken * log_pi.gather(-1, action).squeeze(-1) + (correction_weights * log_pi).sum(-1)
                     + self.entropy_coef * entropy).sum()
        g = torch.autograd.grad(surrogate, logits, retain_graph=True)[0]  # (T, N, action_dim)
        with torch.no_grad():
            k = pi - self.act_target.get_log_probs(state).exp()  # d KL(average || pi) / d logits
            z = trust_region_step(g, k, self.kl_clip)
        obj_actor = -(z * logits).sum() / reward.numel()  # its gradient is -mean z dlogits/dtheta: ascent along z
        optimizer_step(self.act_optimizer, obj_actor, self.max_grad_norm)
        soft_update(self.act_target, self.act, self.soft_update_tau)
        return torch.stack((obj_critic.detach(), -surrogate.detach() / reward.numel()))


# ---- multi-agent agents (a team on a PettingZoo parallel env: extras.teams.MultiAgentEnv) ----
class MultiAgent:
    """Makes an agent class a team's (num_agents): states are every agent's observation side by side, actions
    (num_agents,) ints or (num_agents * action_dim,). It learns the agents' reward sum (common_reward, EPyMARL's) or,
    with if_agent_rewards, each agent's own (a sum would train prey to get caught). First among the bases."""

    if_multi_agent = True
    net_keywords = ("num_agents",)  # a team's networks take its size

    def __init__(self, net_dim: int, state_dim: int, action_dim: int, device=None, *, num_agents: int,
                 **hyperparameters):
        self.num_agents = num_agents  # before the networks are built
        super().__init__(net_dim, state_dim, action_dim, device, **hyperparameters)
        self.check_common_reward(self.common_reward)

    @classmethod
    def check_common_reward(cls, common_reward: bool):
        if not (common_reward or cls.if_agent_rewards):
            raise RefusedError(f"common_reward=False is not accepted: {cls.__name__} learns one value of the team's "
                               f"common reward, the sum of the agents' rewards (EPyMARL's common_reward); "
                               f"AgentMADDPG, AgentDiscreteMADDPG, AgentDiscreteIDDPG, AgentMAPPO and "
                               f"AgentDiscreteMAPPO learn from each agent's own reward")

    def random_action(self, num_envs: int | None = None, state: np.ndarray | None = None) -> np.ndarray:
        """Every agent's uniformly random action: (..., num_agents) indices, or (..., num_agents * action_dim)."""
        if not self.if_discrete:
            return super().random_action(num_envs, state)
        return torch.randint(self.action_dim, (() if num_envs is None else (num_envs,)) + (self.num_agents,)).numpy()

    def standard_noise(self, shape: tuple[int, ...], beta: float) -> torch.Tensor:
        """Noise for every agent's action side by side: (..., num_agents * action_dim) for (..., action_dim)."""
        return super().standard_noise((*shape[:-1], self.num_agents * shape[-1]), beta)

    def learned_reward(self, reward, info: dict):
        """The team's reward, its agents' sum (extras.teams.MultiAgentEnv); with if_agent_rewards, each agent's."""
        return super().learned_reward(self.agent_rewards(reward, info) if self.if_agent_rewards else reward, info)

    def agent_rewards(self, reward, info: dict) -> np.ndarray:
        """Every agent's reward, (..., num_agents): its own (info["agent_rewards"]), or with common_reward the sum."""
        if self.common_reward:
            return np.repeat(np.asarray(reward, np.float32)[..., None], self.num_agents, axis=-1)
        if np.ndim(reward) == 0:
            return np.asarray(info["agent_rewards"], np.float32)  # (num_agents,)
        own = np.zeros((len(reward), self.num_agents), np.float32)  # a vector env's (N, num_agents)
        # a copy whose episode ended reset in the same step: its step's info is the final one (final_info)
        for step_info in (info, info.get("final_info", {})):
            if "_agent_rewards" in step_info:
                own[step_info["_agent_rewards"]] = step_info["agent_rewards"][step_info["_agent_rewards"]]
        return own


def team_defaults(defaults: dict, common_reward: bool) -> dict:
    """An agent's hyperparameters as a team's: no if_state_norm, no if_action_mask; common_reward (MultiAgent)."""
    return ({name: value for name, value in defaults.items() if name not in ("if_state_norm", "if_action_mask")}
            | dict(common_reward=common_reward))


class AgentQMIX(MultiAgent, AgentDoubleDQN):
    """QMIX (Rashid et al. arXiv:1803.11485): agents' q-values of the chosen actions, mixed monotonically by the
    team's state into Q_tot (AgentNet.QMixNet) with double-Q targets, so each agent's greedy action is the team's."""

    cri_class = QMixNet
    net_keywords = ("if_noisy", "num_agents")
    # below DQN's step size, tau and updates: with DQN's, Q_tot rose without bound (History/UPDATE_LOG.md, 2026-11-25)
    hyper_defaults = team_defaults(AgentDoubleDQN.hyper_defaults, True) | dict(learning_rate=5e-4,
                                                                                soft_update_tau=0.005)
    train_defaults = AgentDoubleDQN.train_defaults | dict(batch_size=256, replay_ratio=0.125)
    get_q_heads = AgentOffPolicy.get_q_heads  # Q_tot of the joint action taken (QMixNet.get_q_heads)

    def get_next_q(self, next_state: torch.Tensor) -> torch.Tensor:
        """Q_tot_target(s', argmax of each agent's online q(o_i', .)), (B,)."""
        next_action = self.cri(next_state).argmax(dim=-1)  # (B, num_agents)
        return self.cri_target.get_q_heads(next_state, next_action)[0]


class AgentVDN(AgentQMIX):
    """VDN (Sunehag et al. arXiv:1706.05296): QMIX with the agents' q-values summed instead of mixed."""

    cri_class = VDNNet


class AgentMADDPG(MultiAgent, AgentDDPG):
    """MADDPG (Lowe et al. arXiv:1706.02275): decentralised actors (AgentNet.TeamActor), each with a centralised critic
    (TeamCritic) regressed onto r_i + gamma * Q_i'(s', mu'(s')) (eq. 6), r_i agent i's own; DDPG's exploration."""

    if_agent_rewards = True
    # a white warm-up: the team rows (BENCHMARKS.md) were measured with it, and the particle envs reward no momentum
    hyper_defaults = team_defaults(AgentDDPG.hyper_defaults, False) | dict(random_beta=0.0)
    # QMIX's update of 256 per 8 steps (paper: 1024 per 100); DDPG's was slower (History/UPDATE_LOG.md, 2026-11-25)
    train_defaults = AgentDDPG.train_defaults | dict(batch_size=256, replay_ratio=0.125)
    act_class, cri_class = TeamActor, TeamCritic

    def get_obj_critic(self, batch: tuple[torch.Tensor, ...], weights: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """Critic i regresses onto agent i's reward: rewards (B, num_agents) transposed like the critics' Q."""
        state, action, reward, discount, next_state = batch
        return super().get_obj_critic((state, action, reward.T, discount, next_state), weights)

    def get_obj_actor(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Agent i's actor ascends Q_i(s, a_1, ..., mu_i(o_i), ..., a_n), others' actions as replayed (eq. 5)."""
        state, action = batch[:2]
        own, replayed = self.get_team_actions(state, action)  # (B, num_agents, action_dim) each
        if_own = torch.eye(self.num_agents, dtype=torch.bool, device=self.device)[:, None, :, None]  # (n, 1, n, 1)
        joint = torch.where(if_own, own.unsqueeze(0), replayed.unsqueeze(0)).flatten(-2)  # (n, B, n * action_dim)
        return -self.cri(state, joint).mean()

    def get_team_actions(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Every agent's action by its actor now (differentiable) and as replayed, (B, num_agents, action_dim) each."""
        return self.act(state).unflatten(-1, (self.num_agents, -1)), action.unflatten(-1, (self.num_agents, -1))


class AgentDiscreteMADDPG(AgentMADDPG):
    """MADDPG for discrete actions: actors sample a categorical policy (greedy in evaluation) and learn through a
    straight-through Gumbel-softmax sample (Jang et al. arXiv:1611.01144); unlike openai/maddpg, the critics take
    one-hot actions, those the env receives (AgentNet.TeamCriticDiscrete); its logit penalty stays."""

    if_discrete = True
    logits_penalty = 1e-3  # weight of the mean squared logit in the actor's loss, the paper's code's
    hyper_defaults = {name: value for name, value in AgentMADDPG.hyper_defaults.items()
                      if name not in ("explore_noise", "noise_beta", "random_beta")}  # it samples its policy
    act_class, cri_class = TeamActorDiscrete, TeamCriticDiscrete

    def explore_action(self, state: torch.Tensor) -> torch.Tensor:
        return torch.distributions.Categorical(logits=self.act.get_logits(state)).sample()  # (..., num_agents)

    def get_next_q(self, next_state: torch.Tensor) -> torch.Tensor:
        """Every critic's target Q of a joint action sampled from the target actors: the sampling policy's (eq. 6)."""
        next_action = torch.distributions.Categorical(logits=self.act_target.get_logits(next_state)).sample()
        return self.cri_target(next_state, next_action)  # (num_agents, B)

    def get_obj_actor(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """MADDPG's objective plus logits_penalty * the mean squared logit: nothing else bounds the logits, which grow
        until the softmax saturates and the straight-through gradient vanishes (History/UPDATE_LOG.md, 2026-11-26)."""
        return super().get_obj_actor(batch) + self.logits_penalty * self.act.get_logits(batch[0]).square().mean()

    def get_team_actions(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        own = nn.functional.gumbel_softmax(self.act.get_logits(state), hard=True)  # (B, num_agents, action_dim)
        return own, nn.functional.one_hot(action, self.action_dim).float()


class AgentDiscreteIDDPG(AgentDiscreteMADDPG):
    """Independent DDPG, MADDPG's baseline (arXiv:1706.02275, section 5): each critic sees its own agent only."""

    cri_class = TeamCriticLocalDiscrete


class AgentQTRAN(AgentQMIX):
    """QTRAN-base (Son et al. arXiv:1905.05408): an unconstrained Q_jt(s, a) learns the TD target (AgentNet.QTranNet);
    q_i and V_jt(s) are pulled to factorise it, sum_i q_i - Q_jt + V_jt = 0 at the greedy joint action (L_opt), >= 0
    at the taken one (L_nopt) (Theorem 1, eq. 4-6): payoffs QMIX's monotonic mixer cannot represent."""

    cri_class = QTranNet
    hyper_defaults = AgentQMIX.hyper_defaults | dict(lambda_opt=1.0, lambda_nopt=1.0)  # the paper's weights

    def get_obj_critic(self, batch: tuple[torch.Tensor, ...], weights: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """L_td of Q_jt (its TD errors set priorities) + lambda_opt L_opt + lambda_nopt L_nopt."""
        obj_td, td_errors = super().get_obj_critic(batch, weights)
        state, action = batch[:2]
        agent_q = self.cri(state)  # (B, num_agents, action_dim)
        greedy_q, greedy_action = agent_q.max(dim=-1)  # (B, num_agents) each
        with torch.no_grad():
            joint_greedy, joint_taken = (self.cri.get_q_heads(state, a)[0]  # (B,) each
                                         for a in (greedy_action, action))
        value = self.cri.get_value(state)
        gap_opt = greedy_q.sum(dim=-1) - joint_greedy + value
        gap_nopt = agent_q.gather(-1, action.unsqueeze(-1)).squeeze(-1).sum(dim=-1) - joint_taken + value
        obj_opt, obj_nopt = (gap_opt.square() * weights).mean(), (gap_nopt.clamp(max=0).square() * weights).mean()
        return obj_td + self.lambda_opt * obj_opt + self.lambda_nopt * obj_nopt, td_errors


class AgentMAPPO(MultiAgent, AgentPPO):
    """MAPPO (Yu et al. arXiv:2103.01955) for continuous actions: a policy shared by the agents, their index as input
    (AgentNet.TeamActorPPO), each agent's ratio on its own advantage from a centralised V_i(s) (TeamCriticValue;
    agent-specific global state, section 4.3), learned on standardised returns (value normalisation, section 4.1)."""

    if_agent_rewards = True
    act_class, cri_class = TeamActorPPO, TeamCriticValue
    hyper_defaults = team_defaults(AgentPPO.hyper_defaults, False)

    def get_rollout_batch(self, buffer: RolloutBuffer) -> tuple[torch.Tensor, ...]:
        """PPO's batch, its returns merged into the critic's running statistics before it regresses onto them."""
        batch = super().get_rollout_batch(buffer)
        self.cri.value_norm.update(*merged_moments(batch[-1]))  # every agent's returns, (T * N, num_agents)
        return batch

    def get_obj_critic(self, state: torch.Tensor, ret: torch.Tensor) -> torch.Tensor:
        return self.criterion(self.cri.get_normalized_value(state), self.cri.value_norm(ret))


class AgentDiscreteMAPPO(AgentMAPPO):
    """MAPPO with a categorical policy shared by the agents (AgentNet.TeamActorDiscretePPO)."""

    if_discrete = True
    act_class = TeamActorDiscretePPO
    hyper_defaults = team_defaults(AgentDiscretePPO.hyper_defaults, False)
    train_defaults = AgentDiscretePPO.train_defaults


class AgentCOMA(MultiAgent, AgentVPG):
    """COMA (Foerster et al. arXiv:1705.08926): a shared categorical policy (TeamActorDiscretePPO), a centralised
    critic Q(s, (a_-i, .)) (AgentNet.COMACritic) on its target's TD(lambda) returns, and per agent the counterfactual
    advantage A_i = Q(s, a) - sum_a' pi_i(a') Q(s, (a_-i, a')) (eq. 4), which credits the agent alone."""

    if_discrete = True
    act_class, cri_class = TeamActorDiscretePPO, COMACritic
    if_cri_target = True
    hyper_defaults = team_defaults(DiscreteOnPolicy.hyper_defaults, True) | dict(soft_update_tau=0.01)

    def update_net(self, buffer: RolloutBuffer, batch_size: int, epochs: float) -> dict[str, float]:
        """The critic on TD(lambda) returns (fit_critic), then one actor step on its advantages (Algorithm 1)."""
        with torch.no_grad():
            q_taken = self.cri_target.get_q_taken(buffer.states, buffer.actions).mean(dim=-1)  # (T, N), rows' mean
            next_action = self.act.get_action_log_prob(buffer.next_states)[0]  # where the rollout holds no next action
            next_q = self.cri_target.get_q_taken(buffer.next_states, next_action).mean(dim=-1)
            next_q[:-1] = torch.where(buffer.not_done[:-1].bool(), q_taken[1:], next_q[:-1])  # the next one taken
            returns = buffer.get_advantages(q_taken, next_q, self.gamma, self.lambda_gae)[1]  # TD(lambda) returns
        state, action = buffer.states.flatten(0, 1), buffer.actions.flatten(0, 1)
        obj_critic = self.fit_critic((state, action, returns.flatten()), batch_size, epochs)
        obj_actor = self.update_actor((state, action, buffer.log_probs.flatten(0, 1),
                                       self.get_advantage(state, action)))
        return {"obj_critic": obj_critic, "obj_actor": obj_actor} | self.extra_stats()

    def get_obj_critic(self, state: torch.Tensor, action: torch.Tensor, ret: torch.Tensor) -> torch.Tensor:
        """Every agent's row regresses Q(s, a) of the joint action taken onto the return."""
        q = self.cri.get_q_taken(state, action)  # (B, num_agents)
        return self.criterion(q, ret.unsqueeze(-1).expand_as(q))

    def critic_step(self, minibatch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        obj_critic = super().critic_step(minibatch)
        soft_update(self.cri_target, self.cri, self.soft_update_tau)  # the target follows every critic step
        return obj_critic

    @torch.no_grad()
    def get_advantage(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Counterfactual advantages A_i = Q(s, a) - sum_a' pi_i(a'|o_i) Q(s, (a_-i, a')), (B, num_agents)."""
        q = self.cri(state, action)  # (B, num_agents, action_dim)
        baseline = (self.act.get_log_probs(state).exp() * q).sum(dim=-1)
        return q.gather(-1, action.unsqueeze(-1)).squeeze(-1) - baseline

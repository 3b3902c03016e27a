"""Agents and their replay buffer.

Every agent shares one interface (DESIGN.md):
    agent = AgentSAC(net_dim, state_dim, action_dim, device=None, **hyperparameters)
    action = agent.select_action(state, deterministic=False)  # np.ndarray in, np.ndarray out
    trajectory = agent.explore_env(env, horizon)               # tensors for buffer.extend
    stats = agent.update_net(buffer, batch_size, repeat_times) # dict of floats
    agent.update_state_norm(trajectory[0])                     # with if_state_norm: the explored states' statistics,
                                                               # after the update that learns on the ones it acted on
    agent.save_or_load_agent(cwd, if_save)

Continuous actions are in [-1, 1]; the environment rescales them (gymnasium.wrappers.RescaleAction).
Discrete agents return integer actions.
"""
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
                      CriticRecurrentValue, CriticTwin, CriticTwinEncoded, CriticTwinShared, CriticValue, Greedy,
                      is_image, legal_only, QMixNet, QNet, QNetDist, QNetDistDuel, QNetDuel, QNetRecurrentDuel,
                      QNetTwin, QTranNet, StateNorm, TeamActor, TeamActorDiscrete, TeamActorDiscretePPO, TeamActorPPO,
                      TeamCritic, TeamCriticDiscrete, TeamCriticLocalDiscrete, TeamCriticValue, VDNNet)

# ---- helpers ----


class RefusedError(ValueError):
    """Input the library refuses (a setting, an env, a file, a run directory), with what it accepts instead:
    `python AgentRun.py` prints its message alone, and any other error keeps its traceback."""


@torch.no_grad()
def soft_update(target: nn.Module, online: nn.Module, tau: float):
    """target <- tau * online + (1 - tau) * target, parameter by parameter."""
    for t, o in zip(target.parameters(), online.parameters(), strict=True):
        t.lerp_(o, tau)


def optimizer_step(optimizer: torch.optim.Optimizer, objective: torch.Tensor, clip_grad_norm: float | None = None):
    """One gradient step of one network's objective with that network's own optimizer; among data-parallel learners
    (torch.distributed initialised: AgentRun under torchrun) with the mean of every rank's gradients."""
    optimizer.zero_grad(set_to_none=True)
    objective.backward()
    params = [p for group in optimizer.param_groups for p in group["params"]]
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        # each gradient becomes its mean over the ranks, in one all_reduce of them all: every rank then takes the
        # same step from the same weights, and the ranks' networks stay equal (as DistributedDataParallel keeps them)
        grads = [p.grad for p in params if p.grad is not None]  # the same ones on every rank: they run the same code
        flat = torch.cat([grad.flatten() for grad in grads])
        torch.distributed.all_reduce(flat)
        flat /= torch.distributed.get_world_size()
        for grad, mean in zip(grads, flat.split([grad.numel() for grad in grads])):
            grad.copy_(mean.view_as(grad))
    if clip_grad_norm is not None:
        nn.utils.clip_grad_norm_(params, clip_grad_norm)
    optimizer.step()


def new_adam(params, learning_rate: float, device: torch.device) -> torch.optim.Adam:
    """Adam with torch's fused kernel where it has one (CPU, CUDA): one kernel per step, not a loop over tensors."""
    return torch.optim.Adam(params, learning_rate, fused=device.type in ("cpu", "cuda"))


def merged_moments(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The count, sum and sum of squares of rows (M, dim), float64, for StateNorm.update; among data-parallel learners
    (torch.distributed initialised) every rank's rows count, so that their running statistics stay equal."""
    rows = rows.to(torch.float64)
    count = torch.full((1,), rows.shape[0], dtype=torch.float64, device=rows.device)
    moments = torch.cat((count, rows.sum(dim=0), rows.square().sum(dim=0)))  # (1 + 2 * dim,)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.all_reduce(moments)
    return moments[0], *moments[1:].split(rows.shape[1])


def load_weights(path: str, device) -> dict | torch.Tensor:
    """torch.load with weights_only=True: tensors and plain containers only, never pickled code. Any failure
    (missing, truncated, corrupted, or carrying code) is reported with the file's path."""
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as error:
        raise RefusedError(f"{path} cannot be loaded: {type(error).__name__}: {error}") from None


def frozen_copy(net: nn.Module) -> nn.Module:
    """A target network: a deep copy that only soft_update changes."""
    target = deepcopy(net)
    target.requires_grad_(False)
    return target


@contextlib.contextmanager
def eval_mode(net: nn.Module, if_eval: bool = True):
    """net in eval mode inside the block (NoisyLinear layers at their mean), in training mode after; if_eval=False:
    left as it is."""
    if not if_eval:
        yield
        return
    net.eval()
    try:
        yield
    finally:
        net.train()


def check_same_step(agent, env):
    """Vector envs must autoreset in the same step, so that an ended episode's final observation comes back in
    info["final_obs"] (gymnasium's NEXT_STEP default would hand the agent a step across two episodes)."""
    autoreset_mode = env.metadata.get("autoreset_mode")
    if getattr(autoreset_mode, "value", autoreset_mode) != "SameStep":
        raise RefusedError(f"{type(agent).__name__}.explore_env needs a gymnasium vector env with "
                           f"autoreset_mode=AutoresetMode.SAME_STEP, got {autoreset_mode}")


def final_observations(next_state: np.ndarray, info: dict) -> np.ndarray:
    """A vector env's next states (N, state_dim) with each ended episode's last observation in place of the reset
    one that the env returned: on truncation the agent bootstraps from the state the episode was cut at."""
    if "_final_obs" not in info:
        return next_state
    final_state = next_state.copy()
    ended = np.flatnonzero(info["_final_obs"])
    final_state[ended] = np.stack(info["final_obs"][ended])
    return final_state


class ColoredNoise:
    """Standard normal draws of a fixed shape, one per step, whose power spectrum along the steps falls as 1/f^beta:
    beta 0 is white noise (independent steps), 1 pink, 2 red (a random walk's). Coloured noise keeps a direction for
    a while, as momentum-driven tasks need (MountainCar), and still varies from step to step; pink noise as the
    exploration of off-policy agents: Eberhard et al., "Pink Noise Is All You Need", ICLR 2023. Each sequence of
    seq_len steps is white noise with its spectrum scaled by f^(-beta/2) (Timmer and Koenig 1995); the agents take the
    explored env's episode length (episode_length), as the paper draws a sequence per episode: a shorter sequence
    than the episode repeats its slowest wave, a longer one sets an offset that lasts the whole episode."""

    def __init__(self, beta: float, shape: tuple[int, ...], seq_len: int = 1000, device=None):
        self.beta, self.shape, self.seq_len, self.device = beta, shape, seq_len, device
        freqs = torch.fft.rfftfreq(seq_len, device=device)  # (seq_len // 2 + 1,), cycles per step
        freqs[0] = freqs[1]  # the mean takes the lowest frequency's weight, not an infinite one
        self.scale = freqs.pow(-beta / 2)
        # a step's variance after irfft(scale * spectrum of white noise), both orthonormal: the scales' power over the
        # two-sided spectrum (Parseval), divided by seq_len; dividing by its root leaves every step N(0, 1)
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
    """The time limit of an env's episodes in steps (a vector env's copies'; a PettingZoo env's max_cycles), or default
    where it declares none."""
    single = env.unwrapped.envs[0] if hasattr(env.unwrapped, "envs") else env  # (EnvPoolVectorEnv has the spec)
    limit = single.spec.max_episode_steps if single.spec is not None else None
    return limit or getattr(single.unwrapped, "max_cycles", None) or default


def n_step_returns(rewards: torch.Tensor, not_terminated: torch.Tensor, not_done: torch.Tensor, gamma: float,
                   n_step: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """n-step returns (Sutton and Barto, section 7.1) of T steps of N envs, (T, N) tensors step by step. For each step
    t: the return sum_{j<k} gamma^j r_{t+j}, the discount gamma^k * not_terminated_{t+k-1} of the bootstrap value, and
    t+k-1, the step whose next state gives that value; (T, N) each. k <= n_step ends at the episode's end (terminated:
    no bootstrap; truncated: bootstrap from its final observation) and at the T-th step, where later steps are not
    known yet: a shorter return, still exact. Each env's column stands alone, so copies may end at different steps.
    A team's rewards of every agent, (T, N, num_agents), give every agent's returns, (T, N, num_agents)."""
    horizon = rewards.shape[0]
    returns = rewards.clone()
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
    """The distribution with probs (B, num_atoms) on target_support (B, num_atoms) (r + discount * z, which no longer
    falls on the atoms), projected onto the evenly spaced `support` (num_atoms,): C51's Algorithm 1 (Bellemare et al.
    arXiv:1707.06887) splits each p_j between the two atoms around clip(Tz_j) in proportion to its nearness to each.
    Writing the upper one as lower + 1 (not ceil) keeps the whole p_j where Tz_j falls on an atom."""
    position = (target_support.clamp(support[0], support[-1]) - support[0]) / (support[1] - support[0])  # in atoms
    lower = position.floor().long()  # (B, num_atoms)
    upper_share = position - lower  # (B, num_atoms), in [0, 1)
    projected = torch.zeros_like(probs).scatter_add_(1, lower, probs * (1 - upper_share))
    return projected.scatter_add_(1, (lower + 1).clamp(max=support.shape[0] - 1), probs * upper_share)  # (B, num_atoms)


def value_rescale(x: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    """h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x (Pohlen et al. arXiv:1805.11593, section 3.2; R2D2 learns its
    Q-values in this space): it shrinks large returns roughly to their square root, so one learning rate suits
    returns of any size, and it is invertible (value_rescale_inverse), unlike reward clipping."""
    return x.sign() * ((x.abs() + 1).sqrt() - 1) + eps * x


def value_rescale_inverse(x: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    """h^-1(x) = sign(x) (((sqrt(1 + 4 eps (|x| + 1 + eps)) - 1) / (2 eps))^2 - 1), the exact inverse of value_rescale
    (Pohlen et al. arXiv:1805.11593, Proposition A.2): the root of the quadratic that h(y) = x is in sqrt(|y| + 1)."""
    return x.sign() * ((((1 + 4 * eps * (x.abs() + 1 + eps)).sqrt() - 1) / (2 * eps)).square() - 1)


def sequence_priority(td_abs: torch.Tensor, mask: torch.Tensor, eta: float) -> torch.Tensor:
    """R2D2's priority of each sequence (arXiv:1810.06059, section 2.3): eta * max_t |td_t| + (1 - eta) * mean_t |td_t|
    over its unmasked steps; td_abs and mask (T, B) -> (B,). The max keeps a sequence with one large error from being
    averaged away by its many small ones, as a mean alone over a long sequence would."""
    td_abs = torch.where(mask.bool(), td_abs, 0)  # a masked step's error counts in neither, whatever its value
    return eta * td_abs.amax(dim=0) + (1 - eta) * td_abs.sum(dim=0) / mask.sum(dim=0).clamp(min=1)


# ---- replay buffers ----


class ReplayBuffer:
    """Transitions (state, action, reward, discount, next_state) in preallocated tensors on the agent's device,
    written at a ring pointer and sampled on the device. The target is reward + discount * V(next_state).

    discount is gamma^k * not_terminated (AgentOffPolicy.as_transitions; k = 1 without n-step returns): 0 only
    where the episode truly ended (gymnasium's `terminated`); a time-limit truncation keeps gamma^k, so that
    transition still bootstraps from its next state. Each transition stands alone: nothing spans two of them.
    A multi-agent team's transition (num_agents > 1) holds every agent's state and action side by side, and every
    agent's own reward where its agents learn from their own (num_rewards = num_agents: if_agent_rewards).
    Images (state_dim an image's shape) are stored in the env's dtype (state_dtype: uint8 frames, MinAtar's bool
    grids), a quarter of float32's memory or less, and sampled so: the networks scale them (AgentNet.ImageEncoder).
    """

    def __init__(self, max_len: int, state_dim: "int | tuple[int, ...]", action_dim: int, if_discrete: bool, device=None,
                 num_agents: int = 1, num_rewards: int = 1, state_dtype: torch.dtype = torch.float32):
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
        self.add_size = 0  # how many were added since the last update; update_net trains on repeat_times * this

    def extend(self, *trajectory: torch.Tensor) -> torch.Tensor:
        """Append a trajectory (the tuple explore_env returns), overwriting the oldest when full; returns the
        indices written, (size,)."""
        size = trajectory[0].shape[0]
        if size > self.max_len:  # only the newest max_len fit
            trajectory = tuple(t[-self.max_len:] for t in trajectory)
            size = self.max_len
        idx = torch.arange(self.pointer, self.pointer + size, device=self.device) % self.max_len  # (size,)
        for buf, new in zip(self.tensors, trajectory, strict=True):
            buf[idx] = new.to(self.device)
        self.pointer = (self.pointer + size) % self.max_len
        self.cur_len = min(self.cur_len + size, self.max_len)
        self.add_size += size
        return idx

    def sample(self, batch_size: int) -> tuple[tuple[torch.Tensor, ...], torch.Tensor, torch.Tensor]:
        """A uniform random batch (states (B, state_dim), actions, rewards (B,), discounts (B,), next_states), the
        weights of its transitions' losses (1 here) and their indices (B,)."""
        idx = torch.randint(self.cur_len, (batch_size,), device=self.device)
        return tuple(buf[idx] for buf in self.tensors), self.unit_weight, idx

    def update_priorities(self, idx: torch.Tensor, td_errors: torch.Tensor):
        """Uniform replay has no priorities (PrioritizedReplayBuffer has)."""

    def state_dict(self) -> dict:
        """The filled part only, as CPU copies: a view of the preallocated tensors would save all of their storage."""
        return {"pointer": self.pointer, "cur_len": self.cur_len, "add_size": self.add_size,
                "tensors": [buf[:self.cur_len].to("cpu", copy=True) for buf in self.tensors]}

    def load_state_dict(self, state: dict):
        self.pointer, self.cur_len, self.add_size = state["pointer"], state["cur_len"], state["add_size"]
        for buf, saved in zip(self.tensors, state["tensors"], strict=True):
            buf[:self.cur_len] = saved.to(self.device)


class PrioritizedReplayBuffer(ReplayBuffer):
    """Proportional prioritized replay (Schaul et al. arXiv:1511.05952, section 3.3): transition i is sampled with
    probability P(i) = p_i / sum_k p_k, p_i = (|TD error_i| + eps)^alpha, new ones at the largest p so far, and its loss
    is weighted by (N P(i))^-beta / max_k (N P(k))^-beta = (p_i / min_k p_k)^-beta (section 3.4).

    beta stays fixed, not annealed to 1 as in the paper: its full correction matters as learning converges, and our
    runs stop at the target return; a fixed value is one default for every task (History/UPDATE_LOG.md, 2026-11-23).
    The sums and minima are trees of `fanout` children per node, kept on the buffer's device, so that an update of a
    batch's priorities and the sampling of a batch are a few vectorised operations per tree level (4 levels for 2^20
    transitions), never a Python loop over the batch."""

    alpha, beta, eps = 0.6, 0.4, 1e-6  # the paper's proportional variant (Table 3); eps keeps every p_i above 0
    fanout = 32

    def __init__(self, max_len: int, state_dim: "int | tuple[int, ...]", action_dim: int, if_discrete: bool, device=None,
                 num_agents: int = 1, num_rewards: int = 1, state_dtype: torch.dtype = torch.float32):
        super().__init__(max_len, state_dim, action_dim, if_discrete, device, num_agents, num_rewards, state_dtype)
        self.init_trees()

    def init_trees(self):
        """The sum and min trees over max_len leaves at priority 0, and the largest priority so far at 1."""
        sizes = [math.ceil(self.max_len / self.fanout) * self.fanout]  # the leaves, then each level up to the root
        while sizes[-1] > 1:
            nodes = sizes[-1] // self.fanout
            sizes.append(nodes if nodes == 1 else math.ceil(nodes / self.fanout) * self.fanout)
        # float64 sums: sampling descends by subtracting sums of up to 2^20 priorities
        self.sum_tree = [torch.zeros(size, dtype=torch.float64, device=self.device) for size in sizes]
        self.min_tree = [torch.full((size,), math.inf, dtype=torch.float64, device=self.device) for size in sizes]
        self.max_priority = torch.ones((), dtype=torch.float64, device=self.device)

    def extend(self, *trajectory: torch.Tensor) -> torch.Tensor:
        """ReplayBuffer.extend, the new transitions at the largest priority so far; or, where the trajectory ends with
        their absolute TD errors (size,) (if_explorer_priorities: Ape-X's explorers compute them), at the priorities of
        those errors (update_priorities)."""
        idx = super().extend(*trajectory[:len(self.tensors)])
        if len(trajectory) > len(self.tensors):
            self.update_priorities(idx, trajectory[-1][-idx.shape[0]:].to(self.device))  # the newest, as extend keeps
        else:
            self.set_priorities(idx, self.max_priority.expand(idx.shape))  # new transitions are replayed at least once
        return idx

    def sample(self, batch_size: int) -> tuple[tuple[torch.Tensor, ...], torch.Tensor, torch.Tensor]:
        """A batch drawn in proportion to the priorities, one draw from each of batch_size equal slices of their sum
        (the paper's appendix B.2.1), with the importance weights (B,) and indices (B,)."""
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
        """p_i = (|TD error_i| + eps)^alpha for the sampled transitions (td_errors (B,), already absolute). An error
        at or below 0 gives eps^alpha: a float32 KL divergence (Rainbow's) dips to about -1e-6 where the net fits its
        target, and a negative base would give a NaN that spreads through the sum tree to every later draw. A NaN or
        infinite error (a diverged critic) is refused, naming the transitions (one host sync per batch)."""
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
        """Write leaves idx, then recompute their ancestors level by level (an index twice in idx writes the same
        value twice)."""
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
    """Whether a[i, j] and b[i, j] are equal in every entry, (I, J) bool; compared 8 bytes at a time where the
    entries are bytes (uint8, bool frames) that come in multiples of 8."""
    a, b = a.flatten(2), b.flatten(2)
    aligned = lambda x: all(size % 8 == 0 for size in (*x.stride()[:-1], x.storage_offset(), x.shape[-1]))
    if a.element_size() == 1 and a.shape[-1] > 0 and aligned(a) and aligned(b):
        a, b = a.view(torch.int64), b.view(torch.int64)
    return (a == b).all(-1)


class FrameStacks:
    """A replay buffer's mixin (FrameStackReplayBuffer, FrameStackPrioritizedReplayBuffer) for image states, each a
    stack of an env copy's last S frames (gymnasium's FrameStackObservation: Atari's (4, 84, 84); S = 1, a frame the
    whole image, for unstacked ones: MinAtar, CarRacing): each frame is stored once, in a ring of frames, and a
    transition holds the stamps (the how-many-th frame written) of its state's S frames and of its next state's;
    sampling gathers the stacks, as rlpyt's frame buffer does (Stooke & Abbeel arXiv:1909.01500). About 7,600 bytes
    per Atari transition, not 56,464; unstacked images about half of a state and a next state (BENCHMARKS.md).

    Which frames a stack shares with another is read from the frames themselves, so that every stack comes back bit
    for bit as the env gave it. A state that is its env copy's state before again (a round's first state, which the
    round before saw as a next state) adds no frame; one whose first S - 1 frames are the last S - 1 of the state
    before continues it and adds its last frame; an episode's first state, the reset frame S times
    (FrameStackObservation's padding), adds one; anything else (a stacking padded another way) adds all S. A next
    state is the state k <= n_step steps on where it is one; else it continues one of the states between (an
    episode's final observation; a round's last) and adds its last frame, once; anything else adds all S. So no stack
    reaches into the episode before. extend takes the trajectory in the step-then-env order of num_envs copies
    (AgentOffPolicy.as_transitions). The ring holds max_len * 17 / 16 frames, and grows where the live transitions
    need more (reserve: a task whose episodes last a few steps): no frame a live transition reads is overwritten.
    A resumed run starts new episodes (AgentRun), so checkpoints keep no copy's last state."""

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
        """The transitions with their states as stamps (then PrioritizedReplayBuffer's priorities, if any), and the
        frames they add."""
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

    def stamps(self, states: torch.Tensor, next_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Each transition's state and next state as the stamps of their frames, (T * N, S) each, and the new frames,
        (W, ...) stamped from `written` on: shared frames read from the stacks' contents (the docstring). The common
        cases are compared for the whole round at once, the rest (episode ends, a round's ends) one by one."""
        n, n_step = self.num_envs, self.n_step
        states, next_states = (x.cpu().reshape(-1, n, self.stack, *self.frames.shape[1:]) for x in (states, next_states))
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
        """One env copy's states (T, S, ...) as the stamps of their frames, T lists of S, after its last next state
        `last` (its content and stamps, or None); continues[t]: state t + 1 continues state t. add(stacks, t, places)
        adds frames of the states (stacks 0) or next states (1) and returns their stamps."""
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
        """One env copy's next states (T, S, ...) as stamps, T lists of S: the state k steps on where it is one (n_on[t]:
        k = n_step), else a final observation continuing a state between, its last frame added once; else added whole."""
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
        """Enlarge the ring to hold `needed` frames (from the oldest a live transition reads to the newest), each
        frame kept under its stamp."""
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
        self.frames[torch.arange(self.written - frames.shape[0], self.written, device=self.device) % self.capacity] = frames


class FrameStackReplayBuffer(FrameStacks, ReplayBuffer):
    """ReplayBuffer of images, each frame of their stacks stored once (FrameStacks)."""


class FrameStackPrioritizedReplayBuffer(FrameStacks, PrioritizedReplayBuffer):
    """PrioritizedReplayBuffer of images, each frame of their stacks stored once (FrameStacks)."""


class SequenceReplayBuffer(PrioritizedReplayBuffer):
    """R2D2's replay (Kapturowski et al., ICLR 2019, section 2.3): fixed-length sequences of one env copy's steps, each
    stored with the recurrent memory the explorer had at its first step, prioritized as whole sequences
    (PrioritizedReplayBuffer's trees and importance weights over sequences; max_len counts sequences).

    A sequence is burn_in + seq_len steps: the k-th of an episode trains on its steps [k * stride, k * stride +
    seq_len), stride = seq_len // 2 (adjacent ones overlap by half, as the paper's 80 by 40), after a prefix of the
    burn_in steps before them, which only refresh the stored state. A prefix before the episode's start holds the
    previous episode's last steps (padding at the run's start); the core zeroes its memory at the episode's first step
    anyway (AgentNet.RecurrentCore). Steps after the episode's end (the next episode's, which start from zero again)
    are padding: `mask` is 1 only on the training steps of the sequence's own episode, so a sequence never mixes
    episodes without a mask. Each step's n-step return is computed inside its sequence (n_step_returns): it never runs
    across its episode's end (terminated: no bootstrap; truncated: from the final observation), and the sequence's
    end shortens it, exactly. The bootstrap state of step t is the one after its return's last step, last[t].

    extend takes the explorer's steps (T * N, ...) in step-then-env order (AgentR2D2.explore_env), keeps each copy's
    last window - 1 steps, so that sequences span rounds, and stores a sequence once its last step is explored; its
    add_size counts explored steps, as repeat_times does. A resumed run starts new episodes: the kept steps restart."""

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
        self.init_trees()
        self.tail = self.padding(state_shape, state_dtype, width, memory_rows)

    def padding(self, state_shape: tuple[int, ...], state_dtype: torch.dtype, width: int, memory_rows: int
                ) -> list[torch.Tensor]:
        """window - 1 steps of each copy before any explored one: no episode's (episode step -1), never trained."""
        rows, n, device = self.window - 1, self.num_envs, self.device
        zeros = lambda *shape, dtype=torch.float32: torch.zeros((rows, n, *shape), dtype=dtype, device=device)
        ones = torch.ones((rows, n), device=device)  # not_terminated, not_done
        return [zeros(*state_shape, dtype=state_dtype), zeros(1, dtype=torch.long), zeros(), ones, ones,
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
        """The K steps of each of N copies, (K, N, ...), the first window - 1 of them kept from before -> the S
        sequences whose first training step (the anchor, at index burn_in) is an episode's step k * stride and whose
        window ends within the K steps, (S, window, ...) each in the order of `tensors`."""
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
    """Hindsight experience replay (Andrychowicz et al. arXiv:1707.01495) for goal envs, whose flat states are
    [observation, achieved_goal, desired_goal] (extras.goals.GoalObservation), each goal goal_dim long. A sampled
    transition keeps its goal with probability 1 / (her_k + 1); otherwise its goal (in state and next_state) becomes
    the goal achieved after a step drawn uniformly from this one to its episode's last stored step, and its reward
    and discount are recomputed for it by `feedback` (the env's compute_reward and compute_terminated): the "future"
    strategy with k = her_k (section 4.5; relabelled as the batch is drawn, so an episode still under way offers the
    steps it has so far). Needs one-step transitions: an n-step reward belongs to the goal it was summed for.

    extend takes the trajectory with one more tensor, not_done (T * N,) in its step-then-env order (False where the
    step ended the episode), from which each transition learns its episode's last step; the N env copies write at
    absolute indices t * N + env, so an episode's steps lie num_envs apart."""

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
        """A resumed run starts new episodes (AgentRun.train_serial), so the ones under way end at their last step.
        The episode bookkeeping holds for the capacity and the env copies it was written with only."""
        for name in ("max_len", "num_envs"):
            if state[name] != getattr(self, name):
                setting = "max_memo" if name == "max_len" else "num_envs * num_workers"  # a round's env copies
                raise RefusedError(f"{setting}={getattr(self, name)} is not accepted on resume: the saved hindsight replay "
                                   f"was written with {setting}={state[name]}; resume with that, or if_save_buffer=False")
        super().load_state_dict(state)
        self.total = state["total"]
        self.open_start = torch.full((self.num_envs,), self.total, device=self.device) + torch.arange(
            self.num_envs, device=self.device)


class RolloutBuffer:
    """The latest rollout of num_envs vectorised environments as (horizon, num_envs, ...) tensors; each
    extend replaces it, since on-policy agents learn only from data of their current policy."""

    def __init__(self, device=None):
        self.device = torch.device("cpu") if device is None else torch.device(device)
        self.add_size = 0  # transitions in the latest rollout

    def extend(self, states, actions, log_probs, rewards, not_terminated, not_done, next_states):
        """next_states[t] is the observation step t led to: on truncation the final observation of the cut
        episode (gymnasium's info["final_obs"]), not the reset one that the next step starts from."""
        states, actions, log_probs, rewards, not_terminated, not_done, next_states = (  # a no-op where they are already
            tensor.to(self.device) for tensor in (states, actions, log_probs, rewards, not_terminated, not_done, next_states))
        # (T, N, state_dim), (T, N, ...), and (T, N), or a team's every agent's (T, N, num_agents)
        self.states, self.actions, self.log_probs = states, actions, log_probs
        self.rewards, self.not_terminated, self.not_done = rewards, not_terminated, not_done  # (T, N) each
        self.next_states = next_states  # (T, N, state_dim)
        self.add_size = states.shape[0] * states.shape[1]

    def get_advantages(self, values: torch.Tensor, next_values: torch.Tensor, gamma: float, lambda_gae: float
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """GAE(lambda) advantages and the critic's targets (advantage + value), (T, N) each
        (Schulman et al. arXiv:1506.02438, eq. 16). values = V(states), next_values = V(next_states).
        The TD error bootstraps unless the step terminated, so a truncated step bootstraps from the value
        of its final observation; the sum over later TD errors stops at every episode end. A team's every agent's
        rewards and values, (T, N, num_agents), give every agent's advantages."""
        columns = (1,) * (self.rewards.dim() - self.not_done.dim())  # one per agent of a team's rewards
        not_terminated, not_done = (flags.view(*flags.shape, *columns) for flags in (self.not_terminated, self.not_done))
        deltas = self.rewards + gamma * not_terminated * next_values - values  # (T, N) or (T, N, num_agents)
        advantages = torch.empty_like(deltas)
        gae = torch.zeros_like(deltas[0])  # (N,) or (N, num_agents)
        for t in reversed(range(deltas.shape[0])):
            gae = deltas[t] + gamma * lambda_gae * not_done[t] * gae
            advantages[t] = gae
        return advantages, advantages + values


class RecurrentRolloutBuffer(RolloutBuffer):
    """The rollout of a recurrent agent (AgentRecurrentPPO): RolloutBuffer's tensors, then the memories the rollout
    started from and where its episodes start, which learning replays the rollout's sequences from."""

    def extend(self, *rollout: torch.Tensor):
        *transitions, start_memory, episode_start = rollout
        super().extend(*transitions)
        self.start_memory = start_memory.to(self.device)  # (2, N, width): the actor's (h, c)
        self.episode_start = episode_start.to(self.device)  # (T, N) 1 where step t starts an episode: memory zeroed


class SegmentReplayBuffer(RolloutBuffer):
    """ACER's replay (Wang et al. arXiv:1611.01224, section 3): the newest rollouts, max_len transitions in all,
    each kept whole as num_envs trajectory segments of horizon steps with the behaviour policy's log-probs of every
    action. extend makes a rollout the current one, as RolloutBuffer does, and keeps it for replay."""

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
    """round(epochs) (at least one) passes over samples in a fresh random order, each cut into minibatches of
    batch_size: yields one tuple of aligned slices of `tensors` (T, ...) per minibatch."""
    for _ in range(max(1, round(epochs))):
        # one shuffled copy per epoch, cut into minibatch views: one gather per tensor and epoch, not per minibatch
        perm = torch.randperm(tensors[0].shape[0], device=tensors[0].device)
        yield from zip(*(tensor[perm].split(batch_size) for tensor in tensors), strict=True)


# ---- base agents ----


class AgentBase:
    """What every agent shares: its networks (act_class, cri_class, targets where it keeps them, one Adam optimizer
    each), acting, saving, and extra values for the recorder. Its subclasses add how to explore and learn:
    AgentOffPolicy into and from a replay buffer, AgentOnPolicy from vectorised rollouts.

    A subclass sets if_off_policy, and train_defaults and hyper_defaults: the loop settings and the keyword
    hyperparameters of __init__ that suit it, from which Arguments fills the fields left at None (DESIGN.md: defaults
    come from the agent, never from a per-task table)."""

    if_off_policy: bool
    if_discrete = False
    train_defaults: dict
    hyper_defaults: dict
    act_class: type
    cri_class: type
    if_act_target = if_cri_target = False  # whether to keep frozen target copies of the actor and the critic
    if_act_optimizer = True  # False: something other than Adam moves the actor (TRPO's line search)
    if_async = False  # True: workers step shared networks without a learner (AgentA3C; AgentRun.train_async)
    # False: its steps use more than gradients (a line search, Fisher factors), which the ranks of data-parallel
    # learners (AgentRun.train_distributed) do not average, so their networks would part
    if_data_parallel = True
    # True: every network standardises its states by the running mean and std of the explored ones (AgentNet.StateNorm,
    # update_state_norm); a hyperparameter of the agents whose hyper_defaults name it
    if_state_norm = False
    # True: learning takes the sign of every reward (learned_reward), the evaluation the raw score; a hyperparameter of
    # the agents that take images (if_image_states), whose hyper_defaults name it: None there clips on ALE/ ids only
    # (Arguments.resolve), the papers' Atari setting; R2D2's False never clips
    if_clip_reward = False
    # True: its networks take image observations (state_dim an image's shape: AgentNet.ImageEncoder)
    if_image_states = False
    if_multi_agent = False  # True: a team's agent (MultiAgent) on a PettingZoo env
    # True: its networks carry a memory per env copy (AgentRecurrentPPO, AgentR2D2), which the evaluator restarts per
    # episode (reset_memory, keep_memory); the serial and multiprocess loops, not torchrun
    if_recurrent = False
    # True: explore_env ends each trajectory with its transitions' absolute TD errors, from which a
    # PrioritizedReplayBuffer sets their first priorities (AgentApeX's explorers compute them)
    if_explorer_priorities = False
    net_keywords = ()  # the hyperparameters that act_class and cri_class take (a team's num_agents)
    if_agent_rewards = False  # True: a team's agent with a value per agent, which can learn each agent's own reward
    # the actor's step size, None: learning_rate (Spinning Up's pi_lr beside q_lr); a hyperparameter of the agents with
    # an actor that an optimizer steps, whose hyper_defaults name it
    actor_learning_rate = None

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
            raise RefusedError(f"if_state_norm=True is not accepted with image observations (shape {tuple(state_dim)}): "
                               f"their encoder scales pixels inside the network (AgentNet.ImageEncoder); it accepts "
                               f"flat Box observations (state_dim,); pass if_state_norm=False")
        self.init_networks()
        if self.if_state_norm:
            for module in self.state_takers():
                module.state_norm = StateNorm(state_dim).to(self.device)

    def init_networks(self):
        """Actor, critic, their frozen targets and one optimizer each (new_optimizer; the actor none without
        if_act_optimizer)."""
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
        """States on the agent's device: flat ones as float32, images in their own dtype (uint8, bool), which the
        buffers store and the networks scale (AgentNet.ImageEncoder)."""
        return torch.as_tensor(state, dtype=None if is_image(self.state_dim) else torch.float32, device=self.device)

    @torch.no_grad()
    def select_action(self, state: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """state (state_dim,) or (batch, state_dim) -> action (action_dim,) or (batch, action_dim) in [-1, 1]."""
        state = self.as_state_tensor(state)
        action = self.act(state) if deterministic else self.explore_action(state)
        return action.cpu().numpy()

    def reset_memory(self, num_envs: int):
        """A recurrent agent's acting memory (select_action) at zero for num_envs episodes that start side by side
        (AgentRun.run_episodes); nothing for an agent without memory."""

    def keep_memory(self, rows: list[int]):
        """Keep the rows of the acting memory whose episodes go on, in that order (the others ended); nothing for an
        agent without memory."""

    def set_env_copies(self, first: int, total: int):
        """The explorer acting with this agent steps env copies first, first + 1, ... of the `total` that explore a
        round together (every explorer's, worker by worker: AgentRun.Explorer); nothing for an agent that acts alike in
        every copy (AgentApeX's epsilon differs)."""

    def policy_module(self) -> nn.Module:
        """The deterministic policy as one module, states -> the actions select_action(deterministic=True) takes (the
        module AgentRun.export writes)."""
        return self.act

    def extra_stats(self) -> dict[str, float]:
        """Values beside the objectives that the recorder should log (SAC: its temperature)."""
        return {}

    def learned_reward(self, reward, info: dict):
        """The reward the agent learns from, of the env's step (reward and info; a vector env's, one per copy): the
        env's, or its sign with if_clip_reward (DQN, Mnih et al. 2015: one learning rate for games whose scores differ
        in scale). The env's own rewards stay raw: the returns the recorder reports are the game's score."""
        return np.sign(reward) if self.if_clip_reward else reward

    def state_takers(self) -> list[nn.Module]:
        """Every module of every network, targets included, that takes states (has a state_norm), each once."""
        return self.modules_with("state_norm")

    def modules_with(self, name: str) -> list[nn.Module]:
        """Every module of every network, targets included, that has the attribute `name`, each once."""
        nets = {id(part): part for part in self.parts().values() if isinstance(part, nn.Module)}.values()
        return [module for net in nets for module in net.modules() if hasattr(module, name)]

    @torch.no_grad()
    def update_state_norm(self, states: torch.Tensor):
        """With if_state_norm, merge explored states (..., state_dim) into the statistics of every network's StateNorm,
        the same in all of them: a target network that standardised otherwise would value other inputs. Among
        data-parallel learners (torch.distributed initialised) every rank's states count, so their networks stay equal.
        Nothing else changes the statistics: evaluation and replay act on them as they are."""
        if not self.if_state_norm:
            return
        norms = [module.state_norm for module in self.state_takers()]
        norms[0].update(*merged_moments(states.reshape(-1, self.state_dim).to(self.device)))
        for norm in norms[1:]:
            norm.load_state_dict(norms[0].state_dict())

    def parts(self) -> dict:
        """Every network, target, optimizer and extra tensor that a checkpoint holds, by name."""
        names = ("act", "act_target", "cri", "cri_target", "act_optimizer", "cri_optimizer") + self.extra_save_names()
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

    def extra_save_names(self) -> tuple[str, ...]:
        return ()


class AgentOffPolicy(AgentBase):
    """Off-policy agents: explore into a ReplayBuffer (or PrioritizedReplayBuffer) and learn with the actor-critic
    update of DDPG's shape. Subclasses name their network classes and override what differs: explore_action (how to
    explore), get_next_q (the bootstrap value), get_obj_critic, get_obj_actor, or extra_update."""

    if_off_policy = True
    train_defaults = dict(net_dim=128, batch_size=128, max_memo=2 ** 20, target_step=256, repeat_times=1.0, num_envs=1,
                          num_workers=1,
                          # uniformly random actions before learning, as the TD3 paper does (section 6.1): without them
                          # TD3 hovered on LunarLanderContinuous-v3 (History/UPDATE_LOG.md, 2026-11-22)
                          random_steps=10_000,
                          if_save_buffer=True,  # checkpoints hold the replay buffer's filled part
                          if_per=False,  # uniform replay; True: PrioritizedReplayBuffer
                          her_k=4,  # on a goal env, 4 hindsight goals per kept one: the HER paper's best (Figure 6)
                          # the serial loop: SAC learned no faster in processes (History/UPDATE_LOG.md, 2026-11-22)
                          if_multiprocess=False)
    # Keyword hyperparameters of __init__ with their defaults; subclasses extend the dict.
    # 2e-3 and 0.02 (batch 128): DDPG and SAC need fewer updates than at TD3's (History/UPDATE_LOG.md, 2026-11-23)
    hyper_defaults = dict(learning_rate=2e-3, gamma=0.99, reward_scale=1.0, soft_update_tau=0.02,
                          n_step=1,  # rewards summed before the bootstrap (n-step returns, n_step_returns)
                          if_state_norm=False)  # standardised states (AgentNet.StateNorm)
    criterion = nn.MSELoss(reduction="none")  # regression loss of the critic, per transition
    policy_delay = 1  # the actor steps once every policy_delay critic steps (TD3 sets 2)
    # True: the targets and extra_update wait for the actor's steps (TD3's delayed updates); False: they follow every
    # critic step, and only the actor waits (ModSAC)
    if_delay_targets = True
    if_act_target = True  # SAC bootstraps from its online actor and keeps no actor target
    if_cri_target = True

    def __init__(self, net_dim: int, state_dim: int, action_dim: int, device=None, **hyperparameters):
        super().__init__(net_dim, state_dim, action_dim, device, **hyperparameters)
        self.critic_steps = 0  # across update_net calls: the actor and the targets follow every policy_delay of them
        self.noise = None  # the ColoredNoise stream of exploration (standard_noise)
        self.noise_steps = 1000  # its sequences' length: the explored env's episode length, set by explore_env

    # -- exploring --

    def explore_env(self, env, horizon: int, if_random: bool = False) -> tuple[torch.Tensor, ...]:
        """Step a gymnasium env `horizon` times with the exploring policy (if_random: with uniformly random
        actions, the warm-up before learning starts), continuing the episode the last call left. Returns the
        transitions as_transitions makes of them. A vector env (autoreset SAME_STEP) is stepped by explore_vector_env."""
        self.noise_steps = max(2, episode_length(env))  # ColoredNoise's lowest non-zero frequency needs two steps
        if hasattr(env, "num_envs"):
            return self.explore_vector_env(env, horizon, if_random)
        state = env.reset()[0] if self.last_state is None else self.last_state
        steps = []
        for _ in range(horizon):
            action = self.random_action(state=state) if if_random else self.select_action(state)
            next_state, reward, terminated, truncated, info = env.step(action)
            # a truncated episode still bootstraps from next_state, its final observation, not the reset one
            steps.append((state, action, self.learned_reward(reward, info), not terminated, not (terminated or truncated),
                          next_state))
            state = env.reset()[0] if terminated or truncated else next_state
        self.last_state = state
        return self.as_transitions(*(np.array(column)[:, None] for column in zip(*steps)))  # (horizon, 1, ...) each

    def explore_vector_env(self, env, horizon: int, if_random: bool = False) -> tuple[torch.Tensor, ...]:
        """explore_env for a vector env of N copies: one policy call acts for all of them, which costs about what
        one env's call does. The horizon * N transitions come back step by step, env by env, as explore_env's."""
        check_same_step(self, env)
        state = env.reset()[0] if self.last_state is None else self.last_state  # (N, state_dim)
        steps = []
        for _ in range(horizon):
            action = self.random_action(env.num_envs, state) if if_random else self.select_action(state)
            next_state, reward, terminated, truncated, info = env.step(action)
            steps.append((state, action, self.learned_reward(reward, info), ~terminated, ~(terminated | truncated),
                          final_observations(next_state, info)))
            state = next_state
        self.last_state = state
        return self.as_transitions(*map(np.stack, zip(*steps)))  # (horizon, N, ...) each

    def as_transitions(self, states, actions, rewards, not_terminated, not_done, next_states) -> tuple[torch.Tensor, ...]:
        """Arrays of T steps of N envs, (T, N, ...) -> the T * N transitions (states, actions, rewards, discounts,
        next_states) that ReplayBuffer.extend takes, step by step, env by env: rewards are the n-step returns of the
        rewards times reward_scale, discounts gamma^k * not_terminated, next_states the states k steps on
        (n_step_returns); discrete actions (T * N, 1) integers, a team's (T * N, num_agents); a team's rewards of every
        agent (T * N, num_agents) where its agents learn from their own."""
        as_tensor = lambda x, dtype=torch.float32: torch.as_tensor(x, dtype=dtype, device=self.device)
        rewards, discounts, last = n_step_returns(as_tensor(rewards) * self.reward_scale, as_tensor(not_terminated),
                                                  as_tensor(not_done), self.gamma, self.n_step)
        envs = torch.arange(last.shape[1], device=self.device)
        next_states = self.as_state_tensor(next_states)[last, envs]  # (T, N, ...)
        if self.if_discrete:
            actions = as_tensor(actions, torch.long).reshape(*discounts.shape, -1)  # (T, N, 1 or num_agents)
        else:
            actions = as_tensor(actions)
        return tuple(t.flatten(0, 1) for t in (self.as_state_tensor(states), actions, rewards, discounts, next_states))

    def random_action(self, num_envs: int | None = None, state: np.ndarray | None = None) -> np.ndarray:
        """Uniform in [-1, 1]: the standard normal CDF of standard_noise, rescaled (uniform at every step, coloured
        along the steps as the exploration noise is); (action_dim,), or (num_envs, action_dim) for a vector env."""
        draws = self.standard_noise((*(() if num_envs is None else (num_envs,)), self.action_dim), self.random_beta)
        return torch.erf(draws / math.sqrt(2)).cpu().numpy()

    def standard_noise(self, shape: tuple[int, ...], beta: float) -> torch.Tensor:
        """Standard normal draws for one exploring step, coloured along the steps by beta (ColoredNoise): the
        warm-up's random_beta, the policy's noise_beta. One stream per shape and colour, so a new one begins where
        either changes (one env, a vector env's copies; the warm-up's end where the two colours differ), each sequence
        as long as the explored env's episodes (noise_steps)."""
        if self.noise is None or (self.noise.shape, self.noise.beta, self.noise.seq_len) != (shape, beta, self.noise_steps):
            self.noise = ColoredNoise(beta, shape, self.noise_steps, device=self.device)
        return self.noise.sample()

    # -- learning --

    def update_net(self, buffer: ReplayBuffer, batch_size: int, repeat_times: float) -> dict[str, float]:
        """repeat_times gradient steps of the critic per transition added since the last call (the
        update-to-data ratio); a critic step after which if_actor_step says so also steps the actor; extra_update
        (SAC's temperature) and the targets' soft updates follow the actor's steps (if_delay_targets, TD3's delayed
        updates) or every critic step. Returns mean objectives (obj_actor NaN in a call without an actor step, so that
        every recorder row has the same columns) and mean_q (batch_mean_q)."""
        update_times = max(1, int(buffer.add_size * repeat_times))
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
            if_actor_step = self.if_actor_step(obj_critic)
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
        """The critic's mean Q of the call's last batch, every head, in the env's reward units (divided by
        reward_scale) beside the returns: a value that rises past any return the task pays is overestimation."""
        return torch.stack(self.get_q_heads(*batch[:2])).mean().item() / self.reward_scale

    def if_actor_step(self, obj_critic: torch.Tensor) -> bool:
        """Whether the actor and the targets step after this critic step: every policy_delay-th, counted across
        calls of update_net (TD3 paper, Algorithm 1)."""
        return self.critic_steps % self.policy_delay == 0

    def get_obj_critic(self, batch: tuple[torch.Tensor, ...], weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Regress every Q head onto reward + discount * next_q (discount = gamma^k * not_terminated), each
        transition's loss times its weight (B,) or scalar; also returns each transition's absolute TD error (B,),
        averaged over the heads, from which a PrioritizedReplayBuffer sets its priority."""
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
        """Deterministic policy gradient: maximise Q(s, pi(s)) (Silver et al. 2014; Lillicrap et al. arXiv:1509.02971)."""
        state = batch[0]
        return -self.cri(state, self.act(state)).mean()

    def extra_update(self, batch: tuple[torch.Tensor, ...]):
        """What else steps with the targets (SAC: its temperature; update_net says when); nothing here."""


# ---- DQN family (discrete actions) ----


class ActionMasks:
    """What a discrete agent needs for masks of legal actions (if_action_mask, a hyperparameter of the agents whose
    hyper_defaults name it): the states end with the env's mask (extras.masks), and the agent never takes an illegal
    action nor values a state by one. Put it first among the bases: class AgentDQN(ActionMasks, AgentOffPolicy)."""

    if_action_mask = False

    def init_networks(self):
        super().init_networks()
        if self.if_action_mask:
            for module in self.modules_with("if_action_mask"):  # the categorical policies mask their own logits
                module.if_action_mask = True

    def legal(self, values: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """values (..., action_dim) of every action at state, its illegal actions' at AgentNet.ILLEGAL (no max or
        argmax picks one) where the states carry a mask."""
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
    """Deep Q-Network (Mnih et al. 2015) with a soft-updated target network, epsilon-greedy
    exploration and the Huber loss."""

    if_discrete = True
    if_image_states = True  # the DQN family up to Rainbow: its Q-networks take images (AgentNet.mlp)
    # reward_scale 0.1 keeps CartPole's Q-values (up to 100 unscaled) where the Huber loss is quadratic; half an update
    # of batch 64 per step halves the update cost, which dominates the run (History/UPDATE_LOG.md, 2026-11-23)
    hyper_defaults = AgentOffPolicy.hyper_defaults | dict(explore_rate=0.1,  # epsilon, the chance of a random action
                                                     learning_rate=1e-3, soft_update_tau=0.02, reward_scale=0.1,
                                                     if_noisy=False,  # noisy layers (NoisyLinear) explore instead
                                                     if_action_mask=False,
                                                     if_clip_reward=None)  # the rewards' signs; None: on ALE/ ids
    net_keywords = ("if_noisy",)  # the hyperparameters that cri_class takes
    # num_envs 8: one policy call acts for 8 envs, cheaper per transition (History/UPDATE_LOG.md, 2026-11-23)
    train_defaults = AgentOffPolicy.train_defaults | dict(batch_size=64, repeat_times=0.5, num_envs=8,
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
        """state (state_dim,) or (batch, state_dim) -> integer action () or (batch,). Deterministic: greedy, with
        noisy layers at their mean (eval mode); exploring: epsilon-greedy, noisy layers with fresh noise. Legal actions
        only, if_action_mask."""
        state = self.as_state_tensor(state)
        with eval_mode(self.cri, deterministic and self.if_noisy):  # a switch costs a fifth of a forward: only if noisy
            action = self.legal(self.cri(state), state).argmax(dim=-1)
        if not deterministic:
            action = self.epsilon_greedy(action, state)
        return action.cpu().numpy()

    def epsilon_greedy(self, action: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """The greedy actions (batch,) at state, each replaced by a uniformly random (legal) one with probability
        explore_rates (explore_rate; AgentApeX: one per env copy)."""
        if_random = torch.rand(action.shape, device=self.device) < self.explore_rates(action.shape)
        return torch.where(if_random, self.uniform_action(action.shape, state), action)

    def explore_rates(self, shape: tuple[int, ...]) -> float | torch.Tensor:
        """epsilon of each action of an exploring batch of that shape: explore_rate for all (AgentApeX: one per env
        copy)."""
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
    """Double DQN (van Hasselt et al. arXiv:1509.06461): the online network picks the next action and the target
    network values it, which curbs the overestimation of DQN's max."""

    def get_next_q(self, next_state: torch.Tensor) -> torch.Tensor:
        """Q_target(s', argmax_a Q(s', a)), (B,) (Double DQN paper, eq. 4)."""
        next_action = self.legal(self.cri(next_state), next_state).argmax(dim=1, keepdim=True)  # (B, 1)
        return self.cri_target(next_state).gather(1, next_action).squeeze(1)


class AgentD3QN(AgentDoubleDQN):
    """Dueling double DQN: Double DQN's target with a dueling Q-network (arXiv:1511.06581)."""

    cri_class = QNetDuel


class AgentApeX(AgentD3QN):
    """Ape-X DQN (Horgan et al. arXiv:1803.00933): many actors explore, each with its own epsilon, and compute their
    transitions' first priorities; one learner replays them by priority with D3QN's 3-step double-Q target.

    The paper's N actors are here the env copies of every explorer of the run, N = num_workers * num_envs, copy
    worker * num_envs + j the actor i (set_env_copies), so the same rule serves the serial loop (one explorer of
    num_envs copies) and the multiprocess one; actor i explores with eps_i = explore_rate^(1 + 7 i / (N - 1))
    (explore_rates). The priorities come with the trajectory (as_transitions): the learner stores what its explorers
    send. Scaled to one machine: num_workers explorer processes instead of 360 actors, the update ratio and the
    soft-updated target of the DQN family here; prioritized replay with the paper's alpha 0.6 and beta 0.4
    (PrioritizedReplayBuffer). Noisy layers (if_noisy) and uniform replay (if_per=False) are refused: the epsilons
    explore, and the explorers' priorities are what the buffer replays by. The recorder's epsilon is explore_rate, the
    largest, actor 0's."""

    # explore_rate 0.4: the paper's epsilon, the base of every actor's eps_i
    hyper_defaults = {name: value for name, value in AgentD3QN.hyper_defaults.items() if name != "if_noisy"} | dict(
        explore_rate=0.4, n_step=3)
    # two explorer processes (16 env copies): on 2 cores faster to CartPole-v1's target than the serial loop
    # (History/UPDATE_LOG.md, 2026-11-26); if_multiprocess=False runs one explorer of num_envs copies
    train_defaults = AgentD3QN.train_defaults | dict(if_per=True, num_workers=2, if_multiprocess=True)
    net_keywords = ()  # no noisy layers: its epsilons explore
    if_noisy = False
    if_explorer_priorities = True
    epsilon_alpha = 7.0  # the exponent's range in eps_i (the paper's alpha, section 4.1)
    env_copies: tuple[int, int] | None = None  # (first, total): which of the run's env copies its explorer steps

    def set_env_copies(self, first: int, total: int):
        self.env_copies = (first, total)

    def explore_rates(self, shape: tuple[int, ...]) -> torch.Tensor:
        """eps_i = explore_rate^(1 + epsilon_alpha * i / (N - 1)) of the env copy i of N that each action is for (Ape-X
        paper, section 4.1; explore_rate where N = 1): the copies of set_env_copies, else the batch's own rows."""
        count = math.prod(shape)
        first, total = self.env_copies or (0, count)
        index = torch.arange(first, first + count, dtype=torch.float32, device=self.device)
        return (self.explore_rate ** (1 + self.epsilon_alpha * index / max(1, total - 1))).reshape(shape)

    def as_transitions(self, *steps: np.ndarray) -> tuple[torch.Tensor, ...]:
        """AgentOffPolicy's transitions and, last, their absolute n-step TD errors |R + discount * max_a Q(s', a) -
        Q(s, a)| (B,) by the explorer's own copy of the Q-network, from which the buffer sets their priorities (Ape-X
        paper, Algorithm 1, ComputePriorities). An explorer process holds only the learner's online network (the weights
        it is sent), so that copy plays the target network's role too: Double DQN's target with one network is max_a
        Q(s', a). The serial loop computes them the same way, with the learner's online network."""
        transitions = super().as_transitions(*steps)
        state, action, reward, discount, next_state = transitions
        with torch.no_grad():
            next_q = self.legal(self.cri(next_state), next_state).max(dim=1).values  # (B,)
            q = self.get_q_heads(state, action)[0]  # (B,)
        return transitions + ((reward + discount * next_q - q).abs(),)


class AgentC51(AgentDQN):
    """Categorical DQN (Bellemare et al. arXiv:1707.06887): the network predicts each action's distribution of
    returns on num_atoms fixed values in [v_min, v_max] (QNetDist) and learns by the cross-entropy to the
    distributional Bellman target, projected back onto those values."""

    # [-10, 10] holds the discounted returns of the benchmark tasks at DQN's reward_scale 0.1 (CartPole: 10 at most)
    hyper_defaults = AgentDQN.hyper_defaults | dict(num_atoms=51, v_min=-10.0, v_max=10.0)
    net_keywords = AgentDQN.net_keywords + ("num_atoms", "v_min", "v_max")
    cri_class = QNetDist

    def get_obj_critic(self, batch: tuple[torch.Tensor, ...], weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-entropy between the projected target distribution of r + discount * z at the next action and the
        predicted one at the action taken (C51 paper, Algorithm 1), per transition times its weight; and, for the
        priorities, the KL divergence between the two (B,), as Rainbow prioritises (its section 3): the same gradient,
        without the target's own entropy, which would rank learned transitions by how spread their targets are."""
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
    """Rainbow (Hessel et al. arXiv:1710.02298): C51 with Double DQN's choice of the next action, a dueling
    distributional network with noisy layers (exploring instead of epsilon), prioritized replay and 3-step returns."""

    # a quarter of an update per step (DQN: half): each costs several of D3QN's (History/UPDATE_LOG.md, 2026-11-23).
    # Not yet a set that serves every task.
    hyper_defaults = AgentC51.hyper_defaults | dict(if_noisy=True, explore_rate=0.0, n_step=3)
    train_defaults = AgentC51.train_defaults | dict(if_per=True, repeat_times=0.25)
    cri_class = QNetDistDuel

    def get_next_action(self, next_state: torch.Tensor, next_probs: torch.Tensor) -> torch.Tensor:
        """Double DQN (arXiv:1509.06461): the online network picks the action whose target distribution is used."""
        return self.legal(self.cri(next_state), next_state).argmax(dim=-1)


# ---- deterministic and stochastic actor-critics (continuous actions) ----


class AgentDDPG(AgentOffPolicy):
    """DDPG (Lillicrap et al. arXiv:1509.02971) with Gaussian exploration noise instead of the OU process
    (TD3 paper, section 6.1, found no benefit in OU)."""

    hyper_defaults = AgentOffPolicy.hyper_defaults | dict(actor_learning_rate=None,  # None: learning_rate
                                                          explore_noise=0.1,  # std of the action noise, actions in [-1, 1]
                                                          noise_beta=0.0,  # its colour (ColoredNoise): 0 white, 1 pink
                                                          random_beta=1.0)  # the random warm-up's colour (AgentSAC)
    act_class, cri_class = Actor, Critic

    def explore_action(self, state: torch.Tensor) -> torch.Tensor:
        noise = self.standard_noise((*self.batch_shape(state), self.action_dim), self.noise_beta)
        return self.act.get_action(state, self.explore_noise, noise)


class AgentTD3(AgentDDPG):
    """TD3 (Fujimoto et al. arXiv:1802.09477): twin critics, delayed actor updates and target policy smoothing."""

    # policy_noise, noise_clip: the target smoothing noise's std and clip
    # explore_noise 0.2 (the paper's 0.1) and its other values: else seeds hovered (History/UPDATE_LOG.md, 2026-11-23)
    # random_beta 0: pink lost LunarLanderContinuous seeds; white loses MountainCar (History/UPDATE_LOG.md, 2026-11-25)
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
    """Soft Actor-Critic (Haarnoja et al. arXiv:1801.01290) with twin critics and an automatically tuned
    entropy temperature alpha (arXiv:1812.05905, section 5). No actor target: SAC bootstraps from the online policy."""

    # pink warm-up: finds MountainCar's reward; pink policy: slower on LunarLander (History/UPDATE_LOG.md, 2026-11-25)
    hyper_defaults = AgentOffPolicy.hyper_defaults | dict(actor_learning_rate=None,  # None: learning_rate
                                                          alpha_init=0.2,  # initial entropy temperature
                                                          if_tune_alpha=True,  # False: alpha stays alpha_init
                                                          noise_beta=0.0,  # colour of the policy's noise (ColoredNoise)
                                                          random_beta=1.0)  # colour of the random warm-up's actions
    act_class, cri_class = ActorSAC, CriticTwin
    if_act_target = False

    def init_networks(self):
        super().init_networks()
        # alpha = exp(log_alpha) stays positive; it has its own optimizer, not a share of the actor's, or none: a fixed
        # temperature, as Spinning Up's SAC has it
        self.log_alpha = torch.tensor(np.log(self.alpha_init), dtype=torch.float32, device=self.device,
                                      requires_grad=self.if_tune_alpha)
        self.alpha_optimizer = new_adam([self.log_alpha], self.learning_rate, self.device) if self.if_tune_alpha else None
        self.target_entropy = -float(self.action_dim)  # the heuristic of arXiv:1812.05905, section 5

    def explore_action(self, state: torch.Tensor) -> torch.Tensor:
        """A sample of the policy, its standard normal draws coloured along the steps by noise_beta."""
        return self.act.get_action(state, self.standard_noise((*self.batch_shape(state), self.action_dim), self.noise_beta))

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
        """One step of the temperature toward the target entropy (arXiv:1812.05905, eq. 18), after the policy's step
        as in its Algorithm 1, on the log-probs of fresh actions of the stepped policy; none for a fixed alpha."""
        if self.alpha_optimizer is None:
            return
        with torch.no_grad():
            log_prob = self.act.get_action_log_prob(batch[0])[1]
        optimizer_step(self.alpha_optimizer, -(self.log_alpha * (log_prob + self.target_entropy)).mean())

    def extra_stats(self) -> dict[str, float]:
        return {"alpha": self.log_alpha.exp().item()}

    def extra_save_names(self) -> tuple[str, ...]:
        return ("log_alpha", "alpha_optimizer")


class AgentModSAC(AgentSAC):
    """SAC as the 2020 three-file library modified it (ElegantRL's AgentModSAC, late 2020): twin Q heads on one shared
    trunk (CriticTwinShared), an actor that steps less often while the critic is unreliable (if_actor_step), and log
    alpha kept in [-16, 2]. As there, only the actor waits: the temperature steps and the critic's target soft-updates
    after every critic step. The target keeps SAC's minimum of the two heads."""

    cri_class = CriticTwinShared
    if_delay_targets = False
    log_alpha_range = (-16.0, 2.0)  # alpha in [1e-7, 7.4]: a temperature that can neither vanish nor run away
    critic_average = 0.995  # the weight of the past in the running average of the critic's relative loss
    target_spread = torch.ones(())  # the variance of the last batch's bootstrap values (get_next_q)

    def __init__(self, net_dim: int, state_dim: int, action_dim: int, device=None, **hyperparameters):
        # [the running average of the critic's relative loss, actor steps owed], a tensor (on the host) that
        # checkpoints hold, so that a resumed run goes on with its lambda: a start at which the critic is half
        # reliable, and the first critic step followed by an actor step. Before the base's __init__, whose StateNorm setup reads every part.
        self.actor_share = torch.tensor([math.sqrt(-math.log(0.5)), 1.0], dtype=torch.float64)
        super().__init__(net_dim, state_dim, action_dim, device, **hyperparameters)

    def if_actor_step(self, obj_critic: torch.Tensor) -> bool:
        """The "reliable lambda": lambda = exp(-L^2), L a running average of the critic's relative loss, and the actor
        takes 1 / (2 - lambda) steps per critic step, from half of them (an unreliable critic) to every one (a
        reliable one). A credit that grows by that share and pays one actor step per unit spreads them evenly.
        L is each head's mean squared TD error over the variance of the batch's bootstrap values (target_spread): the
        share of the values' spread that the critic misses, whatever the reward's units. On the raw loss, lambda
        stayed near 0 on every task measured (Pendulum-v1: L = 5.6), the actor on half the steps throughout; relative,
        it reaches 1 as the critic fits (LunarLanderContinuous-v3: History/UPDATE_LOG.md, 2026-11-26). The loss is read
        on the host each step: free on the CPU, a wait per step on a GPU. Data-parallel learners average it over the
        ranks first, so that all of them step their actors alike and their all_reduce stays in step."""
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
        """SAC's soft value of next_state; its variance over the batch is the scale of the critic's loss that
        if_actor_step reads (target_spread)."""
        next_q = super().get_next_q(next_state)
        self.target_spread = next_q.var()
        return next_q

    def extra_save_names(self) -> tuple[str, ...]:
        return super().extra_save_names() + ("actor_share",)

    def extra_update(self, batch: tuple[torch.Tensor, ...]):
        super().extra_update(batch)
        with torch.no_grad():
            self.log_alpha.clamp_(*self.log_alpha_range)


class AgentTQC(AgentSAC):
    """Truncated Quantile Critics (Kuznetsov et al. arXiv:2005.04269): SAC whose critics learn distributions of the
    return (CriticQuantiles) and whose target drops the largest atoms of their pooled mixture, which controls the
    overestimation that SAC's minimum of two heads controls coarsely. The actor maximises the mean of every atom."""

    # the zoo's step size and tau for TQC on BipedalWalkerHardcore-v3 (its step size without the decay): at the family's
    # 2e-3 and 0.02 the critic diverged there (History/UPDATE_LOG.md, 2026-11-28)
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

    def get_obj_critic(self, batch: tuple[torch.Tensor, ...], weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The quantile Huber loss (kappa 1) of every critic's atoms against every kept target atom (TQC paper, section 4;
        Dabney et al. arXiv:1710.10044, eq. 10), summed over the critics as SAC sums its heads' losses; each
        transition's absolute TD error (B,) is that of the atoms' means."""
        state, action, reward, discount, next_state = batch
        with torch.no_grad():
            q_target = reward[:, None] + discount[:, None] * self.get_next_q(next_state)  # (B, K)
        quantiles = self.cri.get_quantiles(state, action)  # (B, N, M)
        fractions = (torch.arange(quantiles.shape[2], device=self.device) + 0.5) / quantiles.shape[2]  # (M,)
        shape = (*quantiles.shape, q_target.shape[1])  # (B, N, M, K): every atom against every target atom, as views
        atom, target = quantiles[..., None].expand(shape), q_target[:, None, None, :].expand(shape)
        huber = nn.functional.huber_loss(atom, target, reduction="none")  # one fused kernel: 3x faster on the CPU
        with torch.no_grad():
            asymmetry = (fractions[:, None] - (target < atom).float()).abs()  # |tau_m - 1{target - atom < 0}|
        loss = (asymmetry * huber).mean(dim=(2, 3)).sum(dim=1)  # (B,)
        td_errors = (quantiles.detach().mean(dim=(1, 2)) - q_target.mean(dim=1)).abs()
        return (loss * weights).mean(), td_errors


class SharedEncoder:
    """The mixin of AgentInterAC and AgentInterSAC: an actor and a critic that share one state encoder, the first layer
    of the actor's net (one Linear-ReLU; on images its ImageEncoder), which the critic encodes states with too
    (CriticEncoded). The critic's loss alone trains it: the actor's step freezes the critic, encoder included, and the
    actor's optimizer holds only the layers after it, as SAC+AE stops the actor's gradient at its shared encoder
    (Yarats et al. arXiv:1910.01741); so each optimizer steps one objective, never a sum of them. The targets keep
    their own slow copies of the encoder."""

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
    """DDPG whose actor and critic share one state encoder (SharedEncoder): the 2020 three-file library's
    AgentInterAC, its integrated actor-critic in DDPG's form. There the shared network stepped one objective, the
    critic's plus the actor's weighted by the reliable lambda; here the critic's loss alone trains the encoder, as in
    AgentInterSAC, so that the two optimizers never step a sum."""

    act_class, cri_class = ActorEncoded, CriticEncoded


class AgentInterSAC(SharedEncoder, AgentModSAC):
    """ModSAC whose actor and critic share one state encoder (SharedEncoder), as the 2020 three-file library's
    InterSAC shares one network between them; its critic keeps ModSAC's twin heads on one trunk (CriticTwinEncoded)."""

    act_class, cri_class = ActorSACEncoded, CriticTwinEncoded


class AgentDiscreteSAC(ActionMasks, AgentSAC):
    """SAC for discrete actions (Christodoulou arXiv:1910.07207): a categorical policy, twin Q-networks that value
    every action at once, and expectations over the policy's probabilities where continuous SAC samples an action;
    the entropy enters the policy's objective and the temperature's, not the critic's target (get_next_q)."""

    if_discrete = True
    if_image_states = True
    act_class, cri_class = ActorDiscretePPO, QNetTwin
    # random_steps 0: the initial policy is uniform, it explores
    # DQN's 8 envs, half an update per step: SAC's were slower on LunarLander-v3 (History/UPDATE_LOG.md, 2026-11-24)
    train_defaults = AgentSAC.train_defaults | dict(random_steps=0, num_envs=8, repeat_times=0.5)
    # a categorical policy samples actions, not noise
    hyper_defaults = {name: value for name, value in AgentSAC.hyper_defaults.items()
                      if name not in ("noise_beta", "random_beta")} | dict(if_action_mask=False, if_clip_reward=None)
    # of the uniform policy's entropy log(action_dim); the paper's 0.98 ran alpha away, and with the entropy kept out of
    # the target (get_next_q) 0.6 solved more LunarLander-v3 seeds than 0.3 (History/UPDATE_LOG.md, 2026-11-24)
    target_entropy_share = 0.6

    def init_networks(self):
        super().init_networks()
        self.target_entropy = self.target_entropy_share * math.log(self.action_dim)

    def explore_action(self, state: torch.Tensor) -> torch.Tensor:
        return self.act.get_action_log_prob(state)[0]

    def get_next_q(self, next_state: torch.Tensor) -> torch.Tensor:
        """Value of next_state under the policy, sum_a pi(a|s') min Q_target(s', a): the paper's eq. 10 without its
        entropy reward, as SACLite (Yu et al. arXiv:2201.12434) drops it. With it, alpha * H / (1 - gamma) paid the
        agent for not ending episodes, and on LunarLander-v3 alpha ran away (History/UPDATE_LOG.md, 2026-11-24)."""
        probs = self.act.get_log_probs(next_state).exp()  # (B, action_dim)
        return (probs * torch.minimum(*self.cri_target.get_q_values(next_state))).sum(dim=-1)

    def get_obj_actor(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """sum_a pi(a|s) (alpha log pi(a|s) - min Q(s, a)), averaged over the batch (the paper's eq. 12)."""
        log_probs = self.act.get_log_probs(batch[0])  # (B, action_dim)
        q = torch.minimum(*self.cri.get_q_values(batch[0]))  # (B, action_dim)
        return (log_probs.exp() * (self.log_alpha.exp().detach() * log_probs - q)).sum(dim=-1).mean()

    def extra_update(self, batch: tuple[torch.Tensor, ...]):
        """The temperature's step on the exact entropy of the stepped policy (the paper's eq. 11); none for a fixed
        alpha."""
        if self.alpha_optimizer is None:
            return
        with torch.no_grad():
            log_probs = self.act.get_log_probs(batch[0])
            entropy = -(log_probs.exp() * log_probs).sum(dim=-1)  # (B,)
        optimizer_step(self.alpha_optimizer, (self.log_alpha * (entropy - self.entropy_target(batch[0]))).mean())

    def entropy_target(self, state: torch.Tensor) -> torch.Tensor | float:
        """target_entropy; with action masks, the same share of the uniform entropy over each state's legal actions,
        (B,): a state with two legal actions cannot reach a share of log(action_dim), and would push alpha up forever."""
        if not self.if_action_mask:
            return self.target_entropy
        return self.target_entropy_share * state[..., -self.action_dim:].sum(dim=-1).log()


# ---- on-policy agents: the rollout (AgentOnPolicy), then VPG, A2C and PPO (continuous and discrete) ----


class AgentOnPolicy(AgentBase):
    """On-policy agents: a rollout of num_envs vectorised envs into a RolloutBuffer, GAE advantages (get_rollout_batch),
    a critic V(s) regressed onto the returns (get_obj_critic) and the policy-gradient surrogate (get_obj_actor).
    Subclasses say how they step on a rollout (update_net): VPG and TRPO step the actor once and fit the critic in
    epochs, A2C (ACKTR, A3C) steps both once, PPO in epochs of minibatches."""

    if_off_policy = False
    if_image_states = True  # ActorPPO, ActorDiscretePPO and CriticValue take images (AgentNet.mlp)
    act_class, cri_class = ActorPPO, CriticValue
    # one step on a short rollout (A2C's); agents that step more than once on it add batch_size and repeat_times
    train_defaults = dict(net_dim=64, target_step=256, num_envs=8, num_workers=1,
                          if_multiprocess=False)  # not measured faster in processes
    hyper_defaults = dict(learning_rate=1e-3, gamma=0.99, reward_scale=1.0,
                          actor_learning_rate=None,  # None: learning_rate
                          lambda_gae=0.95,  # GAE's lambda: 0 is the one-step TD error, 1 the Monte Carlo return
                          entropy_coef=0.0,  # weight of the entropy bonus; the Gaussian's learned std explores
                          if_state_norm=False,  # standardised states (AgentNet.StateNorm)
                          if_clip_reward=None)  # the rewards' signs (learned_reward); None: on ALE/ ids
    criterion = nn.MSELoss()  # regression loss of the critic onto the GAE returns
    max_grad_norm = 0.5  # gradient-norm clip of every step, as in the PPO implementations the paper's results came from
    target_kl = None  # PPO's early stop of a round's epochs (update_minibatches); a hyperparameter of the PPO family
    explained_variance = math.nan  # of the last rollout's returns by the critic (get_rollout_batch)

    def explore_action(self, state: torch.Tensor) -> torch.Tensor:
        return self.act.convert_action_for_env(self.act.get_action_log_prob(state)[0])

    @torch.no_grad()
    def explore_env(self, env, horizon: int) -> tuple[torch.Tensor, ...]:
        """Step a gymnasium vector env `horizon` times (its autoreset mode must be SAME_STEP, so that the
        final observation of an ended episode comes back in info["final_obs"]). Returns the RolloutBuffer.extend
        tensors, each (horizon, num_envs, ...), rewards multiplied by reward_scale."""
        check_same_step(self, env)
        state = env.reset()[0] if self.last_state is None else self.last_state  # (N, state_dim)
        rollout = [[] for _ in range(7)]
        for _ in range(horizon):
            state_t = self.as_state_tensor(state)
            action, log_prob = self.get_action_behaviour(state_t)
            next_state, reward, terminated, truncated, info = env.step(self.act.convert_action_for_env(action).cpu().numpy())
            self.end_step(terminated | truncated)
            for store, value in zip(rollout, (state_t, action, log_prob, self.learned_reward(reward, info), ~terminated,
                                              ~(terminated | truncated), final_observations(next_state, info)), strict=True):
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
        """What the agent keeps of which env copies' episodes the last step ended, (N,) bool: nothing here (a recurrent
        agent zeroes their memories before the next step)."""

    def get_log_prob_entropy(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """log pi(action|state) and the policy's entropy by the actor (a recurrent agent's state is a sequence's index)."""
        return self.act.get_log_prob_entropy(state, action)

    @torch.no_grad()
    def get_rollout_batch(self, buffer: RolloutBuffer) -> tuple[torch.Tensor, ...]:
        """The rollout flattened to T * N samples (states, actions, log-probs, advantages, returns): GAE advantages
        normalised per rollout, and the log-probs of the policy that acted, which the ratio divides by. In every loop
        that policy is the learner's at the round's start, so each round starts at ratio 1: the multiprocess explorer
        of an on-policy agent waits for the weights trained on its last rollout (AgentRun.explorer_process)."""
        values, next_values = self.cri(buffer.states), self.cri(buffer.next_states)  # (T, N) each
        advantages, returns = buffer.get_advantages(values, next_values, self.gamma, self.lambda_gae)
        # how much of the returns' variance the critic explained before this round's steps (1: all, 0: no more than
        # their mean would); one reduction a round
        self.explained_variance = (1 - (returns - values).var() / returns.var().clamp(min=1e-8)).item()
        states, actions = buffer.states.flatten(0, 1), buffer.actions.flatten(0, 1)  # (T * N, ...)
        log_probs = buffer.log_probs.flatten(0, 1)
        returns, advantages = returns.flatten(0, 1), advantages.flatten(0, 1)  # (T * N,), a team's (T * N, num_agents)
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)  # normalised per rollout
        # a team's log-probs are every agent's, (T * N, num_agents): each agent's ratio on its advantage (its own
        # rewards', MAPPO) or the team's (COMA's critic gives its own)
        advantages = advantages.view(*advantages.shape, *(1,) * (log_probs.dim() - advantages.dim())).expand_as(log_probs)
        return states, actions, log_probs, advantages, returns

    def get_obj_critic(self, state: torch.Tensor, ret: torch.Tensor) -> torch.Tensor:
        """The critic's regression of V(state) onto the returns."""
        return self.criterion(self.cri(state), ret)

    def extra_stats(self) -> dict[str, float]:
        """The critic's explained variance of the last rollout's returns (get_rollout_batch); the Gaussian's learned std
        (a categorical policy has none)."""
        stats = {} if math.isnan(self.explained_variance) else {"explained_variance": self.explained_variance}
        return stats | ({} if self.if_discrete else {"action_std": self.act.log_std.exp().mean().item()})

    def get_obj_actor(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """The surrogate mean(pi(a|s) / pi_old(a|s) * advantage) plus the entropy bonus, negated, pi_old the policy that
        acted: at pi = pi_old, where every loop starts a round, its gradient is the policy gradient (TRPO paper
        arXiv:1502.05477, eq. 14); TRPO also takes its value away from pi_old."""
        state, action, old_log_prob, advantage = batch
        log_prob, entropy = self.get_log_prob_entropy(state, action)
        return -((log_prob - old_log_prob).exp() * advantage + self.entropy_coef * entropy).mean()


class DiscreteOnPolicy(ActionMasks):
    """What makes an on-policy agent class a Discrete action space's: a categorical policy (AgentNet.ActorDiscretePPO)
    and an entropy bonus; masks of legal actions. Put it first among the bases: class AgentDiscreteA2C(DiscreteOnPolicy, AgentA2C). Its
    hyper_defaults are AgentOnPolicy's with discrete_defaults; a class whose base adds hyperparameters names its own."""

    if_discrete = True
    act_class = ActorDiscretePPO
    # an entropy bonus (no learned std to explore with) and masks of legal actions (ActionMasks)
    discrete_defaults = dict(entropy_coef=0.01, if_action_mask=False)
    hyper_defaults = AgentOnPolicy.hyper_defaults | discrete_defaults


class AgentVPG(AgentOnPolicy):
    """Vanilla policy gradient (Williams 1992, with a learned value baseline and GAE, as Spinning Up teaches it): one
    plain policy-gradient step on the whole rollout, then the critic fitted to the returns for repeat_times epochs in
    minibatches of batch_size, so that the next rollout's advantages rest on a converged baseline."""

    # one policy step per 512 transitions: the fastest rollout on Pendulum-v1 (History/UPDATE_LOG.md, 2026-11-23)
    train_defaults = AgentOnPolicy.train_defaults | dict(target_step=512, batch_size=256, repeat_times=8)

    def update_net(self, buffer: RolloutBuffer, batch_size: int, repeat_times: float) -> dict[str, float]:
        """The actor's step (update_actor), then repeat_times epochs of the critic's regression."""
        state, action, old_log_prob, advantage, ret = self.get_rollout_batch(buffer)
        obj_actor = self.update_actor((state, action, old_log_prob, advantage))
        obj_critic = self.fit_critic((state, ret), batch_size, repeat_times)
        return {"obj_critic": obj_critic, "obj_actor": obj_actor} | self.extra_stats()

    def fit_critic(self, batch: tuple[torch.Tensor, ...], batch_size: int, repeat_times: float) -> float:
        """repeat_times epochs of critic_step over batch (aligned tensors, a row per transition) in minibatches of
        batch_size; returns the mean objective."""
        sum_obj_critic = torch.zeros((), device=self.device)
        update_times = 0
        for minibatch in minibatches(batch, batch_size, repeat_times):
            sum_obj_critic = sum_obj_critic + self.critic_step(minibatch)
            update_times += 1
        return sum_obj_critic.item() / update_times

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
    """A2C (Mnih et al. arXiv:1602.01783, synchronous): a step of the critic and then of the actor on the whole
    rollout as one batch, on the plain policy gradient (get_obj_actor)."""

    def update_net(self, buffer: RolloutBuffer, batch_size: int | None = None, repeat_times: float | None = None
                   ) -> dict[str, float]:
        """One step on the whole rollout, whatever batch_size and repeat_times say: a second step would follow the
        plain gradient on data that the stepped policy did not act on."""
        return self.update_minibatches(buffer, buffer.add_size, 1)

    def update_minibatches(self, buffer: RolloutBuffer, batch_size: int, epochs: float) -> dict[str, float]:
        """round(epochs) epochs over the rollout in minibatches of batch_size; critic then actor each step, the round
        stopped early once the approximate KL to the policy that acted passes target_kl (None: never; Spinning Up's PPO
        stops its policy steps so; the check reads the KL on the host, a sync per minibatch where target_kl is set).
        Also each get_step_stats value at the round's first minibatch (<name>_start) and its mean over the steps taken,
        and epochs_done, the epochs taken."""
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

    def get_step_stats(self, state: torch.Tensor, action: torch.Tensor, old_log_prob: torch.Tensor
                       ) -> dict[str, torch.Tensor]:
        """Values of the policy before each actor step, () tensors by name, that update_minibatches reports (PPO: the
        clip fraction); none here."""
        return {}


class AgentDiscreteA2C(DiscreteOnPolicy, AgentA2C):
    """A2C with a categorical policy: AgentA2C's update, DiscreteOnPolicy's actor and entropy bonus."""


class AgentPPO(AgentA2C):
    """PPO (Schulman et al. arXiv:1707.06347): A2C's steps on the rollout, in several epochs of minibatches, on the
    clipped surrogate (get_obj_actor), which keeps the steps after the first near the policy that acted."""

    # processes: serial was slower and solved no more BipedalWalker-v3 seeds (History/UPDATE_LOG.md, 2026-11-25)
    train_defaults = AgentA2C.train_defaults | dict(batch_size=256, target_step=2048,
                                                    repeat_times=8,  # epochs over each rollout
                                                    if_multiprocess=True)
    hyper_defaults = AgentA2C.hyper_defaults | dict(ratio_clip=0.2,  # the policy ratio is clipped to 1 +- ratio_clip
                                                    target_kl=None)  # stop a round's epochs past this KL; None: never

    def update_net(self, buffer: RolloutBuffer, batch_size: int, repeat_times: float) -> dict[str, float]:
        """repeat_times epochs over the rollout in minibatches of batch_size (update_minibatches)."""
        return self.update_minibatches(buffer, batch_size, repeat_times)

    @torch.no_grad()
    def get_step_stats(self, state: torch.Tensor, action: torch.Tensor, old_log_prob: torch.Tensor
                       ) -> dict[str, torch.Tensor]:
        """What the field reads to debug PPO, from one forward of the policy before each actor step: clip_fraction,
        the share of samples whose ratio pi / pi_old lies outside [1 - ratio_clip, 1 + ratio_clip] (at the round's first
        minibatch 0 where the learner's own policy acted: the ratio starts at 1); approx_kl, KL(pi_old || pi) estimated
        as the mean of (ratio - 1) - log ratio, unbiased and never negative (Schulman's k3; SB3's approx_kl), which
        target_kl compares; entropy, the policy's mean entropy."""
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
    """(T, N, ...) -> (T // seq_len * N, seq_len, ...): each env copy's column cut into sequences of seq_len steps,
    sequence k * N + n the k-th of copy n."""
    return tensor.unflatten(0, (-1, seq_len)).transpose(1, 2).flatten(0, 1)


class RecurrentActing:
    """What a recurrent agent's acting shares (AgentRecurrentPPO, AgentR2D2): select_action acts in E episodes side by
    side from act_memory, each episode's (h, c) of the acting network's core (act.core), which reset_memory zeroes at
    their start and keep_memory keeps for the ones that go on (AgentRun.run_episodes); export is refused. Put it first
    among the bases: class AgentRecurrentPPO(RecurrentActing, AgentPPO)."""

    act_memory = None  # (2, E, width) the acting network's (h, c) of each episode that select_action acts in

    def acting_features(self, state: torch.Tensor) -> torch.Tensor:
        """The core's features (E, width) of state (E, state_dim), each from its episode's memory, carried on."""
        state_dims = len(self.state_dim) if is_image(self.state_dim) else 1  # (E, state_dim) or (E, *image_shape)
        if self.act_memory is None or state.dim() != 1 + state_dims or state.shape[0] != self.act_memory.shape[1]:
            raise RefusedError(f"{type(self).__name__}.select_action takes a batch (E, state_dim) of the E episodes "
                               f"that reset_memory(E) started (got shape {tuple(state.shape)}); call reset_memory(E) at "
                               f"their start, keep_memory(rows) when some end")
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
    """PPO with a GRU (or an LSTM) in front of the actor and of the critic (AgentNet.Recurrent), for partially observed
    envs (CartPoleNoVel-v1). Every PPO rule is AgentPPO's; what memory changes:
    - exploring: each env copy's actor memory goes on across steps and rounds and is zeroed before the step that
      starts its next episode, terminated or truncated alike; the rollout stores the memories it started from and the
      episode starts, so an explorer process sends them with its trajectory (AgentRun's multiprocess loop). A fresh
      agent (a new run, or a resumed one, whose checkpoint keeps no memory and whose explorer starts new episodes)
      starts every copy's memory at zero with a new episode. The critic does not act: its memory is the learner's;
    - learning: one pass over the whole rollout (no gradient), the actor's from the stored memories and the critic's
      from the one its pass over the last rollout ended with (cri_memory), gives the values, the next states' values
      and the memory at every step; each copy's column is cut into sequences of seq_len steps, each
      started from its recomputed memory, and minibatches are whole sequences (batch_size // seq_len of them), through
      which the gradient flows back (truncated back-propagation through time, as R2D2 arXiv:1810.06059 replays stored
      states; SB3's RecurrentPPO zeroes the memory at episode starts inside a sequence the same way). The first
      minibatch of a round replays the memories the policy acted with, so its ratio starts at 1;
    - evaluating: select_action acts from the memory that reset_memory zeroes per episode (AgentRun.run_episodes).
    Refused: state normalisation, masks of legal actions, torchrun and export (AgentRun says so)."""

    if_recurrent = True
    act_class, cri_class = ActorRecurrentPPO, CriticRecurrentValue
    # processes not measured faster yet; a GRU: 5/5 seeds of PendulumNoVel-v1 where the LSTM missed one, and less per
    # step (BENCHMARKS.md, "An LSTM or a GRU")
    train_defaults = AgentPPO.train_defaults | dict(if_multiprocess=False, recurrent_cell="gru")
    hyper_defaults = ({name: value for name, value in AgentPPO.hyper_defaults.items() if name != "if_state_norm"}
                      | dict(seq_len=16))  # steps of a learning sequence; must divide target_step // num_envs
    memory = None  # (rows, N, width) the actor's memory of each explored env copy (RecurrentCore)
    cri_memory = None  # (rows, N, width) the critic's memory after the last rollout it learned from, per env copy
    episode_start = None  # (N,) 1 where the next explored step starts an episode
    sequence_inputs = None  # this round's sequences (get_rollout_batch), which a minibatch's indices select

    @torch.no_grad()
    def select_action(self, state: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """state (E, state_dim) of the E episodes that reset_memory started (and keep_memory kept) -> action (E, ...),
        each from its episode's memory, which it carries on."""
        features = self.acting_features(self.as_state_tensor(state))
        action = self.act(features) if deterministic else self.act.get_action_log_prob(features)[0]
        return self.act.convert_action_for_env(action).cpu().numpy()

    def explore_env(self, env, horizon: int) -> tuple[torch.Tensor, ...]:
        """AgentOnPolicy.explore_env's tensors, then the actor's memories the rollout started from (2, N, width) and the
        episode starts (T, N) (RecurrentRolloutBuffer.extend)."""
        if self.memory is None or self.last_state is None:  # every copy starts a new episode
            self.memory = self.act.core.zero_memory(env.num_envs, self.device)
            self.episode_start = torch.ones(env.num_envs, device=self.device)
        start_memory, first_start = self.memory, self.episode_start
        rollout = super().explore_env(env, horizon)
        episode_start = torch.cat((first_start[None], 1 - rollout[5][:-1]))  # (T, N): a step after one that ended
        return (*rollout, start_memory, episode_start)

    def get_action_behaviour(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        start = self.episode_start[None]  # (1, N)
        features, memories = self.act.core(state[None], self.memory, start)
        self.memory = memories[-1]
        return self.act.get_action_log_prob(features[0])

    def end_step(self, done: np.ndarray):
        self.episode_start = torch.as_tensor(done, dtype=torch.float32, device=self.device)

    def update_net(self, buffer: RecurrentRolloutBuffer, batch_size: int, repeat_times: float) -> dict[str, float]:
        """repeat_times epochs over the rollout's sequences, batch_size // seq_len (at least one) per minibatch."""
        return self.update_minibatches(buffer, max(1, batch_size // self.seq_len), repeat_times)

    @torch.no_grad()
    def get_rollout_batch(self, buffer: RecurrentRolloutBuffer) -> tuple[torch.Tensor, ...]:
        """AgentOnPolicy.get_rollout_batch's values by sequence: (S,) sequence indices in place of states, then
        actions, log-probs, advantages and returns (S, seq_len, ...), S = T // seq_len * N; keeps the sequences'
        states, episode starts and first memories for the minibatches (sequence_inputs)."""
        num_steps, num_envs = buffer.rewards.shape
        if num_steps % self.seq_len:
            raise RefusedError(f"seq_len={self.seq_len} is not accepted with rollouts of {num_steps} steps per env copy "
                               f"(target_step // num_envs): seq_len must divide it, so that sequences are whole")
        act_memories = self.act.core(buffer.states, buffer.start_memory, buffer.episode_start)[1]  # (T + 1, 2, N, W)
        if self.cri_memory is None or self.cri_memory.shape != buffer.start_memory.shape:  # a fresh learner: a rollout
            self.cri_memory = torch.zeros_like(buffer.start_memory)  # whose copies all start episodes (explore_env)
        cri_features, cri_memories = self.cri.core(buffer.states, self.cri_memory, buffer.episode_start)
        self.cri_memory = cri_memories[-1]  # the next rollout goes on from here (the same env copies, in order)
        values = self.cri(cri_features)  # (T, N)
        # V(next_states[t]) from the memory after step t: the value of the next step's state where the episode goes
        # on, of the final observation of a truncated one; one batched step for all T * N
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
        num_sequences = self.sequence_inputs[0].shape[0]
        return (torch.arange(num_sequences, device=self.device),
                *(sequences(tensor, self.seq_len) for tensor in (buffer.actions, buffer.log_probs, advantages, returns)))

    def features(self, net: nn.Module, index: torch.Tensor, memory_column: int) -> torch.Tensor:
        """The core of net (the actor or the critic) over the sequences of index (B,) from their first memories ->
        features (B, seq_len, W), with the gradient through the whole sequence."""
        states, episode_start, *first_memory = (tensor[index] for tensor in self.sequence_inputs)
        memory = first_memory[memory_column].transpose(0, 1)  # (2, B, W)
        features = net.core(states.transpose(0, 1), memory, episode_start.transpose(0, 1))[0]  # (seq_len, B, W)
        return features.transpose(0, 1)

    def get_log_prob_entropy(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.act.get_log_prob_entropy(self.features(self.act, state, 0), action)

    def get_obj_critic(self, state: torch.Tensor, ret: torch.Tensor) -> torch.Tensor:
        return self.criterion(self.cri(self.features(self.cri, state, 1)), ret)


class AgentDiscreteRecurrentPPO(DiscreteOnPolicy, AgentRecurrentPPO):
    """Recurrent PPO with a categorical policy on the recurrent core's features (no masks of legal actions: the head sees
    features, not the states that would carry a mask)."""

    act_class = ActorDiscreteRecurrentPPO
    hyper_defaults = AgentRecurrentPPO.hyper_defaults | dict(  # the entropy bonus, no masks (see above)
        entropy_coef=DiscreteOnPolicy.discrete_defaults["entropy_coef"])


class AgentR2D2(RecurrentActing, AgentD3QN):
    """R2D2 (Kapturowski et al., ICLR 2019, "Recurrent Experience Replay in Distributed RL"), on one explorer: dueling
    double DQN with a recurrent core (AgentNet.QNetRecurrentDuel; a GRU by default where the paper has an LSTM: the same
    steps to target here, cheaper steps, BENCHMARKS.md "Memory"), learning from replayed sequences. What memory changes:
    - exploring: epsilon-greedy (AgentDQN.epsilon_greedy) from each env copy's memory, carried across steps and rounds
      and zeroed before the step that starts its next episode; every step is stored with the memory it received and
      its step in the episode, from which SequenceReplayBuffer cuts overlapping sequences, each with the memory at its
      first step ("stored state", section 3). A fresh agent (a new run, or a resumed one) starts every copy anew;
    - learning: each sampled sequence runs from its stored memory through a burn-in prefix without gradient (it only
      refreshes the stale stored state, section 3), then through its training steps, whose Q of the actions taken are
      regressed onto n-step double-Q targets in the rescaled space, h(G + discount * h^-1(Q_target(s', argmax_a
      Q(s', a)))) (value_rescale; section 2.3), the loss masked to the sequence's own episode; the replayed sequence's
      priority is eta * max + (1 - eta) * mean of its absolute TD errors (sequence_priority). h learns raw scores, so
      R2D2 clips no rewards, on Atari either (if_clip_reward False: a 7-point brick counts 7);
    - evaluating: greedy from the memory that reset_memory zeroes per episode (RecurrentActing).
    Sizes scaled down from the paper's 80 + 40 burn-in to CartPole-length tasks. The serial and multiprocess loops
    (an explorer process sends each step with the memory it received), without state normalisation or masks of legal
    actions (the core's input is the state, the head sees features); export refused. On images (MinAtar's grids,
    Atari's frames) the core's encoder is a convolutional one (AgentNet.mlp) and the sequences keep the frames' dtype,
    a default replay of them within 8 GiB (AgentRun.replay_capacity)."""

    if_image_states = True  # QNetRecurrentDuel's core encodes images (AgentNet.mlp); its sequences keep their dtype
    if_recurrent = True
    cri_class = QNetRecurrentDuel
    net_keywords = ()  # epsilon-greedy only: the recurrent Q-network has no noisy layers
    priority_eta = 0.9  # the paper's eta of the sequence priority (section 2.3)
    hyper_defaults = ({name: value for name, value in AgentD3QN.hyper_defaults.items()
                       if name not in ("if_noisy", "if_action_mask", "if_state_norm")}
                      # h rescales the values instead of reward_scale; 5-step returns as the paper's n (Table 2);
                      # DQN's 1e-3 left a seed of CartPoleNoVel-v1 below 475 (History/UPDATE_LOG.md, 2026-11-26)
                      # h is there so that raw scores can be learned: no clip (Pohlen et al. arXiv:1805.11593)
                      | dict(reward_scale=1.0, n_step=5, learning_rate=5e-4, if_clip_reward=False,
                             seq_len=20,  # training steps of a replayed sequence (paper: 80)
                             burn_in=10))  # steps before them that only refresh the stored memory (paper: 40)
    # batch_size and max_memo count sequences; if_per and her_k are not its: its replay is always prioritized sequences
    # a GRU: the LSTM's steps to target on CartPoleNoVel-v1 at 1.29x less per gradient step (BENCHMARKS.md, "Memory")
    train_defaults = ({name: value for name, value in AgentD3QN.train_defaults.items()
                       if name not in ("if_per", "her_k")} | dict(batch_size=32, max_memo=2 ** 14, repeat_times=1 / 32,
                                                                 recurrent_cell="gru"))
    memory = None  # (rows, N, width) the memory of each explored env copy (RecurrentCore)
    episode_steps = None  # (N,) the next explored step's index in its episode, 0 where it starts one

    @torch.no_grad()
    def select_action(self, state: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """state (E, state_dim) of the E episodes that reset_memory started -> action (E,): greedy in Q, from each
        episode's memory (RecurrentActing.acting_features); exploring: epsilon-greedy."""
        state = self.as_state_tensor(state)
        action = self.cri(self.acting_features(state)).argmax(dim=-1)
        return (action if deterministic else self.epsilon_greedy(action, state)).cpu().numpy()

    @torch.no_grad()
    def explore_vector_env(self, env, horizon: int, if_random: bool = False) -> tuple[torch.Tensor, ...]:
        """Step the vector env's N copies horizon times, each from its memory. Returns the T * N steps in step-then-env
        order: states, actions (T * N, 1), rewards times reward_scale, not_terminated, not_done, next_states (an ended
        episode's final observation), the step's index in its episode and the memory it received (T * N, 2, width),
        for SequenceReplayBuffer.extend."""
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
        """net's core over a batch of B sequences from their stored memories: the burn-in steps without gradient, which
        only refresh the memory (paper section 3), then the training steps -> their features (seq_len, B, width) and
        the memory after each of them (seq_len, 2, B, width)."""
        states, episode_start, memory = batch[0].transpose(0, 1), batch[6].transpose(0, 1), batch[8].transpose(0, 1)
        if self.burn_in:
            with torch.no_grad():
                memory = net.core(states[:self.burn_in], memory, episode_start[:self.burn_in])[1][-1]  # (2, B, width)
        features, memories = net.core(states[self.burn_in:], memory, episode_start[self.burn_in:])
        return features, memories[1:]

    def get_obj_critic(self, batch: tuple[torch.Tensor, ...], weights: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """The online network's Q of the actions taken at the training steps, regressed onto h(G + discount *
        h^-1(next_q)) (G the n-step return, next_q get_next_q's), each step's loss masked to the sequence's episode and
        averaged over its unmasked steps, times the sequence's importance weight (B,); also returns each sequence's
        priority (sequence_priority of the absolute TD errors in the rescaled space, as the paper's)."""
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
        """Double DQN's bootstrap value (arXiv:1509.06461, eq. 4) of each training step's bootstrap state (seq_len, B,
        state_dim): the online network picks the action and the target network values it, each from its own memory
        after the step last (seq_len, B) (an index among the training steps), one batched step for them all ->
        (seq_len, B)."""
        next_action = self.cri(self.next_features(self.cri, boot_states, last, memories)).argmax(dim=-1, keepdim=True)
        next_q = self.cri_target(self.next_features(self.cri_target, boot_states, last, target_memories))
        return next_q.gather(-1, next_action).squeeze(-1)

    @staticmethod
    def next_features(net: nn.Module, boot_states: torch.Tensor, last: torch.Tensor, memories: torch.Tensor
                      ) -> torch.Tensor:
        """net's features (seq_len, B, width) of boot_states, each from memories (seq_len, 2, B, width) after its step
        last (seq_len, B): one step of the core for all seq_len * B."""
        columns = torch.arange(last.shape[1], device=last.device)
        after = memories.permute(0, 2, 1, 3)[last, columns]  # (seq_len, B, 2, width)
        no_start = torch.zeros((1, last.numel()), device=last.device)
        features = net.core(boot_states.flatten(0, 1)[None], after.flatten(0, 1).transpose(0, 1), no_start)[0]
        return features[0].unflatten(0, last.shape)

    @torch.no_grad()
    def batch_mean_q(self, batch: tuple[torch.Tensor, ...]) -> float:
        """The online network's mean Q of the actions taken at the unmasked training steps of the call's last batch, in
        the env's reward units (h^-1 of the rescaled values, divided by reward_scale)."""
        actions, mask = (tensor[:, self.burn_in:].transpose(0, 1) for tensor in (batch[1], batch[7]))
        q = self.cri(self.unroll(self.cri, batch)[0]).gather(-1, actions[..., None]).squeeze(-1)  # (seq_len, B)
        return (value_rescale_inverse(q)[mask.bool()].mean() / self.reward_scale).item()


# ---- asynchronous advantage actor-critic (A3C) ----


class SharedStep:
    """The optimizer of an A3C worker's own copy of a network: its step hands the copy's gradients to the shared
    network and steps that with the shared optimizer (A3C paper, Algorithm S3: gradients of the thread's theta',
    applied to the shared theta asynchronously, without locks). param_groups are the copy's, so that optimizer_step
    clips the copy's gradients."""

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
    """A3C (Mnih et al. arXiv:1602.01783, Algorithm S3): num_workers processes (AgentRun.train_async), each with its
    own env(s) and copy of the networks, step one shared set of networks in shared memory with A2C's gradients of
    their own rollouts, asynchronously and without locks; the optimizer's statistics are shared as well (the paper's
    shared RMSProp, section 4; Adam here, as every agent's). A worker's copy takes the shared weights after each step."""

    if_async = True
    if_data_parallel = False  # its workers already share one model
    train_defaults = AgentA2C.train_defaults | dict(num_workers=2, if_multiprocess=True)  # its workers are processes
    # no if_state_norm: the workers' explored states would have to merge into shared statistics as well
    hyper_defaults = {name: value for name, value in AgentA2C.hyper_defaults.items() if name != "if_state_norm"}
    shared = None  # the shared agent of a worker (attach); None: this agent steps its own networks, as A2C does

    def share(self):
        """Make this agent the shared one: its networks and its optimizers' statistics in shared memory. Statistics
        not there yet (a new run's) are created by a step with zero gradients, in which Adam moves nothing, and its
        step count set back to 0, so that the first real step is bias-corrected as the first."""
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
        """Make this agent a worker of `shared`: its optimizers step the shared networks, its networks start as theirs."""
        self.shared = shared
        self.act_optimizer = SharedStep(self.act, shared.act, shared.act_optimizer)
        self.cri_optimizer = SharedStep(self.cri, shared.cri, shared.cri_optimizer)
        self.pull()

    def pull(self):
        """theta' <- theta: this worker's copy takes the shared weights (load_state_dict copies them)."""
        self.act.load_state_dict(self.shared.act.state_dict())
        self.cri.load_state_dict(self.shared.cri.state_dict())

    def update_net(self, buffer: RolloutBuffer, batch_size: int | None = None, repeat_times: float | None = None
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
    """v -> (F + damping I) v, F the Fisher information of the policy at the current parameters. mean_kl is the
    mean KL(pi_old || pi_theta) evaluated at theta = theta_old, whose Hessian there is F (TRPO paper, arXiv:1502.05477,
    Appendix C.1): the product is the gradient of (grad KL . v), two backward passes, no matrix. Damping keeps the
    system well conditioned where F is nearly singular (Martens 2010)."""
    grad_kl = flat_grad(mean_kl, params, create_graph=True)
    return lambda vector: flat_grad(grad_kl @ vector, params, retain_graph=True) + damping * vector


def conjugate_gradient(matrix_vector_product: Callable[[torch.Tensor], torch.Tensor], b: torch.Tensor,
                       iterations: int = 10, residual_tol: float = 1e-10) -> torch.Tensor:
    """x with A x = b for a symmetric positive definite A known only through v -> A v (TRPO paper, Appendix C:
    the natural gradient F^-1 g in `iterations` products, never forming or inverting F); exact after n
    iterations for an n x n system, up to rounding."""
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
    """Move params to theta + backtrack_coef^j * full_step for the first j = 0, 1, ... at which evaluate() ->
    (surrogate, mean KL from theta) has KL <= max_kl and a surrogate above theta's (TRPO paper, Appendix C: the
    quadratic model of the KL may be wrong far from theta). Returns j, or None with params left at theta."""
    old_params = parameters_to_vector(params)
    old_surrogate = evaluate()[0]
    for j in range(backtrack_iters):
        vector_to_parameters(old_params + backtrack_coef ** j * full_step, params)
        surrogate, kl = evaluate()
        if kl <= max_kl and surrogate > old_surrogate:
            return j
    vector_to_parameters(old_params, params)
    return None


class AgentTRPO(AgentVPG):
    """TRPO (Schulman et al. arXiv:1502.05477): VPG's loop with the policy step along the natural gradient, scaled
    to the edge of the trust region mean KL(pi_old || pi_new) <= max_kl and shortened until it stays inside and
    improves the surrogate (the paper's Appendix C). The critic is fitted by regression, as VPG's."""

    # delta, the trust region's radius in mean KL; no actor_learning_rate: a line search steps the actor
    hyper_defaults = {name: value for name, value in AgentVPG.hyper_defaults.items()
                      if name != "actor_learning_rate"} | dict(max_kl=0.01)
    # a step bounded in KL wants a large batch: 1024 was slower on Pendulum-v1 (History/UPDATE_LOG.md, 2026-11-23)
    train_defaults = AgentVPG.train_defaults | dict(target_step=2048)
    damping = 0.1  # added to the Fisher matrix's diagonal (fisher_vector_product)
    cg_iterations = 10  # conjugate-gradient products per step, the paper's (Appendix C)
    if_act_optimizer = False  # the actor moves by update_actor's line search; learning_rate is the critic's
    if_data_parallel = False  # the line search's steps are not gradients the ranks could average

    def update_actor(self, batch: tuple[torch.Tensor, ...]) -> float:
        """x = F^-1 g by conjugate gradient, the step sqrt(2 max_kl / x.Fx) x, then the line search; returns the
        objective (the negated surrogate) where the actor ends."""
        state = batch[0]
        params = list(self.act.parameters())
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
    """TRPO with a categorical policy: AgentTRPO's update, AgentDiscreteVPG's actor. Its hyper_defaults are
    AgentTRPO's, entropy_coef 0 among them: the paper's surrogate has no entropy bonus, and none was needed."""

    hyper_defaults = AgentTRPO.hyper_defaults | dict(if_action_mask=False)


# ---- Kronecker-factored natural gradient (ACKTR) ----


class KFAC(torch.optim.Optimizer):
    """Natural-gradient steps for a network of nn.Linear layers, the Fisher approximated by Kronecker factors
    (K-FAC, Martens and Grosse arXiv:1503.05671), with ACKTR's trust-region step size (Wu et al. arXiv:1708.05144).

    For a layer s = W a (a: its input with a 1 appended for the bias, W: [weight | bias]) the gradient of one
    sample is g a^T, g = dloss/ds, and its Fisher block E[vec(g a^T) vec(g a^T)^T] is approximated by G (x) A,
    A = E[a a^T], G = E[g g^T] (K-FAC section 3), each a running average over updates (section 5). Samples
    of g come from the model's own output distribution (update_factors), as the Fisher asks (section 5). With the
    eigendecompositions A = Q_A diag(d_A) Q_A^T and G = Q_G diag(d_G) Q_G^T, the damped inverse is exact, as
    G (x) A has the eigenvectors q_g (x) q_a with eigenvalues d_g d_a:
    (G (x) A + damping I)^-1 vec(V) = vec(Q_G [(Q_G^T V Q_A) / (d_G d_A^T + damping)] Q_A^T).
    Parameters held by the network outside nn.Linear layers (a Gaussian policy's log std) have no factors and take
    the plain gradient, as the OpenAI baselines implementation of ACKTR does for the ops it cannot factor.

    step() moves along the preconditioned gradient x = F^-1 g by eta = min(lr, sqrt(2 kl_clip / x^T F x))
    (ACKTR section 3.2), so that the quadratic model of the KL of each step, eta^2 x^T F x / 2, stays within
    kl_clip; x^T F x = x^T g."""

    def __init__(self, net: nn.Module, lr: float, kl_clip: float, damping: float, stat_decay: float):
        self.layers = [module for module in net.modules() if type(module) is nn.Linear]
        for name, module in net.named_modules():
            if module is not net and type(module) is not nn.Linear and list(module.parameters(recurse=False)):
                raise RefusedError(f"K-FAC takes networks of nn.Linear layers and parameter-free activations; "
                                   f"{type(net).__name__}.{name} is a {type(module).__name__} (ACKTR accepts an actor and "
                                   f"a critic of nn.Linear layers, such as AgentNet's build_mlp)")
        super().__init__(net.parameters(), dict(lr=lr, kl_clip=kl_clip, damping=damping, stat_decay=stat_decay))

    def record_layer(self, layer: nn.Linear, inputs: tuple[torch.Tensor], output: torch.Tensor):
        """A forward hook while update_factors runs: keep the layer's input and, on the backward pass, its output's
        gradient."""
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
    """ACKTR (Wu et al. arXiv:1708.05144): A2C's loop with the actor and the critic stepped along their natural
    gradients (KFAC), each step bounded by a trust region. The actor's Fisher is that of its action distribution;
    the critic's that of a Gaussian of unit variance around V(s) (ACKTR section 3.1)."""

    if_image_states = False  # KFAC has Kronecker factors for nn.Linear layers only, none for convolutions
    hyper_defaults = AgentA2C.hyper_defaults | dict(learning_rate=0.25,  # eta_max, the largest step along F^-1 g
                                                    kl_clip=0.001,  # delta, the trust region of each step in KL
                                                    damping=0.01)  # added to the Kronecker-factored Fisher
    # TRPO's batch: A2C's 256 was slower on Pendulum-v1 and left a seed unsolved (History/UPDATE_LOG.md, 2026-11-24)
    train_defaults = AgentA2C.train_defaults | dict(target_step=2048)
    max_grad_norm = None  # the trust region bounds the step; a clip before it would rescale the natural gradient
    if_data_parallel = False  # each rank's Kronecker factors would precondition the mean gradient differently
    stat_decay = 0.99  # the factors' running average, the baselines implementation's

    def new_optimizer(self, net: nn.Module, learning_rate: float) -> KFAC:
        return KFAC(net, learning_rate, self.kl_clip, self.damping, self.stat_decay)

    def update_net(self, buffer: RolloutBuffer, batch_size: int | None = None, repeat_times: float | None = None
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
    train_defaults = AgentACKTR.train_defaults | dict(target_step=AgentA2C.train_defaults["target_step"])


# ---- off-policy actor-critic with experience replay (ACER) ----


def retrace_targets(rewards: torch.Tensor, not_terminated: torch.Tensor, not_done: torch.Tensor,
                    next_values: torch.Tensor, q_taken: torch.Tensor, traces: torch.Tensor, gamma: float
                    ) -> torch.Tensor:
    """Retrace targets of segments (T, N) each (Munos et al. arXiv:1606.02647; ACER paper, section 3.1 and Algorithm 2):
    Q_ret[t] = r[t] + gamma * not_terminated[t] * (V(next_state[t]) + not_done[t] * traces[t+1] * (Q_ret[t+1] -
    Q(s[t+1], a[t+1]))), traces = min(1, pi / mu) of the actions taken. The correction stops at every episode end
    (truncation bootstraps from the final observation's value, termination from nothing) and at the segment's end."""
    q_ret = torch.empty_like(rewards)
    correction = torch.zeros_like(rewards[0])  # traces[t+1] * (Q_ret[t+1] - Q[t+1]); nothing past the segment
    for t in reversed(range(rewards.shape[0])):
        q_ret[t] = rewards[t] + gamma * not_terminated[t] * (next_values[t] + not_done[t] * correction)
        correction = traces[t] * (q_ret[t] - q_taken[t])
    return q_ret


def trust_region_step(g: torch.Tensor, k: torch.Tensor, delta: float) -> torch.Tensor:
    """argmin_z |g - z|^2 / 2 subject to k.z <= delta, row by row (..., dim): z = g - max(0, (k.g - delta) / |k|^2) k
    (ACER paper, section 3.3): the gradient g, less its part along k (the gradient of the KL to the average policy) that
    would move the linearised KL by more than delta."""
    excess = ((k * g).sum(dim=-1, keepdim=True) - delta).clamp(min=0)
    return g - excess / k.pow(2).sum(dim=-1, keepdim=True).clamp(min=1e-12) * k


class AgentACER(DiscreteOnPolicy, AgentOnPolicy):
    """ACER for discrete actions (Wang et al. arXiv:1611.01224): a categorical actor, a critic Q(s, .), and an
    average policy (the actor's soft-updated copy). Each update learns from the new rollout, then from repeat_times
    rollouts replayed from a SegmentReplayBuffer: the critic regresses Q(s, a) on Retrace targets, the actor follows
    the truncated importance-weighted policy gradient with bias correction (section 3.2) projected into the trust region
    around the average policy (trust_region_step)."""

    if_image_states = False  # not yet tried on images
    if_act_target = True  # the average policy network
    cri_class = QNet
    train_defaults = AgentOnPolicy.train_defaults | dict(repeat_times=4,  # rollouts replayed per new one
                                                         max_memo=50_000,  # the paper's replay, in transitions
                                                         if_save_buffer=True)  # checkpoints hold the replayed rollouts
    # reward_scale 0.1 (DQN's): a Q critic moves slowly toward returns up to 100 (History/UPDATE_LOG.md, 2026-11-24)
    hyper_defaults = dict(learning_rate=1e-3, gamma=0.99, reward_scale=0.1, entropy_coef=0.01,
                          soft_update_tau=0.01,  # 1 - alpha: the average policy's step toward the actor
                          rho_clip=10.0,  # c, the truncation of the importance weight in the policy gradient
                          kl_clip=1.0,  # delta, the trust region of the linearised KL(average || new) per state
                          if_state_norm=False)

    def get_action_behaviour(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A sampled action (N,) and the log-probs of every action (N, action_dim), for the importance weights of
        every action in the bias correction."""
        return self.act.get_action_log_prob(state)[0], self.act.get_log_probs(state)

    def update_net(self, buffer: SegmentReplayBuffer, batch_size: int | None = None, repeat_times: float = 4
                   ) -> dict[str, float]:
        """The new rollout on-policy, then round(repeat_times) replayed ones (the paper's replay ratio)."""
        rollouts = [buffer.rollouts[-1]] + [buffer.sample() for _ in range(round(repeat_times))]
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
    """What makes an agent class a team's: num_agents. Its states are the team's, every agent's observation
    (state_dim long) side by side, (num_agents * state_dim,); its actions every agent's, (num_agents,) integers or
    (num_agents * action_dim,) in [-1, 1]. Its reward (valued_reward) is the team's, the sum of the agents' rewards
    (common_reward, EPyMARL's convention), or, for an agent with a value per agent (if_agent_rewards: MADDPG, MAPPO)
    and common_reward=False, each agent's own: on a competitive or mixed env (simple_tag_v3) a sum would train every
    agent, the prey too, to get the prey caught. Put it first among the bases:
    class AgentQMIX(MultiAgent, AgentDoubleDQN)."""

    if_multi_agent = True
    net_keywords = ("num_agents",)  # a team's networks take its size

    def __init__(self, net_dim: int, state_dim: int, action_dim: int, device=None, *, num_agents: int, **hyperparameters):
        self.num_agents = num_agents  # before the networks are built
        super().__init__(net_dim, state_dim, action_dim, device, **hyperparameters)
        self.check_common_reward(self.common_reward)

    @classmethod
    def check_common_reward(cls, common_reward: bool):
        if not (common_reward or cls.if_agent_rewards):
            raise RefusedError(f"common_reward=False is not accepted: {cls.__name__} learns one value of the team's common "
                               f"reward, the sum of the agents' rewards (EPyMARL's common_reward); AgentMADDPG, "
                               f"AgentDiscreteMADDPG, AgentDiscreteIDDPG, AgentMAPPO and AgentDiscreteMAPPO learn from each "
                               f"agent's own reward")

    def random_action(self, num_envs: int | None = None, state: np.ndarray | None = None) -> np.ndarray:
        """Every agent's uniformly random action: (..., num_agents) indices, or (..., num_agents * action_dim)."""
        if not self.if_discrete:
            return super().random_action(num_envs, state)
        return torch.randint(self.action_dim, (() if num_envs is None else (num_envs,)) + (self.num_agents,)).numpy()

    def standard_noise(self, shape: tuple[int, ...], beta: float) -> torch.Tensor:
        """Noise for every agent's action side by side: (..., num_agents * action_dim) for (..., action_dim)."""
        return super().standard_noise((*shape[:-1], self.num_agents * shape[-1]), beta)

    def learned_reward(self, reward, info: dict):
        """The team's reward, the sum of its agents' (the env's: extras.teams.MultiAgentEnv); for an agent with a value
        per agent (if_agent_rewards), every agent's (agent_rewards)."""
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
    """An agent's hyperparameters as a team's: no if_state_norm (a team's states mix every agent's observations; their
    statistics are not one agent's), no if_action_mask (a team's env gives no mask per agent), and common_reward: True
    learns from the sum of the agents' rewards, False from each agent's own (MultiAgent)."""
    return ({name: value for name, value in defaults.items() if name not in ("if_state_norm", "if_action_mask")}
            | dict(common_reward=common_reward))


class AgentQMIX(MultiAgent, AgentDoubleDQN):
    """QMIX (Rashid et al. arXiv:1803.11485): the agents' shared network gives each agent's q-values, a monotonic
    mixer of the team's state joins the chosen ones into Q_tot (AgentNet.QMixNet), and Q_tot learns the team's
    reward with double-Q targets: the online agents pick every next action, the target network values the joint one.
    Each agent acts greedily on its own q-values (epsilon-greedy while exploring), which monotonicity makes the
    team's greedy joint action."""

    cri_class = QMixNet
    net_keywords = ("if_noisy", "num_agents")
    # half DQN's learning rate, a quarter of its tau and an eighth of its updates (in batches four times as large):
    # with DQN's, Q_tot on simple_spread_v3 rose without bound (History/UPDATE_LOG.md, 2026-11-25)
    hyper_defaults = team_defaults(AgentDoubleDQN.hyper_defaults, True) | dict(learning_rate=5e-4, soft_update_tau=0.005)
    train_defaults = AgentDoubleDQN.train_defaults | dict(batch_size=256, repeat_times=0.125)
    get_q_heads = AgentOffPolicy.get_q_heads  # Q_tot of the joint action taken (QMixNet.get_q_heads)

    def get_next_q(self, next_state: torch.Tensor) -> torch.Tensor:
        """Q_tot_target(s', argmax of each agent's online q(o_i', .)), (B,)."""
        next_action = self.cri(next_state).argmax(dim=-1)  # (B, num_agents)
        return self.cri_target.get_q_heads(next_state, next_action)[0]


class AgentVDN(AgentQMIX):
    """VDN (Sunehag et al. arXiv:1706.05296): QMIX with the agents' q-values summed instead of mixed."""

    cri_class = VDNNet


class AgentMADDPG(MultiAgent, AgentDDPG):
    """MADDPG (Lowe et al. arXiv:1706.02275) for continuous actions: decentralised actors that see their own
    observation (AgentNet.TeamActor), each with a centralised critic on every observation and action (TeamCritic)
    that regresses onto its own target r_i + gamma * Q_i'(s', mu'(s')) (eq. 6), r_i agent i's own reward (MultiAgent);
    DDPG's exploration and warm-up."""

    if_agent_rewards = True
    # a white warm-up: the team rows (BENCHMARKS.md) were measured with it, and the particle envs reward no momentum
    hyper_defaults = team_defaults(AgentDDPG.hyper_defaults, False) | dict(random_beta=0.0)
    # QMIX's: an update of batch 256 per 8 steps (the paper's: one of 1024 per 100 steps)
    # DDPG's, one of 128 per step, was slower on simple_spread_v3 and scored lower (History/UPDATE_LOG.md, 2026-11-25)
    train_defaults = AgentDDPG.train_defaults | dict(batch_size=256, repeat_times=0.125)
    act_class, cri_class = TeamActor, TeamCritic

    def get_obj_critic(self, batch: tuple[torch.Tensor, ...], weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Critic i regresses onto agent i's reward: the batch's rewards (B, num_agents), as (num_agents, B) beside the
        critics' Q (TeamCritic)."""
        state, action, reward, discount, next_state = batch
        return super().get_obj_critic((state, action, reward.T, discount, next_state), weights)

    def get_obj_actor(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Agent i's actor ascends Q_i(s, a_1, ..., mu_i(o_i), ..., a_n), the other agents' actions as replayed
        (eq. 5)."""
        state, action = batch[:2]
        own, replayed = self.get_team_actions(state, action)  # (B, num_agents, action_dim) each
        if_own = torch.eye(self.num_agents, dtype=torch.bool, device=self.device)[:, None, :, None]  # (n, 1, n, 1)
        joint = torch.where(if_own, own.unsqueeze(0), replayed.unsqueeze(0)).flatten(-2)  # (n, B, n * action_dim)
        return -self.cri(state, joint).mean()

    def get_team_actions(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Every agent's action by its actor now (differentiable) and as replayed, (B, num_agents, action_dim) each."""
        return self.act(state).unflatten(-1, (self.num_agents, -1)), action.unflatten(-1, (self.num_agents, -1))


class AgentDiscreteMADDPG(AgentMADDPG):
    """MADDPG for discrete actions: each actor samples from a categorical policy while exploring and in the critics'
    target, and acts greedily in evaluation; its gradient passes through a straight-through Gumbel-softmax sample
    (one-hot forward, softmax backward; Jang et al. arXiv:1611.01144). The paper's code (openai/maddpg) fed the critics
    the relaxed (soft) Gumbel-softmax sample itself and added 1e-3 times the mean squared logit to the actor's loss;
    the critics here take one-hot actions (AgentNet.TeamCriticDiscrete), the actions the env receives, and the actor's
    loss keeps that penalty (get_obj_actor)."""

    if_discrete = True
    logits_penalty = 1e-3  # weight of the mean squared logit in the actor's loss, the paper's code's
    hyper_defaults = {name: value for name, value in AgentMADDPG.hyper_defaults.items()
                      if name not in ("explore_noise", "noise_beta", "random_beta")}  # it samples its policy
    act_class, cri_class = TeamActorDiscrete, TeamCriticDiscrete

    def explore_action(self, state: torch.Tensor) -> torch.Tensor:
        return torch.distributions.Categorical(logits=self.act.get_logits(state)).sample()  # (..., num_agents)

    def get_next_q(self, next_state: torch.Tensor) -> torch.Tensor:
        """Every critic's target Q of a joint action sampled from the target actors: the critics value the sampling
        policy that acts and that the actors' objective grades, not its greedy action (eq. 6)."""
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
    """Independent DDPG, the MADDPG paper's DDPG baseline (Lowe et al. arXiv:1706.02275, section 5 and Figure 3):
    each agent a DDPG learner of its own reward with a decentralised critic Q_i(o_i, a_i) on its own observation and
    action (AgentNet.TeamCriticLocalDiscrete); discrete MADDPG's actors, exploration and settings otherwise, as the
    paper gave both Gumbel-softmax actors, so that the two differ only in what the critics see."""

    cri_class = TeamCriticLocalDiscrete


class AgentQTRAN(AgentQMIX):
    """QTRAN-base (Son et al. arXiv:1905.05408): QMIX's agents act greedily on their q_i, but no mixer constrains the
    team's Q: an unconstrained Q_jt(s, a) learns the TD target (AgentNet.QTranNet), and the q_i and V_jt(s) are pulled to
    factorise it, sum_i q_i(a_i) - Q_jt(s, a) + V_jt(s) = 0 at the greedy joint action (L_opt) and >= 0 at the taken
    one (L_nopt), Q_jt held fixed in both (Theorem 1, eq. 4-6). It can represent payoffs that QMIX's monotonic
    mixer cannot."""

    cri_class = QTranNet
    hyper_defaults = AgentQMIX.hyper_defaults | dict(lambda_opt=1.0, lambda_nopt=1.0)  # the paper's weights of L_opt, L_nopt

    def get_obj_critic(self, batch: tuple[torch.Tensor, ...], weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """L_td of Q_jt (its TD errors set priorities) + lambda_opt L_opt + lambda_nopt L_nopt."""
        obj_td, td_errors = super().get_obj_critic(batch, weights)
        state, action = batch[:2]
        agent_q = self.cri(state)  # (B, num_agents, action_dim)
        greedy_q, greedy_action = agent_q.max(dim=-1)  # (B, num_agents) each
        with torch.no_grad():
            joint_greedy, joint_taken = (self.cri.get_q_heads(state, a)[0] for a in (greedy_action, action))  # (B,) each
        value = self.cri.get_value(state)
        gap_opt = greedy_q.sum(dim=-1) - joint_greedy + value
        gap_nopt = agent_q.gather(-1, action.unsqueeze(-1)).squeeze(-1).sum(dim=-1) - joint_taken + value
        obj_opt, obj_nopt = (gap_opt.square() * weights).mean(), (gap_nopt.clamp(max=0).square() * weights).mean()
        return obj_td + self.lambda_opt * obj_opt + self.lambda_nopt * obj_nopt, td_errors


class AgentMAPPO(MultiAgent, AgentPPO):
    """MAPPO (Yu et al. arXiv:2103.01955) for continuous actions: PPO for a team, one policy shared by every agent with
    its index as input (AgentNet.TeamActorPPO), each agent's own clipped ratio on its own advantage, from a centralised
    value of the team's state for each agent, V_i(s) (TeamCriticValue), of its own rewards (MultiAgent; the paper's
    agent-specific global state, section 4.3, where their rewards differ), which learns standardised returns: value
    normalisation, which the paper finds matters (section 4.1)."""

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
    """COMA (Foerster et al. arXiv:1705.08926): actor-critic for a team with a shared categorical policy
    (TeamActorDiscretePPO) and a centralised critic of Q(s, (a_-i, .)) (AgentNet.COMACritic), which learns TD(lambda)
    returns of its target network; each agent's policy gradient weighs log pi_i(a_i) by its counterfactual advantage
    A_i = Q(s, a) - sum_a' pi_i(a') Q(s, (a_-i, a')) (eq. 4), which credits the agent alone for the team's reward."""

    if_discrete = True
    act_class, cri_class = TeamActorDiscretePPO, COMACritic
    if_cri_target = True
    hyper_defaults = team_defaults(DiscreteOnPolicy.hyper_defaults, True) | dict(soft_update_tau=0.01)

    def update_net(self, buffer: RolloutBuffer, batch_size: int, repeat_times: float) -> dict[str, float]:
        """The critic first (fit_critic on TD(lambda) returns), then one step of the actor on the whole rollout with
        the stepped critic's advantages (Algorithm 1)."""
        with torch.no_grad():
            q_taken = self.cri_target.get_q_taken(buffer.states, buffer.actions).mean(dim=-1)  # (T, N): every row's Q(s, a)
            next_action = self.act.get_action_log_prob(buffer.next_states)[0]  # where the rollout holds no next action
            next_q = self.cri_target.get_q_taken(buffer.next_states, next_action).mean(dim=-1)
            next_q[:-1] = torch.where(buffer.not_done[:-1].bool(), q_taken[1:], next_q[:-1])  # the next one taken
            returns = buffer.get_advantages(q_taken, next_q, self.gamma, self.lambda_gae)[1]  # TD(lambda) returns
        state, action = buffer.states.flatten(0, 1), buffer.actions.flatten(0, 1)
        obj_critic = self.fit_critic((state, action, returns.flatten()), batch_size, repeat_times)
        obj_actor = self.update_actor((state, action, buffer.log_probs.flatten(0, 1), self.get_advantage(state, action)))
        return {"obj_critic": obj_critic, "obj_actor": obj_actor} | self.extra_stats()

    def get_obj_critic(self, state: torch.Tensor, action: torch.Tensor, ret: torch.Tensor) -> torch.Tensor:
        """Every agent's row regresses Q(s, a) of the joint action taken onto the return (its minibatches carry the
        action: update_net)."""
        q = self.cri.get_q_taken(state, action)  # (B, num_agents)
        return self.criterion(q, ret.unsqueeze(-1).expand_as(q))

    def critic_step(self, minibatch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        obj_critic = super().critic_step(minibatch)
        soft_update(self.cri_target, self.cri, self.soft_update_tau)  # the target follows every critic step
        return obj_critic

    @torch.no_grad()
    def get_advantage(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Every agent's counterfactual advantage, A_i = Q(s, a) - sum_a' pi_i(a'|o_i) Q(s, (a_-i, a')), each Q from
        agent i's row of the critic, (B, num_agents)."""
        q = self.cri(state, action)  # (B, num_agents, action_dim)
        baseline = (self.act.get_log_probs(state).exp() * q).sum(dim=-1)
        return q.gather(-1, action.unsqueeze(-1)).squeeze(-1) - baseline

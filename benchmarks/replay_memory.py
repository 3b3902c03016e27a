"""Resident memory of a replay buffer of Atari transitions (issue 42): (4, 84, 84) uint8 stacks stored whole, two a
transition (ReplayBuffer), against each frame stored once (FrameStackReplayBuffer). Fills a fresh buffer of `size`
transitions with Atari-shaped stacks of one env copy (episodes of `episode` steps, each a reset stack of one frame four
times, then one new frame a step) and prints the process's resident memory (VmRSS) before and after, and the bytes
per transition of the buffer's tensors. One buffer per process: the numbers are that buffer's alone.

    python benchmarks/replay_memory.py buffer=frames size=1048576
    python benchmarks/replay_memory.py buffer=plain size=131072   # a plain 1M-transition buffer needs 59 GB
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from AgentZoo import FrameStackReplayBuffer, ReplayBuffer  # noqa: E402


def resident_gib() -> float:
    with open("/proc/self/status") as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return kib / 2 ** 20


def atari_like_rounds(size: int, episode: int, horizon: int = 4096):
    """Rounds of `horizon` transitions (states, actions, rewards, discounts, next_states) of one env copy."""
    generator = torch.Generator().manual_seed(0)
    frames = torch.randint(0, 256, (episode + 1, 84, 84), dtype=torch.uint8, generator=generator)  # one episode's
    stacks = torch.stack([frames[torch.arange(t - 3, t + 1).clamp(min=0)] for t in range(episode + 1)])
    for start in range(0, size, horizon):
        t = torch.arange(start, min(start + horizon, size)) % episode  # each step's place in its episode
        ends = t == episode - 1
        yield (stacks[t], torch.zeros(t.shape[0], 1, dtype=torch.long), torch.zeros(t.shape[0]),
               torch.where(ends, 0.0, 0.99), stacks[t + 1])


def main(buffer: str = "frames", size: str = str(2 ** 20), episode: str = "1000"):
    size, episode = int(size), int(episode)
    before = resident_gib()
    if buffer == "frames":
        replay = FrameStackReplayBuffer(size, (4, 84, 84), 6, True, num_envs=1, n_step=1, stack=4)
    else:
        replay = ReplayBuffer(size, (4, 84, 84), 6, True, state_dtype=torch.uint8)
    for trajectory in atari_like_rounds(size, episode):
        replay.extend(*trajectory)
    tensors = sum(t.nbytes for t in replay.tensors) + (replay.frames.nbytes if buffer == "frames" else 0)
    print(f"buffer={buffer} size={size} episode={episode}: {tensors / size:,.0f} bytes per transition, resident "
          f"{resident_gib() - before:.2f} GiB more than before it ({resident_gib():.2f} GiB in all)")


if __name__ == "__main__":
    main(**dict(arg.split("=", 1) for arg in sys.argv[1:]))

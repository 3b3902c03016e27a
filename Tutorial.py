"""The smallest correct DQN, DDPG and PPO, to read top to bottom.

Each function trains one agent from nothing but torch, numpy and gymnasium, stops when the greedy
(noise-free) policy reaches the task's target return, and prints how many steps and seconds it took.
`python Tutorial.py` runs all three. The library (AgentNet.py, AgentZoo.py, AgentRun.py) grows the
same ideas into reusable classes; nothing here imports it.

Lines marked "easy to miss" are the ones that, left out, quietly stop an agent from learning.
"""
import time
from copy import deepcopy

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn

# Networks this small run fastest on one thread: with torch's default, the DQN below took 190.8 s on a 2-core machine
# with one other process busy, and 49.2 s on one thread (the same 18k steps; its Adam was not fused then).
torch.set_num_threads(1)


def mlp(input_dim: int, output_dim: int, hidden_dim: int = 64) -> nn.Sequential:
    """Two hidden ReLU layers: enough for every task in this file."""
    return nn.Sequential(nn.Linear(input_dim, hidden_dim), nn.ReLU(),
                         nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                         nn.Linear(hidden_dim, output_dim))


def evaluate(env: gym.Env, policy, episodes: int = 8) -> float:
    """Mean return of `policy` (state -> action, no exploration) over full episodes."""
    returns = []
    for _ in range(episodes):
        state, _ = env.reset()
        episode_return, done = 0.0, False
        while not done:
            state, reward, terminated, truncated, _ = env.step(policy(state))
            episode_return += reward
            done = terminated or truncated
        returns.append(episode_return)
    return float(np.mean(returns))


def make_envs(env_id: str, seed: int) -> tuple[gym.Env, gym.Env]:
    """Seed torch and numpy; one env to learn in and a separately seeded one to evaluate in."""
    torch.manual_seed(seed)
    np.random.seed(seed)
    env, eval_env = gym.make(env_id), gym.make(env_id)
    eval_env.reset(seed=seed + 1)
    return env, eval_env


def soft_update(target: nn.Module, online: nn.Module, tau: float):
    """target <- tau * online + (1 - tau) * target: the target network trails the online one slowly,
    so the value it bootstraps from does not move with every gradient step."""
    with torch.no_grad():
        for t, o in zip(target.parameters(), online.parameters()):
            t.lerp_(o, tau)


class ReplayBuffer:
    """The last `size` transitions in numpy arrays, overwritten oldest first."""

    def __init__(self, size: int, state_dim: int, action_dim: int):
        self.states = np.zeros((size, state_dim), np.float32)
        self.actions = np.zeros((size, action_dim), np.float32)
        self.rewards = np.zeros(size, np.float32)
        self.terminated = np.zeros(size, np.float32)
        self.next_states = np.zeros((size, state_dim), np.float32)
        self.size, self.pointer, self.length = size, 0, 0

    def add(self, state, action, reward, terminated, next_state):
        i = self.pointer
        self.states[i], self.actions[i], self.rewards[i] = state, action, reward
        self.terminated[i], self.next_states[i] = terminated, next_state
        self.pointer = (self.pointer + 1) % self.size
        self.length = min(self.length + 1, self.size)

    def sample(self, batch_size: int) -> list[torch.Tensor]:
        idx = np.random.randint(self.length, size=batch_size)
        arrays = (self.states, self.actions, self.rewards, self.terminated, self.next_states)
        return [torch.as_tensor(a[idx]) for a in arrays]


def progress(name: str, reached: float, step: int, start: float):
    """A line every few thousand steps, so that a slow run can be told from a hung one."""
    print(f"{name}: step {step}, evaluation return {reached:.1f}, {time.time() - start:.0f} s", flush=True)


def report(name: str, reached: float, target: float, step: int, start: float) -> dict:
    seconds = time.time() - start
    print(f"{name}: evaluation return {reached:.1f} (target {target}) after {step} steps, {seconds:.1f} s")
    return {"return": reached, "steps": step, "seconds": seconds}


# ---- DQN on CartPole-v1 ----
# Mnih et al. 2015, "Human-level control through deep reinforcement learning": learn Q(s, a) by
# regressing it onto r + gamma * Q_target(s', a'), acting epsilon-greedily. a' is chosen by the online
# network and valued by the target network (Double DQN, van Hasselt et al. arXiv:1509.06461): with the
# plain max_a' Q_target(s', a') the Q-values here climb past 1 / (1 - gamma) = 100, the most CartPole can pay.


def run__tutorial_dqn(seed: int = 0, max_steps: int = 50_000, target: float = 475.0) -> dict:
    env, eval_env = make_envs("CartPole-v1", seed)
    state_dim, action_dim = env.observation_space.shape[0], int(env.action_space.n)
    gamma, epsilon, batch_size, tau = 0.99, 0.1, 128, 0.005

    q_net = mlp(state_dim, action_dim, 128)
    q_target = deepcopy(q_net)  # the target network starts as an exact copy
    # fused: Adam's whole step in one kernel, not a dozen small ops per tensor (the same rule): 1.9 ms a step of
    # this DQN on one thread against 2.6 (History/UPDATE_LOG.md, 2026-11-29)
    optimizer = torch.optim.Adam(q_net.parameters(), lr=1e-3, fused=True)
    buffer = ReplayBuffer(50_000, state_dim, 1)
    greedy = lambda s: int(q_net(torch.as_tensor(s)).argmax())

    start, reached = time.time(), -np.inf
    state, _ = env.reset(seed=seed)
    env.action_space.seed(seed)  # the random actions of epsilon-greedy come from here
    for step in range(1, max_steps + 1):
        with torch.no_grad():
            action = env.action_space.sample() if np.random.rand() < epsilon else greedy(state)
        next_state, reward, terminated, truncated, _ = env.step(action)
        # easy to miss: store `terminated`, not `terminated or truncated`. CartPole truncates at 500 steps;
        # that state is not an end of the task, so its value must still be bootstrapped.
        buffer.add(state, action, reward, terminated, next_state)
        state = next_state  # easy to forget, and then nothing learns
        if terminated or truncated:
            state, _ = env.reset()

        if buffer.length >= batch_size:
            states, actions, rewards, terminals, next_states = buffer.sample(batch_size)
            with torch.no_grad():  # the target is a constant: no gradient flows into it
                next_action = q_net(next_states).argmax(dim=1, keepdim=True)  # chosen by the online network
                next_q = q_target(next_states).gather(1, next_action).squeeze(1)  # valued by the target network
                q_target_value = rewards + gamma * (1 - terminals) * next_q
            q = q_net(states).gather(1, actions.long()).squeeze(1)  # Q of the action actually taken
            loss = nn.functional.smooth_l1_loss(q, q_target_value)  # Huber: robust to the odd large TD error
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            soft_update(q_target, q_net, tau)  # easy to miss: without it the target never learns anything

        if step % 1000 == 0:
            with torch.no_grad():
                reached = evaluate(eval_env, greedy)  # greedy: evaluation without epsilon
            if reached >= target:
                break
            if step % 5000 == 0:
                progress("DQN ", reached, step, start)
    return report("DQN  on CartPole-v1", reached, target, step, start)


# ---- DDPG on Pendulum-v1 ----
# Lillicrap et al. 2015 (arXiv:1509.02971): a deterministic actor a = pi(s) climbs the critic's
# Q(s, a); the critic learns Q from r + gamma * Q_target(s', pi_target(s')).


def run__tutorial_ddpg(seed: int = 0, max_steps: int = 20_000, target: float = -200.0) -> dict:
    env, eval_env = make_envs("Pendulum-v1", seed)
    state_dim, action_dim = env.observation_space.shape[0], env.action_space.shape[0]
    max_action = float(env.action_space.high[0])  # Pendulum's torque is in [-2, 2]
    gamma, noise_std, batch_size, tau = 0.99, 0.1, 128, 0.005

    actor = nn.Sequential(mlp(state_dim, action_dim, 128), nn.Tanh())  # tanh keeps the action in [-1, 1]
    critic = mlp(state_dim + action_dim, 1, 128)
    actor_target, critic_target = deepcopy(actor), deepcopy(critic)
    actor_optimizer = torch.optim.Adam(actor.parameters(), lr=1e-3, fused=True)  # one optimizer per network
    critic_optimizer = torch.optim.Adam(critic.parameters(), lr=1e-3, fused=True)
    buffer = ReplayBuffer(50_000, state_dim, action_dim)
    q_value = lambda net, s, a: net(torch.cat([s, a], dim=1)).squeeze(1)
    deterministic = lambda s: actor(torch.as_tensor(s)).numpy() * max_action

    start, reached = time.time(), -np.inf
    state, _ = env.reset(seed=seed)
    for step in range(1, max_steps + 1):
        with torch.no_grad():
            action = actor(torch.as_tensor(state)).numpy()
        # exploration: Gaussian noise on the action, clipped back into range (TD3 paper found it as good as OU noise)
        action = np.clip(action + noise_std * np.random.randn(action_dim), -1.0, 1.0)
        next_state, reward, terminated, truncated, _ = env.step(action * max_action)
        buffer.add(state, action, reward, terminated, next_state)  # Pendulum never terminates: every step bootstraps
        state = next_state  # easy to forget
        if terminated or truncated:
            state, _ = env.reset()

        if buffer.length >= batch_size:
            states, actions, rewards, terminals, next_states = buffer.sample(batch_size)
            with torch.no_grad():
                next_q = q_value(critic_target, next_states, actor_target(next_states))
                q_target_value = rewards + gamma * (1 - terminals) * next_q
            critic_loss = nn.functional.mse_loss(q_value(critic, states, actions), q_target_value)
            critic_optimizer.zero_grad()
            critic_loss.backward()
            critic_optimizer.step()

            # the actor ascends Q(s, pi(s)); only the actor's optimizer steps, so the critic is left alone
            actor_loss = -q_value(critic, states, actor(states)).mean()
            actor_optimizer.zero_grad()
            actor_loss.backward()
            actor_optimizer.step()
            soft_update(critic_target, critic, tau)  # easy to miss: both targets trail their networks
            soft_update(actor_target, actor, tau)

        if step % 1000 == 0:
            with torch.no_grad():
                reached = evaluate(eval_env, deterministic)  # no exploration noise in evaluation
            if reached >= target:
                break
            if step % 5000 == 0:
                progress("DDPG", reached, step, start)
    return report("DDPG on Pendulum-v1", reached, target, step, start)


# ---- PPO on CartPole-v1 ----
# Schulman et al. 2017 (arXiv:1707.06347): collect a horizon with the current policy, then take several
# epochs of small steps on the clipped surrogate objective so the new policy stays near the old one.
# Advantages come from GAE (Schulman et al. 2015, arXiv:1506.02438).


def run__tutorial_ppo(seed: int = 0, max_steps: int = 100_000, target: float = 475.0) -> dict:
    env, eval_env = make_envs("CartPole-v1", seed)
    state_dim, action_dim = env.observation_space.shape[0], int(env.action_space.n)
    gamma, lambda_gae, clip, horizon, epochs, batch_size = 0.99, 0.95, 0.2, 1024, 10, 128

    actor, critic = mlp(state_dim, action_dim), mlp(state_dim, 1)  # actor gives logits of a categorical policy
    actor_optimizer = torch.optim.Adam(actor.parameters(), lr=1e-3, fused=True)
    critic_optimizer = torch.optim.Adam(critic.parameters(), lr=1e-3, fused=True)
    greedy = lambda s: int(actor(torch.as_tensor(s)).argmax())

    start, reached, step = time.time(), -np.inf, 0
    state, _ = env.reset(seed=seed)
    while step < max_steps:
        # 1. collect one horizon with the current (stochastic) policy
        states = np.zeros((horizon, state_dim), np.float32)
        actions, log_probs, rewards = (np.zeros(horizon, np.int64), np.zeros(horizon, np.float32),
                                       np.zeros(horizon, np.float32))
        terminated_flags, done_flags = np.zeros(horizon, np.float32), np.zeros(horizon, np.float32)
        next_states = np.zeros((horizon, state_dim), np.float32)
        for t in range(horizon):
            with torch.no_grad():
                dist = torch.distributions.Categorical(logits=actor(torch.as_tensor(state)))
                action = dist.sample()
            next_state, reward, terminated, truncated, _ = env.step(int(action))
            states[t], actions[t], log_probs[t], rewards[t] = state, int(action), dist.log_prob(action), reward
            terminated_flags[t], done_flags[t], next_states[t] = terminated, terminated or truncated, next_state
            state = next_state  # easy to forget
            if terminated or truncated:
                state, _ = env.reset()
        step += horizon

        # 2. advantages by GAE, walking the horizon backwards
        states_t, next_states_t = torch.as_tensor(states), torch.as_tensor(next_states)
        with torch.no_grad():
            values, next_values = critic(states_t).squeeze(1).numpy(), critic(next_states_t).squeeze(1).numpy()
        advantages, gae = np.zeros(horizon, np.float32), 0.0
        for t in reversed(range(horizon)):
            # easy to miss: the TD error bootstraps unless the episode *terminated*; on truncation
            # next_states[t] is the final observation of the cut episode, and its value counts
            delta = rewards[t] + gamma * (1 - terminated_flags[t]) * next_values[t] - values[t]
            # ...but the GAE sum stops at *any* episode end: the next step belongs to another episode
            gae = delta + gamma * lambda_gae * (1 - done_flags[t]) * gae
            advantages[t] = gae
        returns = torch.as_tensor(advantages + values)  # regression targets of the critic
        advantages = torch.as_tensor((advantages - advantages.mean()) / (advantages.std() + 1e-8))
        actions_t, old_log_probs = torch.as_tensor(actions), torch.as_tensor(log_probs)

        # 3. several epochs of minibatch steps on the clipped surrogate (PPO paper, eq. 7)
        for _ in range(epochs):
            for idx in torch.randperm(horizon).split(batch_size):
                dist = torch.distributions.Categorical(logits=actor(states_t[idx]))
                ratio = (dist.log_prob(actions_t[idx]) - old_log_probs[idx]).exp()  # pi_new / pi_old
                surrogate = torch.min(ratio * advantages[idx], ratio.clamp(1 - clip, 1 + clip) * advantages[idx])
                actor_loss = -surrogate.mean()
                actor_optimizer.zero_grad()
                actor_loss.backward()
                actor_optimizer.step()
                critic_loss = nn.functional.mse_loss(critic(states_t[idx]).squeeze(1), returns[idx])
                critic_optimizer.zero_grad()
                critic_loss.backward()
                critic_optimizer.step()

        with torch.no_grad():
            reached = evaluate(eval_env, greedy)  # the most likely action, no sampling
        if reached >= target:
            break
        if step // horizon % 5 == 0:  # every fifth horizon
            progress("PPO ", reached, step, start)
    return report("PPO  on CartPole-v1", reached, target, step, start)


if __name__ == "__main__":
    run__tutorial_dqn()
    run__tutorial_ddpg()
    run__tutorial_ppo()

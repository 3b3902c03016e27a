"""Tiny environments whose every step is known in advance, for tests of bootstrapping."""
import gymnasium as gym
import numpy as np
from pettingzoo import ParallelEnv


class CounterEnv(gym.Env):
    """Observation = steps taken in this episode; reward 1 per step; terminates when it reaches `terminate_at`."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, terminate_at):
        self.terminate_at, self.t = terminate_at, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([self.t], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t], np.float32), 1.0, self.t == self.terminate_at, False, {}


def make_counter_vector_env(autoreset_mode=gym.vector.AutoresetMode.SAME_STEP):
    return gym.vector.SyncVectorEnv([
        lambda: gym.wrappers.TimeLimit(CounterEnv(terminate_at=3), max_episode_steps=10),  # terminates every 3 steps
        lambda: gym.wrappers.TimeLimit(CounterEnv(terminate_at=10), max_episode_steps=2),  # truncated every 2 steps
    ], autoreset_mode=autoreset_mode)


class PointGoalEnv(gym.Env):
    """A goal env in gymnasium-robotics' convention (Dict observations, compute_reward, compute_terminated): a point in
    the cube [-1, 1]^dim, moved by up to `speed` per axis and step, must come within `reach` of a goal drawn anew at
    each reset, from a start drawn too. Reward -1 per step away from the goal, 0 within reach; episodes only end by
    their time limit, as FetchReach's do. In 4 dimensions a random walk almost never comes within reach."""

    def __init__(self, dim=4, speed=0.2, reach=0.1):
        self.dim, self.speed, self.reach = dim, speed, reach
        self.action_space = gym.spaces.Box(-1.0, 1.0, (dim,), np.float32)
        self.observation_space = gym.spaces.Dict({key: gym.spaces.Box(-1.0, 1.0, (dim,), np.float32)
                                                  for key in ("observation", "achieved_goal", "desired_goal")})

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position, self.goal = self.np_random.uniform(-1, 1, (2, self.dim)).astype(np.float32)
        return self.observe(), {}

    def step(self, action):
        self.position = np.clip(self.position + self.speed * np.clip(action, -1, 1), -1, 1).astype(np.float32)
        reward = float(self.compute_reward(self.position, self.goal, {}))
        return self.observe(), reward, False, False, {"is_success": reward == 0}

    def observe(self):
        return {"observation": self.position.copy(), "achieved_goal": self.position.copy(), "desired_goal": self.goal.copy()}

    def compute_reward(self, achieved_goal, desired_goal, info):
        return -(np.linalg.norm(achieved_goal - desired_goal, axis=-1) > self.reach).astype(np.float32)

    def compute_terminated(self, achieved_goal, desired_goal, info):
        return np.zeros(np.shape(achieved_goal)[:-1], bool)


def make_point_goal_env(max_episode_steps=20):
    return gym.wrappers.TimeLimit(PointGoalEnv(), max_episode_steps=max_episode_steps)


class BitFlippingEnv(gym.Env):
    """The HER paper's bit flipping (section 3.1), a goal env: n bits and an n-bit goal drawn at each reset; action i
    flips bit i; reward -1 per step until the bits equal the goal, when the episode terminates with reward 0."""

    def __init__(self, n=12):
        self.n = n
        self.action_space = gym.spaces.Discrete(n)
        self.observation_space = gym.spaces.Dict({key: gym.spaces.Box(0.0, 1.0, (n,), np.float32)
                                                  for key in ("observation", "achieved_goal", "desired_goal")})

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.bits, self.goal = self.np_random.integers(0, 2, (2, self.n)).astype(np.float32)
        return self.observe(), {}

    def step(self, action):
        self.bits[action] = 1 - self.bits[action]
        reward = float(self.compute_reward(self.bits, self.goal, {}))
        return self.observe(), reward, bool(self.compute_terminated(self.bits, self.goal, {})), False, {"is_success": reward == 0}

    def observe(self):
        return {"observation": self.bits.copy(), "achieved_goal": self.bits.copy(), "desired_goal": self.goal.copy()}

    def compute_reward(self, achieved_goal, desired_goal, info):
        return -(achieved_goal != desired_goal).any(-1).astype(np.float32)

    def compute_terminated(self, achieved_goal, desired_goal, info):
        return (achieved_goal == desired_goal).all(-1)


def make_bit_flipping_env(n=12):
    return gym.wrappers.TimeLimit(BitFlippingEnv(n), max_episode_steps=n)


class MatrixGame(ParallelEnv):
    """A one-step cooperative game of two agents in PettingZoo's parallel API: each picks one of len(payoff) actions,
    and the team gets payoff[a0][a1], half to each agent. Both observe a constant 1, so only learning from the team's
    reward can tell either agent which action pays."""

    metadata = {"name": "matrix_game", "render_modes": []}

    def __init__(self, payoff):
        self.payoff = np.asarray(payoff, np.float32)
        self.possible_agents = ["agent_0", "agent_1"]
        self.agents = []
        self.max_cycles = 1

    def observation_space(self, agent):
        return gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)

    def action_space(self, agent):
        return gym.spaces.Discrete(len(self.payoff))

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        return {agent: np.ones(1, np.float32) for agent in self.agents}, {agent: {} for agent in self.agents}

    def step(self, actions):
        reward = float(self.payoff[actions["agent_0"], actions["agent_1"]]) / 2
        agents, self.agents = self.agents, []
        return ({agent: np.ones(1, np.float32) for agent in agents}, {agent: reward for agent in agents},
                {agent: True for agent in agents}, {agent: False for agent in agents}, {agent: {} for agent in agents})


class ContinuousMatrixGame(MatrixGame):
    """MatrixGame's one step with an action in [-1, 1] each: the team gets 1 - (a0 - 0.5)^2 - (a1 + 0.5)^2, half to
    each agent; 1 at (0.5, -0.5), 0.5 where both act 0 (an untrained Gaussian policy's mean)."""

    def __init__(self):
        super().__init__([[0.0]])

    def action_space(self, agent):
        return gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def step(self, actions):
        a0, a1 = float(actions["agent_0"][0]), float(actions["agent_1"][0])
        self.payoff = np.array([[1.0 - (a0 - 0.5) ** 2 - (a1 + 0.5) ** 2]], np.float32)
        return super().step({"agent_0": 0, "agent_1": 0})


CLIMBING_GAME = [[11, -30, 0], [-30, 7, 6], [0, 0, 5]]  # Claus and Boutilier (1998): optimum 11 at (0, 0)


class MaskedEnv(gym.Env):
    """Four actions, of which two are legal at each step t, t % 4 and (t + 1) % 4, given as info["action_mask"] or,
    with if_dict, as a Dict observation's "action_mask" beside the observation; an illegal action raises. Reward 1
    for action t % 4; episodes of 20 steps. A policy that ignores the mask takes an illegal action half the time."""

    action_space = gym.spaces.Discrete(4)

    def __init__(self, if_dict=False):
        self.if_dict, self.t = if_dict, 0
        observation = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.observation_space = gym.spaces.Dict({"observation": observation, "action_mask": gym.spaces.MultiBinary(4)}
                                                 ) if if_dict else observation

    def legal(self):
        mask = np.zeros(4, np.int8)
        mask[[self.t % 4, (self.t + 1) % 4]] = 1
        return mask

    def observe(self):
        observation = np.array([self.t % 4 / 3, self.t / 20], np.float32)
        if self.if_dict:
            return {"observation": observation, "action_mask": self.legal()}, {}
        return observation, {"action_mask": self.legal()}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.observe()

    def step(self, action):
        if not self.legal()[int(action)]:
            raise AssertionError(f"illegal action {action} at step {self.t}, legal: {self.legal()}")
        reward = float(action == self.t % 4)
        self.t += 1
        return *self.observe()[:1], reward, self.t == 20, False, self.observe()[1]

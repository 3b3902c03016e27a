"""The peer for time_to_target.py: one Stable-Baselines3 run with the rl-baselines3-zoo hyperparameters of
its task, measured under our protocol (shared/BENCH.md) and our evaluator's schedule: the mean return of 8
deterministic episodes on separate envs, at least eval_gap seconds apart; the run stops at the task's target.

    python benchmarks/peer_sb3.py algo=SAC env=Pendulum-v1 seed=0 max_time=600
    python benchmarks/peer_sb3.py algo=SAC env=HalfCheetah-v5 seed=0 max_time=900 target=inf  # a fixed time budget

It prints the same `Stop: <reason> at step N after S s` line as AgentRun.py. Benchmark-only: it needs
stable-baselines3 and sb3-contrib (QR-DQN, TRPO, MaskablePPO, RecurrentPPO) (pip install -r benchmarks/requirements.txt); the library never imports them.
"""
import math
import os
import sys
import time

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import A2C, DDPG, DQN, PPO, SAC, TD3, HerReplayBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_atari_env, make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.noise import NormalActionNoise
from stable_baselines3.common.vec_env import (VecFrameStack, VecNormalize, VecTransposeImage,
                                              sync_envs_normalization)
from sb3_contrib import QRDQN, TRPO, MaskablePPO, RecurrentPPO
from sb3_contrib.common.maskable.evaluation import evaluate_policy as evaluate_masked_policy
from sb3_contrib.common.wrappers import ActionMasker

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from AgentRun import TARGET_RETURN_WITHOUT_THRESHOLD, Arguments, Evaluator, env_family, make_env  # noqa: E402
from extras import goals  # noqa: E402
from extras.no_velocity import NO_VELOCITY  # noqa: E402
from extras.pixels import ActionRepeat  # noqa: E402

ALGOS = {"A2C": A2C, "DDPG": DDPG, "DQN": DQN, "PPO": PPO, "QRDQN": QRDQN, "SAC": SAC, "TD3": TD3, "TRPO": TRPO,
         "MaskablePPO": MaskablePPO, "RecurrentPPO": RecurrentPPO}
TARGETS = {"CartPole-v1": 475.0, "Pendulum-v1": -200.0, "LunarLander-v3": 200.0, "LunarLanderContinuous-v3": 200.0,
           "Acrobot-v1": -100.0, "FetchReach-v4": TARGET_RETURN_WITHOUT_THRESHOLD["FetchReach-v4"],
           "MountainCarContinuous-v0": 90.0, "BipedalWalker-v3": 300.0, "Taxi-v4": 8.0,
           "ALE/Pong-v5": 18.0}  # issue 42's Pong target: an evaluation mean of 18 points out of 21
TARGETS |= {env_id: TARGETS[base_id] for env_id, (base_id, _) in NO_VELOCITY.items()}  # a NoVel task keeps its base's


def linear(start: float):
    """The zoo's lin_<start>: decays to 0 over n_timesteps (SB3 passes the fraction of training left)."""
    return lambda progress_remaining: progress_remaining * start


# hyperparams/<algo>.yml of rl-baselines3-zoo (qrdqn.yml, trpo.yml for sb3-contrib's QRDQN, TRPO); its LunarLander entries name v2, whose dynamics
# v3 keeps.
# Each entry: (n_timesteps, n_envs, keyword arguments); "noise_std" becomes a NormalActionNoise; "normalize" (the zoo's
# normalize: true) wraps the envs in VecNormalize with the entry's gamma, the evaluator's with the same observation
# statistics and raw rewards, as the zoo's EvalCallback does.
DDPG_TD3_ZOO = (None, 1, dict(gamma=0.98, buffer_size=200_000, learning_starts=10_000, noise_std=0.1, gradient_steps=-1,
                              train_freq=(1, "episode"), learning_rate=1e-3, policy_kwargs=dict(net_arch=[400, 300])))
PPO_LUNAR_ZOO = (1_000_000, 16, dict(n_steps=1024, batch_size=64, gae_lambda=0.98, gamma=0.999, n_epochs=4, ent_coef=0.01))
ZOO = {
    ("DQN", "CartPole-v1"): (200_000, 1, dict(learning_rate=2.5e-4, batch_size=512, buffer_size=100_000, learning_starts=0,
                                              gamma=0.99, target_update_interval=5000, train_freq=16, gradient_steps=4,
                                              exploration_fraction=0.06, exploration_final_eps=0.11)),
    ("DQN", "LunarLander-v3"): (150_000, 1, dict(learning_rate=8.8e-4, batch_size=32, buffer_size=1_000_000, learning_starts=0,
                                                 gamma=0.99, target_update_interval=10_000, train_freq=16, gradient_steps=-1,
                                                 exploration_fraction=0.2, exploration_final_eps=0.1,
                                                 policy_kwargs=dict(net_arch=[256, 256]))),
    ("DQN", "Acrobot-v1"): (150_000, 1, dict(learning_rate=2.5e-4, batch_size=512, buffer_size=100_000, learning_starts=0,
                                             gamma=0.99, target_update_interval=5000, train_freq=16, gradient_steps=4,
                                             exploration_fraction=0.06, exploration_final_eps=0.11)),
    ("QRDQN", "CartPole-v1"): (50_000, 1, dict(learning_rate=2.3e-3, batch_size=64, buffer_size=100_000, learning_starts=1000,
                                               gamma=0.99, target_update_interval=10, train_freq=256, gradient_steps=128,
                                               exploration_fraction=0.16, exploration_final_eps=0.04,
                                               policy_kwargs=dict(net_arch=[256, 256], n_quantiles=10))),
    ("QRDQN", "LunarLander-v3"): (100_000, 1, dict(learning_rate=linear(1.5e-3), batch_size=128, buffer_size=100_000,
                                                   learning_starts=10_000, gamma=0.995, target_update_interval=1,
                                                   train_freq=256, gradient_steps=-1, exploration_fraction=0.24,
                                                   exploration_final_eps=0.18,
                                                   policy_kwargs=dict(net_arch=[256, 256], n_quantiles=170))),
    ("QRDQN", "Acrobot-v1"): (100_000, 1, dict(learning_rate=6.3e-4, batch_size=128, buffer_size=50_000, learning_starts=0,
                                               gamma=0.99, target_update_interval=250, train_freq=4, gradient_steps=-1,
                                               exploration_fraction=0.12, exploration_final_eps=0.1,
                                               policy_kwargs=dict(net_arch=[256, 256], n_quantiles=25))),
    ("PPO", "CartPole-v1"): (100_000, 8, dict(n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
                                              learning_rate=linear(1e-3), clip_range=linear(0.2))),
    ("PPO", "Pendulum-v1"): (100_000, 4, dict(n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10, ent_coef=0.0,
                                              learning_rate=1e-3, clip_range=0.2, use_sde=True, sde_sample_freq=4)),
    ("PPO", "LunarLander-v3"): PPO_LUNAR_ZOO,
    ("PPO", "LunarLanderContinuous-v3"): PPO_LUNAR_ZOO,
    ("A2C", "CartPole-v1"): (500_000, 8, dict(ent_coef=0.0)),
    ("TRPO", "CartPole-v1"): (100_000, 2, dict(n_steps=512, batch_size=512, cg_damping=1e-3, gae_lambda=0.98, gamma=0.99,
                                               learning_rate=1e-3, n_critic_updates=20)),
    ("TRPO", "Pendulum-v1"): (100_000, 2, dict(n_steps=1024, gamma=0.9, n_critic_updates=15, use_sde=True,
                                               sde_sample_freq=4)),
    ("SAC", "Pendulum-v1"): (20_000, 1, dict(learning_rate=1e-3)),
    ("SAC", "LunarLanderContinuous-v3"): (500_000, 1, dict(batch_size=256, learning_rate=linear(7.3e-4), buffer_size=1_000_000,
                                                           ent_coef="auto", gamma=0.99, tau=0.01, train_freq=1,
                                                           gradient_steps=1, learning_starts=10_000,
                                                           policy_kwargs=dict(net_arch=[400, 300]))),
    # gSDE (use_sde) explores MountainCar and the walker: Raffin et al. arXiv:2005.05719
    ("SAC", "MountainCarContinuous-v0"): (50_000, 1, dict(learning_rate=3e-4, buffer_size=50_000, batch_size=512, ent_coef=0.1,
                                                          train_freq=32, gradient_steps=32, gamma=0.9999, tau=0.01,
                                                          learning_starts=0, use_sde=True,
                                                          policy_kwargs=dict(log_std_init=-3.67, net_arch=[64, 64]))),
    ("SAC", "BipedalWalker-v3"): (500_000, 1, dict(learning_rate=7.3e-4, buffer_size=300_000, batch_size=256, ent_coef="auto",
                                                   gamma=0.98, tau=0.02, train_freq=64, gradient_steps=64,
                                                   learning_starts=10_000, use_sde=True,
                                                   policy_kwargs=dict(log_std_init=-3, net_arch=[400, 300]))),
    # the walker's on-policy entries: ppo.yml's, and trpo.yml's (its &pybullet-defaults for 1M steps)
    ("PPO", "BipedalWalker-v3"): (5_000_000, 32, dict(normalize=True, n_steps=2048, batch_size=64, gae_lambda=0.95,
                                                      gamma=0.999, n_epochs=10, ent_coef=0.0, learning_rate=3e-4,
                                                      clip_range=0.18)),
    ("TRPO", "BipedalWalker-v3"): (1_000_000, 2, dict(normalize=True, batch_size=128, n_steps=1024, gamma=0.99,
                                                      gae_lambda=0.95, sub_sampling_factor=1, cg_max_steps=25,
                                                      cg_damping=0.1, n_critic_updates=20, learning_rate=1e-3)),
    ("TD3", "Pendulum-v1"): (20_000, *DDPG_TD3_ZOO[1:]),
    ("TD3", "LunarLanderContinuous-v3"): (300_000, *DDPG_TD3_ZOO[1:]),
    ("DDPG", "Pendulum-v1"): (20_000, *DDPG_TD3_ZOO[1:]),
    # hyperparams/her.yml's TD3 entry for FetchReach-v1, whose task v4 keeps (the zoo's newer files set HER on SAC and TQC)
    ("TD3", "FetchReach-v4"): (25_000, 1, dict(buffer_size=1_000_000, batch_size=256, gamma=0.95, learning_rate=1e-3,
                                               learning_starts=1000, replay_buffer_class=HerReplayBuffer,
                                               replay_buffer_kwargs=dict(n_sampled_goal=4, goal_selection_strategy="future"))),
    # hyperparams/ppo_lstm.yml (sb3-contrib's RecurrentPPO, MlpLstmPolicy) on the velocity-masked tasks, which importing
    # AgentRun registers as the zoo defines them; its LunarLander entries name v2 and hold PPO's LunarLander values.
    ("RecurrentPPO", "CartPoleNoVel-v1"): (100_000, 8, dict(n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98,
                                                           n_epochs=20, ent_coef=0.0, learning_rate=linear(1e-3),
                                                           clip_range=linear(0.2))),
    ("RecurrentPPO", "PendulumNoVel-v1"): (100_000, 4, dict(n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10,
                                                           ent_coef=0.0, learning_rate=1e-3, clip_range=0.2, use_sde=True,
                                                           sde_sample_freq=4)),
    ("RecurrentPPO", "LunarLanderNoVel-v3"): PPO_LUNAR_ZOO,
    ("RecurrentPPO", "LunarLanderContinuousNoVel-v3"): PPO_LUNAR_ZOO,
    # the zoo has no Taxi entry: MaskablePPO's defaults (SB3 PPO's), on 8 envs as the zoo's PPO on the classic tasks
    ("MaskablePPO", "Taxi-v4"): (None, 8, {}),
}
# hyperparams/sac.yml's MuJoCo entries (&mujoco-defaults, named v3 there): SB3 SAC's defaults, 10,000 random steps first
ZOO |= {("SAC", env_id): (1_000_000, 1, dict(learning_starts=10_000)) for env_id in ("HalfCheetah-v5", "Walker2d-v5", "Ant-v5")}
# the `atari:` entries of ppo.yml and dqn.yml (CnnPolicy, AtariWrapper, 4 frames stacked; make_atari_env below)
ATARI_ZOO = {"PPO": (10_000_000, 8, dict(n_steps=128, n_epochs=4, batch_size=256, learning_rate=linear(2.5e-4),
                                         clip_range=linear(0.1), vf_coef=0.5, ent_coef=0.01)),
             "DQN": (10_000_000, 1, dict(buffer_size=100_000, learning_rate=1e-4, batch_size=32, learning_starts=100_000,
                                         target_update_interval=1000, train_freq=4, gradient_steps=1,
                                         exploration_fraction=0.1, exploration_final_eps=0.01,
                                         optimize_memory_usage=False))}
ZOO |= {(algo, "ALE/Pong-v5"): entry for algo, entry in ATARI_ZOO.items()}
# ppo.yml's CarRacing-v3 entry (CnnPolicy on car_racing_envs' frames); its normalize scales rewards, not observations
ZOO[("PPO", "CarRacing-v3")] = (4_000_000, 8, dict(
    normalize=dict(norm_obs=False, norm_reward=True), batch_size=128, n_steps=512, gamma=0.99, gae_lambda=0.95,
    n_epochs=10, ent_coef=0.0, sde_sample_freq=4, max_grad_norm=0.5, vf_coef=0.5, learning_rate=linear(1e-4),
    use_sde=True, clip_range=0.2, policy_kwargs=dict(log_std_init=-2, ortho_init=False, activation_fn=torch.nn.GELU,
                                                     net_arch=dict(pi=[256], vf=[256]))))
PIXEL_TASKS = ("ALE/", "CarRacing-")  # the peer's CnnPolicy, on the GPU where there is one


def atari_envs(env_id: str, n_envs: int, seed: int, if_eval: bool):
    """ALE/<Game>-v5 as the zoo trains on it: SB3's AtariWrapper (up to 30 no-ops, each action 4 frames, 84x84 grey; for
    learning, a lost life ends the episode and rewards are clipped to their sign), 4 frames stacked. The env is made
    with frameskip=1 (the wrapper skips) and keeps v5's sticky actions, as AgentRun.make_atari_env; the evaluator's
    plays full games and scores them raw, as ours does."""
    import ale_py
    gym.register_envs(ale_py)
    wrapper_kwargs = dict(terminal_on_life_loss=False, clip_reward=False) if if_eval else None
    env = make_atari_env(env_id, n_envs=n_envs, seed=seed, env_kwargs=dict(frameskip=1), wrapper_kwargs=wrapper_kwargs)
    return VecFrameStack(env, n_stack=4)


def car_racing_frames(env: gym.Env) -> gym.Env:
    """The zoo's CarRacing-v3 env_wrapper: each action 2 frames (its FrameSkip, which ActionRepeat is), 64x64 grey frames
    (channel kept)."""
    return gym.wrappers.GrayscaleObservation(gym.wrappers.ResizeObservation(ActionRepeat(env, 2), (64, 64)), keep_dim=True)


def car_racing_envs(env_id: str, n_envs: int, seed: int, if_eval: bool):
    """CarRacing-v3 as the zoo trains on it (car_racing_frames, 2 frames stacked), for the evaluator too: the same full
    races, the raw rewards."""
    return VecFrameStack(make_vec_env(env_id, n_envs=n_envs, seed=seed, wrapper_class=car_racing_frames), n_stack=2)


def taxi_mask(env: gym.Env) -> np.ndarray:
    """The legal actions of Taxi's current state, the mask its info carries (for ActionMasker)."""
    return env.unwrapped.action_mask(env.unwrapped.s)


class TimeToTarget(BaseCallback):
    """Evaluates as AgentRun's Evaluator does: eval_times episodes side by side (one per env of a vector env),
    at least eval_gap seconds apart and far enough apart that evaluating takes at most Evaluator.eval_share of
    the run; stops training at the target."""

    def __init__(self, eval_env, target: float, eval_gap: float, max_time: float):
        super().__init__()
        self.eval_env, self.target, self.eval_gap, self.max_time = eval_env, target, eval_gap, max_time
        self.start_time, self.last_eval_time, self.eval_seconds, self.reason = 0.0, -math.inf, 0.0, None
        self.best_return = self.last_return = -math.inf

    def _on_training_start(self):
        self.start_time = time.time()

    def _on_step(self) -> bool:
        if (time.time() - self.last_eval_time < Evaluator.wait_seconds(self.eval_gap, self.eval_seconds)
                and time.time() - self.start_time < self.max_time):  # at max_time: a last evaluation, then the stop
            return True
        start = time.time()
        sync_envs_normalization(self.training_env, self.eval_env)  # the training envs' observation statistics, if any
        evaluate = evaluate_masked_policy if isinstance(self.model, MaskablePPO) else evaluate_policy  # masks on
        avg_return = evaluate(self.model, self.eval_env, n_eval_episodes=self.eval_env.num_envs, deterministic=True)[0]
        self.last_eval_time = time.time()
        self.eval_seconds = self.last_eval_time - start
        self.best_return, self.last_return = max(self.best_return, avg_return), avg_return
        print(f"{self.num_timesteps:>10d} {time.time() - self.start_time:>8.1f} {avg_return:>10.1f}", flush=True)
        if avg_return >= self.target:
            self.reason = f"reached target_return {self.target} (evaluation mean {avg_return:.1f})"
        elif time.time() - self.start_time >= self.max_time:
            self.reason = f"reached max_time {self.max_time} s"
        return self.reason is None


def main(argv: list[str]):
    options = dict(item.split("=", 1) for item in argv)
    algo, env_id, seed = options["algo"], options["env"], int(options.get("seed", 0))
    max_time, eval_gap = float(options.get("max_time", 1800)), float(options.get("eval_gap", Arguments.eval_gap))
    if (algo, env_id) not in ZOO:
        raise SystemExit(f"no zoo hyperparameters here for {algo} on {env_id}; known: {sorted(ZOO)}")
    n_timesteps, n_envs, kwargs = ZOO[algo, env_id]
    kwargs = dict(kwargs)
    torch.set_num_threads(1)  # shared/BENCH.md: the peer with one torch thread, as ours
    if_pixels = env_id.startswith(PIXEL_TASKS)
    make_pixel_envs = atari_envs if env_id.startswith("ALE/") else car_racing_envs
    if env_family(env_id) is goals:
        goals.register(env_id)  # registers gymnasium-robotics' ids, or says how to install it
    masker = dict(wrapper_class=ActionMasker, wrapper_kwargs=dict(action_mask_fn=taxi_mask)) if algo == "MaskablePPO" else {}
    env = make_pixel_envs(env_id, n_envs, seed, False) if if_pixels else make_vec_env(env_id, n_envs=n_envs, seed=seed,
                                                                                     **masker)
    if "noise_std" in kwargs:
        action_dim = env.action_space.shape[0]
        kwargs["action_noise"] = NormalActionNoise(np.zeros(action_dim), kwargs.pop("noise_std") * np.ones(action_dim))
    eval_env = (make_pixel_envs(env_id, Arguments.eval_times, seed + 1000, True) if if_pixels  # one episode per env
                else make_vec_env(env_id, n_envs=Arguments.eval_times, seed=seed + 1000, **masker))
    normalize = kwargs.pop("normalize", False)
    if normalize:  # True: observations and rewards; a dict: the zoo's own choice of the two
        settings = normalize if isinstance(normalize, dict) else {}
        env = VecNormalize(env, gamma=kwargs.get("gamma", 0.99), **settings)
        eval_env = VecNormalize(eval_env, training=False, norm_reward=False, norm_obs=settings.get("norm_obs", True))
    if if_pixels:  # channels first, outside VecNormalize, as the model wraps the training envs (sync_envs_normalization)
        eval_env = VecTransposeImage(eval_env)
    policy = ("MultiInputPolicy" if isinstance(env.observation_space, gym.spaces.Dict) else "CnnPolicy" if if_pixels
              else "MlpLstmPolicy" if algo == "RecurrentPPO" else "MlpPolicy")
    # pixels: the GPU where there is one, as our learner (AgentRun.build_agent); else the CPU, as ours
    model = ALGOS[algo](policy, env, seed=seed, device="auto" if if_pixels else "cpu", verbose=0, **kwargs)
    # ours: the spec's reward_threshold, else AgentRun's table, else none (+inf: MuJoCo's Walker2d-v5)
    target = float(options["target"]) if "target" in options else TARGETS.get(env_id, make_env(env_id)[1].target_return)
    callback = TimeToTarget(eval_env, target, eval_gap, max_time)
    model.learn(total_timesteps=n_timesteps or 10 ** 9, callback=callback)
    reason = callback.reason or f"reached the zoo's n_timesteps {n_timesteps}"
    print(f"Stop: {reason} at step {model.num_timesteps} after {time.time() - callback.start_time:.1f} s; "
          f"best evaluation mean {callback.best_return:.1f}; last {callback.last_return:.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])

"""A training script in CleanRL's style: its own argparse flags, TensorBoard's SummaryWriter for metrics,
`runs/{run_name}` relative to the working directory. It knows nothing about rlbench."""

import argparse
import time

import gymnasium as gym
import numpy as np
from torch.utils.tensorboard import SummaryWriter

parser = argparse.ArgumentParser()
parser.add_argument("--env-id", type=str, default="CartPole-v1")
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--total-timesteps", type=int, default=1000)
parser.add_argument("--learning-rate", type=float, default=2.5e-4)
args = parser.parse_args()

run_name = f"{args.env_id}__cleanrl_style__{args.seed}__{int(time.time())}"
writer = SummaryWriter(f"runs/{run_name}")
writer.add_text("hyperparameters", str(vars(args)))
env = gym.make(args.env_id)
rng = np.random.default_rng(args.seed)
obs, _ = env.reset(seed=args.seed)
ep_return, ep_len = 0.0, 0
for global_step in range(1, args.total_timesteps + 1):
    obs, reward, term, trunc, _ = env.step(int(rng.integers(env.action_space.n)))
    ep_return += float(reward)
    ep_len += 1
    if term or trunc:
        writer.add_scalar("charts/episodic_return", ep_return, global_step)
        writer.add_scalar("charts/episodic_length", ep_len, global_step)
        ep_return, ep_len = 0.0, 0
        obs, _ = env.reset()
    if global_step % 250 == 0:
        writer.add_scalar("charts/learning_rate", args.learning_rate, global_step)
writer.close()

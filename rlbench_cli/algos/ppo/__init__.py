"""``ppo``: Proximal Policy Optimisation, following CleanRL's ``ppo.py`` / ``ppo_continuous_action.py``;
one run (``PPO``) or the seeds of a job (``train_packed``, ``resources.seeds_per_job``), by the same loop.

Layout
------
``config.py`` (``PPOConfig``, ``CONTINUOUS_DEFAULTS``), ``nets.py`` (the agent, the stacked agents of N
seeds, NumPy copies of the actor), ``envs.py`` (spaces; N seeds x E envs with same-step autoreset),
``loss.py`` (the clipped losses), ``update.py`` (the epochs of an update, one CUDA graph each on a GPU),
``learner.py`` (``OneAgent`` for one seed, ``StackedAgents`` for N), ``policy.py`` (``PPOPolicy``,
``load_policy``, observation statistics), ``transfer.py`` (host <-> device copies), ``loop.py`` (the
training loop over a leading seed axis, checkpoints included). ``ppo`` is the loop with one seed and
``OneAgent``: its CPU runs are bitwise what they were before packed and unpacked ppo shared this code
(tests/unit/test_ppo_reference.py hashes reference runs).

Semantics
---------
The algorithm is CleanRL's single-file PPO: ``num_envs`` environments are stepped in lock-step for
``num_steps`` steps, advantages come from GAE(``gamma``, ``gae_lambda``), and the policy and value networks
(separate 64x64 tanh MLPs, orthogonal init, policy head gain 0.01, value head gain 1) are trained for
``update_epochs`` epochs of ``num_minibatches`` minibatches with the clipped surrogate objective, the
clipped value loss, an entropy bonus, global gradient-norm clipping and optionally a linearly annealed
learning rate. All hyperparameters live in ``PPOConfig`` (CleanRL's ``ppo.py`` defaults) and come from
the run's ``params``. Discrete action spaces use a categorical policy; ``Box`` action spaces use a Gaussian
with a state-independent log-std (as ``ppo_continuous_action.py``), actions are clipped to the space bounds
when stepping (the unclipped sample is what is trained on), and observation / reward normalisation
(``normalize_obs``, ``normalize_reward``) can be switched on. On a ``Box`` action space the defaults are
``ppo_continuous_action.py``'s (``CONTINUOUS_DEFAULTS``: learning rate 3e-4, one env, 2048-step rollouts,
32 minibatches, 10 epochs, no entropy bonus, observation and reward normalisation on, both clipped to
+-10), so continuous control works without params; params given in the suite override any of them.
Evaluation sees observations normalised by the training statistics as they stand (they are not updated
by evaluation episodes) and acts with the Gaussian's mean, clipped to the bounds. The training budget is
``ctx.steps`` env steps counted over all envs; the last iteration collects a shorter rollout so a run stops
at ``ctx.steps`` (rounded up to a multiple of ``num_envs``). The learning-rate annealing follows the step
count.

Vectorisation and autoreset
---------------------------
gymnasium 1.0's vector envs reset an episode on the *next* ``step`` call: that step ignores the action,
returns reward 0, ``done=False`` and the new episode's first observation. Fed to CleanRL's loop unchanged,
every episode boundary would add a bogus transition to the batch. So ppo keeps plain environments
(``ctx.make_env(seed + i)``) and steps them itself, resetting an environment on the same step its episode
ends, exactly like the gym 0.26 vector envs CleanRL was written for. The episode's true final observation
is kept, so a *truncated* (time-limit) episode is bootstrapped with ``gamma * V(final_obs)`` added to its
last reward (``bootstrap_truncated``, on by default, as in SB3; CleanRL treats truncation like
termination). Episode returns, lengths and safety costs (``info["cost"]``: NeoRL-2's SafetyCost wrapper)
are tracked here (raw rewards, before any normalisation) and logged as ``train/episode_return`` /
``train/episode_length`` / ``train/episode_cost`` at the step the episode ended. A pack on plain
``CartPole-v0/v1`` steps all its envs in one NumPy call (``envs.CartPoleBlock``: gymnasium's physics over
arrays, bit-identical observations).

Speed
-----
During a rollout the weights are fixed, so the actor's forward pass for sampling is done in NumPy on a
copy of the weights taken after each update (a few microseconds per step instead of tens for the torch
dispatch of a tiny MLP); actions are sampled with a NumPy generator seeded from the run seed. Values and
log-probabilities of the collected batch are computed by torch in one batched forward pass (one run away
from the CPU: by a NumPy copy of the critic when cheap, ``HOST_VALUES_MACS``). On a GPU every blocking copy
between host and device waits for the work queued on the device (and, when runs share it, for their
turns), so an iteration sends its batch, advantages and every epoch's permutation in one copy from a
pinned buffer and fetches the update's statistics with the actor's new weights in one copy back; an
epoch's minibatch updates are one CUDA graph, replayed (``update.py``), for one run and for a pack alike.
Evaluation acts deterministically (argmax / Gaussian mean), through torch on the CPU and through the NumPy
actor elsewhere.

Packed seeds
------------
``train_packed(ctxs)`` trains one agent per context (same params, env and budget; different seeds) with
every per-seed quantity along a leading seed axis. The stacked networks (``nets.StackedAgent``) hold each
layer's weights of all seeds in one tensor, critic and actor hidden layers together, so a forward pass is
one ``baddbmm`` per layer; on CPU, tanh is NumPy's kernel with torch's backward formula. One Adam runs over
the stacks with per-seed losses and a per-seed gradient-norm clip (``update.StackedUpdate``), so each seed
is updated as alone. Every random draw of seed ``s`` comes from a stream of ``s`` alone, the same as one
run's: the initial weights right after ``torch.manual_seed(s)``, actions from ``np.random.default_rng(s)``,
permutations from ``torch.Generator().manual_seed(s)``, env ``i`` seeded ``s + i``, evaluation by
``eval_seeds(s)``; so a seed's metrics are bit for bit the same whichever other seeds share its job, and a
pack of one reproduces ``ppo`` to float rounding (NumPy's tanh, the batched matmuls). A seed whose policy,
value or entropy loss is not finite stops there (``"diverged: NaN in <which> loss at step S"``), leaves the
stacks and the others go on. Differences from one run per job (none statistical): ``should_stop`` of any
context stops the pack; with ``target_kl`` a seed that stops its epochs early keeps counting the pack's Adam
steps; ``sys/*`` metrics describe the shared process.

Checkpoints
-----------
Checkpoints (``budget.checkpoint_every``) are taken at iteration boundaries, after the iteration's metrics
and evaluation: the agent, the optimiser (``optimizer``: torch's state dict; a pack's seed: ``adam``, its
slice of the pack's Adam state, in the ``packed`` layout), the action-sampling and minibatch-permutation
generators, the environments pickled whole, the current observations, the running episode returns and
costs and the normalisation statistics. A resumed run continues bitwise as if it had never stopped (on
CPU); a pack resumes all its seeds at their latest common step (``base.resume_together``).

The policy handed to evaluation is a ``PPOPolicy``: callable on an observation batch (the deterministic
action), ``sample(obs)`` draws from the policy as training does, and ``save(path)`` writes a checkpoint
(the agent's state dict, its config, the action space and the observation-normalisation statistics) that
``load_policy(path)`` restores without the training run. The dataset builder snapshots it this way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ..base import RunContext
from .config import CONTINUOUS_DEFAULTS, PPOConfig
from .envs import can_vectorise_cartpole
from .loop import check_pack, train
from .policy import PPOPolicy, load_policy

__all__ = ["CONTINUOUS_DEFAULTS", "PPO", "PPOConfig", "PPOPolicy", "can_vectorise_cartpole", "load_policy",
           "train_packed"]  # fmt: skip


class PPO:
    name: ClassVar[str] = "ppo"

    @staticmethod
    def check_params(params: dict[str, Any]) -> None:
        """What ``PPOConfig.from_params`` refuses for every kind of action space (the env decides the kind,
        and so the defaults, when the run starts; a value refused with one kind's defaults only is the
        run's to report)."""
        try:
            PPOConfig.from_params(params, continuous=False)
        except ValueError:
            PPOConfig.from_params(params, continuous=True)

    def train(self, ctx: RunContext) -> None:
        train([ctx], packed=False)

    @staticmethod
    def train_packed(ctxs: Sequence[RunContext]) -> dict[int, str | None]:
        """The seeds of a job (``resources.seeds_per_job``): ``train_packed`` below."""
        return train_packed(ctxs)


def train_packed(ctxs: Sequence[RunContext], vectorise: bool | None = None) -> dict[int, str | None]:
    """Train one PPO agent per context, in lock step. Returns {seed: None if it finished, else why it failed}.

    ``vectorise``: step CartPole with the NumPy-vectorised block (None: whenever the env allows it;
    False: a list of plain envs, as one run does).
    """
    check_pack(ctxs)
    return train(ctxs, packed=True, vectorise=vectorise)

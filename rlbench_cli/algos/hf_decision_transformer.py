"""``hf_decision_transformer``: a Decision Transformer built from a HuggingFace ``DecisionTransformerConfig``
(``transformers.DecisionTransformerModel``), trained from scratch on the run's offline dataset.

Nothing is downloaded: the model is built from its config alone. Training follows HuggingFace's Decision
Transformer example: windows of ``context_length`` steps (returns-to-go, timesteps from 0, an attention mask
over the left padding; see ``algos.offline``), observations standardised by the dataset's mean and std,
returns-to-go multiplied by ``reward_scale`` (the example divides by 1000), AdamW with a linear learning-rate
warm-up over ``warmup_ratio`` of the steps (then constant, as the original Decision Transformer code) and
gradients clipped to ``max_grad_norm``. One difference: a window ends at a uniformly sampled step (the
example starts it there), so that training also sees the short contexts every evaluation episode begins with.

Continuous actions: the model's tanh action head, its [-1, 1] mapped onto the env's action bounds; the loss is
the mean squared error on the actions. Discrete actions: the ``act_dim`` outputs of the action head (no tanh)
are logits over the actions, which go in as one-hot vectors; the loss is cross-entropy. Evaluation is
return-conditioned on ``target_return`` (default: the dataset's ``ref_expert``, else its best episode return;
see ``algos.offline.default_target_return``), all running episodes in one forward pass per step, actions
greedy for discrete spaces.

Saved policies (``algos.keep``): the best and final policy as transformers' ``save_pretrained`` folder plus
``conditioning.json`` (``_Policy.save``), which ``rlbench enjoy`` rebuilds with ``load_policy``.

Checkpoints (``budget.checkpoint_every``, checked every step): the model, AdamW and its warm-up schedule,
the window-sampling generator and the loss not yet logged (dropout draws from torch's global generator,
which the runner saves); a resumed run continues bitwise on CPU.

Parameters: the model's config fields below (``CONFIG_PARAMS``, with transformers' defaults; ``max_ep_len``
is the size of the timestep embedding and must exceed the longest episode) and the training ones
(``TRAIN_PARAMS``, HuggingFace's example's values). Losses go to ``train/loss/loss``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, ClassVar

import gymnasium
import numpy as np
import torch
import torch.nn.functional as F

from ..datasets.data import OfflineData
from .base import RunContext
from .offline import (
    EpisodeContexts,
    TrajectoryWindows,
    WindowBatch,
    action_bounds,
    check_dataset,
    default_target_return,
    longest_episode,
)
from .params import coerce_all

__all__ = ["HFDecisionTransformer", "CONFIG_PARAMS", "TRAIN_PARAMS", "load_policy"]

CONDITIONING = "conditioning.json"  # beside save_pretrained's files: what rebuilds the conditioning

# DecisionTransformerConfig fields a suite may set, with transformers' defaults (state_dim, act_dim and
# action_tanh come from the dataset).
CONFIG_PARAMS: dict[str, Any] = {
    "hidden_size": 128,
    "n_layer": 3,
    "n_head": 1,
    "n_inner": None,  # feed-forward width; None: 4 * hidden_size
    "activation_function": "relu",
    "resid_pdrop": 0.1,
    "embd_pdrop": 0.1,
    "attn_pdrop": 0.1,
    "max_ep_len": 4096,
}
TRAIN_PARAMS: dict[str, Any] = {
    "context_length": 20,  # K: steps per window
    "batch_size": 64,
    "learning_rate": 1e-4,
    "weight_decay": 1e-4,
    "warmup_ratio": 0.1,  # fraction of the steps over which the learning rate rises linearly from 0
    "max_grad_norm": 0.25,
    "reward_scale": 0.001,  # returns-to-go are multiplied by this
    "normalize_observations": True,  # standardise observations with the dataset's mean and std
    "target_return": None,  # None: meta.ref_expert, else the dataset's best episode return
    "logging_steps": 1000,  # the loss is averaged over and logged every this many steps
}


class _Encoding:
    """How observations, actions and returns go into the model and actions come out of it."""

    def __init__(self, data: OfflineData, env: gymnasium.Env, discrete: bool, settings: dict[str, Any]):
        self.discrete = discrete
        self.obs_shape = tuple(np.shape(data.observations)[1:])
        obs = np.asarray(data.observations, np.float64).reshape(len(data), -1)
        if settings["normalize_observations"]:
            self.obs_mean, self.obs_std = obs.mean(axis=0), obs.std(axis=0) + 1e-6
        else:
            self.obs_mean, self.obs_std = np.zeros(obs.shape[1]), np.ones(obs.shape[1])
        self.reward_scale = float(settings["reward_scale"])
        space = env.action_space
        if discrete:
            self.act_dim = int(space.n)
        else:
            self.low, self.high = action_bounds(data, space)
            self.act_dim = int(np.prod(space.shape))

    def to_dict(self) -> dict[str, Any]:
        """What rebuilds this encoding without the dataset (``from_dict``), as JSON-able numbers."""
        out: dict[str, Any] = {"discrete": self.discrete, "obs_shape": list(self.obs_shape),
                               "obs_mean": self.obs_mean.tolist(), "obs_std": self.obs_std.tolist(),
                               "reward_scale": self.reward_scale, "act_dim": self.act_dim}  # fmt: skip
        if not self.discrete:
            out["action_low"], out["action_high"] = self.low.tolist(), self.high.tolist()
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> _Encoding:
        """The encoding ``to_dict`` describes (floats round-trip exactly through JSON)."""
        enc = cls.__new__(cls)
        enc.discrete, enc.obs_shape = bool(d["discrete"]), tuple(d["obs_shape"])
        enc.obs_mean, enc.obs_std = (
            np.asarray(d["obs_mean"], np.float64),
            np.asarray(d["obs_std"], np.float64),
        )
        enc.reward_scale, enc.act_dim = float(d["reward_scale"]), int(d["act_dim"])
        if not enc.discrete:
            enc.low, enc.high = (
                np.asarray(d["action_low"], np.float64),
                np.asarray(d["action_high"], np.float64),
            )
        return enc

    def observations(self, obs: np.ndarray) -> np.ndarray:
        """Observations (leading dims, *obs_shape) as the model's flat, standardised states."""
        flat = obs.reshape(*obs.shape[: obs.ndim - len(self.obs_shape)], -1)
        return ((flat - self.obs_mean) / self.obs_std).astype(np.float32)

    def actions(self, actions: np.ndarray) -> np.ndarray:
        """Dataset actions as the model's input: one-hot, or scaled to [-1, 1]."""
        if self.discrete:
            return np.eye(self.act_dim, dtype=np.float32)[np.asarray(actions, np.int64).reshape(-1)]
        a = np.asarray(actions, np.float64).reshape(len(actions), -1)
        return (2.0 * (a - self.low) / (self.high - self.low) - 1.0).astype(np.float32)

    def env_actions(self, model_out: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """(actions for the env, the same actions as the model's input) from the action head's outputs."""
        if self.discrete:
            chosen = model_out.argmax(dim=-1).cpu().numpy()
            return chosen, np.eye(self.act_dim, dtype=np.float32)[chosen]
        scaled = model_out.clamp(-1.0, 1.0).cpu().numpy().astype(np.float64)
        return (self.low + (scaled + 1.0) * 0.5 * (self.high - self.low)).astype(np.float32), scaled


class _Policy:
    """The ``EpisodePolicy`` of the model: all running episodes in one forward pass per step.

    ``save(folder)`` writes the model with transformers' own ``save_pretrained`` (``config.json`` and the
    weights) and what rebuilds its return-to-go conditioning as ``conditioning.json`` (target return, reward
    scale, context length, the largest timestep, the observations' mean and std, the action encoding);
    ``load_policy`` reads it back (``loader``: the run's saved policies, ``algos.keep``)."""

    loader = "hf_decision_transformer:load_policy"
    policy_file = "transformer"  # a folder: save_pretrained's files and conditioning.json

    def __init__(
        self, model: Any, enc: _Encoding, settings: dict[str, Any], target_return: float, device: str
    ):
        self._model = model
        self._enc = enc
        self._length = int(settings["context_length"])
        self._max_t = int(settings["max_ep_len"]) - 1
        self._target = target_return
        self._device = device
        self._ctx: EpisodeContexts | None = None

    def save(self, path: Any) -> None:
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        self._model.save_pretrained(str(folder))
        conditioning = {"target_return": self._target, "context_length": self._length,
                        "max_ep_len": self._max_t + 1, **self._enc.to_dict()}  # fmt: skip
        (folder / CONDITIONING).write_text(json.dumps(conditioning, indent=1) + "\n")

    def reset(self, n: int) -> None:
        state_dim = len(self._enc.obs_mean)
        self._ctx = EpisodeContexts(
            n,
            self._length,
            (state_dim,),
            self._enc.act_dim,
            self._target,
            first_timestep=0,
            max_timestep=self._max_t,
        )

    def act(self, obs: np.ndarray, rewards: np.ndarray, idx: np.ndarray) -> np.ndarray:
        c = self._ctx
        assert c is not None, "reset(n) before act()"
        c.step(idx, self._enc.observations(np.asarray(obs)), rewards)
        rtg = c.returns_to_go[idx] * self._enc.reward_scale
        was_training = self._model.training
        self._model.eval()
        with torch.no_grad():
            _, preds, _ = self._model(
                **_inputs(
                    c.observations[idx], c.actions[idx], rtg, c.timesteps[idx], c.masks[idx], self._device
                )
            )
        self._model.train(was_training)
        env_actions, model_actions = self._enc.env_actions(preds[:, -1])
        c.set_actions(idx, model_actions)
        return env_actions


def load_policy(path: Any, device: str = "cpu") -> _Policy:
    """Rebuild a policy saved by ``_Policy.save``: the model by ``from_pretrained`` (nothing downloaded), the
    conditioning from ``conditioning.json``."""
    from transformers import DecisionTransformerModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a bar of its weights loading on stderr says nothing here
    folder = Path(path)
    c = json.loads((folder / CONDITIONING).read_text())
    model = DecisionTransformerModel.from_pretrained(str(folder), local_files_only=True).to(device).eval()
    settings = {"context_length": int(c["context_length"]), "max_ep_len": int(c["max_ep_len"])}
    return _Policy(model, _Encoding.from_dict(c), settings, float(c["target_return"]), device)


def _inputs(
    obs: np.ndarray,
    actions: np.ndarray,
    rtg: np.ndarray,
    timesteps: np.ndarray,
    masks: np.ndarray,
    device: str,
) -> dict[str, Any]:
    """Keyword arguments of ``DecisionTransformerModel.forward`` (which ignores ``rewards``)."""

    def t(a: np.ndarray, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.as_tensor(a, dtype=dtype, device=device)

    return {
        "states": t(obs),
        "actions": t(actions),
        "returns_to_go": t(rtg),
        "timesteps": t(timesteps, torch.long),
        "attention_mask": t(masks, torch.long),
        "return_dict": False,
    }


class HFDecisionTransformer:
    """Trains ``transformers.DecisionTransformerModel`` from scratch on ``ctx.dataset()``."""

    name: ClassVar[str] = "hf_decision_transformer"

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        cls.split_params(params)

    @classmethod
    def split_params(cls, params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """(config fields, all settings with defaults filled in). Unknown keys raise ValueError."""
        unknown = sorted(set(params) - set(CONFIG_PARAMS) - set(TRAIN_PARAMS))
        if unknown:
            valid = ", ".join(sorted({*CONFIG_PARAMS, *TRAIN_PARAMS}))
            raise ValueError(f"unknown parameter(s) for {cls.name}: {', '.join(unknown)}; valid: {valid}")
        kinds = {"n_inner": 0, "target_return": 0.0}
        settings = {**CONFIG_PARAMS, **TRAIN_PARAMS,
                    **coerce_all(cls.name, params, {**CONFIG_PARAMS, **TRAIN_PARAMS}, kinds)}  # fmt: skip
        return {k: settings[k] for k in CONFIG_PARAMS}, settings

    def build_model(self, config_fields: dict[str, Any], state_dim: int, act_dim: int, discrete: bool) -> Any:
        """A randomly initialised model from a config; transformers is imported here, when a run needs it."""
        from transformers import DecisionTransformerConfig, DecisionTransformerModel

        config = DecisionTransformerConfig(
            state_dim=state_dim,
            act_dim=act_dim,
            action_tanh=not discrete,
            bos_token_id=None,  # GPT-2's token ids mean nothing here (and trigger a warning: no vocabulary)
            eos_token_id=None,
            **config_fields,
        )
        return DecisionTransformerModel(config)

    def train(self, ctx: RunContext) -> None:
        data = ctx.dataset()
        env = ctx.make_env()
        label = repr(ctx.spec.dataset)
        discrete = check_dataset(self.name, data, env, label, discrete_ok=True, continuous_ok=True)
        config_fields, settings = self.split_params(ctx.params)
        longest = longest_episode(data)
        if longest > int(settings["max_ep_len"]):
            raise ValueError(
                f"max_ep_len ({settings['max_ep_len']}) must cover the longest episode ({longest} steps)"
            )
        enc = _Encoding(data, env, discrete, settings)
        env.close()

        torch.manual_seed(ctx.seed)
        device = ctx.device
        model = self.build_model(config_fields, len(enc.obs_mean), enc.act_dim, discrete).to(device)
        model.train()
        optim = torch.optim.AdamW(
            model.parameters(),
            lr=float(settings["learning_rate"]),
            weight_decay=float(settings["weight_decay"]),
        )
        warmup = max(1, math.ceil(float(settings["warmup_ratio"]) * ctx.steps))
        schedule = torch.optim.lr_scheduler.LambdaLR(optim, lambda s: min((s + 1) / warmup, 1.0))
        windows = TrajectoryWindows(data, enc.actions(np.asarray(data.actions)), all_ends=True)
        rng = np.random.default_rng(ctx.seed)
        batch_size, length = int(settings["batch_size"]), int(settings["context_length"])
        target = settings["target_return"]
        policy = _Policy(
            model, enc, settings, default_target_return(data) if target is None else float(target), device
        )

        logging_steps = int(settings["logging_steps"])
        loss_sum = torch.zeros((), device=device)
        count = step = first = 0
        state = ctx.resume()
        if state is None:
            ctx.maybe_evaluate(0, policy)
        else:
            model.load_state_dict(state["model"])
            optim.load_state_dict(state["optim"])
            schedule.load_state_dict(state["schedule"])
            rng = state["rng"]
            loss_sum.copy_(state["loss_sum"])
            count = int(state["count"])
            first = step = int(state["step"])
        for step in range(first + 1, ctx.steps + 1):
            loss = self._loss(model, windows.sample(batch_size, length, rng), enc, device)
            optim.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), float(settings["max_grad_norm"]))
            optim.step()
            schedule.step()
            loss_sum += loss.detach()
            count += 1
            if step % logging_steps == 0:
                ctx.sink.log(step, **{"train/loss/loss": float(loss_sum) / count})
                loss_sum.zero_()
                count = 0
            ctx.maybe_evaluate(step, policy)
            ctx.log_system(step)
            if ctx.checkpoint_due(step):
                ctx.save_checkpoint(step, {
                    "model": model.state_dict(), "optim": optim.state_dict(), "schedule": schedule.state_dict(),
                    "rng": rng, "loss_sum": loss_sum.detach().cpu(), "count": count,
                })  # fmt: skip
            if ctx.should_stop():
                break
        if count:  # the steps since the last logging step
            ctx.sink.log(step, **{"train/loss/loss": float(loss_sum) / count})
        ctx.finish(step, policy)

    @staticmethod
    def _loss(model: Any, w: WindowBatch, enc: _Encoding, device: str) -> torch.Tensor:
        """Action loss over the real (unpadded) steps of a batch of windows."""
        obs = enc.observations(w.observations) * w.masks[..., None]  # padding stays zero after standardising
        _, preds, _ = model(
            **_inputs(obs, w.actions, w.returns_to_go * enc.reward_scale, w.timesteps, w.masks, device)
        )
        real = torch.as_tensor(w.masks, device=device) > 0
        targets = torch.as_tensor(w.actions, device=device)[real]
        if enc.discrete:
            return F.cross_entropy(preds[real], targets.argmax(dim=-1))
        return F.mse_loss(preds[real], targets)

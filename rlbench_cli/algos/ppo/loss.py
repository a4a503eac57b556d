"""PPO's losses on one minibatch: the clipped surrogate, the (clipped) value loss and the entropy bonus, for
one agent's batch or, along a leading seed axis, for the batches of N seeds at once."""

from __future__ import annotations

import torch

from .config import PPOConfig

__all__ = ["clipped_losses"]


def clipped_losses(
    cfg: PPOConfig,
    newlogprob: torch.Tensor,
    entropy: torch.Tensor,
    newvalue: torch.Tensor,
    old_logprob: torch.Tensor,
    adv: torch.Tensor,
    returns: torch.Tensor,
    values: torch.Tensor,
    seed_axis: bool = False,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The loss to minimise and its parts (pg_loss, v_loss, entropy, approx_kl, clipfrac), CleanRL's formulas.

    Without ``seed_axis`` every input is one minibatch (B,) and every output a scalar; with it they are
    (N, B) and each output is (N,), seed k's alone (the loss too: summed, its gradient is each seed's own).
    """

    def mean(x: torch.Tensor) -> torch.Tensor:
        return x.mean(1) if seed_axis else x.mean()

    logratio = newlogprob - old_logprob
    ratio = logratio.exp()
    with torch.no_grad():
        approx_kl = mean((ratio - 1) - logratio)
        clipfrac = mean(((ratio - 1.0).abs() > cfg.clip_coef).float())
    if cfg.norm_adv and adv.shape[-1] > 1:
        if seed_axis:
            adv = (adv - adv.mean(1, keepdim=True)) / (adv.std(1, keepdim=True) + 1e-8)
        else:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg_loss = mean(torch.max(-adv * ratio, -adv * torch.clamp(ratio, 1 - cfg.clip_coef, 1 + cfg.clip_coef)))
    v_loss_unclipped = (newvalue - returns).pow(2)
    if cfg.clip_vloss:
        v_clipped = values + torch.clamp(newvalue - values, -cfg.clip_coef, cfg.clip_coef)
        v_loss = 0.5 * mean(torch.max(v_loss_unclipped, (v_clipped - returns).pow(2)))
    else:
        v_loss = 0.5 * mean(v_loss_unclipped)
    entropy_loss = mean(entropy)
    loss = pg_loss - cfg.ent_coef * entropy_loss + cfg.vf_coef * v_loss
    parts = {"pg_loss": pg_loss, "v_loss": v_loss, "entropy": entropy_loss, "approx_kl": approx_kl,
             "clipfrac": clipfrac}  # fmt: skip
    return loss, parts

"""The loss pieces of the value-based text algorithms (``ilql``, ``mc_returns``), as pure tensor functions.

Token-level ILQL (Snell et al., 2023): an action of k tokens (``<eoa>`` included) is k token decisions; the
state of decision j is the context plus the action's first j-1 tokens. Inside an action there is no reward
and no discount, so the Q target of token j < k is V of token j+1; the action's last token gets the turn's
reward plus the discounted V of the next turn's state (nothing after a terminal turn; no target at all for the
last turn of an episode cut by a time limit, ``q_target_mask``). V is fitted to the
target Q network's values by expectile regression (upper expectile ``tau``: V approaches the best action's Q
the data supports). ``mc_returns`` regresses Q on the Monte Carlo return-to-go of the turn instead.
"""

from __future__ import annotations

import torch

__all__ = ["expectile_loss", "ilql_q_targets", "masked_mean", "q_target_mask", "returns_to_go", "token_ce"]


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp_min(1.0)


def token_ce(logits: torch.Tensor, tokens: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """The tokens' cross-entropy (B, K) given their logits (B, K, vocab), averaged where ``valid``."""
    import torch.nn.functional as F

    ce = F.cross_entropy(logits.flatten(0, 1).float(), tokens.flatten(), reduction="none").view_as(valid)
    return masked_mean(ce, valid)


def expectile_loss(diff: torch.Tensor, tau: float, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean of |tau - 1(diff < 0)| diff^2 (over ``mask``): IQL's asymmetric squared loss of ``diff = Q - V``."""
    weight = torch.where(diff < 0, 1.0 - tau, tau)
    loss = weight * diff.pow(2)
    return loss.mean() if mask is None else masked_mean(loss, mask)


def ilql_q_targets(
    v: torch.Tensor,
    valid: torch.Tensor,
    rewards: torch.Tensor,
    terminal: torch.Tensor,
    v_next: torch.Tensor,
    gamma: float,
) -> torch.Tensor:
    """Q targets (B, K) of each action token.

    Args:
        v: V of each token's state (B, K), detached by the caller.
        valid: 1 for the real tokens of each row's action (a prefix of K), 0 for padding.
        rewards: the turn's reward (B,); terminal: 1 where nothing follows the turn (B,).
        v_next: V of the next turn's state (B,), ignored where ``terminal``.
    """
    n = valid.sum(dim=1).long()  # tokens per action
    shifted = torch.zeros_like(v)
    shifted[:, :-1] = v[:, 1:]  # token j's target is V of token j+1 ...
    last = rewards + gamma * (1.0 - terminal) * v_next  # ... and the last token's the turn's TD target
    rows = torch.arange(v.shape[0], device=v.device)
    shifted[rows, n - 1] = last
    return shifted * valid


def q_target_mask(valid: torch.Tensor, truncated: torch.Tensor) -> torch.Tensor:
    """Which action tokens (B, K) have a Q target: every real token (``valid``), except the last token of a
    turn that an episode's time limit cut (``truncated``, B): its next state is not in the data, and it is not
    a terminal state, so neither a bootstrapped nor a terminal target is right."""
    n = valid.sum(dim=1).long()
    rows = torch.arange(valid.shape[0], device=valid.device)
    mask = valid.clone()
    mask[rows, (n - 1).clamp_min(0)] *= 1.0 - truncated.to(valid.dtype)
    return mask


def returns_to_go(rewards: list[float], gamma: float) -> list[float]:
    """Discounted return from each turn of an episode to its end."""
    out, g = [0.0] * len(rewards), 0.0
    for i in range(len(rewards) - 1, -1, -1):
        g = rewards[i] + gamma * g
        out[i] = g
    return out

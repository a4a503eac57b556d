"""Offline algorithms for text tasks, trained on a text dataset (``datasets.text``) and evaluated in its env:

- ``bc`` (on a text dataset): behaviour cloning, the action tokens' cross-entropy given the context;
- ``filtered_bc``: behaviour cloning on the best ``top_fraction`` of the episodes, by return;
- ``mc_returns``: behaviour cloning plus token Q and V heads regressed on each turn's Monte Carlo
  return-to-go; acting adds ``beta`` times Q to the logits;
- ``ilql``: implicit language Q-learning (Snell et al., 2023) at the token level (see ``losses``): two Q
  heads trained by TD on V, V by expectile regression on the target network's Q (the smaller of two target
  heads, read from a target copy of the value transformer, all Polyak-averaged, as LMRL-Gym's ILQL), a
  CQL-style cross-entropy on Q, and the language model's cross-entropy (the behaviour policy); acting adds
  ``beta`` times the target Q. The last turn of an episode cut by the time limit (``"truncated"`` in the
  dataset) has no next state to bootstrap from and is no terminal state either: its last token gets no Q
  target (a terminal target there would claim that the walk ends, with its last reward as its whole value).

The value heads read the language model's hidden states (``value_model: shared``) or those of a transformer of
their own, a copy of the LM's body trained only by the value losses (``value_model: separate``, LMRL-Gym's
layout). On Maze FO's mixed data at lmrl-small's settings (500 steps) the shared heads give every cell the
same V; ``benchmarks/ilql_maze_values.py`` measures both against the maze's exact values.

Each step is one gradient step on ``batch_size`` turns drawn uniformly from the (filtered) dataset. Losses
go to ``train/loss/<name>`` every ``logging_steps``. Checkpoints (``budget.checkpoint_every``): model,
optimiser, sampler and step; a resumed run goes on from there.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch

from ..base import RunContext
from .common import TextParams, Turns, adamw, load_episodes, normalizer, settings_of, texts_of, turn_samples
from .imagined import agent_params, check_data_params, training_data
from .losses import expectile_loss, ilql_q_targets, masked_mean, q_target_mask, token_ce
from .policy import TextPolicy, _gather_pos, action_batch, build_model, build_tokenizer
from .verifier import check_oracle, check_task, check_verifier, verified_metrics

__all__ = ["TextBC", "FilteredBC", "MCReturns", "ILQL"]


class _OfflineText(TextParams):
    name: ClassVar[str] = "bc"
    values: ClassVar[bool] = False
    twin_q: ClassVar[bool] = False  # two Q heads (clipped double Q)
    own: ClassVar[dict[str, Any]] = {}
    takes_verifier: ClassVar[bool] = True  # ``verifier:`` (``algos.text.verifier``)
    takes_imagination: ClassVar[bool] = (
        True  # ``imagination:``, ``train_episodes:`` (``algos.text.imagined``)
    )

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        if "verifier" in params:
            check_verifier(params["verifier"])
        check_data_params(params)
        settings_of(cls.name, agent_params(params), cls.own)

    def setup(self, ctx: RunContext) -> tuple[Any, ...]:
        """(settings, tokenizer, turns of the data it trains on, values to log at the end)."""
        settings = settings_of(self.name, agent_params(ctx.params), self.own)
        episodes = load_episodes(ctx)
        if not len(episodes):
            raise ValueError(f"text dataset {ctx.spec.dataset!r} has no episodes")
        # the real-data budget and the data_mix: real, imagined (a world model's episodes), or both
        episodes, data_values = training_data(ctx, episodes, ctx.params)
        ctx._dataset = episodes  # what ctx.dataset() returns from now on
        if "verifier" in ctx.params:  # checked before the agent trains: a saved world model, an oracle's env
            verifier = check_verifier(ctx.params["verifier"])
            check_task(verifier, episodes, "verifier", ctx.spec.env_id)
            check_oracle(verifier, ctx.make_env)
        ctx.score_normalizer = normalizer(str(ctx.spec.dataset), ctx.spec.env_id)
        tok = build_tokenizer(settings, texts_of(episodes))
        turns = turn_samples(episodes, tok, settings)
        return settings, tok, turns, data_values

    def rows(self, turns: Turns, settings: dict[str, Any]) -> np.ndarray:
        """The samples training draws from."""
        return np.arange(len(turns))

    def train(self, ctx: RunContext) -> None:
        settings, tok, turns, data_values = self.setup(ctx)
        torch.manual_seed(ctx.seed)
        device = ctx.device
        model = build_model(settings, tok, values=self.values, twin_q=self.twin_q).to(device)
        model.train()
        params = [p for p in model.parameters() if p.requires_grad]
        optim = adamw(params, settings)
        rows = self.rows(turns, settings)
        rng = np.random.default_rng(ctx.seed)
        beta = float(settings.get("beta", 0.0)) if self.values else 0.0
        policy = TextPolicy(model, tok, settings, device, beta=beta)
        sums: dict[str, float] = {}
        count = first = step = 0
        state = ctx.resume()
        if state is None:
            ctx.maybe_evaluate(0, policy)
        else:
            model.load_state_dict(state["model"])
            optim.load_state_dict(state["optim"])
            rng = state["rng"]
            first = step = int(state["step"])
        logging_steps = int(settings["logging_steps"])
        for step in range(first + 1, ctx.steps + 1):
            batch = rows[rng.integers(len(rows), size=int(settings["batch_size"]))]
            losses = self.losses(model, tok, turns, batch, settings, device)
            total = sum(losses.values())
            optim.zero_grad(set_to_none=True)
            total.backward()  # type: ignore[union-attr]
            torch.nn.utils.clip_grad_norm_(params, float(settings["max_grad_norm"]))
            optim.step()
            if self.values:
                model.update_target(float(settings["polyak"]))
            for k, v in losses.items():
                sums[k] = sums.get(k, 0.0) + float(v.detach())
            count += 1
            if step % logging_steps == 0:
                ctx.sink.log(step, **{f"train/loss/{k}": v / count for k, v in sums.items()})
                sums, count = {}, 0
            ctx.maybe_evaluate(step, policy)
            ctx.log_system(step)
            if ctx.checkpoint_due(step):
                ctx.save_checkpoint(
                    step, {"model": model.state_dict(), "optim": optim.state_dict(), "rng": rng}
                )
            if ctx.should_stop():
                break
        if count:
            ctx.sink.log(step, **{f"train/loss/{k}": v / count for k, v in sums.items()})
        ctx.finish(step, policy)
        if data_values and not ctx.should_stop():  # what the agent trained on, the world model's fidelity
            ctx.sink.log(step, **data_values)
        verifier = ctx.params.get("verifier")
        if (
            verifier is not None and not ctx.should_stop()
        ):  # the agent with a world model checking its actions
            ctx.sink.log(step, **verified_metrics(ctx, policy, verifier))

    def losses(self, model: Any, tok: Any, turns: Turns, batch: np.ndarray, settings: dict[str, Any],
               device: str) -> dict[str, torch.Tensor]:  # fmt: skip
        b = action_batch(tok, [turns.contexts[i] for i in batch], [turns.actions[i] for i in batch], device)
        logits, _ = model(b.ids, b.mask)
        return {"bc": token_ce(_gather_pos(logits, b.pos), b.tok, b.valid)}


class TextBC(_OfflineText):
    """``bc`` on a text dataset (the suite entry ``bc`` dispatches here when its task is a text env)."""

    name: ClassVar[str] = "bc"


class FilteredBC(_OfflineText):
    name: ClassVar[str] = "filtered_bc"
    own: ClassVar[dict[str, Any]] = {"top_fraction": 0.1}  # the best this fraction of episodes, by return

    def rows(self, turns: Turns, settings: dict[str, Any]) -> np.ndarray:
        frac = float(settings["top_fraction"])
        if not 0 < frac <= 1:
            raise ValueError(f"top_fraction must be in (0, 1], got {frac}")
        n_ep = int(turns.episode.max()) + 1
        ret = np.zeros(n_ep)
        ret[turns.episode] = turns.episode_return
        keep = np.argsort(-ret, kind="stable")[: max(1, int(np.ceil(frac * n_ep)))]
        return np.flatnonzero(np.isin(turns.episode, keep))


class ILQL(_OfflineText):
    name: ClassVar[str] = "ilql"
    values: ClassVar[bool] = True
    twin_q: ClassVar[bool] = True
    bootstraps: ClassVar[bool] = True  # V is fitted to the target network's Q (mc_returns: to returns)
    own: ClassVar[dict[str, Any]] = {
        "tau": 0.7,  # expectile of V
        "beta": 4.0,  # weight of Q in the policy's logits when acting
        "cql_weight": 0.01,  # cross-entropy on the Q logits (keeps Q low off the data)
        "bc_weight": 1.0,  # the language model's cross-entropy (the behaviour policy acting adds Q to)
        "polyak": 0.005,  # target network (Q heads and their transformer) update rate
        "reward_scale": 1.0,  # rewards are multiplied by this for the value heads
        # "separate": Q and V on a transformer of their own, as LMRL-Gym's ILQL (they learn what the LM's
        # hidden states do not carry, e.g. the maze position; twice the compute); "shared": on the LM's
        "value_model": "shared",
    }

    def losses(self, model: Any, tok: Any, turns: Turns, batch: np.ndarray, settings: dict[str, Any],
               device: str) -> dict[str, torch.Tensor]:  # fmt: skip
        b = action_batch(tok, [turns.contexts[i] for i in batch], [turns.actions[i] for i in batch], device)
        logits, hidden = model(b.ids, b.mask)
        h = _gather_pos(hidden, b.pos)  # (B, K, width)
        q_alls = model.q_values(h)
        qs = [q.gather(-1, b.tok[..., None])[..., 0] for q in q_alls]
        v = model.v_head(h)[..., 0]
        q_target = None
        if self.bootstraps:
            with torch.no_grad():
                th = _gather_pos(model.target_hidden(b.ids, b.mask), b.pos)
                q_target = model.target_values(th).gather(-1, b.tok[..., None])[..., 0]
        out = {"bc": float(settings["bc_weight"]) * token_ce(_gather_pos(logits, b.pos), b.tok, b.valid)}
        out.update(self.value_losses(model, tok, turns, batch, settings, device, b, qs, v, q_target, q_alls))
        return out

    def value_losses(self, model, tok, turns, batch, settings, device, b, qs, v, q_target, q_alls):  # noqa: ANN001
        scale = float(settings["reward_scale"])
        rewards = torch.as_tensor(turns.rewards[batch] * scale, device=device)
        nxt = turns.next_index[batch]
        terminal = torch.as_tensor(turns.terminal[batch], device=device)
        v_next = torch.zeros(len(batch), device=device)
        has = np.flatnonzero(nxt >= 0)
        if len(has):
            with torch.no_grad():
                rows = nxt[has]
                nb = action_batch(
                    tok, [turns.contexts[i] for i in rows], [turns.actions[i] for i in rows], device
                )
                nh = model.value_hidden(nb.ids, nb.mask)
                v_next[torch.as_tensor(has, device=device)] = model.v_head(
                    nh[torch.arange(len(rows)), nb.first]
                )[:, 0]
        target = ilql_q_targets(v.detach(), b.valid, rewards, terminal, v_next, float(settings["gamma"]))
        q_mask = q_target_mask(b.valid, torch.as_tensor(turns.truncated[batch], device=device))
        return {
            "q": sum(masked_mean((q - target).pow(2), q_mask) for q in qs),
            "v": expectile_loss(q_target - v, float(settings["tau"]), b.valid),
            "cql": float(settings["cql_weight"]) * sum(token_ce(q_all, b.tok, b.valid) for q_all in q_alls),
        }


class MCReturns(ILQL):
    name: ClassVar[str] = "mc_returns"
    twin_q: ClassVar[bool] = False
    bootstraps: ClassVar[bool] = False
    own: ClassVar[dict[str, Any]] = {"beta": 1.0, "bc_weight": 1.0, "polyak": 1.0, "reward_scale": 1.0,
                                     "tau": 0.5, "cql_weight": 0.0, "value_model": "shared"}  # fmt: skip

    def value_losses(self, model, tok, turns, batch, settings, device, b, qs, v, q_target, q_alls):  # noqa: ANN001
        g = torch.as_tensor(turns.returns_to_go[batch] * float(settings["reward_scale"]), device=device)
        target = g[:, None] * b.valid
        return {
            "q": masked_mean((qs[0] - target).pow(2), b.valid),
            "v": masked_mean((v - target).pow(2), b.valid),
        }

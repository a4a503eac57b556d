"""``text_world_model``: a transformer that learns a text env from collected trajectories, and how faithful
it is.

One GPT-2 (built as the policies are, ``algos.text.policy``) learns two things from every turn of the
dataset, as one token sequence::

    <bos> obs_t <act> action_t <eoa> <obs> obs_t+1 <rew> reward_t <cont|done> <eoa>

the action given the observation (the agent: behaviour cloning of the dataset) and what follows an action
(the world model: the next observation, the reward as text, and whether the episode ended). A turn that ends
its episode has no next observation in the dataset: its target is ``<obs> <rew> reward <done>``.

Where a task's observation is its whole history (the partially observed maze, TextNav, Wordle: each next
observation is the current one with the new turn's lines after it), the world model predicts only the new
text, after what is known (``known_prefix``): ``suffix``, the text after the observation; ``echo``, the text
after the observation and the action written back on a line of its own (Maze PO, TextNav: ``\nmove up\n``
then the new walls); ``full``, whole observations. ``outcome: auto`` (the default) takes the first of echo and
suffix that every turn of the data the world model trains on fits (``fits``: each next observation starts
with its known text and is longer), else full; ``suffix`` or ``echo`` asked for on data that does not fit is
refused. Whatever reads a prediction back (EM, the WM rollouts, ``WorldModelEnv``, the verifier, the
imagined episodes) gets the whole next observation, the known text followed by the predicted one
(``next_observation``); the input context is cut on the left to ``max_context`` tokens as always. A whole
history is long (over 1,300 tokens after 100 maze turns) and a small model almost never copies it exactly
(Maze PO, 800 steps: EM 0.01, no episode end predicted); a new line is about 15 tokens, and copying the
action back was most of what a suffix model still got wrong after 800 steps (204 of its 235 misses of 300).
Maze PO, seed 0, ``suites/lmrl-world-model.yaml``'s recipe: EM 0.63 (800 steps) and 0.76 (1,600) with echo,
0.22 and 0.70 with suffix; episode ends 28 and 40 of 79 with echo (whole histories: EM 0.01, 0 of 79).
The mode used is logged as ``train/outcome_mode`` (0 full, 1 suffix, 2 echo). The
episodes are split: ``holdout_fraction`` of them (the last ones) are never trained on and measure EM; of the
rest, the first ``train_episodes`` are trained on (all of them for 0), the data size a scaling suite sweeps.
The loss is ``policy_weight`` times the action tokens' cross-entropy plus the outcome tokens'. The agent's
loss stays near the entropy of the data's mixed behaviour (about 0.45 a token on Maze FO's mixed data), and
its noisy gradients dominate the shared weights' updates (AdamW's second moments, gradient clipping): after
800 steps of a 2 x 64 GPT-2 at weight 1 the summed gradient's norm was 0.83 (18% of steps clipped) against
0.06 for the outcome loss alone, and EM was 0.66 where the world model alone reached 0.98; a small weight
keeps both (``suites/lmrl-world-model.yaml`` says what was measured).

Metrics, logged at the end of training (``eval/return`` and ``eval/success``, the agent's, at every
evaluation point as for every algorithm; the model's size at step 0, ``model/parameters`` and
``model/parameters_non_embedding``, what a scaling figure is drawn against: ``policy.size_metrics``):

- ``eval/em``: the greedy next-observation prediction equals the real next observation exactly, micro-averaged
  over the held-out turns that have one (at most ``em_turns`` of them, spread evenly over all the held-out
  episodes: ``datasets.text.held_out_turns``);
- ``eval/em_end``: on the held-out episodes' last turns that ended them (not a time limit's cut, where the
  dataset says so: ``truncated``), the share whose predicted outcome is exactly the end: no next observation,
  the turn's reward, ``<done>``. EM leaves these turns out (they have no next observation), yet they carry the
  goal's reward: a world model can have a high EM and never let an agent reach the goal inside it (WM and W2R
  then read 0);
- ``eval/real``: the agent's success rate in the real env (``eval_episodes`` seeded episodes of at most
  ``max_turns`` turns);
- ``eval/wm``: its success rate inside the world model, episodes starting from the same real first
  observations;
- ``eval/w2r``: each world-model episode's actions replayed open loop in the real env from the same start:
  successes / (episodes - errors), an error being an action the real env rejects (it raises, or its info says
  ``invalid``);
- ``eval/cr``: W2R / Real (not logged when Real is 0).

An episode succeeds when the env's info says ``success`` at its end or, in the world model (which predicts
no info), when it predicts ``<done>`` with a reward of at least ``success_reward`` (the text envs' goal
reward: 0 in the mazes, where every other step costs).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import torch

from ...datasets.text import held_out, held_out_ends, held_out_turns
from ..base import RunContext, eval_seeds
from .common import TextParams, adamw, load_episodes, normalizer, settings_of, texts_of
from .losses import token_ce
from .offered import offered_to
from .policy import (
    TextPolicy,
    _gather_pos,
    action_batch,
    build_model,
    build_tokenizer,
    decode_tokens,
    size_metrics,
)

__all__ = [
    "OUTCOMES",
    "TextWorldModel",
    "check_lengths",
    "check_outcome",
    "fits",
    "known_prefix",
    "next_observation",
    "outcome_code",
    "outcome_mode",
    "outcome_text",
    "outcome_error",
    "outcome_ids",
    "parse_outcome",
    "strict_outcome",
    "world_model_metrics",
]


OUTCOMES = ("auto", "full", "suffix", "echo")
AUTO_ORDER = ("echo", "suffix")  # what auto picks, the first the data fits; else full


def known_prefix(obs: str, action: str, mode: str) -> str:
    """What a next observation starts with, known before the world model predicts it: nothing (``full``),
    the observation (``suffix``), or the observation followed by the action on a line of its own (``echo``:
    a history that writes each action back)."""
    if mode == "echo":
        return f"{obs}\n{str(action).strip()}\n"
    return obs if mode == "suffix" else ""


def fits(episodes: Any, mode: str) -> bool:
    """Whether every next observation in ``episodes`` is its ``known_prefix`` under ``mode`` with more text
    after it, and there is at least one (always for ``full``)."""
    if mode == "full":
        return True
    pairs = 0
    for ep in episodes:
        for i in range(len(ep) - 1):
            known = known_prefix(str(ep[i]["observation"]), str(ep[i]["action"]), mode)
            nxt = str(ep[i + 1]["observation"])
            if len(nxt) <= len(known) or not nxt.startswith(known):
                return False
            pairs += 1
    return pairs > 0


def check_outcome(value: Any, field: str) -> None:
    """ValueError naming the ``field`` (``outcome``, ``verifier.outcome``, ...) when ``value`` is not one of
    ``OUTCOMES``."""
    if value not in OUTCOMES:
        raise ValueError(f"{field} must be one of {', '.join(OUTCOMES)} (auto: the new text alone where "
                         f"each next observation extends the current one), got {value!r}")  # fmt: skip


def outcome_mode(settings: dict[str, Any], episodes: Any, field: str) -> str:
    """What the world model of ``episodes`` predicts after an action (``full``, ``suffix`` or ``echo``: the
    next observation less its ``known_prefix``), from ``settings["outcome"]`` (see the module docstring);
    sets ``settings["outcome"]`` to it, which ``samples`` and ``predict`` read. ValueError for ``suffix`` or
    ``echo`` on data where a next observation does not start with that known text."""
    want = settings.get("outcome", "auto")
    check_outcome(want, field)
    if want == "auto":
        want = next((m for m in AUTO_ORDER if fits(episodes, m)), "full")
    elif not fits(episodes, want):
        what = "its turn's observation" + (" and action on a line of its own" if want == "echo" else "")
        raise ValueError(f"{field} {want}: the data has a next observation that does not start with {what} "
                         "(or adds nothing to it), so there is no new text alone to predict; use outcome: "
                         f"{'suffix, ' if want == 'echo' else ''}full or auto")  # fmt: skip
    settings["outcome"] = want
    return str(want)


def outcome_code(mode: str) -> float:
    """A resolved ``outcome`` mode as the number runs log (``train/outcome_mode`` and the channels' copies):
    0 full, 1 suffix, 2 echo."""
    return float(OUTCOMES.index(mode) - 1)


def outcome_text(known: str, nxt: str) -> str:
    """The next observation ``nxt`` as the world model learns it: the text after its ``known`` prefix
    (``known_prefix``; all of it for ``full``); ``""`` (an episode's end: no next observation) stays ``""``."""
    if not nxt:
        return nxt
    if not nxt.startswith(known):
        raise ValueError(
            f"outcome: next observation {nxt[:60]!r} does not start with the known {known[-60:]!r}"
        )
    return nxt[len(known) :]


def next_observation(known: str, text: str) -> str:
    """The whole next observation from a predicted ``text`` (``outcome_text``'s inverse): ``known`` followed
    by it; an empty text is no next observation (``""``) in every mode."""
    return known + text if text else text


def outcome_ids(tok: Any, next_obs: str, reward: float, done: bool) -> list[int]:
    """What follows an action: ``<obs> next_obs <rew> reward <cont|done>``."""
    return [tok.obs_id, *tok.encode(next_obs), tok.rew_id, *tok.encode(f" {reward:g}"),
            tok.done_id if done else tok.cont_id]  # fmt: skip


def parse_outcome(tok: Any, ids: list[int]) -> tuple[str, float, bool]:
    """(next observation, reward, done) from generated outcome tokens; what is missing reads as an empty
    observation, reward 0 and not done."""
    ids = list(ids)
    if ids[:1] == [tok.obs_id]:
        ids = ids[1:]
    obs_part, rest = ids, []
    if tok.rew_id in ids:
        k = ids.index(tok.rew_id)
        obs_part, rest = ids[:k], ids[k + 1 :]
    done = tok.done_id in rest
    stop = [i for i, t in enumerate(rest) if t in (tok.done_id, tok.cont_id)]
    try:
        reward = float(tok.decode(rest[: stop[0]] if stop else rest).strip())
    except ValueError:
        reward = 0.0
    return tok.decode(obs_part), reward, done


def outcome_error(tok: Any, ids: list[int]) -> str | None:
    """Why generated outcome tokens are not a whole outcome, or None when they are: ``<obs> text <rew> number
    <done|cont>`` and nothing else (no special token inside the text or the number, a finite number, the end
    marker last, a text unless the episode ends: an episode's last turn has no next observation in the data).
    ``parse_outcome`` reads anything; this says when what it read was made up."""
    ids = [int(t) for t in ids]
    ends = (tok.done_id, tok.cont_id)
    if ids[:1] != [tok.obs_id]:
        return "no <obs>"
    if tok.rew_id not in ids:
        return "no <rew>"
    if not any(t in ends for t in ids):
        return "no <cont> or <done>"
    if ids[-1] not in ends:
        return "tokens after <cont> or <done>"
    k = ids.index(tok.rew_id)
    text, number = ids[1:k], ids[k + 1 : -1]
    if not number:
        return "no reward"
    if not text and ids[-1] != tok.done_id:
        return "no observation"
    special = {tok.pad_id, tok.unk_id, tok.bos_id, tok.act_id, tok.eoa_id, tok.obs_id, tok.rew_id, *ends}
    if any(t in special for t in text + number):
        return "a special token inside the observation or the reward"
    try:
        reward = float(tok.decode(number).strip())
    except ValueError:
        return "reward is not a number"
    return None if math.isfinite(reward) else "reward is not finite"


def strict_outcome(tok: Any, ids: list[int]) -> tuple[str, float, bool] | None:
    """(next observation, reward, done) from a world model's generated outcome tokens, or None when they do
    not read as one (``outcome_error`` says why): what a rollout inside a world model acts on."""
    return None if outcome_error(tok, ids) else parse_outcome(tok, ids)


def check_lengths(settings: dict[str, Any], where: str) -> None:
    """ValueError naming the fields when a turn's longest sequence, its context, action and predicted outcome
    (``max_context`` + ``max_action_tokens`` + ``max_outcome_tokens`` + 2), cannot fit the model's
    ``n_positions``: predicting it would run past the model's last position."""
    sizes = {k: int(settings[k]) for k in ("max_context", "max_action_tokens", "max_outcome_tokens")}
    need, have = sum(sizes.values()) + 2, int(settings["n_positions"])
    if need > have:
        raise ValueError(f"{where}: max_context ({sizes['max_context']}) + max_action_tokens "
                         f"({sizes['max_action_tokens']}) + max_outcome_tokens ({sizes['max_outcome_tokens']}) + 2 = "
                         f"{need} is more than n_positions ({have}); raise n_positions to {need} or lower the others")  # fmt: skip


def world_model_metrics(real: float, w2r_successes: int, episodes: int, errors: int) -> dict[str, float]:
    """W2R = successes / (episodes - errors) and CR = W2R / Real (absent when Real is 0)."""
    out = {"eval/real": float(real)}
    w2r = w2r_successes / (episodes - errors) if episodes > errors else 0.0
    out["eval/w2r"] = float(w2r)
    if real > 0:
        out["eval/cr"] = float(w2r / real)
    return out


class TextWorldModel(TextParams):
    name: ClassVar[str] = "text_world_model"
    own: ClassVar[dict[str, Any]] = {
        "holdout_fraction": 0.1,  # episodes kept out of training, for EM
        "train_episodes": 0,  # real episodes trained on: the first N not held out (0: all of them)
        "em_turns": 200,  # held-out turns EM is measured on, at most
        "max_turns": 30,  # turns of an episode in the world model (and in the real env, to compare)
        "max_outcome_tokens": 96,  # tokens of a predicted outcome, at most
        "success_reward": 0.0,  # a world-model episode succeeds when it predicts <done> with this reward or more
        "policy_weight": 1.0,  # weight of the agent's (behaviour cloning) loss beside the world model's
        "outcome": "auto",  # next observations whole (full) or their new text (suffix, echo); auto: from the data
    }

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        settings = settings_of(cls.name, params, cls.own)
        check_outcome(settings["outcome"], "outcome")
        check_lengths(settings, cls.name)

    def train(self, ctx: RunContext) -> None:
        settings = settings_of(self.name, ctx.params, self.own)
        episodes = load_episodes(ctx)
        ctx._dataset = episodes
        ctx.score_normalizer = normalizer(str(ctx.spec.dataset), ctx.spec.env_id)
        train_eps, held = self.split(episodes, settings, str(ctx.spec.dataset))
        mode = outcome_code(outcome_mode(settings, train_eps, "outcome"))
        tok = build_tokenizer(settings, texts_of(episodes))
        samples = self.samples(tok, train_eps, settings)
        torch.manual_seed(ctx.seed)
        device = ctx.device
        model = build_model(settings, tok).to(device)
        model.train()
        optim = adamw(model.parameters(), settings)
        rng = np.random.default_rng(ctx.seed)
        agent = TextPolicy(model, tok, settings, device)
        first = step = 0
        state = ctx.resume()
        if state is None:
            ctx.sink.log(0, **size_metrics(model))
            ctx.maybe_evaluate(0, agent)
        else:
            model.load_state_dict(state["model"])
            optim.load_state_dict(state["optim"])
            rng, first = state["rng"], int(state["step"])
            step = first
        sums, count = np.zeros(2), 0
        logging_steps = int(settings["logging_steps"])
        for step in range(first + 1, ctx.steps + 1):
            rows = rng.integers(len(samples), size=int(settings["batch_size"]))
            l_pi, l_wm = self.losses(model, tok, samples, rows, device)
            loss = float(settings["policy_weight"]) * l_pi + l_wm
            optim.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), float(settings["max_grad_norm"]))
            optim.step()
            sums += [float(l_pi.detach()), float(l_wm.detach())]
            count += 1
            if step % logging_steps == 0:
                ctx.sink.log(
                    step, **{"train/loss/policy": sums[0] / count, "train/loss/world_model": sums[1] / count}
                )
                sums, count = np.zeros(2), 0
            ctx.maybe_evaluate(step, agent)
            ctx.log_system(step)
            if ctx.checkpoint_due(step):
                ctx.save_checkpoint(
                    step, {"model": model.state_dict(), "optim": optim.state_dict(), "rng": rng}
                )
            if ctx.should_stop():
                break
        if count:
            ctx.sink.log(
                step, **{"train/loss/policy": sums[0] / count, "train/loss/world_model": sums[1] / count}
            )
        ctx.finish(step, agent)
        if not ctx.should_stop():
            values = self.evaluate(ctx, model, tok, held, settings)
            ctx.sink.log(step, **{"train/outcome_mode": mode, **values})

    @staticmethod
    def losses(
        model: Any, tok: Any, samples: list[tuple[list[int], list[int], int]], rows: np.ndarray, device: str
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The agent's and the world model's cross-entropy on the ``samples`` at ``rows``: (action tokens,
        outcome tokens)."""
        b = action_batch(tok, [samples[i][0] for i in rows], [samples[i][1] for i in rows], device)
        logits, _ = model(b.ids, b.mask)
        lg = _gather_pos(logits, b.pos)
        n_act = torch.as_tensor([samples[i][2] for i in rows], device=device)
        k = torch.arange(b.valid.shape[1], device=device)[None, :]
        act_mask = b.valid * (k <= n_act[:, None])  # the action and its <eoa>
        return token_ce(lg, b.tok, act_mask), token_ce(lg, b.tok, b.valid - act_mask)

    @staticmethod
    def split(episodes: Any, settings: dict[str, Any], dataset: str) -> tuple[list[Any], list[Any]]:
        """(the episodes trained on, the held-out ones EM is measured on): the last ``holdout_fraction`` are
        held out (``datasets.text.held_out``: at least one of two or more), and of the rest the first ``train_episodes`` (all of them for 0) are trained on."""
        n_hold = held_out(len(episodes), float(settings["holdout_fraction"]))
        train_eps = list(episodes)[: len(episodes) - n_hold] or list(episodes)
        held = list(episodes)[len(episodes) - n_hold :]
        return TextWorldModel.first_episodes(train_eps, int(settings["train_episodes"]), dataset), held

    @staticmethod
    def first_episodes(train_eps: list[Any], n: int, dataset: str) -> list[Any]:
        """The first ``n`` training episodes (all of them for 0): the data size a scaling suite sweeps. The
        held-out episodes stay the same whatever ``n`` is, so EM is measured on the same turns."""
        if n < 0 or n > len(train_eps):
            raise ValueError(f"train_episodes {n}: dataset {dataset!r} has {len(train_eps)} episodes to train "
                             "on (those not held out); use 1 to that many, or 0 for all")  # fmt: skip
        return train_eps[:n] if n else train_eps

    @staticmethod
    def samples(
        tok: Any, episodes: list[Any], settings: dict[str, Any]
    ) -> list[tuple[list[int], list[int], int]]:
        """(context ids, action + outcome ids, action length) of every turn. The action and outcome are cut on
        the right to what fits the model's ``n_positions`` after the context (and the ``<eoa>`` the batch adds):
        a partially observed maze's next observation is its whole history, longer than any model of a few
        hundred positions takes; the world model learns its beginning, and what it cannot see it cannot
        predict (EM counts such a turn as a miss). With ``settings["outcome"]`` ``suffix`` or ``echo`` the next
        observation is only its new text (``outcome_text``)."""
        limit, act_limit = int(settings["max_context"]), int(settings["max_action_tokens"])
        positions = int(settings["n_positions"])
        mode = str(settings.get("outcome", "full"))
        out = []
        for ep in episodes:
            for i, t in enumerate(ep):
                known = known_prefix(t["observation"], t["action"], mode)
                nxt = outcome_text(known, ep[i + 1]["observation"]) if i + 1 < len(ep) else ""
                ctx_ids = ([tok.bos_id, *tok.encode(t["observation"]), tok.act_id])[-limit:]
                act = tok.encode(t["action"])[:act_limit]
                tail = outcome_ids(tok, nxt, float(t["reward"]), bool(t["done"]) or i + 1 == len(ep))
                out.append((ctx_ids, (act + [tok.eoa_id] + tail)[: positions - len(ctx_ids) - 1], len(act)))
        return out

    @staticmethod
    def predict(model: Any, tok: Any, obs: list[str], actions: list[str], settings: dict[str, Any],
                device: str, parse: Any = parse_outcome) -> list[Any]:  # fmt: skip
        """The greedy outcome of each (observation, action), read by ``parse(tok, ids)`` (``parse_outcome``;
        ``strict_outcome`` returns None for tokens that do not read as an outcome), its text made the whole
        next observation (``next_observation``: with ``settings["outcome"]`` ``suffix`` or ``echo``, the
        known text, ``known_prefix``, followed by the predicted text)."""
        limit = int(settings["max_context"])
        contexts = [([tok.bos_id, *tok.encode(o), tok.act_id])[-limit:] + tok.encode(a) + [tok.eoa_id]
                    for o, a in zip(obs, actions)]  # fmt: skip
        banned = [tok.pad_id, tok.bos_id, tok.act_id, tok.unk_id]
        was = model.training
        model.eval()
        try:
            out = decode_tokens(model, tok, contexts, int(settings["max_outcome_tokens"]), banned, device)
        finally:
            model.train(was)
        mode = str(settings.get("outcome", "full"))
        read = [parse(tok, ids) for ids, _ in out]
        if mode == "full":
            return read
        return [r if r is None else (next_observation(known_prefix(o, a, mode), r[0]), *r[1:])
                for o, a, r in zip(obs, actions, read)]  # fmt: skip

    @staticmethod
    def predict_chunked(model: Any, tok: Any, obs: list[str], actions: list[str], settings: dict[str, Any],
                        device: str, chunk: int = 64) -> list[tuple[str, float, bool]]:  # fmt: skip
        """``predict`` in batches of ``chunk`` pairs."""
        out: list[Any] = []
        for s in range(0, len(obs), chunk):
            out += TextWorldModel.predict(
                model, tok, obs[s : s + chunk], actions[s : s + chunk], settings, device
            )
        return out

    def evaluate(
        self,
        ctx: RunContext,
        model: Any,
        tok: Any,
        held: list[Any],
        settings: dict[str, Any],
        agent: TextPolicy | None = None,
    ) -> dict[str, float]:
        """EM on ``held``, and Real, WM, W2R and CR of ``agent`` (the world model's own behaviour cloning head
        when None) with the world model ``model``: the module docstring's metrics, named ``eval/...``."""
        device = ctx.device
        values: dict[str, float] = {}
        # EM on held-out turns that have a next observation, spread over all the held-out episodes
        pairs = held_out_turns(held, int(settings["em_turns"]))
        if pairs:
            pred = self.predict_chunked(
                model, tok, [p[0] for p in pairs], [p[1] for p in pairs], settings, device
            )
            values["eval/em"] = sum(pr[0] == p[2] for pr, p in zip(pred, pairs)) / len(pairs)
        # the turns that end an episode (not a time limit's end): is the end and its reward predicted?
        ends = held_out_ends(held, int(settings["em_turns"]))
        if ends:
            pred = self.predict_chunked(model, tok, [str(t["observation"]) for t in ends],
                                        [str(t["action"]) for t in ends], settings, device)  # fmt: skip
            values["eval/em_end"] = sum(
                pr == ("", float(t["reward"]), True) for pr, t in zip(pred, ends)
            ) / len(ends)
        seeds = eval_seeds(ctx.seed, int(ctx.spec.budget["eval_episodes"]))
        max_turns = int(settings["max_turns"])
        agent = agent if agent is not None else TextPolicy(model, tok, settings, device)
        envs = [ctx.make_env(seed=s) for s in seeds]
        starts = [str(env.reset(seed=s)[0]) for env, s in zip(envs, seeds)]
        real = self.play_real(envs, seeds, agent, max_turns)
        # inside the world model, from the same first observations
        for env, s in zip(envs, seeds):
            env.reset(seed=s)
        offered = offered_to(envs)  # the actions a predicted observation lists, else the real env's at reset
        agent.bind(offered)  # type: ignore[arg-type]
        agent.reset(len(envs))
        obs, alive = list(starts), list(range(len(envs)))
        actions: list[list[str]] = [[] for _ in envs]
        wm_success = np.zeros(len(envs))
        for _ in range(max_turns):
            if not alive:
                break
            for i in alive:
                offered[i].obs = obs[i]
            acts = agent.act(
                np.array([obs[i] for i in alive], dtype=object), np.zeros(len(alive)), np.array(alive)
            )
            pred = self.predict(model, tok, [obs[i] for i in alive], [str(a) for a in acts], settings, device)
            still = []
            for i, a, (o, r, done) in zip(alive, acts, pred):
                actions[i].append(str(a))
                obs[i] = o
                if done:
                    wm_success[i] = float(r >= float(settings["success_reward"]))
                else:
                    still.append(i)
            alive = still
        # the world model's actions, open loop in the real env
        ok = errors = 0
        for env, s, acts in zip(envs, seeds, actions):
            env.reset(seed=s)
            try:
                succeeded = False
                for a in acts:
                    _, _, term, trunc, info = env.step(a)
                    if isinstance(info, dict) and info.get("invalid"):
                        raise ValueError("invalid action")
                    if term or trunc:
                        succeeded = bool(info.get("success", term)) if isinstance(info, dict) else bool(term)
                        break
                ok += succeeded
            except Exception:  # noqa: BLE001 - an action the real env rejects is an error, not a failure
                errors += 1
        for env in envs:
            env.close()
        values["eval/wm"] = float(wm_success.mean())
        values.update(world_model_metrics(real, ok, len(envs), errors))
        return values

    @staticmethod
    def play_real(envs: list[Any], seeds: list[int], agent: TextPolicy, max_turns: int) -> float:
        """The agent's success rate in the real envs, episodes of at most ``max_turns`` turns."""
        agent.bind(envs)
        agent.reset(len(envs))
        obs = [str(env.reset(seed=s)[0]) for env, s in zip(envs, seeds)]
        alive, success = list(range(len(envs))), np.zeros(len(envs))
        for _ in range(max_turns):
            if not alive:
                break
            acts = agent.act(
                np.array([obs[i] for i in alive], dtype=object), np.zeros(len(alive)), np.array(alive)
            )
            still = []
            for i, a in zip(alive, acts):
                o, _, term, trunc, info = envs[i].step(str(a))
                obs[i] = str(o)
                if term or trunc:
                    success[i] = float(bool(info.get("success", term)) if isinstance(info, dict) else term)
                else:
                    still.append(i)
            alive = still
        return float(success.mean())

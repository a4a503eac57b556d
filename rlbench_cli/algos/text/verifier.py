"""Verification, the first agent-utility channel of a text world model: before a text agent's action is
executed, a world model predicts its outcome, and an action predicted to fail is replaced by the agent's
next choice.

``verifier: {world_model_steps: N, tries: K, ...}`` on ``bc``, ``filtered_bc``, ``mc_returns`` or ``ilql``
(on a text task): after the agent has trained, the run trains a world model on the same dataset with
``text_world_model``'s code (``TextWorldModel.samples``, ``.losses``, ``.predict``: its outcome tokens only,
``N`` steps; the model and training settings are the text algorithms' own, given inside ``verifier``,
e.g. ``n_embd``, ``learning_rate``), then plays the run's evaluation episodes (the same seeds as
``eval/return``) with the verifier. Each turn the agent ranks the env's valid actions (an env that lists none:
its one decoded action); the world model predicts the outcome of the best, and while the prediction is a
failure, of the next, up to ``K`` of them; the first one not predicted to fail is executed, and the agent's
first choice when all ``K`` are. A predicted failure (``predicted_failure``): an end of the episode with a
reward below ``success_reward`` (a loss, or the end without success), or, the episode going on, a next
observation equal to the current one (a wall, an invalid move: nothing changes) or to one seen earlier in the
episode (a loop, a repeated guess). Where the world model predicts only each turn's new text (``outcome``
``suffix`` or ``echo``: the observation is the whole history, which always grows), the rule compares that
new text instead (``turn_text``): a failure is a turn whose new text is the one the last turn added (the
episode's first observation counts as the first turn's). Maze PO's new line names the walls around the agent,
not its position: a move into a wall repeats it exactly, and so does a step inside a straight corridor
(14 of the maze's 50 moves between free cells), which the text cannot tell from a bump; 8 wall lines describe
its 26 free cells, so a line seen earlier is no sign of a loop and only the last one is compared. With
``suffix`` the new text starts with the action, so a bump repeats it only after the same action (``auto``
picks ``echo`` on Maze PO and TextNav). ``loops`` says which turns a turn must not repeat: ``episode`` (any
earlier one: a loop, a repeated guess), ``last`` (the last one only), ``auto`` (episode for whole
observations, last for a history's new text, as Maze PO needs). Where a turn's new text names the state
(TextNav's room, what is in it and the commands there; Wordle's guess and its feedback), ``episode`` catches
walking back and forth and a guess made before. One probe (MazePO-v0-mixed, seed 0, bc 100 steps at 2 x 64, world
model 300 steps, echo, 5 episodes): 1.2% of turns vetoed, none falsely, 2.8 predictions a turn (most turns
all three tries read as no progress: the first choice stands), return -80.8 with and without the verifier.

Logged once at the end of training, at the run's last step, beside the final ``eval/return`` (which stays
the agent WITHOUT the verifier): ``eval/verified/return``, ``eval/verified/success`` (where the env reports
it), ``eval/verified/normalized_return`` (where the run has a normaliser), ``eval/verified/length``,
``eval/verified/calls_per_step`` (world-model predictions per executed turn), ``eval/verified/veto_rate``
(turns whose executed action is not the agent's first choice), ``eval/verified/false_veto_rate`` (of those,
the share whose first choice was in fact good: replayed in a copy of the real env, it did not fail by the
same rule, the env's ``invalid`` flag counting as a failure; over the vetoes whose env could be copied: a
move the rule itself misjudges is not counted, e.g. Maze PO's corridor steps, see ``oracle``) and
``eval/verified/world_model_loss`` (the outcome tokens' cross-entropy over the last 10% of its steps) and
``eval/verified/world_model_outcome_mode`` (0: whole next observations, 1 and 2: only each turn's new text,
``verifier.outcome``: ``text_world_model``'s ``outcome``). And the world model's fidelity, as the other two
channels log it (``TextWorldModel.evaluate``): ``eval/world_model/em`` (and ``em_end``) on the dataset's last
``holdout_fraction`` of episodes, which its training never sees (a loaded one's run held out the same ones
when it trained on this dataset with its default ``holdout_fraction``), and, for the run's agent without the
verifier, ``eval/world_model/real``, ``wm``, ``w2r`` and ``cr`` on the run's evaluation episodes (at most
``max_turns`` turns each): a verifier's figure is read beside its world model's EM and CR.

``verifier.oracle: true``: no world model; a copy of the real env tells each action's outcome (``oracle_outcome``),
the same rule judging it: what an exact world model could do for this agent, the channel's ceiling (a null
result with the oracle says the agent's failures are not ones a veto of its ranked choices can avert). Logged
``eval/verified/oracle`` = 1 and no world-model metrics; an env that cannot be copied is a ValueError.
Measured (``results/reference/wm-oracle``): on Maze PO an exact verifier lowers success (the last-line rule
vetoes steps along a corridor, which repeat the wall line as a bump does), so there the rule is what fails.

``verifier.world_model``: a saved ``text_world_model`` (its run's folder or kept final policy) is loaded instead of training
one (``algos.text.loaded``, ``world_model_of``); the run then logs the loaded flag in place of the world
model's training loss.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch

from ...suite.world_models import find_world_model
from ..base import RunContext, eval_seeds
from .common import adamw, settings_of, texts_of
from .loaded import check_loaded, load_world_model, loaded_settings, vocabulary_problem
from .policy import TextPolicy, build_model, build_tokenizer
from .world_model import TextWorldModel, check_outcome, known_prefix, outcome_code, outcome_mode

__all__ = [
    "VERIFIER_OWN",
    "check_oracle",
    "check_task",
    "check_verifier",
    "predicted_failure",
    "real_failure",
    "turn_text",
    "verified_metrics",
    "world_model_of",
]

VERIFIER_OWN: dict[str, Any] = {
    "world_model_steps": 300,  # gradient steps of the world model, trained after the agent
    "tries": 3,  # the agent's ranked actions the world model checks each turn, at most
    "success_reward": 0.0,  # an end predicted with at least this reward is a success (the mazes' goal: 0)
    "max_outcome_tokens": 96,  # tokens of a predicted outcome, at most
    "outcome": "auto",  # next observations whole (full) or their new text (suffix, echo); auto: from the data
    "world_model": "",  # a saved text_world_model to load instead of training one (algos.text.loaded)
    "holdout_fraction": 0.1,  # the dataset's last episodes kept out of the world model's training, for its EM
    "em_turns": 200,  # held-out turns EM is measured on, at most
    "max_turns": 30,  # turns of an episode inside the world model (CR), and in the real env to compare
    "loops": "auto",  # no progress is a repeat of: the episode's earlier turns (episode), the last (last); auto
    "oracle": False,  # the real env, copied, predicts each outcome: the channel's ceiling, no world model
}
LOOPS = ("auto", "episode", "last")
MAX_WORLD_MODEL_STEPS = 1_000_000


def check_verifier(value: Any) -> dict[str, Any]:
    """The verifier's settings (world model, training and ``VERIFIER_OWN``, defaults filled in); ValueError
    naming the field for a value it cannot take."""
    if not isinstance(value, dict):
        raise ValueError(
            f"verifier must be a mapping, e.g. {{world_model_steps: 300, tries: 3}}; got {value!r}"
        )
    settings = settings_of("verifier", value, VERIFIER_OWN)
    n = int(settings["world_model_steps"])
    if not 1 <= n <= MAX_WORLD_MODEL_STEPS:
        raise ValueError(f"verifier.world_model_steps must be 1 to {MAX_WORLD_MODEL_STEPS}, got {n}")
    tries, most = int(settings["tries"]), int(settings["max_candidates"])
    if not 2 <= tries <= most:
        raise ValueError(f"verifier.tries must be 2 to max_candidates ({most}), got {tries}: the agent's first "
                         "choice and at least one alternative")  # fmt: skip
    if not 0 <= float(settings["holdout_fraction"]) < 1:
        raise ValueError(f"verifier.holdout_fraction must be in [0, 1), got {settings['holdout_fraction']}: the "
                         "share of the dataset's episodes (its last ones) the world model's EM is measured on, "
                         "never trained on (0: none, no EM)")  # fmt: skip
    check_outcome(settings["outcome"], "verifier.outcome")
    if settings["loops"] not in LOOPS:
        raise ValueError(f"verifier.loops must be one of {', '.join(LOOPS)}, got {settings['loops']!r}: what a "
                         "turn must not repeat to count as progress (episode: any earlier turn's text, last: "
                         "the last turn's; auto: episode for whole observations, last for a history)")  # fmt: skip
    if settings["oracle"] not in (True, False):
        raise ValueError(f"verifier.oracle must be true or false, got {settings['oracle']!r}")
    if settings["oracle"] and settings["world_model"] not in (None, ""):
        raise ValueError("verifier.oracle: an oracle verifier asks a copy of the real env, not a world model; "
                         "remove world_model, or oracle to use the saved world model")  # fmt: skip
    check_loaded("verifier", value, settings)
    return settings


def check_task(settings: dict[str, Any], episodes: Any, channel: str, task: str) -> None:
    """ValueError naming ``channel.world_model`` when the saved world model it names does not fit ``task``'s
    text (``loaded.vocabulary_problem``), so a run finds out before it trains; nothing without one."""
    if settings.get("world_model") in (None, ""):
        return
    where = f"{channel}.world_model"
    problem = vocabulary_problem(
        find_world_model(settings["world_model"], where), texts_of(episodes), where, task
    )
    if problem:
        raise ValueError(problem)


def history_mode(settings: dict[str, Any]) -> str:
    """How the verifier compares outcomes: ``suffix`` or ``echo`` (the resolved ``settings["outcome"]``: each
    turn's new text), else ``full`` (whole observations; also an ``outcome: auto`` not yet resolved)."""
    mode = str(settings.get("outcome", "full"))
    return mode if mode in ("suffix", "echo") else "full"


def turn_text(obs: str, action: str, nxt: str, mode: str) -> str:
    """What a turn adds: the next observation ``nxt`` after its ``known_prefix`` under ``mode`` (all of it for
    ``full``, or where it does not start with that known text)."""
    known = known_prefix(obs, action, mode)
    return nxt[len(known) :] if nxt.startswith(known) else nxt


def remembers_episode(settings: dict[str, Any], mode: str) -> bool:
    """Whether a repeat of any earlier turn of the episode counts as no progress (``loops: episode``), or of
    the last one only (``last``). ``auto``: the episode for whole observations (a maze cell seen before), the
    last turn for a history's new text (Maze PO's wall lines repeat without a loop; see the module)."""
    loops = settings.get("loops", "auto")
    return mode == "full" if loops == "auto" else loops == "episode"


def oracle_outcome(env: Any, action: str) -> tuple[str, float, bool]:
    """(next observation, reward, done) of ``action`` in a copy of the real ``env``: what an exact world model
    would predict (``verifier.oracle``). ValueError naming the field when the env cannot be copied."""
    o, r, term, trunc, _ = copied(env).step(action)
    return str(o), float(r), bool(term or trunc)


def copied(env: Any) -> Any:
    """A deep copy of ``env``; ValueError naming ``verifier.oracle`` when it cannot be copied."""
    try:
        return copy.deepcopy(env)
    except Exception as e:  # noqa: BLE001 - an env holding a process or a socket (Stockfish)
        raise ValueError(f"verifier.oracle: this env cannot be copied ({type(e).__name__}), so no copy of it can "
                         "tell an action's outcome; use a world model (remove oracle)") from e  # fmt: skip


def check_oracle(settings: dict[str, Any], make_env: Any) -> None:
    """ValueError (``copied``'s) when ``verifier.oracle`` is on and the run's env cannot be copied: checked as
    the run starts, before the agent trains, not after."""
    if not settings.get("oracle"):
        return
    env = make_env()
    try:
        env.reset(seed=0)
        copied(env)
    finally:
        env.close()


def predicted_failure(
    obs: str,
    seen: set[str],
    outcome: tuple[str, float, bool],
    success_reward: float,
    action: str = "",
    mode: str = "full",
) -> bool:
    """Whether an outcome (next observation, reward, done) of ``action`` is a failure: an end with a reward
    below ``success_reward``, or, going on, no progress. ``full``: the same observation again or one ``seen``
    earlier in the episode. ``suffix``/``echo`` (a history): the turn's new text (``turn_text``) is in
    ``seen``, which then holds the new text of the last turn or of every earlier one (``play_verified``,
    ``remembers_episode``)."""
    nxt, reward, done = outcome
    if done:
        return reward < success_reward
    if mode == "full":
        return nxt == obs or nxt in seen
    return turn_text(obs, action, nxt, mode) in seen


def real_failure(env: Any, action: str, obs: str, seen: set[str], mode: str = "full") -> bool | None:
    """Whether ``action`` fails in a copy of the real ``env`` by ``predicted_failure``'s rule (an invalid
    action, an end without success, no progress); None when the env cannot be copied."""
    try:
        twin = copy.deepcopy(env)
    except Exception:  # noqa: BLE001 - an env holding a process or a socket (Stockfish) is not checked
        return None
    o, _, term, trunc, info = twin.step(action)
    info = info if isinstance(info, dict) else {}
    if info.get("invalid"):
        return True
    if term or trunc:
        return not bool(info.get("success", False))
    return predicted_failure(obs, seen, (str(o), 0.0, False), 0.0, action, mode)


def train_world_model(
    episodes: Any,
    settings: dict[str, Any],
    seed: int,
    device: str,
    policy: bool = False,
    field: str = "outcome",
) -> tuple[Any, Any, float]:
    """A world model of ``episodes``: (model, tokenizer, mean outcome loss over the last 10% of its steps).
    ``policy``: its action head learns the episodes' actions too (``text_world_model``'s two losses), so the
    model also clones their behaviour (``algos.text.imagined`` acts with it). ``settings["outcome"]`` is
    resolved in place (``world_model.outcome_mode``; ``field`` names it in an error), so that predictions
    with the same settings read the model's outcomes back as whole observations. Shared by the three
    agent-utility channels."""
    outcome_mode(settings, episodes, field)
    tok = build_tokenizer(settings, texts_of(episodes))
    samples = TextWorldModel.samples(tok, list(episodes), settings)
    torch.manual_seed(seed)
    model = build_model(settings, tok).to(device)
    model.train()
    optim = adamw(model.parameters(), settings)
    rng = np.random.default_rng(seed)
    steps = int(settings["world_model_steps"])
    tail: list[float] = []
    for step in range(steps):
        rows = rng.integers(len(samples), size=int(settings["batch_size"]))
        l_pi, loss = TextWorldModel.losses(model, tok, samples, rows, device)
        optim.zero_grad(set_to_none=True)
        (loss + l_pi if policy else loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), float(settings["max_grad_norm"]))
        optim.step()
        if step >= steps - max(1, steps // 10):
            tail.append(float(loss.detach()))
    model.eval()
    return model, tok, float(np.mean(tail))


def world_model_of(
    episodes: Any,
    settings: dict[str, Any],
    seed: int,
    device: str,
    channel: str,
    task: str,
    policy: bool = False,
    checked: bool = False,
) -> tuple[Any, Any, float | None]:
    """The channel's world model: (model, tokenizer, its training loss), trained on ``episodes``
    (``train_world_model``), or, where ``settings["world_model"]`` names a saved one, loaded
    (``loaded.load_world_model``: its tokenizer checked against ``episodes``' text, ``task`` in a message),
    its own settings put in ``settings`` in place (``loaded.loaded_settings``) and no loss (None). ``checked``:
    the tokenizer was checked against ``episodes`` already (``check_task``, before the agent trained)."""
    path = settings.get("world_model")
    if path in (None, ""):
        return train_world_model(episodes, settings, seed, device, policy=policy, field=f"{channel}.outcome")
    where = f"{channel}.world_model"
    saved = find_world_model(path, where)
    model, tok = load_world_model(saved, None if checked else texts_of(episodes), where, task, device)
    settings.update(loaded_settings(settings, saved))
    return model, tok, None


def ranked_actions(
    policy: TextPolicy, contexts: list[list[int]], cands: list[list[str] | None]
) -> list[list[str]]:
    """Each context's candidate actions, the agent's first choice first (as ``TextPolicy.choose`` picks it),
    then by falling log-likelihood; a context without candidates gets its one decoded action."""
    out: list[list[str]] = [[] for _ in contexts]
    scored = [j for j, c in enumerate(cands) if c]
    if scored:
        scores = policy._score([contexts[j] for j in scored], [cands[j] for j in scored])  # type: ignore[misc]
        for j, sc in zip(scored, scores):
            out[j] = [cands[j][m] for m in np.argsort(-sc, kind="stable")]  # type: ignore[index]
    rest = [j for j, c in enumerate(cands) if not c]
    if rest:
        acts, _ = policy.choose([contexts[j] for j in rest], [None] * len(rest))
        for j, a in zip(rest, acts):
            out[j] = [a]
    return out


def play_verified(
    envs: list[Any], seeds: list[int], policy: TextPolicy, judge: Any, settings: dict[str, Any]
) -> dict[str, Any]:
    """One seeded episode in each env with the verifier: returns, lengths, successes (None where an env does
    not report them) and the verifier's counts. ``judge(obs, actions)`` predicts each pair's outcome; None: a
    copy of the pair's real env tells it (``oracle_outcome``: the verifier's ceiling)."""
    n, tries, goal = len(envs), int(settings["tries"]), float(settings["success_reward"])
    mode = history_mode(settings)
    whole_episode = remembers_episode(settings, mode)
    policy.bind(envs)
    policy.reset(n)
    obs = [str(env.reset(seed=s)[0]) for env, s in zip(envs, seeds)]
    seen = [{o} for o in obs]
    returns, lengths = np.zeros(n), np.zeros(n, np.int64)
    success: list[Any] = [None] * n
    counts = {"calls": 0, "turns": 0, "vetoes": 0, "checked": 0, "false_vetoes": 0}
    alive = list(range(n))
    was = policy.model.training
    policy.model.eval()
    try:
        while alive:
            contexts = [policy.context(i, obs[i]) for i in alive]
            ranked = ranked_actions(policy, contexts, [policy.candidates(i) for i in alive])
            chosen = [r[0] for r in ranked]
            pending = list(range(len(alive)))
            for k in range(tries):
                todo = [j for j in pending if k < len(ranked[j])]
                if not todo:
                    break
                pred = (
                    judge([obs[alive[j]] for j in todo], [ranked[j][k] for j in todo])
                    if judge is not None
                    else [oracle_outcome(envs[alive[j]], ranked[j][k]) for j in todo]
                )
                counts["calls"] += len(todo)
                pending = []
                for j, outcome in zip(todo, pred):
                    i = alive[j]
                    if predicted_failure(obs[i], seen[i], outcome, goal, ranked[j][k], mode):
                        pending.append(j)
                    else:
                        chosen[j] = ranked[j][k]
            still = []
            for j, i in enumerate(alive):
                a = chosen[j]
                if a != ranked[j][0]:
                    counts["vetoes"] += 1
                    bad = real_failure(envs[i], ranked[j][0], obs[i], seen[i], mode)
                    if bad is not None:
                        counts["checked"] += 1
                        counts["false_vetoes"] += int(not bad)
                policy.turns[i].append((obs[i], a))
                o, r, term, trunc, info = envs[i].step(a)
                counts["turns"] += 1
                returns[i] += r
                lengths[i] += 1
                new = str(o) if mode == "full" else turn_text(obs[i], a, str(o), mode)
                if whole_episode:
                    seen[i].add(new)
                else:  # what the next turn must not repeat: this one's observation or new text
                    seen[i] = {new}
                obs[i] = str(o)
                if term or trunc:
                    success[i] = info.get("success") if isinstance(info, dict) else None
                else:
                    still.append(i)
            alive = still
    finally:
        policy.model.train(was)
    return {"returns": returns, "lengths": lengths, "success": success, **counts}


def play_metrics(
    ctx: RunContext, policy: TextPolicy, judge: Any, settings: dict[str, Any]
) -> dict[str, float]:
    """The run's evaluation episodes played with the verifier (``judge``; None: the oracle), as the
    ``eval/verified/*`` metrics other than the world model's."""
    seeds = eval_seeds(ctx.seed, int(ctx.spec.budget["eval_episodes"]))
    envs = [ctx.make_env(seed=s) for s in seeds]
    try:
        out = play_verified(envs, seeds, policy, judge, settings)
    finally:
        for env in envs:
            env.close()
    mean = float(out["returns"].mean())
    values = {
        "eval/verified/return": mean,
        "eval/verified/length": float(out["lengths"].mean()),
        "eval/verified/calls_per_step": out["calls"] / max(1, out["turns"]),
        "eval/verified/veto_rate": out["vetoes"] / max(1, out["turns"]),
        "eval/verified/world_model_outcome_mode": outcome_code(settings["outcome"]),
    }
    if out["checked"]:
        values["eval/verified/false_veto_rate"] = out["false_vetoes"] / out["checked"]
    if all(s is not None for s in out["success"]):
        values["eval/verified/success"] = float(np.mean([bool(s) for s in out["success"]]))
    if ctx.score_normalizer is not None:
        values["eval/verified/normalized_return"] = float(ctx.score_normalizer(mean))
    return values


def oracle_metrics(ctx: RunContext, policy: TextPolicy, settings: dict[str, Any]) -> dict[str, float]:
    """``verifier.oracle``: the evaluation episodes played with a copy of the real env as the verifier (an exact
    world model: no training, no fidelity to report), flagged ``eval/verified/oracle`` = 1. The turns are
    compared as a world model of the dataset would predict them (``outcome: auto`` resolved on its data)."""
    outcome_mode(settings, ctx.dataset(), "verifier.outcome")
    return {**play_metrics(ctx, policy, None, settings), "eval/verified/oracle": 1.0}


def verified_metrics(ctx: RunContext, policy: TextPolicy, verifier: dict[str, Any]) -> dict[str, float]:
    """Train the world model on the run's dataset (less its held-out last ``holdout_fraction``), play the run's
    evaluation episodes with the verifier, and return the ``eval/verified/*`` metrics and the world model's
    ``eval/world_model/*`` fidelity (see the module docstring)."""
    settings = check_verifier(verifier)
    device = ctx.device
    if settings["oracle"]:
        return oracle_metrics(ctx, policy, settings)
    # text_world_model's split: the last holdout_fraction held out, every other episode trained on
    train_eps, held = TextWorldModel.split(
        ctx.dataset(),
        {"holdout_fraction": settings["holdout_fraction"], "train_episodes": 0},
        str(ctx.spec.dataset),
    )
    model, tok, loss = world_model_of(
        train_eps, settings, ctx.seed, device, "verifier", ctx.spec.env_id, checked=True
    )

    def judge(obs: list[str], actions: list[str]) -> list[tuple[str, float, bool]]:
        return TextWorldModel.predict(model, tok, obs, actions, settings, device)

    values = play_metrics(ctx, policy, judge, settings)
    # a loaded world model trained here for no step: its flag instead of a training loss
    values.update(
        {"eval/verified/world_model_loaded": 1.0}
        if loss is None
        else {"eval/verified/world_model_loss": loss}
    )
    fidelity = TextWorldModel().evaluate(ctx, model, tok, held, settings, agent=policy)
    values.update({f"eval/world_model/{k.partition('/')[2]}": v for k, v in fidelity.items()})
    return values

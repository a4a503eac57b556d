"""The interface between rlbench and an algorithm: ``RunContext`` in, metrics out.

An adapter is a class with a ``name`` and a ``train(ctx)`` method. It trains for ``ctx.steps`` environment
steps, calls ``ctx.maybe_evaluate(step, policy)`` as it goes and ``ctx.finish(step, policy)`` at the end,
and logs whatever else it likes through ``ctx.sink``. Evaluation is shared: every algorithm is scored on
the same seeded evaluation episodes, in the same way, under the same metric names.

Offline adapters train for ``ctx.steps`` gradient steps on ``ctx.dataset()`` and are evaluated the same
way, in the dataset's environment; where the dataset knows its random and expert reference returns,
evaluation also logs ``eval/normalized_return`` (D4RL's convention: 0 = random, 100 = expert).

A policy is a function from a batch of observations to a batch of actions. A policy with memory across an
episode's steps (a Decision Transformer) is an ``EpisodePolicy`` instead: evaluation calls its ``reset(n)``
when n episodes start and its ``act(obs, rewards, idx)`` with the observations of the episodes still
running, the rewards they got on their last step, and their indices in 0..n-1.

Checkpoints: when the budget sets ``checkpoint_every`` (steps, or minutes as ``'10m'``), an adapter that
supports them asks ``ctx.checkpoint_due(step)`` at points where training could stop and go on, and then
``ctx.save_checkpoint(step, state)`` with everything it needs to continue (models, optimisers, buffers,
environments, its own random generators, counters; the global RNG states and the evaluation bookkeeping are
added here). Before training, ``ctx.resume()`` returns the latest checkpoint's state (or None): the adapter
puts it back and continues from its step. The checkpoint records which metric shards held the rows logged
before it, and ``resume`` writes those rows into the new attempt, so the run's curve is one curve: nothing
logged after the checkpoint by the attempt that stopped is kept, and the resumed attempt logs it again.

Metric names: ``eval/return`` (mean over episodes), ``eval/return_std``, ``eval/length``, and in an env that
reports a safety cost (``info["cost"]``, e.g. the ``SafetyCost`` wrapper) ``eval/cost`` (mean episode cost) and
``eval/violations`` (the share of episodes whose cost exceeded ``info["cost_limit"]``), logged at the
suite's evaluation point (0, eval_every, 2 eval_every, ..., the budget) that the evaluation stands for, with
``eval/actual_step``, the step training had reached (ppo, say, reaches a point at its next batch boundary);
``train/episode_return``, ``train/episode_length``, ``train/loss/<name>``, ``sys/sps_overall`` and
``sys/rss_peak_mb`` (whole run), and every few seconds the runner's ``sysmon``: ``sys/steps_per_second``,
``sys/cpu_percent``, ``sys/rss_mb`` and on a GPU ``sys/gpu_util``, ``sys/gpu_mem_mb``, at the step an
algorithm last passed to ``ctx.log_system(step)``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np

from ..envs import make_env
from ..sink import MetricSink
from ..suite.grid import RunSpec
from ..sysmon import peak_rss_mb

__all__ = [
    "Algorithm",
    "RunContext",
    "Policy",
    "EpisodePolicy",
    "eval_seeds",
    "eval_points",
    "process_spoiled",
    "resume_together",
    "spoil_process",
]

# obs batch (n, *obs_shape) -> actions (n,) or (n, act_dim); deterministic unless the algorithm says so.
Policy = Callable[[np.ndarray], np.ndarray]

EVAL_SEED_OFFSET = 1_000_003


class EpisodePolicy(Protocol):
    """A policy that remembers the steps of each episode (see the module docstring)."""

    def reset(self, n: int) -> None: ...

    def act(self, obs: np.ndarray, rewards: np.ndarray, idx: np.ndarray) -> np.ndarray: ...


class Algorithm(Protocol):
    name: ClassVar[str]

    def train(self, ctx: RunContext) -> None: ...


def eval_seeds(seed: int, episodes: int) -> list[int]:
    """Seeds of the evaluation episodes: the same for every algorithm at a given run seed."""
    return [EVAL_SEED_OFFSET + seed * 10_007 + i for i in range(episodes)]


def eval_points(steps: int, every: int) -> list[int]:
    """Steps at which a run is evaluated: 0, every, 2*every, ... and always the last step."""
    pts = list(range(0, steps, every))
    if not pts or pts[-1] != steps:
        pts.append(steps)
    return pts


_SPOILED: list[str] = []  # why this process must run no further job, if it must not


def spoil_process(why: str) -> None:
    """Say that this process must run no further job (a JAX runtime left wedged in a thread that cannot be
    stopped): ``packed.run_job`` adds ``restart_worker`` to the job's result, and the executor replaces the
    worker once the job's end is reported."""
    _SPOILED.append(why)


def process_spoiled() -> str | None:
    """Why this process must run no further job (``spoil_process``), or None."""
    return _SPOILED[0] if _SPOILED else None


PRUNE_FILE = "PRUNE"  # written into a running attempt's folder by rlbench tune's pruner
PRUNE_CHECK_S = 0.5


@dataclass
class RunContext:
    """Everything one run needs. Built by the runner inside a worker process."""

    spec: RunSpec
    sink: MetricSink
    device: str = "cpu"
    run_dir: Path = field(default_factory=lambda: Path("."))
    stop_event: threading.Event | None = None
    # called after each evaluation with (step, mean return, policy): the dataset builder keeps snapshots
    on_evaluate: Callable[[int, float, Any], None] | None = None
    # mean return -> normalised score, logged as eval/normalized_return (text tasks: the lmrl table)
    score_normalizer: Callable[[float], float] | None = None
    _dataset: Any = None
    _next_eval: int = 0
    _eval_envs: list[Any] | None = None
    _t0: float = field(default_factory=time.perf_counter)
    _last_eval_step: int = -1
    current_step: int = 0  # the step the system monitor logs at; kept current by log_system / evaluate
    evaluations: int = 0
    last_eval: float | None = None
    resumed_from_step: int | None = None  # set by resume() when this attempt continues a checkpoint
    checkpoint_on_stop: ClassVar[bool] = True  # save a checkpoint when asked to stop (tests switch it off)
    _ckpt_disabled: bool = False
    _saved_on_stop: bool = False
    _ckpt_every: tuple[int | None, float | None] | None = None
    _next_ckpt_step: int = 0
    _last_ckpt_time: float = field(default_factory=time.monotonic)
    _resumed: dict[str, Any] | None = None
    failure: str | None = None  # set by fail(): this run failed, whatever the others sharing its job do
    pruned: bool = False  # rlbench tune's pruner stopped it (PRUNE_FILE): recorded as 'pruned'
    pruned_at: int | None = None  # the evaluation step its trial was pruned at
    _prune_check: float = 0.0
    # keep the best and final policy and record episodes in run_dir (``keep.Keeper``): the runner's runs do
    keep_artifacts: bool = False
    _keeper: Any = None

    def fail(self, reason: str | BaseException) -> None:
        """Mark this run failed (code training several seeds at once: the others go on). ``reason`` is the
        error recorded for the run: a message, or the exception that ended this seed. A failed run's metrics
        stay logged; ``should_stop()`` is true from now on."""
        if self.failure is None:
            self.failure = (
                f"{type(reason).__name__}: {reason}" if isinstance(reason, BaseException) else str(reason)
            )

    # -- budget ------------------------------------------------------------------------------------
    @property
    def steps(self) -> int:
        return int(self.spec.budget["steps"])

    @property
    def seed(self) -> int:
        return self.spec.seed

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.spec.params)

    @property
    def finetune_steps(self) -> int:
        """Online steps after the offline ones (offline-to-online runs; 0 otherwise)."""
        return int(self.spec.finetune["steps"]) if self.spec.finetune else 0

    @property
    def total_steps(self) -> int:
        """The run's last step: ``steps``, plus ``finetune_steps`` on one step axis."""
        return self.steps + self.finetune_steps

    def eval_schedule(self) -> list[int]:
        """Evaluation points: 0, eval_every, ... ``steps``; for a fine-tuned run then ``steps`` plus each
        multiple of the fine-tuning's eval_every, and always its last step."""
        points = eval_points(self.steps, int(self.spec.budget["eval_every"]))
        ft = self.spec.finetune
        if ft:
            online = eval_points(int(ft["steps"]), int(ft["eval_every"]))
            points += [self.steps + p for p in online[1:]]
        return points

    def should_stop(self) -> bool:
        if self.failure is not None or (self.stop_event is not None and self.stop_event.is_set()):
            return True
        return self._prune_asked()

    def _prune_asked(self) -> bool:
        """Whether ``rlbench tune``'s pruner asked this run to stop: a ``PRUNE`` file in its folder, looked for
        at most every ``PRUNE_CHECK_S`` (a run without one trains exactly as before)."""
        if self.pruned:
            return True
        now = time.monotonic()
        if now >= self._prune_check:
            self._prune_check = now + PRUNE_CHECK_S
            marker = self.run_dir / PRUNE_FILE
            if marker.exists():
                self.pruned = True
                text = marker.read_text().strip()
                self.pruned_at = int(text) if text.isdigit() else self.current_step
        return self.pruned

    # -- checkpoints ---------------------------------------------------------------------------------
    @property
    def checkpoint_dir(self) -> Path:
        """Where this run's checkpoints live: the run folder, shared by its attempts."""
        return self.run_dir.parent / "checkpoint"

    def _checkpoint_every(self) -> tuple[int | None, float | None]:
        """(steps, seconds) between checkpoints, parsed once; (None, None) when there are none."""
        if self._ckpt_disabled:
            return None, None
        if self._ckpt_every is None:
            from ..checkpoint import minutes_or_steps

            if hasattr(self.sink, "directory") and hasattr(self.sink, "flush"):
                self._ckpt_every = minutes_or_steps(self.spec.budget.get("checkpoint_every"))
            else:  # checkpoints need a shard sink: they record which shards hold the curve so far
                self._ckpt_every = (None, None)
        return self._ckpt_every

    @property
    def checkpoints_enabled(self) -> bool:
        """True when the budget sets ``checkpoint_every`` (and checkpointing has not failed in this run)."""
        every_steps, every_s = self._checkpoint_every()
        return every_steps is not None or every_s is not None

    def checkpoint_due(self, step: int) -> bool:
        """True when a checkpoint should be saved at ``step``: a multiple of ``checkpoint_every`` steps was
        reached since the last one, or its minutes have passed, or the run is being stopped (Ctrl-C, SIGTERM
        from a scheduler pre-empting or cancelling the job: the next attempt then loses nothing). Never at
        step 0 or at the run's last step (``total_steps``: an offline-to-online run checkpoints while it
        fine-tunes too), never when ``checkpoint_every`` is unset. Cheap enough to call every step; call it
        just before checking ``should_stop()``."""
        if step <= 0 or step >= self.total_steps:
            return False
        every_steps, every_s = self._checkpoint_every()
        if every_steps is None and every_s is None:
            return False
        if self.failure is not None:  # a failed seed's state is not worth resuming
            return False
        stopping = self.stop_event is not None and self.stop_event.is_set()
        if self.checkpoint_on_stop and not self._saved_on_stop and stopping:
            self._saved_on_stop = True
            return True
        if every_steps is not None:
            if self._next_ckpt_step <= 0:
                self._next_ckpt_step = every_steps
            return step >= self._next_ckpt_step
        if every_s is not None:
            return time.monotonic() - self._last_ckpt_time >= every_s
        return False

    def save_checkpoint(
        self, step: int, state: dict[str, Any], *, layout: str | None = None, prune: bool = True
    ) -> bool:
        """Save ``state`` (anything ``torch.save`` pickles) as the run's checkpoint at ``step``, with the
        global RNG states, the evaluation bookkeeping and the metric shards written so far. Call it at a
        point where training can continue from ``state`` alone, after everything logged for the steps up
        to then. A failure (an environment that does not pickle, a full disk) is printed and switches
        checkpoints off for the rest of the run; training goes on. Returns whether it was saved.

        ``layout`` names a state layout other than the algorithm's usual one (``packed``: a seed of a
        packed job); ``resume`` only hands a state back to a caller asking for the same layout. With
        ``prune=False`` the older checkpoints stay (``prune_checkpoints`` removes them later: a packed job
        keeps its seeds' previous checkpoint until all of them have saved the new one)."""
        from .. import checkpoint
        from ..sink import list_shards

        every_steps, _ = self._checkpoint_every()
        try:
            self.sink.flush()  # type: ignore[attr-defined]
            shards = [p.name for p in list_shards(self.sink.directory)]  # type: ignore[attr-defined]
            meta = {
                "run_id": self.spec.run_id,
                "algo": self.spec.algo_name,
                **({"layout": layout} if layout else {}),
                "attempt_dir": self.run_dir.name,
                "shards": shards,
                "eval": {
                    "next_eval": self._next_eval,
                    "last_eval_step": self._last_eval_step,
                    "last_eval": self.last_eval,
                    "evaluations": self.evaluations,
                    "best": self._keeper.best if self._keeper is not None else None,
                },
            }
            checkpoint.save(self.checkpoint_dir, step, state, meta, prune=prune)
        except Exception as e:  # noqa: BLE001 - a checkpoint that cannot be written must not end the run
            print(f"rlbench: checkpoints switched off for this run: could not save one at step {step}: "
                  f"{type(e).__name__}: {e}", flush=True)  # fmt: skip
            self._ckpt_disabled = True
            return False
        if every_steps is not None:
            self._next_ckpt_step = (step // every_steps + 1) * every_steps
        self._last_ckpt_time = time.monotonic()
        return True

    def disable_checkpoints(self) -> None:
        """Take no more checkpoints in this run (the ones on disk stay for a later attempt)."""
        self._ckpt_disabled = True

    def prune_checkpoints(self, keep: int) -> None:
        """Remove this run's checkpoints other than the one at step ``keep``."""
        from .. import checkpoint

        checkpoint.prune(self.checkpoint_dir, keep)

    def checkpoint_steps(self) -> list[int]:
        """Steps of this run's checkpoints on disk, latest first (from their file names: cheap)."""
        from .. import checkpoint

        return [step for step, _ in checkpoint.list_checkpoints(self.checkpoint_dir)]

    def resume(self, step: int | None = None, layout: str | None = None) -> dict[str, Any] | None:
        """The state of the run's latest checkpoint (with its ``step``), or None to start from scratch.

        Call it once, after building the models and before logging anything. When it returns a state it
        has also restored the global RNG states and the evaluation bookkeeping, and written the metric rows
        the earlier attempt logged before that checkpoint into this attempt's shards, so the stored curve
        continues without duplicates or gaps. Without ``checkpoint_every`` it always returns None.
        ``step``: that checkpoint rather than the latest; ``layout``: the state layout the caller reads
        (``save_checkpoint``); a checkpoint of another layout is left alone (the run starts over).
        """
        if self._resumed is not None:
            return self._resumed
        found = self._checkpoint_to_resume(step, layout)
        return None if found is None else self._resume_from(*found)

    def _checkpoint_to_resume(
        self, step: int | None = None, layout: str | None = None
    ) -> tuple[dict[str, Any], list[Path]] | None:
        """The checkpoint ``resume`` would go on from and the metric shards it continues, or None; changes
        nothing (a packed job checks every seed's before it resumes any)."""
        if not self.checkpoints_enabled:
            return None
        from .. import checkpoint

        if step is None:
            ck = checkpoint.load_latest(self.checkpoint_dir)
        else:
            path = self.checkpoint_dir / f"step-{int(step)}.pt"
            try:
                ck = checkpoint.load(path) if path.is_file() else None
            except Exception:  # noqa: BLE001 - unreadable: start over, as load_latest would without it
                ck = None
        if ck is None:
            return None
        meta, step = ck.get("meta", {}), int(ck["step"])
        if meta.get("run_id") != self.spec.run_id or meta.get("algo") != self.spec.algo_name:
            print(f"rlbench: ignoring a checkpoint of another run in {self.checkpoint_dir}", flush=True)
            return None
        if meta.get("layout") != layout:
            said = {None: "a job of one seed", "packed": "a packed job (resources.seeds_per_job)"}
            print(f"rlbench: not resuming from step {step}: the checkpoint is of {said.get(meta.get('layout'), meta.get('layout'))}, "
                  f"this job is {said.get(layout, layout)}; starting over", flush=True)  # fmt: skip
            return None
        src = self.run_dir.parent / str(meta.get("attempt_dir")) / "metrics"
        files = [src / name for name in meta.get("shards", [])]
        missing = [p for p in files if not p.is_file()]
        if missing:
            print(f"rlbench: not resuming from step {step}: the metric shards it continues are gone "
                  f"({missing[0]}); starting over", flush=True)  # fmt: skip
            return None
        return ck, files

    def _resume_from(self, ck: dict[str, Any], files: list[Path]) -> dict[str, Any]:
        from .. import checkpoint

        meta, step = ck.get("meta", {}), int(ck["step"])
        src = self.run_dir.parent / str(meta.get("attempt_dir")) / "metrics"
        if src.resolve() == Path(self.sink.directory).resolve():  # type: ignore[attr-defined]
            # this very attempt folder ran before (a job requeued as the same attempt): its rows up to the
            # checkpoint are here already; the ones logged after it are moved out of metrics/ (kept)
            self._set_aside_after(files)
            files = []
        if files:
            import pyarrow as pa
            import pyarrow.parquet as pq

            tables = [pq.read_table(p).select(["step", "name", "value", "wall_time"]) for p in files]
            tables = [t.cast(tables[0].schema) if t.schema != tables[0].schema else t for t in tables]
            self.sink.write_table(pa.concat_tables(tables))  # type: ignore[attr-defined]
        checkpoint.set_rng_state(ck["rng"])
        ev = meta.get("eval", {})
        self._next_eval = int(ev.get("next_eval", 0))
        self._last_eval_step = int(ev.get("last_eval_step", -1))
        self.last_eval = ev.get("last_eval")
        self.evaluations = int(ev.get("evaluations", 0))
        if self.keep_artifacts and src.parent != self.run_dir:
            self._carry_artifacts(src.parent, step, ev.get("best"))
        every_steps, _ = self._checkpoint_every()
        if every_steps is not None:
            self._next_ckpt_step = (step // every_steps + 1) * every_steps
        self._last_ckpt_time = time.monotonic()
        self.current_step = step
        self.resumed_from_step = step
        state = dict(ck["state"])
        state.setdefault("step", step)
        self._resumed = state
        print(f"rlbench: resumed from the checkpoint at step {step} "
              f"({len(files)} metric shard(s) of {meta.get('attempt_dir')} carried over)", flush=True)  # fmt: skip
        return state

    def _carry_artifacts(self, earlier: Path, step: int, best: float | None) -> None:
        """List in this attempt the files the earlier attempt listed up to the checkpoint's ``step`` that are
        still there (its best policy, when a later best has not replaced it), as its rows are carried."""
        from ..artifacts import current, read_index

        rows = [r for r in current(read_index(earlier)) if r["step"] <= step and r["kind"] != "policy_final"]
        rows = [r for r in rows if (self.run_dir.parent / r["path"]).is_file()]
        self.keeper.log.append(rows)
        if any(r["kind"] == "policy_best" for r in rows):
            self.keeper.best = best

    def wait_artifacts(self) -> None:
        """Wait for the episode videos still being drawn and list them (the runner, before result.json)."""
        if self._keeper is not None:
            self._keeper.close()

    @property
    def keeper(self) -> Any:
        """This run's ``keep.Keeper`` (its saved policies and episode recordings)."""
        if self._keeper is None:
            from .keep import Keeper

            self._keeper = Keeper(self)
        return self._keeper

    def _set_aside_after(self, keep: list[Path]) -> None:
        from ..sink import list_shards

        self.sink.flush()  # type: ignore[attr-defined]
        names = {p.name for p in keep}
        later = [p for p in list_shards(self.sink.directory) if p.name not in names]  # type: ignore[attr-defined]
        if later:
            aside = self.run_dir / f"metrics.after-checkpoint-{int(time.time())}"
            aside.mkdir(parents=True, exist_ok=True)
            for p in later:
                p.rename(aside / p.name)

    # -- environments --------------------------------------------------------------------------------
    def make_env(self, seed: int | None = None) -> Any:
        """A training env, seeded with the run seed unless another seed is given."""
        return make_env(self.spec.env_id, self.spec.env_kwargs, self.seed if seed is None else seed,
                        self.spec.env_wrappers)  # fmt: skip

    # -- offline data ---------------------------------------------------------------------------------
    def dataset(self) -> Any:
        """The run's offline dataset (``datasets.OfflineData``), loaded once; offline runs only."""
        if self._dataset is None:
            if self.spec.dataset is None:
                raise ValueError(
                    f"{self.spec.algo_name} needs a dataset: list it under datasets: in the suite"
                )
            from ..datasets import load_dataset

            self._dataset = load_dataset(self.spec.dataset, self.spec.dataset_path, mix=self.spec.data_mix,
                                         wrappers=self.spec.env_wrappers)  # fmt: skip
        return self._dataset

    def references(self) -> tuple[float, float] | None:
        """(random, expert) reference returns of the run's dataset, if it has them."""
        return getattr(self.dataset(), "references", None) if self.spec.dataset is not None else None

    # -- evaluation ----------------------------------------------------------------------------------
    def maybe_evaluate(self, step: int, policy: Policy) -> float | None:
        """Evaluate if ``step`` has reached the next evaluation point. Cheap to call every step."""
        self.current_step = step
        if step < self._next_eval:
            return None
        return self.evaluate(step, policy)

    def finish(self, step: int, policy: Policy) -> float | None:
        """Call once after training: evaluates the final policy at the last step (unless that is done) and
        logs the run's overall steps per second and peak memory."""
        elapsed = time.perf_counter() - self._t0
        self.current_step = step
        done = step - (self.resumed_from_step or 0)  # steps trained by this attempt
        self.sink.log(step, **{"sys/sps_overall": done / elapsed if elapsed > 0 else 0.0,
                               "sys/rss_peak_mb": peak_rss_mb()})  # fmt: skip
        mean = None if step <= self._last_eval_step else self.evaluate(step, policy)
        if self.keep_artifacts and self.failure is None:
            self.keeper.final(step, policy)
            self.keeper.close()
        return mean

    def evaluate(self, step: int, policy: Policy) -> float:
        """Run ``eval_episodes`` seeded episodes in lock-step, log eval/return, return its mean. In a language
        env (``envs.imagine``) whose kwargs fix no level, that many episodes per instruction level, logged
        per level as ``eval/success/<level>`` and ``eval/return/<level>`` besides the overall means; where
        the env reports ``info["success"]`` at an episode's end, ``eval/success`` too."""
        from ..envs.imagine import lang_levels

        episodes = int(self.spec.budget["eval_episodes"])
        seeds = eval_seeds(self.seed, episodes)
        levels = lang_levels(self.spec.env_id, self.spec.env_kwargs)
        if self._eval_envs is None:
            kwargs = [dict(self.spec.env_kwargs, level=lv) for lv in levels] or [self.spec.env_kwargs]
            self._eval_envs = [
                make_env(self.spec.env_id, kw, wrappers=self.spec.env_wrappers)
                for kw in kwargs
                for _ in seeds
            ]
        per_level: dict[str, float] = {}
        all_returns, all_lengths, all_success, all_costs = [], [], [], []
        cost_limit: float | None = None
        groups = levels or ("",)
        for g, level in enumerate(groups):
            envs = self._eval_envs[g * len(seeds) : (g + 1) * len(seeds)]
            rets, lens, succ, costs, limit = _episodes(envs, seeds, policy)
            all_returns.append(rets)
            all_costs.append(costs)
            cost_limit = limit if limit is not None else cost_limit
            all_lengths.append(lens)
            if succ is not None:
                all_success.append(succ)
            if level:
                per_level[f"eval/return/{level}"] = float(rets.mean())
                if succ is not None:
                    per_level[f"eval/success/{level}"] = float(succ.mean())
        returns, lengths = np.concatenate(all_returns), np.concatenate(all_lengths)
        mean = float(returns.mean())
        values = {
            "eval/return": mean,
            "eval/return_std": float(returns.std()),
            "eval/length": float(lengths.mean()),
            **per_level,
        }
        if cost_limit is not None:  # mean episode cost, and the share of episodes over the cost limit
            costs = np.concatenate(all_costs)
            values["eval/cost"] = float(costs.mean())
            values["eval/violations"] = float((costs > cost_limit).mean())
        if all_success and len(all_success) == len(groups):
            values["eval/success"] = float(np.concatenate(all_success).mean())
        return self._record_evaluation(step, values, policy, seeds[0])

    def log_evaluation(
        self, step: int, returns: np.ndarray, lengths: np.ndarray, policy: Any = None
    ) -> float:
        """Record an evaluation an algorithm ran itself on the run's ``eval_seeds`` episodes (a JAX program
        evaluates inside its compiled training): eval/return, eval/return_std, eval/length logged at the
        evaluation point ``step`` stands for, as ``evaluate`` logs them; returns the mean return.
        ``policy``: the policy evaluated (one that acts on a batch of observations), kept when it is the best
        so far and recorded (``budget.video_every``) playing the first evaluation seed's episode in the env
        ``keep.Keeper.maybe_record`` plays it in."""
        returns, lengths = np.asarray(returns, np.float64), np.asarray(lengths, np.float64)
        values = {"eval/return": float(returns.mean()), "eval/return_std": float(returns.std()),
                  "eval/length": float(lengths.mean())}  # fmt: skip
        return self._record_evaluation(step, values, policy, eval_seeds(self.seed, 1)[0])

    def _record_evaluation(
        self, step: int, values: dict[str, float], policy: Any, first_seed: int | None
    ) -> float:
        """Log an evaluation's ``values`` (normalised return added) at its evaluation point, keep the policy
        (when there is one) and move the schedule on; returns the mean return."""
        mean = values["eval/return"]
        refs = self.references()
        if refs is not None:
            values["eval/normalized_return"] = 100.0 * (mean - refs[0]) / (refs[1] - refs[0])
        elif self.score_normalizer is not None:
            values["eval/normalized_return"] = float(self.score_normalizer(mean))
        # logged at the suite's evaluation point this evaluation stands for (a multiple of eval_every, or the
        # budget), so every algorithm's rows line up by step; the step training had reached is kept beside it
        schedule = self.eval_schedule()
        due = [p for p in schedule if self._last_eval_step < p <= step]
        values["eval/actual_step"] = float(step)
        self.sink.log(due[-1] if due else step, **values)
        if self.keep_artifacts and policy is not None:
            self.keeper.after_evaluation(due[-1] if due else step, values, policy)
            if first_seed is not None:  # an episode to record (in one of the run's eval envs, if any)
                env = self._eval_envs[0] if self._eval_envs else None
                self.keeper.maybe_record(due[-1] if due else step, self.evaluations, policy, env, first_seed)
        self.evaluations += 1
        self.last_eval = mean
        self._last_eval_step = step
        pts = [p for p in schedule if p > step]
        self._next_eval = pts[0] if pts else self.total_steps + 1
        if self.on_evaluate is not None:
            self.on_evaluate(step, mean, policy)
        return mean

    # -- training-side helpers ------------------------------------------------------------------------
    def log_episode(
        self, step: int, episode_return: float, episode_length: int, episode_cost: float | None = None
    ) -> None:
        """A finished training episode: ``train/episode_return``, ``train/episode_length`` and, where the env
        reports a safety cost, ``train/episode_cost`` (what exploring costs while learning online)."""
        extra = {} if episode_cost is None else {"train/episode_cost": episode_cost}
        self.sink.log(
            step, **{"train/episode_return": episode_return, "train/episode_length": episode_length, **extra}
        )

    def log_system(self, step: int) -> None:
        """Say how far training has got: the runner's system monitor logs steps per second, CPU and memory
        (and GPU use) every few seconds at this step. Cheap enough to call every step."""
        self.current_step = step


def resume_together(ctxs: Sequence[RunContext], layout: str = "packed") -> list[dict[str, Any]] | None:
    """The states of a packed job's seeds at their latest common checkpoint (``RunContext.resume`` for
    each), or None: then every seed starts over. A pack trains its seeds in lock step, so they resume at one
    step or not at all; it saves each seed's checkpoint keeping the older ones until all have the new one
    (``save_checkpoint(prune=False)``, then ``prune_checkpoints``), so a job killed between two seeds' saves
    still leaves a step they all have. Nothing is resumed (no rows carried over) unless every seed can be."""
    if not ctxs or not all(c.checkpoints_enabled for c in ctxs):
        return None
    common = set(ctxs[0].checkpoint_steps())
    for c in ctxs[1:]:
        common &= set(c.checkpoint_steps())
    for step in sorted(common, reverse=True):
        found = [c._checkpoint_to_resume(step, layout) for c in ctxs]
        if all(f is not None for f in found):
            return [c._resume_from(*f) for c, f in zip(ctxs, found)]  # type: ignore[misc]
    return None


def _episodes(
    envs: list[Any], seeds: list[int], policy: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray, float | None]:
    """One seeded episode in each env, in lock-step: (returns, lengths, successes or None when the envs do
    not report ``info["success"]``, episode costs, and the cost limit or None when the envs report no
    ``info["cost"]``: envs.wrappers.SafetyCost)."""
    obs = [env.reset(seed=s)[0] for env, s in zip(envs, seeds)]
    returns = np.zeros(len(envs))
    last_rewards = np.zeros(len(envs))
    lengths = np.zeros(len(envs), dtype=np.int64)
    costs = np.zeros(len(envs))
    cost_limit: float | None = None
    success: list[Any] = [None] * len(envs)
    alive = list(range(len(envs)))
    stateful = hasattr(policy, "act") and hasattr(policy, "reset")
    if hasattr(policy, "bind"):  # a policy that reads its envs (a text policy: their valid actions)
        policy.bind(envs)
    if stateful:
        policy.reset(len(envs))
    while alive:
        batch = np.stack([obs[i] for i in alive])
        if stateful:
            idx = np.asarray(alive)
            actions = np.asarray(policy.act(batch, last_rewards[idx], idx))
        else:
            actions = np.asarray(policy(batch))
        still = []
        for j, i in enumerate(alive):
            o, r, term, trunc, info = envs[i].step(_unbatch(actions[j]))
            if "cost" in info:  # a safety cost: summed per episode
                costs[i] += float(info["cost"])
                cost_limit = float(info.get("cost_limit", 0.0))
            returns[i] += r
            last_rewards[i] = r
            lengths[i] += 1
            obs[i] = o
            if not (term or trunc):
                still.append(i)
            else:
                success[i] = info.get("success")
        alive = still
    ok = all(x is not None for x in success)
    return returns, lengths, np.asarray(success, np.float64) if ok else None, costs, cost_limit


def _unbatch(a: np.ndarray) -> Any:
    """An action from a batch row, in the form gymnasium's spaces expect."""
    if a.ndim == 0:
        return a.item()
    return a

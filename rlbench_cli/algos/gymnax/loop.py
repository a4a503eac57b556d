"""The host side of the algorithms on gymnax tasks (``ppo_jax``, ``pqn_jax``): sets up JAX for a job,
compiles the algorithm's program (``ppo.build``, ``pqn.build``) for its pack, then runs it one evaluation
interval at a time and turns what each call returns into every seed's own rows, failures and checkpoints.
The next interval is sent to the device before the last one's rows are logged (what the host needs of the
state is copied first: the chunk takes its buffers over); on a GPU the call is made from a thread of its own
(``send_in_thread``), because there it holds its thread while the chunk runs.

Imported only when such a run starts (it imports JAX): ``XLA_FLAGS`` gets
``--xla_cpu_multi_thread_eigen=false`` (with the default flags 2 of 9 CPU runs hung for ever inside
``block_until_ready``), a CPU job sees JAX's CPU platform only, a GPU job does not preallocate the device,
and compilations are kept in JAX's persistent cache (``RLBENCH_JAX_CACHE``, default
``~/.cache/rlbench/jax``) so a later run of the same program skips its compilation (about 6 s on CPU).

The wedge that flag was meant for was jaxlib 0.10's batched LAPACK QR (jax's orthogonal init, vmapped over
the seeds) deadlocking XLA's intra-op pool (``common.orthogonal`` says how); the programs now call no LAPACK.
The watchdog (``Watchdog``): should XLA's CPU runtime wedge a call for ever anyway (the caller in
``BlockUntilReady``), nothing in Python can interrupt it. So each compiled call
(the init, every chunk) runs, with ``$RLBENCH_JAX_WATCHDOG=1`` (opt-in), in a daemon thread while the job's
thread waits for it; a call still running after
``max(floor, times x the slowest earlier call per unit of work)`` (a chunk of n iterations is n + 1 units: its
evaluation counts one; floor ``$RLBENCH_JAX_WATCHDOG_FLOOR_S``, default 120 s, times
``$RLBENCH_JAX_WATCHDOG_TIMES``, default 10) ends the job with ``XlaWedged`` naming the wedge. Every seed still
running fails with it, so ``--retries`` runs the pack again at once instead of after the suite's timeout, and
the process is spoiled (``base.spoil_process``): its executor replaces the worker. Opt-in because a thread
left inside an XLA call aborts the process at interpreter exit ("terminate called ... FATAL: exception not
rethrown": jax's atexit clean-up wakes it and Python unwinds it through C++ frames); the local worker ends
with ``os._exit`` and a Ray actor is killed, so only a process that exits normally (a Slurm task, a caller's
own) meets it.

Kept policies: where the runs keep artifacts (``RunContext.keep_artifacts``, every run the runner or
``packed.run_packed`` starts), each seed's best policy (by the suite's score metric) and final one are saved
as ``policy.GymnaxPolicy`` files (``algos.keep``): its slice of ``Program.policy(state)``, copied to the host
after each chunk. The Keepers are deferred (``Keeper.defer``): a seed's best policy waits in memory and is
written while the device computes the next chunk, at a checkpoint or at the end, so thousands of seeds that
improve at every evaluation do not hold the job up writing thousands of folders each time.
"""

from __future__ import annotations

import importlib
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from ...envs.gymnax import CONTINUOUS, make, set_xla_flags
from ...sysmon import peak_rss_mb
from ..base import RunContext, eval_seeds, resume_together, spoil_process
from .policy import GymnaxPolicy, flatten

__all__ = ["Watchdog", "XlaWedged", "cache_dir", "log_rows", "prepare_jax", "say", "send_in_thread", "train"]

CHECKPOINT_LAYOUT = (
    "packed"  # every seed's checkpoint holds its slice of the pack's state, for one job or many
)


def cache_dir() -> Path:
    """Where JAX's persistent compilation cache lives: ``$RLBENCH_JAX_CACHE`` or the user's cache folder."""
    env = os.environ.get("RLBENCH_JAX_CACHE")
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rlbench" / "jax"


def prepare_jax(device: str) -> Any:
    """Set JAX's flags for a job on ``device`` (before JAX starts in this process; a process keeps the first
    job's), import it and switch its persistent compilation cache on; returns the jax module."""
    set_xla_flags()
    if device == "cpu":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # runs may share a GPU
    import jax  # heavy: only in the worker of a run on a gymnax task

    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", str(folder))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    except (OSError, AttributeError):  # a read-only home: compile every time
        pass
    return jax


class XlaWedged(RuntimeError):
    """A compiled call made no progress for far longer than the job's earlier calls took (``Watchdog``)."""


WATCHDOG_FLOOR_S = 120.0
WATCHDOG_TIMES = 10.0


class Watchdog:
    """Runs a job's compiled calls in a daemon thread each and gives up on one that takes far longer than
    the earlier ones did (see the module docstring). ``$RLBENCH_JAX_TEST_STALL=CALL:SECONDS[:FILE]`` makes the
    call numbered CALL (0: the init, 1: the first chunk, ...) sleep that long first: a test's wedge (with FILE:
    only while FILE does not exist, which the stall creates, so a retry goes through)."""

    def __init__(self) -> None:
        # opt-in: in CI its threaded calls were seen to wedge the init and to abort a process at exit, so by
        # default the calls run in the job's thread as before (a suite's timeout and --retries contain a wedge)
        self.enabled = os.environ.get("RLBENCH_JAX_WATCHDOG", "0") == "1"
        self.floor = float(os.environ.get("RLBENCH_JAX_WATCHDOG_FLOOR_S") or WATCHDOG_FLOOR_S)
        self.times = float(os.environ.get("RLBENCH_JAX_WATCHDOG_TIMES") or WATCHDOG_TIMES)
        self.unit = 0.0  # the slowest seconds per unit of work of the calls so far
        self.calls = 0
        stall = os.environ.get("RLBENCH_JAX_TEST_STALL", "")
        call, _, rest = stall.partition(":")
        seconds, _, once = rest.partition(":")
        self.stall = (int(call), float(seconds), once) if stall else None

    def call(self, what: str, units: float, fn: Callable[[], Any], learn: bool = True,
             since: float | None = None) -> Any:  # fmt: skip
        """``fn()`` (which must return host values, or wait for its device values), or XlaWedged when it
        runs past the limit. ``units``: its work; ``learn``: let its time set the limit of later calls;
        ``since``: when the work was sent to the device (``time.perf_counter()``; default now), which is
        where its time counts from. Without ``$RLBENCH_JAX_WATCHDOG=1``, ``fn()`` in this thread."""
        if not self.enabled:
            return fn()
        # before any call has been timed there is nothing to compare with: only the default floor says wedged
        # (a lower $RLBENCH_JAX_WATCHDOG_FLOOR_S applies once a call has set the pace)
        floor = self.floor if self.unit > 0 else max(self.floor, WATCHDOG_FLOOR_S)
        limit = max(floor, self.times * self.unit * units)
        number, box = self.calls, {}
        self.calls += 1

        def target() -> None:
            try:
                if self.stall is not None and self.stall[0] == number:
                    once = self.stall[2]
                    if not once or not os.path.exists(once):
                        if once:
                            Path(once).touch()
                        time.sleep(self.stall[1])
                box["out"] = fn()
            except BaseException as e:  # noqa: BLE001 - raised again in the job's thread
                box["error"] = e

        t0 = time.perf_counter() if since is None else since
        thread = threading.Thread(target=target, daemon=True, name=f"rlbench-jax-{number}")
        thread.start()
        thread.join(max(0.0, limit - (time.perf_counter() - t0)))
        if thread.is_alive():
            why = (f"XLA's runtime wedged: {what} made no progress for {limit:.0f} s (the limit: {self.times:g}x "
                   f"the slowest call so far, at least {floor:g} s); the job ends so --retries can run it "
                   "again")  # fmt: skip
            spoil_process(why)
            raise XlaWedged(why)
        if "error" in box:
            raise box["error"]
        if learn:
            self.unit = max(self.unit, (time.perf_counter() - t0) / units)
        return box["out"]


def send_in_thread(device: str) -> bool:
    """Whether a job's chunks are called from a thread of their own: on a GPU (the call holds its thread
    while the chunk runs); ``$RLBENCH_JAX_SEND_THREAD`` 1 or 0 says so for any device (a test's CPU run)."""
    env = os.environ.get("RLBENCH_JAX_SEND_THREAD")
    if env in ("0", "1"):
        return env == "1"
    return device != "cpu"


def say(line: str) -> None:
    """A progress line (the job's output.log; ``benchmarks/jax_seeds.py`` follows them)."""
    print(f"rlbench jax: {line}", flush=True)


def host_policies(tree: dict[str, np.ndarray], meta: dict[str, Any],
                  ctxs: Sequence[RunContext]) -> Callable[[int], Any]:  # fmt: skip
    """Seed ``k`` -> its policy (a ``GymnaxPolicy``) in ``tree``: the pack's policy state on the host (flat
    leaves, every seed's row), as the job last copied it; a seed's row is taken when its policy is saved."""

    def fetch(k: int) -> dict[str, np.ndarray]:
        return {name: np.array(a[k]) for name, a in tree.items()}

    return lambda k: GymnaxPolicy({**meta, "seed": ctxs[k].seed}, fetch=lambda: fetch(k))


def log_rows(sink: Any, rows: np.ndarray, steps: np.ndarray, names: tuple[str, ...]) -> None:
    """One seed's rows of a chunk (its iterations' metrics, then ``common.EPISODE_COLUMNS``) in one
    ``log_block`` call: the metrics at every step, the training episodes' mean return and length where some
    ended (``names``: the metrics', then those two)."""
    m = len(names) - 2
    count = rows[:, m]
    mask = np.ones((len(rows), m + 2), bool)
    mask[:, m:] = (count > 0)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        episodes = np.stack([rows[:, m + 1] / count, rows[:, m + 2] / count], 1)
    sink.log_block(steps, names, np.concatenate([rows[:, :m], episodes], 1), mask)


def check_pack(ctxs: Sequence[RunContext]) -> None:
    """A ValueError unless ``ctxs`` are runs of one algorithm that differ only by seed."""
    if not ctxs:
        raise ValueError("a pack needs at least one RunContext")
    seeds = [c.seed for c in ctxs]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"packed runs must have different seeds, got {seeds}")
    first = ctxs[0].spec
    for c in ctxs[1:]:
        s = c.spec
        if (s.algo_name, s.params, s.env_id, s.env_kwargs, s.budget) != (
            first.algo_name, first.params, first.env_id, first.env_kwargs, first.budget
        ):  # fmt: skip
            raise ValueError(f"packed runs must differ only by seed ({first.run_id} vs {s.run_id})")


def save_pack(
    ctxs: Sequence[RunContext], rows: Sequence[int], state: Any, iterations: int, batch: int
) -> None:
    """Checkpoint each of ``ctxs`` (row ``rows[i]`` of the state's leaves) at the same step, keeping their
    older checkpoints until every seed has the new one (``base.resume_together`` resumes a common step)."""
    import jax  # the caller's

    leaves = jax.tree_util.tree_leaves(state)
    step = iterations * batch
    saved = [c.save_checkpoint(step, {"iterations": iterations, "leaves": [np.asarray(x[k]) for x in leaves]},
                               layout=CHECKPOINT_LAYOUT, prune=False) for c, k in zip(ctxs, rows)]  # fmt: skip
    for c in ctxs:
        if all(saved):
            c.prune_checkpoints(step)
        else:  # a seed could not save: keep the step they all have, and take no more checkpoints
            c.disable_checkpoints()


def train(ctxs: Sequence[RunContext], program: str, config: Callable[..., Any],
          lr_scale: Sequence[float] | None = None) -> dict[int, str | None]:  # fmt: skip
    """Train one agent per context in one compiled program. Returns {seed: None, or why it failed}.

    ``program``: the module of this package whose ``build(cfg, env, env_params, steps, max_iters)`` makes
    it (``ppo``, ``pqn``); ``config(params, continuous=...)``: the run's config (``learning_rate``,
    ``batch_size``: env steps per iteration). ``lr_scale``: a factor on each seed's learning rate (1 for all
    by default; a test makes one seed diverge with it)."""
    check_pack(ctxs)
    first = ctxs[0]
    jax = prepare_jax(first.device)
    build = importlib.import_module(f"{__package__}.{program}").build  # imports jax, gymnax and optax

    env_id = first.spec.env_id
    cfg = config(first.params, continuous=env_id in CONTINUOUS)
    env, env_params = make(env_id)
    steps, batch, N = first.steps, cfg.batch_size, len(ctxs)
    schedule = first.eval_schedule()
    iters_at = [math.ceil(p / batch) for p in schedule]  # iterations done when an evaluation point is reached
    chunks = [(p, b - a) for p, a, b in zip(schedule, [0, *iters_at], iters_at)]
    chunks = [chunks[0]] + [c for c in chunks[1:] if c[1] > 0]  # points inside one iteration: the next one
    max_iters = max(1, max(n for _, n in chunks))

    t0 = time.perf_counter()
    prog = build(cfg, env, env_params, steps, max_iters)
    seeds = np.array([c.seed for c in ctxs], np.int64)
    lrs = cfg.learning_rate * np.asarray(lr_scale if lr_scale is not None else np.ones(N), np.float32)
    episodes = int(first.spec.budget["eval_episodes"])
    eval_keys = np.stack([np.asarray(jax.vmap(jax.random.PRNGKey)(np.array(eval_seeds(int(s), episodes))))
                          for s in seeds])  # fmt: skip
    watchdog = Watchdog()
    init = prog.init.lower(seeds.astype(np.int32), lrs).compile()  # compiled apart: the watchdog times runs
    state = watchdog.call("the init", 1, lambda: jax.block_until_ready(init(seeds.astype(np.int32), lrs)),
                          learn=False)  # fmt: skip
    chunk = prog.chunk.lower(state, np.int32(0), eval_keys).compile()
    compile_s = time.perf_counter() - t0
    leaves, treedef = jax.tree_util.tree_flatten(state)
    resumed = resume_together(ctxs, CHECKPOINT_LAYOUT)  # every seed at one step, or none of them
    done = 0
    if resumed is not None:  # the whole training state of every seed as it was at that evaluation boundary
        done = int(resumed[0]["iterations"])
        stacked = [np.stack([st["leaves"][j] for st in resumed]) for j in range(len(leaves))]
        state = jax.tree_util.tree_unflatten(treedef, [jax.device_put(x) for x in stacked])
        ends = np.cumsum([n for _, n in chunks])
        chunks = [c for c, e in zip(chunks, ends) if e > done]

    outcome: dict[int, str | None] = {c.seed: None for c in ctxs}
    live = list(range(N))
    tracking_s = 0.0
    names = prog.row
    with_episodes = (*names, "train/episode_return", "train/episode_length")
    checked = [names.index(x) for x in prog.losses]
    keep = any(c.keep_artifacts for c in ctxs)
    meta: dict[str, Any] = {"program": program, "params": dict(first.params), "env_id": env_id,
                            "continuous": env_id in CONTINUOUS}  # fmt: skip
    if env_id in CONTINUOUS:
        space = env.action_space(env_params)
        meta.update(low=np.asarray(space.low).tolist(), high=np.asarray(space.high).tolist())
    for c in ctxs:
        c.sink.log(done * batch, **{"sys/pack_size": float(N), "sys/compile_s": compile_s})

    # On a GPU the call of a chunk holds its thread until the chunk is done (XLA's while loops wait on the host
    # each iteration: 2.4 s of 2.7 for 2,048 seeds' interval on an H200), so it is made in a thread of its own
    # there and the job's thread logs the last chunk's rows meanwhile; on CPU the call returns at once.
    sender = (
        ThreadPoolExecutor(1, thread_name_prefix="rlbench-jax-send") if send_in_thread(first.device) else None
    )

    def dispatch(state: Any, n: int) -> Future:  # returns at once: the device runs the chunk meanwhile
        if sender is not None:
            return sender.submit(chunk, state, np.int32(n), eval_keys)
        done: Future = Future()
        done.set_result(chunk(state, np.int32(n), eval_keys))
        return done

    def running(sent: Future) -> bool:  # whether the chunk sent is still being computed
        if not sent.done():
            return True
        if sent.exception() is not None:
            return False
        return not all(x.is_ready() for x in jax.tree_util.tree_leaves(sent.result()[1:]))

    def collect(sent: Future) -> tuple[Any, ...]:  # waits for the chunk: its rows and evaluation on the host
        state, rows, ret, length = sent.result()
        return state, np.asarray(rows), np.asarray(ret), np.asarray(length)

    def host_copy(tree: Any) -> Any:  # numbers that stay put when the next chunk takes the buffers over
        return jax.tree_util.tree_map(lambda x: np.array(x, copy=True), jax.device_get(tree))

    def policies_in(state: Any) -> Callable[[int], Any]:  # seed k -> its policy, read before donation
        return host_policies(flatten(host_copy(prog.policy(state))) if keep else {}, meta, ctxs)

    policy_of = policies_in(state)
    say(f"{program}_jax, {N} seed(s) of {env_id}: compiled in {compile_s:.1f} s; {len(chunks)} chunk(s) to run"
        + (f" from step {done * batch:,}" if done else ""))  # fmt: skip

    def track_seed(k: int, n: int, first: int, rows: np.ndarray, ret: np.ndarray, length: np.ndarray,
                   policy_of: Callable[[int], Any] | None) -> str | None:  # fmt: skip
        """Seed k's rows of a chunk of ``n`` iterations after ``first``, its evaluation and kept policy; why
        it failed, or None."""
        ctx, r = ctxs[k], rows[k, :n]
        bad = ~np.isfinite(r[:, checked])
        last = int(np.argmax(bad.any(1))) if bad.any() else n - 1
        log_rows(ctx.sink, r[: last + 1], (first + 1 + np.arange(last + 1)) * batch, with_episodes)
        if bad.any():
            which = prog.losses[int(np.argmax(bad[last]))].rsplit("/", 1)[-1]
            ctx.fail(f"diverged: NaN in {which} loss at step {(first + last + 1) * batch}")
            return ctx.failure
        ctx.log_system((first + n) * batch)
        ctx.log_evaluation((first + n) * batch, ret[k], length[k], policy_of(k) if policy_of else None)
        return None

    for c in ctxs:  # thousands of seeds: their best policies are written at checkpoints and at the end
        if c.keep_artifacts:
            c.keeper.defer()

    def write_kept_bests(until: Callable[[], bool] | None = None) -> int:
        """Write the best policies held back, all of them or until ``until()`` (the next chunk is done: the
        host's time while the device computes); how many were written."""
        written = 0
        for c in ctxs:
            if c.keep_artifacts and c.keeper.pending is not None:
                if until is not None and until():
                    break
                c.keeper.write_best()
                written += 1
        return written

    pending, t_sent = dispatch(state, chunks[0][1]), time.perf_counter()
    try:
        for number, (_, n) in enumerate(chunks, 1):
            end = done + n
            what = f"the chunk of {n} iteration(s) to step {end * batch} and its evaluation"
            state, rows, ret, length = watchdog.call(what, n + 1, lambda p=pending: collect(p), since=t_sent)
            dt = time.perf_counter() - t_sent
            say(f"chunk {number}/{len(chunks)} (to step {end * batch:,}): {dt:.2f} s, "
                f"{N * n * batch / dt:,.0f} env steps/s, {time.perf_counter() - t0:.1f} s since the start")  # fmt: skip
            # what the host needs of this chunk's state is copied before the next chunk takes its buffers over
            t_copy = time.perf_counter()
            policy_of = policies_in(state)
            saving = bool(live) and any(ctxs[k].checkpoint_due(end * batch) for k in live)
            host_state = host_copy(state) if saving else None
            t_log = time.perf_counter()
            if number < len(chunks) and not any(ctxs[k].should_stop() for k in live):
                # the next chunk runs on the device while this one's rows are logged here
                pending, t_sent = dispatch(state, chunks[number][1]), time.perf_counter()
            t_rows = time.perf_counter()
            for k in list(live):
                why = track_seed(k, n, done, rows, ret, length, policy_of if keep else None)
                if why is not None:
                    outcome[ctxs[k].seed] = why
                    live.remove(k)
            done = end
            tracking_s += time.perf_counter() - t_copy
            say(f"chunk {number}/{len(chunks)} tracked in {time.perf_counter() - t_copy:.2f} s (copies "
                f"{t_log - t_copy:.2f} s, next chunk sent {t_rows - t_log:.2f} s, rows and evaluations "
                f"{time.perf_counter() - t_rows:.2f} s; the next chunk running meanwhile)")  # fmt: skip
            if host_state is not None and live:
                write_kept_bests()  # the kept policies as of the checkpoint (a resumed run keeps them)
                save_pack([ctxs[k] for k in live], list(live), host_state, done, batch)
            if not live or any(ctxs[k].should_stop() for k in live):
                break
            # the best policies so far, while the device runs the next chunk
            if keep and number < len(chunks):
                t_keep = time.perf_counter()
                written = write_kept_bests(until=lambda p=pending: not running(p))
                if written:
                    say(f"chunk {number}/{len(chunks)}: {written} best policies written in "
                        f"{time.perf_counter() - t_keep:.2f} s while the next chunk ran")  # fmt: skip
    except BaseException:  # the seeds fail: their best policies so far are still kept
        write_kept_bests()
        raise
    finally:
        if sender is not None:
            sender.shutdown()  # after the chunk in flight, if any (a stop breaks the loop with one sent)
    elapsed = time.perf_counter() - t0

    t_end = time.perf_counter()
    write_kept_bests()  # a diverged seed's too: its best before it failed
    for k in live:
        ctx = ctxs[k]
        if ctx.keep_artifacts and ctx.failure is None:
            ctx.keeper.final(done * batch, policy_of(k))
    say(f"kept policies written in {time.perf_counter() - t_end:.2f} s")
    for k in live:
        ctx = ctxs[k]
        ctx.sink.log(done * batch, **{"sys/sps_overall": done * batch / elapsed, "sys/rss_peak_mb": peak_rss_mb(),
                                      "sys/train_s": elapsed - compile_s, "sys/tracking_s": tracking_s})  # fmt: skip
    return outcome

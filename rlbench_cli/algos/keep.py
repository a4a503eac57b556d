"""What a run keeps besides its metrics: its best and final policy, and now and then one evaluation episode as
a video (or, in a text env, a transcript). ``RunContext.evaluate`` and ``finish`` call it; each file is
listed in the attempt's artifact index (``rlbench_cli.artifacts``), which the coordinator ingests.

Saved policies
--------------
A policy an adapter of rlbench hands to evaluation can be saved when it has ``save(path)`` and ``loader``,
``"module:function"`` under ``rlbench_cli.algos`` that rebuilds it (``function(path, device="cpu")``);
``policy_file`` names what ``save`` writes (default ``policy.pt``; a folder for ``save_pretrained``). A saved
policy is a folder::

    <attempt folder>/policy/best-<step>/   the best so far by the suite's score metric (``score.metric``,
                                           eval/return when a run does not log it), higher is better
    <attempt folder>/policy/final/         the policy at the end of training

holding the library's own file(s) and ``policy.json`` (loader, file, algorithm, env, step, metric and value),
written to a temporary folder and renamed into place, then listed (kinds ``policy_best`` and
``policy_final``, one row per file). Saving reads the weights; it draws no random number and changes no
metric.

Episode videos
--------------
With ``budget.video_every: K`` every K-th evaluation (the K-th, the 2K-th, ...; 1: each) also plays one
seeded episode (the first evaluation seed) in a separate env: as MP4 (imageio with imageio-ffmpeg) where the
env renders ``rgb_array``, as a text transcript in a text env, nothing otherwise. The episode is played
without frames (a step costs what an evaluation step costs); a child process replays its actions from the
same seed in an ``rgb_array`` env and draws and encodes the frames while training goes on (drawing is
the expensive part: milliseconds a frame). The global random generators are put back afterwards, so the
run's metrics are what they would have been without it.

A JAX program (``ppo_jax``, ``pqn_jax``) evaluates inside its compiled training, in gymnax, which draws no
frames: its seeds' episodes are played and drawn in the task's gymnasium version (``envs.gymnax.drawn_in``,
as ``rlbench enjoy --video`` plays them) by the seed's policy at that step acting through its NumPy forward
pass. The child drawing the frames is then a fresh interpreter (``python -m rlbench_cli.algos.keep``), not a
fork: JAX's runtime threads make forking its process unsafe. Every run of a pack has its own Keeper; at
most one child per CPU core draws at a time in a process (the next waits for the oldest).
"""

from __future__ import annotations

import importlib
import json
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..artifacts import ArtifactLog

__all__ = [
    "Keeper",
    "can_save",
    "load_saved",
    "play_episode",
    "render_replay",
    "Episode",
    "write_video",
    "write_transcript",
    "POLICY_JSON",
]

POLICY_JSON = "policy.json"
POLICY_FORMAT = "rlbench-saved-policy-1"


def can_save(policy: Any) -> bool:
    """Whether ``policy`` is one rlbench can save and rebuild (``save`` and ``loader``)."""
    return callable(getattr(policy, "save", None)) and isinstance(getattr(policy, "loader", None), str)


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def load_saved(folder: str | Path, device: str = "cpu") -> tuple[Any, dict[str, Any]]:
    """Rebuild the policy saved in ``folder`` (its ``policy.json`` names the loader). Returns (policy, info).

    Raises:
        ValueError: no ``policy.json``, or one that names a loader outside rlbench's algorithms.
    """
    folder = Path(folder)
    try:
        info = json.loads((folder / POLICY_JSON).read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{folder}: no readable {POLICY_JSON} ({type(e).__name__})") from None
    module, _, fn = str(info.get("loader", "")).partition(":")
    if info.get("format") != POLICY_FORMAT or not module or not fn or module.startswith("."):
        raise ValueError(f"{folder}/{POLICY_JSON}: not a policy rlbench saved")
    load = getattr(importlib.import_module(f"rlbench_cli.algos.{module}"), fn)
    return load(folder / info["file"], device=device), info


class Keeper:
    """One run's saved policies and episode recordings (see the module docstring)."""

    def __init__(self, ctx: Any):
        self.ctx = ctx
        self.log = ArtifactLog(ctx.run_dir)
        self.best: float | None = None
        # deferred (``defer``): the best policy not yet written, as (policy, step, metric, value); written by
        # ``write_best`` (a pack of thousands of seeds would otherwise write thousands of folders an evaluation)
        self.deferred = False
        self.pending: tuple[Any, int, str, float] | None = None
        self.video_every = int(ctx.spec.budget.get("video_every") or 0)
        self._video_env: Any = None
        self._video_kind: str | None = None
        # (the child drawing a video: its exit code when it has ended, waiting for it or not; its file, step)
        self._pending: list[tuple[Callable[[bool], int | None], Path, int]] = []

    # -- policies ------------------------------------------------------------------------------------
    def metric(self, values: dict[str, float]) -> tuple[str, float]:
        name = str((self.ctx.spec.score or {}).get("metric") or "eval/return")
        if name not in values:
            name = "eval/return"
        return name, float(values[name])

    def after_evaluation(self, step: int, values: dict[str, float], policy: Any) -> None:
        """Save ``policy`` as the best when ``values`` beat every earlier evaluation of the run."""
        if not can_save(policy):
            return
        name, value = self.metric(values)
        if not np.isfinite(value) or (self.best is not None and value <= self.best):
            return
        self.best = value
        if self.deferred:
            detach = getattr(policy, "detach", None)  # its own copy of the weights, not the pack's
            self.pending = (detach() if detach is not None else policy, step, name, value)
            return
        self._save_best(policy, step, name, value)

    def defer(self) -> None:
        """Keep the best policy in memory from now on, written by ``write_best`` (at a checkpoint, at the
        end): a packed job of thousands of seeds whose returns rise at every evaluation."""
        self.deferred = True

    def write_best(self) -> None:
        """Write the best policy held back by ``defer``, if any."""
        if self.pending is not None:
            policy, step, name, value = self.pending
            self.pending = None
            self._save_best(policy, step, name, value)

    def _save_best(self, policy: Any, step: int, name: str, value: float) -> None:
        root = self.ctx.run_dir / "policy"
        self.save(policy, root / f"best-{step:09d}", "policy_best", step, {"metric": name, "value": value})
        for old in root.glob("best-*"):  # listed before removed: the index never names a file that is gone
            if old.name != f"best-{step:09d}":
                shutil.rmtree(old, ignore_errors=True)

    def final(self, step: int, policy: Any) -> None:
        if can_save(policy):
            self.save(policy, self.ctx.run_dir / "policy" / "final", "policy_final", step, {})

    def save(self, policy: Any, dest: Path, kind: str, step: int, extra: dict[str, Any]) -> None:
        spec = self.ctx.spec
        file = str(getattr(policy, "policy_file", "policy.pt"))
        tmp = dest.with_name(f".{dest.name}.tmp")
        try:
            tmp.mkdir(parents=True)
        except FileExistsError:  # a killed attempt's half-written copy
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        policy.save(tmp / file)
        info = {"format": POLICY_FORMAT, "loader": policy.loader, "file": file, "algo": spec.algo_name,
                "env_id": spec.env_id, "env_kwargs": spec.env_kwargs, "env_wrappers": spec.env_wrappers,
                "run_id": spec.run_id, "seed": spec.seed, "step": int(step), **extra}  # fmt: skip
        (tmp / POLICY_JSON).write_text(json.dumps(info, indent=1, default=str) + "\n")
        if os.path.lexists(dest):  # a requeued attempt's own earlier copy
            shutil.rmtree(dest, ignore_errors=True)
        os.replace(tmp, dest)
        self.log.add(step, kind, _files(dest))

    # -- episodes ------------------------------------------------------------------------------------
    def maybe_record(self, step: int, evaluation: int, policy: Any, eval_env: Any, seed: int) -> None:
        """Record one episode when ``evaluation`` (0-based: the first is 0) is a K-th one (K = video_every).

        The episode is played here without frames (its actions kept) in the env ``envs.gymnax.drawn_in`` names;
        its frames are drawn and encoded in a child process that replays those actions from the same seed
        (``render_replay``), so training goes on meanwhile. At most one video of a run is in the making: the
        next waits for it. A finished video is listed at the next evaluation or at ``close``. ``eval_env``: one
        of the run's evaluation envs (None where the program evaluated inside itself: a JAX one)."""
        from ..envs import make_env
        from ..envs.gymnax import drawn_in

        self._collect(wait=False)
        if self.video_every <= 0 or (evaluation + 1) % self.video_every or self._video_kind == "none":
            return
        state = _rng_state()
        try:
            spec = self.ctx.spec
            drawn = drawn_in(spec.env_id)
            if self._video_env is None:
                self._video_env = make_env(drawn, spec.env_kwargs, wrappers=spec.env_wrappers)
            if self._video_kind is None:
                self._video_kind = _kind_of(drawn, eval_env if eval_env is not None else self._video_env)
            if self._video_kind == "none":
                return
            folder = self.ctx.run_dir / "videos"
            folder.mkdir(parents=True, exist_ok=True)
            if self._video_kind == "video":
                episode = play_episode(self._video_env, seed, policy)
                self._collect(wait=True)
                _room()
                out = folder / f"eval-{step:09d}.mp4"
                args = (out, drawn, spec.env_kwargs, spec.env_wrappers, seed, episode.actions)
                self._pending.append((_spawn(*args) if "jax" in sys.modules else _fork(render_replay, *args),
                                      out, step))  # fmt: skip
                _DRAWING.append(self)
            else:
                episode = play_episode(self._video_env, seed, policy, transcript=True)
                out = write_transcript(folder / f"eval-{step:09d}.txt", episode.lines)
                self.log.add(step, self._video_kind, [out])
        except Exception as e:  # noqa: BLE001 - a recording that fails must not end the run
            self._off(e)
        finally:
            _set_rng_state(state)

    def _collect(self, wait: bool) -> None:
        """List the videos whose process has ended (``wait``: waiting for each)."""
        left = []
        for ended, out, step in self._pending:
            code = ended(wait)
            if code is None:
                left.append((ended, out, step))
                continue
            if self in _DRAWING:
                _DRAWING.remove(self)
            if code == 0 and out.is_file():
                self.log.add(step, "video", [out])
            else:
                self._off(RuntimeError(f"drawing {out.name} ended with {code}"))
        self._pending = left

    def close(self) -> None:
        """Wait for the videos in the making and list them (the run's end: before its result is written)."""
        self._collect(wait=True)

    def _off(self, e: BaseException) -> None:
        print(f"rlbench: episode recording switched off for this run: {type(e).__name__}: {e}", flush=True)
        self._video_kind = "none"


# the Keepers of this process whose child is drawing a video, oldest first: at most MAX_DRAWING at a time
_DRAWING: list[Keeper] = []
MAX_DRAWING = max(1, os.cpu_count() or 1)


def _room() -> None:
    """Wait for the oldest videos in the making until fewer than ``MAX_DRAWING`` are (a pack of many seeds
    records them all at one evaluation)."""
    while len(_DRAWING) >= MAX_DRAWING:
        oldest = _DRAWING[0]
        oldest._collect(wait=True)
        if oldest in _DRAWING:  # nothing left in the making (it leaves the list when its child has ended)
            _DRAWING.remove(oldest)


def _fork(fn: Any, *args: Any) -> Callable[[bool], int | None]:
    """Run ``fn(*args)`` in a forked child (a plain fork: the worker is a daemonic process, which
    multiprocessing lets have no children); the child exits 0 when it returns, 1 on any error, without
    running the parent's exit handlers or flushing its buffers. Returns ``ended(wait)``: the child's exit
    code, or None while it runs (``wait``: wait for it)."""
    pid = os.fork()
    if pid:

        def ended(wait: bool) -> int | None:
            done, status = os.waitpid(pid, 0 if wait else os.WNOHANG)
            return os.waitstatus_to_exitcode(status) if done else None

        return ended
    code = 1
    try:
        fn(*args)
        code = 0
    except BaseException:  # noqa: BLE001 - the exit code says it failed; the parent switches recording off
        pass
    finally:
        os._exit(code)


def _spawn(path: Path, env_id: str, kwargs: dict[str, Any], wrappers: list[dict[str, Any]], seed: int,
           actions: list[Any]) -> Callable[[bool], int | None]:  # fmt: skip
    """``render_replay`` in a fresh interpreter (``main``), its arguments in a JSON file beside ``path``
    (removed when it has ended). Returns ``ended(wait)`` as ``_fork`` does."""
    job = path.with_name(f".{path.name}.replay.json")
    acts = [np.asarray(a).tolist() for a in actions]
    job.write_text(json.dumps({"path": str(path), "env_id": env_id, "kwargs": kwargs, "wrappers": wrappers,
                               "seed": seed, "actions": acts}, default=str))  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", __name__, str(job)], stdin=subprocess.DEVNULL)

    def ended(wait: bool) -> int | None:
        code = proc.wait() if wait else proc.poll()
        if code is not None:
            job.unlink(missing_ok=True)
        return code

    return ended


def main(argv: list[str]) -> int:
    """``python -m rlbench_cli.algos.keep JOB.json``: ``render_replay`` of what ``_spawn`` wrote."""
    job = json.loads(Path(argv[0]).read_text())
    actions = [np.asarray(a, np.float32) if isinstance(a, list) else a for a in job["actions"]]
    render_replay(Path(job["path"]), job["env_id"], job["kwargs"], job["wrappers"], int(job["seed"]), actions)
    return 0


def render_replay(path: Path, env_id: str, kwargs: dict[str, Any], wrappers: list[dict[str, Any]], seed: int,
                  actions: list[Any]) -> None:  # fmt: skip
    """Replay ``actions`` from ``seed`` in a new ``rgb_array`` env and write its frames as an MP4 at ``path``
    (gymnasium's envs are deterministic given the seed and the actions)."""
    from ..envs import make_env

    offscreen()
    env = make_env(env_id, dict(kwargs, render_mode="rgb_array"), wrappers=wrappers)
    env.reset(seed=seed)
    frames = [env.render()]
    for a in actions:
        env.step(a)
        frames.append(env.render())
    write_video(path, frames, _fps(env))
    env.close()


def _kind_of(env_id: str, env: Any) -> str:
    from ..envs.families import is_text_env

    if is_text_env(env_id):
        return "transcript"
    modes = getattr(getattr(env, "unwrapped", env), "metadata", {}).get("render_modes") or []
    return "video" if "rgb_array" in modes else "none"


def offscreen() -> None:
    """Frames are drawn off screen: SDL (pygame, which gymnasium's classic-control envs draw with) gets its
    dummy video driver unless the user chose one, so it opens no display and complains of none."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")


def _fps(env: Any) -> int:
    fps = getattr(getattr(env, "unwrapped", env), "metadata", {}).get("render_fps") or 30
    return max(1, min(int(fps), 60))


@dataclass
class Episode:
    """One episode played by ``play_episode``: its frames (when drawn), transcript lines (when kept), return
    and actions."""

    frames: list[Any] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    total: float = 0.0
    actions: list[Any] = field(default_factory=list)


def play_episode(env: Any, seed: int, policy: Any, frames: bool = False, transcript: bool = False) -> Episode:
    """One seeded episode of ``policy`` (a batch policy or an ``EpisodePolicy``) in ``env``, keeping its
    actions; ``frames``: ``env.render()`` after the reset and after each step; ``transcript``: observation,
    action and reward of each step as text (text envs)."""
    obs, _ = env.reset(seed=seed)
    stateful = hasattr(policy, "act") and hasattr(policy, "reset")
    if hasattr(policy, "bind"):
        policy.bind([env])
    if stateful:
        policy.reset(1)
    ep = Episode(
        frames=[env.render()] if frames else [], lines=[f"# seed {seed}", "", str(obs)] if transcript else []
    )
    reward, done = 0.0, False
    while not done:
        batch = np.stack([obs]) if not isinstance(obs, str) else np.asarray([obs], dtype=object)
        if stateful:
            action = np.asarray(policy.act(batch, np.asarray([reward]), np.asarray([0])))[0]
        else:
            action = np.asarray(policy(batch))[0]
        action = action.item() if isinstance(action, np.ndarray) and action.ndim == 0 else action
        obs, reward, term, trunc, _ = env.step(action)
        ep.actions.append(action)
        ep.total += float(reward)
        done = bool(term or trunc)
        if frames:
            ep.frames.append(env.render())
        if transcript:
            ep.lines += [f"> {action}", f"reward {float(reward):g}", "", str(obs)]
    if transcript:
        ep.lines.append(f"# return {ep.total:g}")
    return ep


def write_video(path: Path, frames: list[Any], fps: int) -> Path:
    """Write RGB frames as an H.264 MP4 (imageio with imageio-ffmpeg), to a temporary name renamed into
    place. Frames are padded to even sizes (yuv420p needs them)."""
    import imageio.v2 as imageio  # heavy: imported when a run records a video

    tmp = path.with_name(f".{path.name}.tmp.mp4")
    with imageio.get_writer(tmp, fps=fps, codec="libx264", macro_block_size=1, quality=None,
                            ffmpeg_log_level="error", output_params=["-preset", "ultrafast", "-crf", "28"],
                            pixelformat="yuv420p") as w:  # fmt: skip
        for f in frames:
            a = np.asarray(f, np.uint8)
            h, wd = a.shape[:2]
            if h % 2 or wd % 2:
                a = np.pad(a, ((0, h % 2), (0, wd % 2), (0, 0)))
            w.append_data(a)
    os.replace(tmp, path)
    return path


def write_transcript(path: Path, lines: list[str]) -> Path:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, path)
    return path


def _rng_state() -> dict[str, Any]:
    """The global random states (torch's only where this process has imported it)."""
    state: dict[str, Any] = {"python": random.getstate(), "numpy": np.random.get_state()}
    if "torch" in sys.modules:
        state["torch"] = sys.modules["torch"].get_rng_state()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    if "torch" in state:
        sys.modules["torch"].set_rng_state(state["torch"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

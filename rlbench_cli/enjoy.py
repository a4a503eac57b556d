"""``rlbench enjoy``: a run's saved policy (its best or its final, ``algos.keep``) rebuilt from its files and
played for a few seeded episodes, with a video of them when asked.

The run's ``artifacts`` rows say which files make the policy; each is checked against its recorded size and
sha256 before anything is loaded, and ``policy.json`` among them names the loader of its library (ppo's
state dict, d3rlpy's own file). The episodes use the run's evaluation seeds (``eval_seeds``), so the first
``eval_episodes`` returns of the final policy are the ones its last evaluation logged.

A policy of a gymnax task (``ppo_jax``, ``pqn_jax``) plays in gymnax, as its run's evaluations did
(``algos.gymnax.policy``); gymnax draws no frames, so with ``--video`` it plays in gymnasium's version of the
task (``envs.gymnax.drawn_in``, classic control) and ``Played.simulator`` says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .algos.base import eval_seeds
from .artifacts import resolve, sha256_file
from .coordinator import runs_root
from .errors import UnknownName, UsageError
from .store import Store

__all__ = ["Played", "enjoy", "WHICH"]

WHICH = ("best", "final")


@dataclass
class Played:
    """What ``enjoy`` played: the run, which policy (and the step it was saved at), each episode's seed and
    return, and the video (or transcript) written, if any."""

    run_id: str
    which: str
    step: int | None
    seeds: list[int]
    returns: list[float]
    video: Path | None = None
    info: dict[str, Any] = field(default_factory=dict)
    simulator: str | None = None  # the env played in when it is not the run's own (a gymnax task's video)


def policy_folder(store: Store, run_id: str, which: str) -> tuple[Path, int | None]:
    """The folder holding run ``run_id``'s ``which`` policy, its files checked against the store's rows,
    and the step it was saved at.

    Raises:
        UnknownName: no such run in the store.
        UsageError: ``which`` is not best or final; the run saved no policy, or not that one; a file is
            missing or differs from what was recorded.
    """
    if which not in WHICH:
        raise UsageError(f"--which {which}: use best or final")
    with store.reader() as con:
        rows = con.execute("SELECT suite, algo_name FROM runs WHERE run_id = ?", [run_id]).fetchall()
        if not rows:
            raise UnknownName(f"{run_id}: no such run in {store.path}; rlbench fetch --suite SUITE --format "
                              "csv lists the run ids (column run_id)")  # fmt: skip
        suite, algo = rows[0]
        saved = [a for a in store.artifacts(con, run_id=run_id) if str(a["kind"]).startswith("policy_")]
    if not saved:
        raise UsageError(f"run {run_id} ({algo}) has no saved policy: runs of ppo, ppo_jax, pqn_jax, the "
                         "d3rlpy algorithms, hf_decision_transformer and the text algorithms keep theirs; run it "
                         "again with this rlbench, or pick another run")  # fmt: skip
    files = [a for a in saved if a["kind"] == f"policy_{which}"]
    if not files:
        have = sorted({str(a["kind"])[len("policy_") :] for a in saved})
        raise UsageError(f"--which {which}: run {run_id} saved only its {' and '.join(have)} policy; "
                         f"use --which {have[0]}")  # fmt: skip
    run_dir = runs_root(store) / suite / run_id
    for a in files:
        try:
            path = resolve(run_dir, a["path"])
        except ValueError as e:
            raise UsageError(f"run {run_id}: artifact {e}; the database was changed by hand") from None
        if not path.is_file():
            raise UsageError(f"{path}: missing (listed as run {run_id}'s {which} policy); the run folder "
                             "was moved or cleaned, so the policy is gone")  # fmt: skip
        if path.stat().st_size != a["bytes"] or sha256_file(path) != a["sha256"]:
            raise UsageError(f"{path}: differs from what run {run_id} recorded (size or sha256); the file "
                             "was changed after the run saved it")  # fmt: skip
    (meta,) = [a for a in files if a["path"].endswith("/policy.json")] or [None]
    if meta is None:
        raise UsageError(f"run {run_id}: its {which} policy lists no policy.json; the run folder is damaged")
    return resolve(run_dir, meta["path"]).parent, meta["step"]


def enjoy(
    store: Store, run_id: str, which: str = "best", episodes: int = 1, video: Path | None = None,
    device: str = "cpu",
) -> Played:  # fmt: skip
    """Rebuild run ``run_id``'s ``which`` policy and play ``episodes`` seeded episodes (the run's evaluation
    seeds); with ``video``, write them one after another as an MP4 (a transcript for a text env).

    Raises:
        UnknownName, UsageError: see ``policy_folder``; ``episodes`` below 1; a video of an env that does
            not render ``rgb_array`` frames.
    """
    from .algos.keep import load_saved, offscreen, play_episode, write_transcript, write_video
    from .envs import make_env
    from .envs.families import is_text_env
    from .envs.gymnax import GYMNAX_ENVS, drawn_in

    if episodes < 1:
        raise UsageError(f"--episodes {episodes}: give 1 or more")
    folder, step = policy_folder(store, run_id, which)
    policy, info = load_saved(folder, device=device)
    env_id, kwargs, wrappers = (
        info["env_id"],
        dict(info.get("env_kwargs") or {}),
        info.get("env_wrappers") or [],
    )
    seeds = eval_seeds(int(info.get("seed", 0)), episodes)
    simulator = None
    if env_id in GYMNAX_ENVS:  # a JAX env: played by the program's own evaluation, or drawn in gymnasium's
        if video is None:
            returns, _ = policy.play(seeds)
            return Played(run_id, which, step, seeds, [float(r) for r in returns], None, info)
        try:
            env_id = simulator = drawn_in(env_id)
        except ValueError as e:
            raise UsageError(f"--video: {e}; drop --video") from None
    text = is_text_env(env_id)
    frames = video is not None and not text
    if frames:
        offscreen()
    env = make_env(env_id, dict(kwargs, render_mode="rgb_array") if frames else kwargs, wrappers=wrappers)
    if frames and "rgb_array" not in (env.unwrapped.metadata.get("render_modes") or []):
        raise UsageError(f"--video: {env_id} does not render rgb_array frames; drop --video")
    returns, shots, lines = [], [], []
    for s in seeds:
        ep = play_episode(env, s, policy, frames=frames, transcript=text)
        shots += ep.frames
        lines += ep.lines
        returns.append(ep.total)
    env.close()
    out = None
    if video is not None:
        video = Path(video)
        video.parent.mkdir(parents=True, exist_ok=True)
        fps = int(env.unwrapped.metadata.get("render_fps") or 30)
        out = write_transcript(video, lines) if text else write_video(video, shots, max(1, min(fps, 60)))
    return Played(run_id, which, step, seeds, returns, out, info, simulator)

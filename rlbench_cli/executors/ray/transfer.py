"""Files between the coordinator and the actors' nodes. Shards, checkpoints and output.log never travel
through a shared filesystem: each actor runs its job in a node-local folder (``actor_root``), the coordinator
copies what it sent into the attempt folders on its own machine (``write_files``, ``receive``), sends a
resumed attempt the files it continues from (``resume_files``), and fetches what an actor that died left on
its node (``salvage``, which runs ``leftovers`` there). Folders of dead actors nothing salvaged are removed
by a later actor.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from ...errors import error_line
from ..base import Job

KEEP_PACKED = 2  # checkpoints kept per run of a packed job on the coordinator's machine (see write_files)
SALVAGE_TIMEOUT_S = (
    30.0  # fetching what a dead actor left on its node (a new worker process, slow on a busy node)
)
# a dead actor's node-local folder is left this long for the coordinator's salvage (which gives up after
# SALVAGE_TIMEOUT_S) before a later actor on the node removes it
ORPHAN_AGE_S = 10 * SALVAGE_TIMEOUT_S
MAX_LOG_BYTES = 1 << 20  # output.log comes back whole up to this size, else its tail


def actor_root() -> Path:
    """This actor's node-local folder, <tmp>/rlbench-ray/<pid>; folders of actors no longer alive that nothing
    has written to for ``ORPHAN_AGE_S`` are removed on the way. A younger one may belong to an actor that has
    just died: the coordinator's salvage task (``leftovers``) reads and removes it, and an actor starting on
    the same node meanwhile (another slot's replacement) must not take its output.log and shards first."""
    base = Path(tempfile.gettempdir()) / "rlbench-ray"
    base.mkdir(exist_ok=True)
    for old in base.iterdir():
        if (
            old.name.isdigit()
            and not Path(f"/proc/{old.name}").exists()
            and _untouched_for(old, ORPHAN_AGE_S)
        ):
            shutil.rmtree(old, ignore_errors=True)
    root = base / str(os.getpid())
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    return root


def _untouched_for(folder: Path, seconds: float) -> bool:
    """Whether nothing in ``folder`` (itself included) was modified in the last ``seconds``."""
    since = time.time() - seconds
    for where, _, files in os.walk(folder):  # every folder is a ``where`` once
        for path in [where, *(os.path.join(where, f) for f in files)]:
            try:
                if os.stat(path, follow_symlinks=False).st_mtime > since:
                    return False
            except OSError:  # removed meanwhile
                continue
    return True


def _settled(log: Path, quiet_s: float = 0.3, limit_s: float = 3.0) -> None:
    """Wait until ``log`` has stopped growing for ``quiet_s`` (at most ``limit_s``): a process that dies of a
    fatal signal is still writing its report (a symbolised stack) when Ray says it is gone."""
    import time

    deadline, last, since = time.monotonic() + limit_s, -1, time.monotonic()
    while time.monotonic() < deadline:
        size = log.stat().st_size if log.is_file() else 0
        if size != last:
            last, since = size, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.05)


def leftovers(folder: str, have: list[str]) -> list[tuple[str, bytes]]:
    """Run as a task on the node of an actor that died under a job: the files the job wrote there that the
    coordinator does not have yet (shards flushed since the last poll, spec.json, output.log, listed
    artifacts). Removes the folder."""
    path, out = Path(folder), []
    _settled(path / "output.log")
    ckpts = new_checkpoints(path.parent, set(have))
    metrics = path / "metrics"
    for f in sorted(metrics.glob("*.parquet")) if metrics.is_dir() else []:
        if f"metrics/{f.name}" not in have:
            out.append((f"metrics/{f.name}", f.read_bytes()))
    for rel in ("spec.json", "result.json", "output.log"):
        p = path / rel
        if p.is_file() and rel not in have:
            data = p.read_bytes()
            out.append((rel, data[-MAX_LOG_BYTES:]))
    out += new_artifacts(path, set(have))
    out += ckpts
    shutil.rmtree(path.parent, ignore_errors=True)
    return out


def new_checkpoints(run_folder: Path, have: set[str]) -> list[tuple[str, bytes]]:
    """The run's checkpoint files on this node that ``have`` lacks, oldest first, as ("checkpoint/step-S.pt",
    bytes). A run keeps only its latest one; a seed of a packed job keeps the one before too until every seed
    has saved the new one (``algos.base.resume_together``), and that one must reach the coordinator as well:
    a poll in the middle of one pack save, then one in the middle of a later save, would otherwise bring seeds
    only checkpoints of different steps, and the pack, lost with its node, would start over."""
    from ...checkpoint import list_checkpoints

    out = []
    for _, path in reversed(list_checkpoints(run_folder / "checkpoint")):
        rel = f"checkpoint/{path.name}"
        if rel in have:
            continue
        try:
            out.append((rel, path.read_bytes()))
        except FileNotFoundError:  # pruned meanwhile: a newer one is there
            continue
    return out


def new_artifacts(folder: Path, have: set[str]) -> list[tuple[str, bytes]]:
    """The files an attempt listed in its artifact index (``rlbench_cli.artifacts``: saved policies, videos)
    that ``have`` lacks, then the index itself when it changed, relative to the attempt folder: a file comes
    before the index line naming it, so the coordinator never lists a file it does not hold. ``have`` is
    updated (the index as ``artifacts.jsonl@<size>``)."""
    from ...artifacts import INDEX, read_index

    index = folder / INDEX
    try:
        data = index.read_bytes()
    except FileNotFoundError:
        return []
    mark = f"{INDEX}@{len(data)}"
    if mark in have:
        return []
    out = []
    prefix = f"{folder.name}/"
    for r in read_index(folder):
        rel = r["path"][len(prefix) :] if r["path"].startswith(prefix) else None
        if rel is None or rel in have:
            continue  # a file of an earlier attempt: the coordinator has it
        try:
            out.append((rel, (folder / rel).read_bytes()))
        except FileNotFoundError:  # a best policy a later one replaced: the index lists the later one too
            continue
        have.add(rel)
    out.append((INDEX, data))
    have.add(mark)
    return out


def resume_files(job: Job, every_checkpoint: bool = False) -> list[tuple[str, bytes]]:
    """What attempt ``job`` needs from its run folder on the coordinator's machine to resume on another
    node: the run's latest checkpoint (``every_checkpoint``: the ones kept, for a seed of a packed job, which
    resumes at the latest step all its seeds have) and the metric shards of its earlier attempts (the
    checkpoint names the shards of the attempt that saved it; without them it would start over), and the
    earlier attempts' artifact indexes with the files they list up to the checkpoint (``earlier_artifacts``).
    Relative to the run folder."""
    if job.attempt < 2 or job.spec.budget.get("checkpoint_every") is None:
        return []
    from ...checkpoint import list_checkpoints

    run_folder = job.folder.parent
    found = list_checkpoints(run_folder / "checkpoint")
    if not found:
        return []
    files = []
    for k in range(1, job.attempt):
        metrics = run_folder / f"attempt-{k}" / "metrics"
        for p in sorted(metrics.glob("*.parquet")) if metrics.is_dir() else []:
            files.append((f"attempt-{k}/metrics/{p.name}", p.read_bytes()))
    files += earlier_artifacts(run_folder, job.attempt, found[0][0])
    for _, path in found if every_checkpoint else found[:1]:
        files.append((f"checkpoint/{path.name}", path.read_bytes()))
    return files


def earlier_artifacts(run_folder: Path, attempt: int, step: int) -> list[tuple[str, bytes]]:
    """The artifact index of each attempt before ``attempt`` and the files they list up to ``step`` (but a
    final policy) that are in the run folder, each file once, relative to the run folder. A resumed attempt
    lists the files of the attempt it continues (``RunContext._carry_artifacts``, which reads that attempt's
    index and keeps the rows whose file is there): on another node than the earlier attempt's, without them
    it would list none, and the run's artifact rows (its videos, its best policy) would be lost at the
    coordinator's next ingest, though the files are here."""
    from ...artifacts import INDEX, current, read_index

    files: list[tuple[str, bytes]] = []
    sent: set[str] = set()
    for k in range(1, attempt):
        index = run_folder / f"attempt-{k}" / INDEX
        if not index.is_file():
            continue
        for r in current(read_index(index.parent)):
            if r["step"] > step or r["kind"] == "policy_final" or r["path"] in sent:
                continue
            path = run_folder / r["path"]
            if path.is_file() and path.resolve().is_relative_to(run_folder.resolve()):
                files.append((r["path"], path.read_bytes()))
                sent.add(r["path"])
        files.append((f"attempt-{k}/{INDEX}", index.read_bytes()))
    return files


def write_files(
    folder: Path, files: list[tuple[str, bytes]], checkpoints_up: bool = True, keep: int = 1
) -> None:
    """Write files an actor sent into the attempt folder on this machine (atomically, same names). A
    checkpoint (``checkpoint/step-S.pt``) goes to the run folder, shared by the attempts, where the newest
    ``keep`` are kept: one, as ``checkpoint.save`` does, or for a seed of a packed job ``KEEP_PACKED`` (its
    seeds resume at a step they all have, ``algos.base.resume_together``, and the job may have been lost after
    one seed's newest checkpoint came over and before another's)."""
    for rel, data in files:
        parts = Path(rel).parts
        if not parts or any(p in ("", ".", "..") for p in parts) or Path(rel).is_absolute():
            continue  # never outside the attempt folder
        is_ckpt = checkpoints_up and parts[0] == "checkpoint" and len(parts) == 2
        dest = (folder.parent if is_ckpt else folder) / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".part")
        tmp.write_bytes(data)
        os.replace(tmp, dest)
        if is_ckpt:
            from ...checkpoint import list_checkpoints

            for _, old in list_checkpoints(dest.parent)[keep:]:
                old.unlink(missing_ok=True)


def receive(job: Job, reply: dict[str, Any]) -> None:
    """Write what an actor sent with a job's result into its runs' attempt folders; a run that finished
    needs its checkpoint no more (``run_one`` removes it where it ran; this is the coordinator's copy)."""
    results = reply["result"].get("pack_results") or [reply["result"]]
    for m, files, r in zip(job.members, reply["files"], results):
        write_files(m.folder, files, keep=KEEP_PACKED if job.pack else 1)
        if r.get("status") == "finished":
            shutil.rmtree(m.folder.parent / "checkpoint", ignore_errors=True)


def salvage(
    ray: Any, dead: list[tuple[Job, str | None, list[str] | None]], timeout: float = SALVAGE_TIMEOUT_S
) -> None:
    """Fetch what dead actors' jobs flushed after the last poll (shards, output.log, the latest
    checkpoint), with a task on each one's node, all at once. A node that is gone, or does not answer
    within ``timeout``, keeps it: the run's ``output.log`` here then says which node and folder hold it (they
    stay there ``ORPHAN_AGE_S``). ``dead``: (job, the actor's node id, the job's folders there)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    asks = []
    for job, node_id, folders in dead:
        if not node_id or not folders:
            continue
        task = ray.remote(num_cpus=0, max_retries=0)(leftovers).options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
        )
        for m, folder in zip(job.members, folders):
            metrics, ckpts = m.folder / "metrics", m.folder.parent / "checkpoint"
            have = [f"metrics/{p.name}" for p in metrics.glob("*.parquet")] if metrics.is_dir() else []
            have += [f"checkpoint/{p.name}" for p in ckpts.glob("step-*.pt")] if ckpts.is_dir() else []
            try:
                asks.append((m, KEEP_PACKED if job.pack else 1, node_id, folder, task.remote(folder, have)))
            except Exception as e:  # noqa: BLE001 - the local Ray instance itself is going down
                left_behind(m.folder, node_id, folder, e)
    deadline = time.monotonic() + timeout
    for m, keep, node_id, folder, ref in asks:
        try:
            write_files(m.folder, ray.get(ref, timeout=max(0.1, deadline - time.monotonic())), keep=keep)
        except Exception as e:  # noqa: BLE001 - node lost or too slow: what was pulled before is what we have
            left_behind(m.folder, node_id, folder, e)
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001
                pass


def left_behind(attempt: Path, node_id: str, folder: str, e: BaseException) -> None:
    """Say in an attempt's ``output.log`` here that what its dead actor wrote after the last pull could not be
    fetched from its node, and where it is."""
    note(attempt / "output.log", f"what this attempt wrote after the last pull could not be fetched from Ray node "
         f"{node_id} ({type(e).__name__}: {error_line(e)[:200]}); it stays in {folder} on that node for {ORPHAN_AGE_S:g}s")  # fmt: skip


def note(log: Path, line: str) -> None:
    """Append rlbench's own line to an attempt's ``output.log`` on the coordinator's side (why it ended)."""
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as fh:
            fh.write(f"\n[rlbench] {line}\n")
    except OSError:
        pass

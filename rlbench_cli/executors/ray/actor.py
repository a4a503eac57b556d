"""The actor: one warm rlbench worker on a Ray node, which runs job after job in node-local folders and hands
back the files they wrote (``poll`` while a job runs, the rest with its result).
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
from pathlib import Path
from typing import Any

from ...packed import run_job
from ..base import output_to, preload_worker
from .transfer import MAX_LOG_BYTES, actor_root, new_artifacts, new_checkpoints, write_files


class RlbenchWorker:
    """One warm worker on a Ray node (wrapped by ``ray.remote`` in ``RayExecutor``; threaded, so ``poll``
    and ``stop`` are served while ``run`` trains).

    Args:
        threads: torch threads.
        env: RLBENCH_* variables of the coordinator, set here too.
        cwd: the coordinator's working directory; used when it exists on this node (same machine or a shared
            filesystem), so entrypoints and scripts named relative to it resolve as they do locally.
    """

    def __init__(self, threads: int, env: dict[str, str], cwd: str, preload_torch: bool = True) -> None:
        import ray

        os.environ.update(env)
        if os.path.isdir(cwd):
            os.chdir(cwd)
        # torch once per actor, not once per job (or not at all when no run uses it, unless a GPU is to be checked)
        preload_worker(threads, preload_torch=False)

        ctx = ray.get_runtime_context()
        gpus = ray.get_gpu_ids()
        self.device = "cpu"
        if gpus or preload_torch:
            import torch

            from ...runner import configure_torch

            configure_torch(torch)
            # A GPU Ray assigned but torch cannot use (declared with --num-gpus, no CUDA here): run on the CPU.
            self.device = "cuda:0" if gpus and torch.cuda.is_available() else "cpu"
        self.info = {
            "host": socket.gethostname(),
            "ip": ray.util.get_node_ip_address(),
            "node_id": ctx.get_node_id(),
            "actor_id": ctx.get_actor_id(),
            "pid": os.getpid(),
            "device": self.device,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        }
        self.root = actor_root()  # node-local, whatever the cluster shares
        self.info["root"] = str(self.root)
        self.stop_event = threading.Event()
        self.stopped: set[str] = set()  # jobs asked to stop, even before their run() began
        self.lock = threading.Lock()
        self.folders: list[Path] = []  # the running job's attempt folders (several for a pack of seeds)
        self.sent: list[set[str]] = []
        self.signals: dict[str, list[tuple[str, bytes]]] = {}  # control files for runs not begun yet

    def where(self) -> dict[str, Any]:
        return self.info

    def run(self, spec: Any, name: Any, carry: list[list[tuple[str, bytes]]] | None = None) -> dict[str, Any]:
        """Run one job in fresh node-local folders; return its result and the files not yet polled.

        ``spec``/``name`` are one run's, or lists of them for a pack of seeds (``resources.seeds_per_job``).
        ``carry`` gives each run the files of its run folder that a resumed attempt needs (its latest
        checkpoint, the metric shards of earlier attempts), relative to that run folder."""
        specs = spec if isinstance(spec, list) else [spec]
        names = name if isinstance(name, list) else [name]
        carries = carry or [[] for _ in specs]
        folders = [self.root / n for n in names]
        sent: list[set[str]] = []
        for folder, files in zip(folders, carries):
            shutil.rmtree(folder.parent, ignore_errors=True)  # this run's folder on this node, fresh
            folder.mkdir(parents=True)
            write_files(folder.parent, files, checkpoints_up=False)
            sent.append({f for f, _ in files if f.startswith("checkpoint/")})  # never sent back
        folder = folders[0]
        with self.lock:
            self.folders, self.sent = folders, sent
            self.stop_event = threading.Event()
            if any(n in self.stopped for n in names):
                self.stop_event.set()
            for n, f in zip(names, folders):
                for file, data in self.signals.pop(n, []):
                    _put(f / file, data)
        with output_to(folder / "output.log"):
            result = run_job(specs, folders, device=self.device, stop_event=self.stop_event)
        with self.lock:
            files = [self._collect(f, sent, final=True) for f, sent in zip(folders, self.sent)]
            self.folders, self.sent = [], []
        for f in folders:
            shutil.rmtree(f.parent, ignore_errors=True)
        return {"result": result, "files": files}

    def poll(self, log: bool = False) -> list[list[tuple[str, bytes]]]:
        """For each run of the running job, the shards it flushed (and the checkpoint it saved) since the
        last poll (complete files only); ``log``: also its ``output.log`` so far (the job is about to be
        killed)."""
        with self.lock:
            return [self._collect(f, sent, final=False, log=log) for f, sent in zip(self.folders, self.sent)]

    def stop(self, name: str) -> None:
        """Ask job ``name`` to stop (it flushes and ends 'interrupted'); also when its run() has not begun."""
        with self.lock:
            self.stopped.add(name)
            if self.root / name in self.folders:
                self.stop_event.set()

    def signal(self, name: str, file: str, data: bytes) -> None:
        """Put a control file into run ``name``'s node-local attempt folder, where the run looks for it
        (``rlbench tune``'s ``PRUNE``, which the coordinator's pruner wrote in the attempt folder on its side);
        a run whose ``run()`` has not made its folder yet gets it as soon as it has."""
        with self.lock:
            if self.root / name in self.folders:
                _put(self.root / name / file, data)
            else:
                self.signals.setdefault(name, []).append((file, data))

    @staticmethod
    def _collect(folder: Path, sent: set[str], final: bool, log: bool = False) -> list[tuple[str, bytes]]:
        # The checkpoints are read BEFORE the shards are listed: every shard they name was flushed
        # before they were saved, so the coordinator never holds a checkpoint without the rows it continues.
        ckpts = new_checkpoints(folder.parent, sent)
        out = []
        metrics = folder / "metrics"
        names = sorted(p.name for p in metrics.glob("*.parquet")) if metrics.is_dir() else []
        for n in names:
            rel = f"metrics/{n}"
            if rel not in sent:
                out.append((rel, (metrics / n).read_bytes()))
                sent.add(rel)
        if final:
            for rel in ("spec.json", "result.json"):
                p = folder / rel
                if p.exists():
                    out.append((rel, p.read_bytes()))
        out += new_artifacts(folder, sent)  # saved policies and videos, before the index naming them
        output = folder / "output.log"
        if (final or log) and output.exists():
            with open(output, "rb") as fh:
                fh.seek(max(0, output.stat().st_size - MAX_LOG_BYTES))
                out.append(("output.log", fh.read()))
        out += ckpts  # last: written after the shards they continue
        sent.update(rel for rel, _ in ckpts)
        return out


def _put(path: Path, data: bytes) -> None:
    """Write a file whole: a reader sees it complete or not at all."""
    tmp = path.with_name(f".{path.name}.partial")
    tmp.write_bytes(data)
    os.replace(tmp, path)

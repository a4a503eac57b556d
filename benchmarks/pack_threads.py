"""What a packed job costs besides its training: the threads of one worker running a pack of N ppo_jax seeds
(``packed.run_packed``, what every executor's worker runs for a pack) and the process's CPU seconds.

Each seed is its own run with its own shards and system metrics; the threads that flush those shards and
sample the system metrics are the pack's, not the seed's (one of each, and at most ``sink.FLUSH_WORKERS``
helpers writing shards, whatever N is). This script runs one pack in this process and prints: the most
Python threads alive at once (``threading.enumerate``, sampled by a thread of its own, counted in), the most
OS threads (``/proc/self/status``: XLA's pools included), the most of rlbench's own (flusher, its helpers
rlbench-sink-io, monitor), the worker's CPU seconds (user + system, this process) and wall seconds, each
seed's rows, and how long rows waited in memory for their shard (a shard's mtime less its first row's
wall_time: what a worker killed with -9 would have lost). A first pack of the same shape warms JAX's
compilation cache unless --cold.

    python benchmarks/pack_threads.py                        # 256 seeds x 16,384 steps of gymnax CartPole
    python benchmarks/pack_threads.py --seeds 2 --steps 1024 --cold  # a quick check of the script
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

PARAMS = {"num_envs": 4, "num_steps": 128}


def os_threads() -> int:
    """Threads of this process as the kernel counts them (Python's and native ones)."""
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("Threads:"))


class Sampler:
    """Every ``every`` seconds, the number of threads alive and the names of rlbench's own; keeps the peaks."""

    def __init__(self, every: float = 0.25):
        self.every, self.py, self.os, self.names = every, 0, 0, Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pack-threads-sampler", daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            alive = threading.enumerate()
            self.py, self.os = max(self.py, len(alive)), max(self.os, os_threads())
            mine = Counter(t.name.partition("_")[0] for t in alive if t.name.startswith("rlbench-"))
            self.names = Counter({k: max(self.names[k], v) for k, v in (self.names | mine).items()})


def run_pack(seeds: int, steps: int, folder: Path) -> dict[str, Any]:
    import pyarrow.parquet as pq

    from rlbench_cli.packed import run_packed
    from rlbench_cli.sink import list_shards
    from rlbench_cli.suite.grid import RunSpec

    budget = {"steps": steps, "eval_every": max(steps // 4, 1), "eval_episodes": 10}
    specs = [RunSpec(suite="pt", algo="ppo_jax", algo_name="ppo_jax", params=dict(PARAMS),
                     env_id="gymnax/CartPole-v1", env_kwargs={}, seed=s, budget=dict(budget))
             for s in range(seeds)]  # fmt: skip
    folders = [folder / s.run_id / "attempt-1" for s in specs]
    cpu0, t0 = os.times(), time.perf_counter()
    with Sampler() as sampler:
        results = run_packed(specs, folders)
    wall, cpu1 = time.perf_counter() - t0, os.times()
    rows = [pq.read_table(list_shards(f / "metrics")).num_rows for f in folders]
    # how long a row waited in memory before its shard was on disk (what a kill -9 would lose): the shard's
    # mtime less the first wall_time in it; the last shard of each seed, written by close, left out
    waits = sorted(
        shard.stat().st_mtime - pq.read_table(shard, columns=["wall_time"])["wall_time"][0].as_py()
        for f in folders
        for shard in list_shards(f / "metrics")[:-1]
    )
    sys_rows = [
        sum(n.startswith("sys/") for n in pq.read_table(list_shards(f / "metrics"))["name"].to_pylist())
        for f in folders[:4]
    ]
    return {"seeds": seeds, "steps": steps, "status": dict(Counter(r["status"] for r in results)),
            "wall_s": wall, "cpu_s": (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system),
            "py_threads": sampler.py, "os_threads": sampler.os, "rlbench_threads": dict(sampler.names),
            "rows_per_seed": sorted(set(rows)), "sys_rows_first_seeds": sys_rows,
            "row_wait_s": {"median": waits[len(waits) // 2], "p99": waits[int(0.99 * (len(waits) - 1))],
                           "max": waits[-1]} if waits else None}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=256)
    ap.add_argument("--steps", type=int, default=16_384, help="env steps per seed")
    ap.add_argument("--cold", action="store_true", help="no warm-up pack: the measured one compiles")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rlbench-pack-threads-") as tmp:
        os.environ.setdefault("RLBENCH_JAX_CACHE", str(Path(tmp) / "jax-cache"))
        if not args.cold:
            run_pack(args.seeds, args.steps, Path(tmp) / "warm")
        r = run_pack(args.seeds, args.steps, Path(tmp) / "measured")
    print(f"{r['seeds']} seeds x {r['steps']:,} steps of ppo_jax in one pack: {r['status']}")
    print(
        f"  threads at most: {r['py_threads']} Python, {r['os_threads']} OS; rlbench's: {r['rlbench_threads']}"
    )
    print(f"  worker CPU {r['cpu_s']:.1f} s over {r['wall_s']:.1f} s wall")
    print(f"  rows per seed: {r['rows_per_seed']}; sys/ rows of the first seeds: {r['sys_rows_first_seeds']}")
    if r["row_wait_s"]:
        w = r["row_wait_s"]
        print(
            f"  a row's wait for its shard (s): median {w['median']:.2f}, p99 {w['p99']:.2f}, max {w['max']:.2f}"
        )
    if args.json:
        args.json.write_text(json.dumps(r, indent=1))


if __name__ == "__main__":
    main()

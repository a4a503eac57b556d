"""The local pool's start: workers forked from one zygote against each worker spawned as a fresh process.

A CPU pool forks its workers from a zygote that imported torch, gymnasium and pyarrow once
(``rlbench_cli/executors/zygote.py``); ``RLBENCH_WORKER_START=spawn`` starts each worker as a fresh Python
process that does those imports itself (rlbench's pool before the zygote, and what a GPU pool still does).
The zygote also runs the params check, which imports the runs' adapters (d3rlpy for dqn: about 3 s), so the
workers forked after it share those imports too. This script times the whole ``rlbench run`` of a small suite
(CartPole-v1, --runs seeds of each of --algos, --steps steps, --workers workers) both ways, taking turns,
--repeat times each, and prints each one's median wall seconds and CPU seconds (the command and every process
it started), and the ratios. --faults adds a job per seed that kills its worker, so the pool also replaces
workers.

    python benchmarks/worker_start.py                    # 2 seeds of ppo and dqn on 2 workers, 3 times each
    python benchmarks/worker_start.py --workers 4 --runs 4 --faults
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RLBENCH = shutil.which("rlbench", path=str(Path(sys.executable).parent)) or "rlbench"
KILLER = """
import os, signal

def dies(ctx):
    os.kill(os.getpid(), signal.SIGKILL)  # what the out-of-memory killer does: the pool replaces the worker
"""


ALGOS = {
    "ppo": "{name: ppo, params: {num_envs: 4, num_steps: 128}}",
    "dqn": "{name: dqn, params: {update_start_step: 200, update_interval: 4, hidden_units: [64, 64]}}",
}


def suite_text(runs: int, steps: int, algos: list[str], faults: bool) -> str:
    entries = [ALGOS[a] for a in algos]
    if faults:
        entries.append("{name: dies, entrypoint: 'killer:dies'}")
    return (
        f"name: wstart\nseeds: {runs}\nbudget: {{steps: {steps}, eval_every: {steps}, eval_episodes: 1}}\n"
        f"envs: [CartPole-v1]\nalgorithms: [{', '.join(entries)}]\n"
    )


def one(folder: Path, mode: str, workers: int) -> tuple[float, float]:
    """(wall s, CPU s) of one ``rlbench run`` in a fresh results folder."""
    shutil.rmtree(folder / "results", ignore_errors=True)
    env = {**os.environ, "RLBENCH_WORKER_START": mode}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run([RLBENCH, "run", "s.yaml", "--workers", str(workers)],
                       cwd=folder, env=env, capture_output=True, text=True)  # fmt: skip
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode not in (0, 1):  # 1: the fault suite's runs failed, as they should
        raise SystemExit(f"rlbench run ({mode}) failed:\n{r.stdout}\n{r.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--runs", type=int, default=2, help="seeds of each algorithm")
    ap.add_argument("--algos", nargs="+", choices=sorted(ALGOS), default=["ppo", "dqn"],
                    help="ppo (torch), dqn (d3rlpy: its import is shared too)")  # fmt: skip
    ap.add_argument("--steps", type=int, default=2048)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--faults", action="store_true", help="add a job per seed that kills its worker")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rlbench-wstart-") as tmp:
        folder = Path(tmp)
        (folder / "s.yaml").write_text(suite_text(args.runs, args.steps, args.algos, args.faults))
        (folder / "killer.py").write_text(KILLER)
        times: dict[str, list[tuple[float, float]]] = {"fork": [], "spawn": []}
        for _ in range(args.repeat):
            for mode in times:
                times[mode].append(one(folder, mode, args.workers))
    med = {
        m: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for m, v in times.items()
    }
    what = f"{args.runs} seeds of {' and '.join(args.algos)}, {args.steps} steps" + (
        f" + {args.runs} jobs killing their worker" if args.faults else ""
    )
    print(f"rlbench run, {what}, {args.workers} workers; medians of {args.repeat}:")
    print(f"{'workers started':<36}{'wall s':>10}{'CPU s':>10}")
    for mode, label in (
        ("fork", "forked from one zygote (default)"),
        ("spawn", "spawned (RLBENCH_WORKER_START=spawn)"),
    ):
        print(f"{label:<36}{med[mode][0]:>10.2f}{med[mode][1]:>10.2f}")
    wall_x, cpu_x = med["spawn"][0] / med["fork"][0], med["spawn"][1] / med["fork"][1]
    print(
        f"spawned / forked: wall {wall_x:.2f}x, CPU {cpu_x:.2f}x ({med['spawn'][1] - med['fork'][1]:+.2f} CPU s)"
    )
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)}, "median": med,
                                         "runs": times, "wall_ratio": wall_x, "cpu_ratio": cpu_x}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()

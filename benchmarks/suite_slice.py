"""What a full-size suite costs, from a slice of it: run some of its algorithms x tasks for one seed and a
few steps on this machine, through the real ``rlbench run``, and scale up.

Full-size suites (suites/lmrl.yaml, suites/imagine.yaml, suites/mujoco-offline.yaml) are sized for GPUs and
take hours; before booking them a researcher wants to know how many. This script writes a copy of the suite
keeping only the ``--algo`` entries and the ``--task`` datasets or envs (all when not given), with ``--seeds``
seeds (default 1) and a budget of ``--steps`` steps (evaluations at 0 and at the end, ``--eval-episodes`` as
the suite's unless given), runs it with ``rlbench run`` into a fresh database and datasets folder (its output
passed on, each line with the seconds since the start), and prints per run: wall seconds, device, training steps/s (median of the run's ``sys/steps_per_second``) and
the GPU's utilisation and memory where the run had one (``sys/gpu_util``, ``sys/gpu_mem_mb``). Then, for
each algorithm x task measured, the full suite's runs of it (``rlbench run --dry-run``) and their training
run-hours at that rate, and the wall time at the slice's concurrency (``--workers`` runs at a time, as
measured): an estimate, evaluations and dataset building left out, said so. The dataset building
time of the slice (wall clock before the first run starts) is printed apart.

    python benchmarks/suite_slice.py suites/lmrl.yaml --algo ilql --algo bc --task MazeFO-v0-mixed --steps 1000
    python benchmarks/suite_slice.py suites/imagine.yaml --algo cql --steps 2000 --workers 2 --json out.json

``--keep DIR`` keeps the database and the datasets there (default: a temporary folder, removed).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml


def _entry_name(entry: Any, key: str) -> str:
    return str(entry.get(key) if isinstance(entry, dict) else entry)


def _task_matches(name: str, wanted: list[str]) -> bool:
    return name in wanted or name.rpartition("/")[2] in wanted


def slice_suite(raw: dict[str, Any], algos: list[str], tasks: list[str], steps: int, seeds: int,
                eval_episodes: int | None) -> dict[str, Any]:  # fmt: skip
    """A copy of the suite ``raw`` (its YAML, loaded) keeping the named algorithms and tasks, sized down."""
    out = dict(raw)
    out["name"] = f"{raw['name']}-slice"
    out.pop("description", None)
    if algos:
        kept = [a for a in raw.get("algorithms", []) if _entry_name(a, "name") in algos]
        missing = sorted(set(algos) - {_entry_name(a, "name") for a in kept})
        if missing:
            raise SystemExit(f"--algo {missing[0]!r}: the suite has no such algorithm entry")
        out["algorithms"] = kept
    if tasks:
        found: set[str] = set()
        for key, field in (("datasets", "name"), ("envs", "id")):
            if key not in raw:
                continue
            kept = [e for e in raw[key] if _task_matches(_entry_name(e, field), tasks)]
            found |= {t for e in kept for t in tasks if _task_matches(_entry_name(e, field), [t])}
            if kept:
                out[key] = kept
            else:
                out.pop(key)
        missing = sorted(set(tasks) - found)
        if missing:
            raise SystemExit(f"--task {missing[0]!r}: the suite has no such dataset or env")
    budget = dict(raw.get("budget") or {})
    budget.update(steps=steps, eval_every=steps)
    if eval_episodes is not None:
        budget["eval_episodes"] = eval_episodes
    out["budget"] = budget
    out["seeds"] = seeds
    out.pop("adaptive", None)
    return out


def _exe() -> str:
    """The ``rlbench`` command: on PATH, else beside this Python."""
    return shutil.which("rlbench") or str(Path(sys.executable).with_name("rlbench"))


def _rlbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_exe(), *args], capture_output=True, text=True)


def run_slice(path: Path, db: Path, datasets: Path, workers: int, t0: float) -> int:
    """``rlbench run`` of the slice, its output passed on line by line with the seconds since ``t0`` (dataset
    building, runs starting and ending); returns its exit code."""
    cmd = [_exe(), "run", str(path), "--db", str(db), "--datasets", str(datasets), "--workers", str(workers)]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(f"  [{time.time() - t0:7.1f} s] {line.rstrip()}", flush=True)
    return proc.returncode


def full_grid(suite_file: Path) -> list[dict[str, Any]]:
    proc = _rlbench("run", str(suite_file), "--dry-run", "--json")
    if proc.returncode != 0:
        raise SystemExit(f"rlbench run --dry-run {suite_file} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def _task(run: dict[str, Any]) -> str:
    return str(run.get("dataset") or run.get("env_id"))


def _run_steps(run: dict[str, Any]) -> int:
    return int(run["budget"]["steps"]) + int((run.get("finetune") or {}).get("steps") or 0)


def measure(db: Path, suite: str) -> list[dict[str, Any]]:
    """Per run of the slice: wall seconds, device, median steps/s and GPU figures, from the database."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        runs = con.execute(
            "SELECT run_id, algo, env, config, duration_s, device, status, started_at FROM runs WHERE suite = ?"
            " ORDER BY algo, env", [suite],
        ).fetchall()  # fmt: skip
        per_run: dict[str, dict[str, list[float]]] = {}  # run_id -> metric -> values, in one query
        for run_id, name, value in con.execute(
            "SELECT m.run_id, m.name, m.value FROM metrics m JOIN runs r USING (run_id) WHERE r.suite = ? AND "
            "m.name IN ('sys/steps_per_second', 'sys/gpu_util', 'sys/gpu_mem_mb', 'sys/sps_overall') "
            "AND m.value IS NOT NULL", [suite],
        ).fetchall():  # fmt: skip
            per_run.setdefault(run_id, {}).setdefault(name, []).append(float(value))
        rows = []
        for run_id, algo, env, config, duration, device, status, started in runs:
            cfg = json.loads(config) if isinstance(config, str) else (config or {})
            vals = per_run.get(run_id, {})
            sps = [v for v in vals.get("sys/steps_per_second", []) if v > 0]
            rows.append({
                "run_id": run_id, "algo": algo, "task": str(cfg.get("dataset") or env), "status": status,
                "device": device, "duration_s": duration, "started_at": started,
                "steps_per_s": statistics.median(sps) if sps else None,
                "sps_overall": max(vals["sys/sps_overall"]) if vals.get("sys/sps_overall") else None,
                "gpu_util": statistics.mean(vals["sys/gpu_util"]) if vals.get("sys/gpu_util") else None,
                "gpu_mem_mb": max(vals["sys/gpu_mem_mb"]) if vals.get("sys/gpu_mem_mb") else None,
            })  # fmt: skip
        return rows
    finally:
        con.close()


def estimate(rows: list[dict[str, Any]], grid: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per algorithm x task measured: the full suite's runs of it and their training hours at that rate."""
    out = []
    for algo in sorted({r["algo"] for r in rows}):
        for task in sorted({r["task"] for r in rows if r["algo"] == algo}):
            mine = [r for r in rows if r["algo"] == algo and r["task"] == task and r["steps_per_s"]]
            full = [g for g in grid if g["algo"] == algo and _task(g) == task]
            if not mine or not full:
                continue
            sps = statistics.median(r["steps_per_s"] for r in mine)
            hours = sum(_run_steps(g) for g in full) / sps / 3600
            out.append({"algo": algo, "task": task, "full_runs": len(full), "steps_per_run": _run_steps(full[0]),
                        "steps_per_s": sps, "train_hours": hours})  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("suite", type=Path)
    ap.add_argument("--algo", action="append", default=[], help="an algorithm entry to keep (repeatable)")
    ap.add_argument(
        "--task", action="append", default=[], help="a dataset name or env id to keep (repeatable)"
    )
    ap.add_argument("--steps", type=int, default=1000, help="steps per run of the slice (default 1000)")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--eval-episodes", type=int, help="episodes per evaluation (default: the suite's)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--keep", type=Path, help="keep the database and datasets in this folder")
    ap.add_argument("--json", type=Path, help="also write every figure to this JSON file")
    args = ap.parse_args(argv)

    raw = yaml.safe_load(args.suite.read_text())
    sliced = slice_suite(raw, args.algo, args.task, args.steps, args.seeds, args.eval_episodes)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="rlbench-slice-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        path = folder / f"{sliced['name']}.yaml"
        path.write_text(yaml.safe_dump(sliced, sort_keys=False))
        db = folder / "slice.duckdb"
        t0 = time.time()
        code = run_slice(path, db, folder / "datasets", args.workers, t0)
        wall = time.time() - t0
        if code != 0:
            raise SystemExit(f"rlbench run {path} failed (exit {code})")
        rows = measure(db, sliced["name"])
        starts = [r["started_at"].timestamp() for r in rows if r["started_at"] is not None]
        prep = (min(starts) - t0) if starts else None
        grid = full_grid(args.suite)
        est = estimate(rows, grid)
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)

    print(f"{args.suite}: slice of {len(rows)} run(s), {args.steps:,} steps each, wall {wall:.1f} s"
          + (f" ({prep:.1f} s before the first run: start-up and datasets)" if prep is not None else ""))  # fmt: skip
    print(f"  {'algo':<20} {'task':<28} {'status':<9} {'device':<7} {'wall s':>7} {'steps/s':>9} "
          f"{'gpu %':>6} {'gpu MiB':>8}")  # fmt: skip
    for r in rows:

        def f(v: Any, fmt: str) -> str:
            return format(v, fmt) if v is not None else "-"

        print(f"  {r['algo']:<20} {r['task']:<28} {r['status']:<9} {str(r['device']):<7} "
              f"{f(r['duration_s'], '7.1f'):>7} {f(r['steps_per_s'], '9.1f'):>9} {f(r['gpu_util'], '6.0f'):>6} "
              f"{f(r['gpu_mem_mb'], '8.0f'):>8}")  # fmt: skip
    total = sum(e["train_hours"] for e in est)
    together = min(args.workers, len(rows)) or 1  # runs that trained at once in the slice, at those rates
    print(f"full suite, measured entries only (training at the slice's median steps/s per run, measured "
          f"{together} at a time; evaluations and dataset building left out): {total:.2f} run-hours, "
          f"~{total / together:.2f} h of wall time {together} at a time")  # fmt: skip
    for e in est:
        print(f"  {e['algo']:<20} {e['task']:<28} {e['full_runs']:>3} runs x {e['steps_per_run']:,} steps "
              f"at {e['steps_per_s']:.1f}/s: {e['train_hours']:.2f} h")  # fmt: skip
    if args.json:
        for r in rows:
            r["started_at"] = str(r["started_at"])
        args.json.write_text(json.dumps({"suite": str(args.suite), "steps": args.steps, "wall_s": wall,
                                         "prep_s": prep, "runs": rows, "estimate": est}, indent=1))  # fmt: skip
    return 0 if all(r["status"] == "finished" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())

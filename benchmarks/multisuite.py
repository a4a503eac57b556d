"""Two suites on one store: one `rlbench run` after the other vs both at once (issue #40, section 4).

Each suite is --seeds runs of the `random` policy on CartPole-v1 for --steps steps, run by its own `rlbench
run SUITE --workers W --json` on one fresh store per trial. "one after the other" times the two commands in a row;
"at once" starts both and times until the last ends (two coordinators of different suites taking turns at
the store's write lock). Both must finish every run with the same metric rows (those of the system monitor,
sys/*, depend on the wall time and are not counted). Printed per trial and as the
median over --repeat trials (alternating the two modes): wall seconds, the ratio (at once / one after the
other), and each coordinator's database writes from `--json` (transactions, connections, seconds writing and
opening the file). On a machine with at least 2 free cores the ratio shows what running a second study beside
the first saves; timings on a shared machine vary, compare the figures of one invocation.

    python benchmarks/multisuite.py [--seeds 4] [--steps 200000] [--workers 1] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import duckdb

RLBENCH = shutil.which("rlbench") or "rlbench"


def write_suites(folder: Path, seeds: int, steps: int) -> list[Path]:
    out = []
    for name in ("study_a", "study_b"):
        p = folder / f"{name}.yaml"
        p.write_text(
            f"name: {name}\nseeds: {seeds}\nbudget: {{steps: {steps}, eval_every: {max(1, steps // 4)}, "
            "eval_episodes: 1}\nenvs: [CartPole-v1]\nalgorithms: [random]\n"
        )
        out.append(p)
    return out


def command(suite: Path, db: Path, workers: int) -> list[str]:
    return [RLBENCH, "run", str(suite), "--db", str(db), "--workers", str(workers), "--json"]


def summary(out: str, err: str, code: int) -> dict:
    if code != 0:
        raise SystemExit(f"rlbench run failed ({code}):\n{out}\n{err}")
    return json.loads(out.strip().splitlines()[-1])


def one_after_the_other(suites: list[Path], db: Path, workers: int) -> tuple[float, list[dict]]:
    t0 = time.monotonic()
    said = []
    for s in suites:
        r = subprocess.run(command(s, db, workers), capture_output=True, text=True)
        said.append(summary(r.stdout, r.stderr, r.returncode))
    return time.monotonic() - t0, said


def at_once(suites: list[Path], db: Path, workers: int) -> tuple[float, list[dict]]:
    t0 = time.monotonic()
    procs = [subprocess.Popen(command(s, db, workers), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for s in suites]  # fmt: skip
    said = []
    for p in procs:
        out, err = p.communicate()
        said.append(summary(out, err, p.returncode))
    return time.monotonic() - t0, said


def rows(db: Path) -> tuple[int, int]:
    """Metric rows other than the system monitor's (whose number depends on the wall time), and runs."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(
            "SELECT count(*) FILTER (name NOT LIKE 'sys/%'), count(DISTINCT run_id) FROM metrics"
        ).fetchone()
    finally:
        con.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--steps", type=int, default=200_000)
    ap.add_argument("--workers", type=int, default=1, help="workers of each rlbench run")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    walls: dict[str, list[float]] = {"one after the other": [], "at once": []}
    counts: set[int] = set()
    with tempfile.TemporaryDirectory() as tmp:
        suites = write_suites(Path(tmp), args.seeds, args.steps)
        print(f"2 suites x {args.seeds} runs of random on CartPole-v1, {args.steps} steps each, "
              f"--workers {args.workers} per rlbench run")  # fmt: skip
        for trial in range(args.repeat):
            for mode, fn in (("one after the other", one_after_the_other), ("at once", at_once)):
                db = Path(tmp) / f"{trial}-{mode.replace(' ', '_')}" / "rlbench.duckdb"
                wall, said = fn(suites, db, args.workers)
                assert all(s["finished"] == args.seeds for s in said), said
                n_rows, n_runs = rows(db)
                assert n_runs == 2 * args.seeds, n_runs
                counts.add(n_rows)
                assert len(counts) == 1, f"the metric rows differ between trials: {counts}"
                walls[mode].append(wall)
                writes = "; ".join(
                    f"{s['suite']}: {s['writes'].get('flushes', 0):.0f} transactions, "
                    f"{s['writes'].get('connects', 0):.0f} connections, {s['writes'].get('write_s', 0):.2f} s "
                    f"writing, {s['writes'].get('connect_s', 0):.2f} s opening"
                    for s in said
                )
                print(
                    f"trial {trial + 1} {mode:>19}: {wall:6.2f} s wall, {n_rows} metric rows besides sys/* "
                    f"({writes})"
                )
    seq, con = statistics.median(walls["one after the other"]), statistics.median(walls["at once"])
    print(f"median wall: one after the other {seq:.2f} s, at once {con:.2f} s, ratio at once / one after the "
          f"other {con / seq:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()

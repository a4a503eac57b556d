"""`rlbench ui` while `rlbench run` writes, in Debian's headless Chromium (Selenium):

    live lag: a metric row logged by a run is on screen within 2 s
    rlbench run's wall time with the UI open and refreshing vs closed: within 5%

Lag: one `command:` run logs ``eval/return`` every --every seconds through rlbench's JSON-lines client; the
browser shows that run's page (its curve refreshes on the page's own polling) and this script reads the number
of points on screen every 50 ms. A point's lag is the time it appeared on screen minus its ``wall_time`` in the
store (when the script logged it): the run's flush (1 s), the page's poll (0.5 s) and its redraw. The UI reads a
running run's flushed shards before the coordinator ingests them (``rlbench_cli/ui/live.py``).

Wall time: the same suite (``random`` on CartPole-v1, --runs runs) timed with no UI, then with the UI open on
the suite's page (curves grouped by algorithm, the table, the leaderboard not asked), alternating, --repeat
times each; medians and their ratio.

    python benchmarks/ui_live.py
    python benchmarks/ui_live.py --repeat 1 --runs 8 --points 6     # quick
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from ui_scale import browser, start_ui  # noqa: E402

BIN = Path(sys.executable).parent
LOGGER = """\
import sys, time
from rlbench_cli import client
points, every = int(sys.argv[1]), float(sys.argv[2])
for k in range(points):
    client.log(k * 100, **{"eval/return": float(k)})
    time.sleep(every)
"""


def close(driver, ui: subprocess.Popen | None) -> None:
    if driver is not None:
        driver.quit()
    if ui is not None:
        ui.terminate()
        ui.wait(timeout=30)


def wait_until(check, timeout: float) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = check()
        except Exception:  # the file or the page not there yet
            value = None
        if value:
            return value
        time.sleep(0.05)
    raise SystemExit("timed out")


def page_state(driver) -> object:
    """What the page's live polling is doing, for a failure's message."""
    return driver.execute_script(
        "const x = new XMLHttpRequest(); x.open('GET', '/api/version', false); x.send();"
        "return {hash: location.hash, fingerprint: state.fingerprint, now: x.responseText,"
        " live: document.getElementById('live').className, refreshed: document.body.getAttribute('data-refreshed'),"
        " chart: !!document.getElementById('run-chart'), error: (document.querySelector('.error') || {}).textContent}"
    )


def lag(work: Path, points: int, every: float) -> list[float]:
    """Seconds from each logged row's wall_time to its point on screen."""
    import duckdb

    (work / "logger.py").write_text(LOGGER)
    suite = work / "lag.yaml"
    suite.write_text(f"name: lag\nseeds: 1\nbudget: {{steps: {points * 100}}}\nenvs: [CartPole-v1]\nalgorithms:\n"
                     f"  - {{name: logger, command: '{sys.executable} {work}/logger.py {points} {every}'}}\n")  # fmt: skip
    db = work / "lag.duckdb"
    run = subprocess.Popen([str(BIN / "rlbench"), "run", str(suite), "--db", str(db)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)  # fmt: skip
    ui, driver, seen = None, None, {}
    try:
        wait_until(db.exists, 120)
        ui, url = start_ui(db)
        driver = browser()
        driver.get(url + "#/suite/lag")
        link = wait_until(lambda: driver.find_element("css selector", "#runs-table tr[data-run] a"), 60)
        link.click()
        ended = None  # when the run ended: the page has 30 s more to show every point, then it has failed
        while len(seen) < points:
            try:
                n = int(driver.find_element("id", "run-chart").get_attribute("data-points") or 0)
            except Exception:  # between two renders
                n = 0
            for k in range(n):
                seen.setdefault(k, time.time())
            if ended is None and run.poll() is not None:
                ended = time.time()
            if ended is not None and time.time() - ended > 30:
                raise SystemExit(f"the run page showed {len(seen)} of {points} points 30 s after the run ended; "
                                 f"the server's log: {''.join(ui.log)[-3000:]}; page: {page_state(driver)}")  # fmt: skip
            time.sleep(0.05)
    finally:
        close(driver, ui)
        run.wait(timeout=120)
    with duckdb.connect(str(db), read_only=True) as con:
        walls = [w for (w,) in con.execute(
            "SELECT wall_time FROM metrics WHERE name = 'eval/return' ORDER BY step").fetchall()]  # fmt: skip
    return [seen[k] - w for k, w in enumerate(walls) if k in seen]


def wall_times(work: Path, runs: int, repeat: int) -> tuple[list[float], list[float]]:
    """rlbench run's wall time without and with the UI open on the suite's page, alternating."""
    seeds = max(1, runs // 2)
    suite = work / "wall.yaml"
    suite.write_text(f"name: wall\nseeds: {seeds}\nbudget: {{steps: 20000, eval_every: 2000, eval_episodes: 3}}\n"
                     "envs: [CartPole-v1, Acrobot-v1]\nalgorithms: [random]\n")  # fmt: skip
    closed, open_ = [], []
    for i in range(repeat):
        for with_ui in (False, True):
            db = work / f"wall-{i}-{int(with_ui)}.duckdb"
            ui = driver = None
            t0 = time.perf_counter()
            run = subprocess.Popen([str(BIN / "rlbench"), "run", str(suite), "--db", str(db)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
            try:
                if with_ui:  # opened as soon as the run has made its database, refreshing until it ends
                    wait_until(db.exists, 120)
                    ui, url = start_ui(db)
                    driver = browser()
                    driver.get(url + "#/suite/wall")
                run.wait(timeout=1800)
                (open_ if with_ui else closed).append(time.perf_counter() - t0)
            finally:
                close(driver, ui)
    return closed, open_


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--points", type=int, default=20, help="points the lag run logs")
    parser.add_argument("--every", type=float, default=0.5, help="seconds between them")
    parser.add_argument("--runs", type=int, default=40, help="runs of the wall-time suite")
    parser.add_argument("--repeat", type=int, default=3, help="wall-time runs with and without the UI")
    parser.add_argument("--json", type=Path, help="also write the numbers to this JSON file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rlbench-ui-live-") as tmp:
        work = Path(tmp)
        lags = lag(work, args.points, args.every)
        closed, open_ = wall_times(work, args.runs, args.repeat)
    ratio = statistics.median(open_) / statistics.median(closed)
    worst = max(lags) if lags else float("nan")
    print(f"live lag, {len(lags)} points: median {statistics.median(lags):.2f} s, max {worst:.2f} s   "
          f"target <= 2 s: {'met' if worst <= 2.0 else 'NOT met'}")  # fmt: skip
    print(f"rlbench run wall time: UI closed {statistics.median(closed):.2f} s, open {statistics.median(open_):.2f} s "
          f"(x{ratio:.3f})   target <= x1.05: {'met' if ratio <= 1.05 else 'NOT met'}")  # fmt: skip
    if args.json:
        args.json.write_text(
            json.dumps({"lags_s": lags, "closed_s": closed, "open_s": open_, "ratio": ratio})
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

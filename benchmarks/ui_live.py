"""`rlbench ui` while `rlbench run` writes, in Debian's headless Chromium (Selenium):

    live lag: a metric row logged by a run is on screen within 2 s
    rlbench run's wall time with the UI open and refreshing vs closed: within 5%

Lag: one `command:` run logs ``eval/return`` every --every seconds through rlbench's JSON-lines client, from
the moment the browser shows that run's page (before, the script waits: a point logged before the page is
open would measure the browser's start, not the lag); the browser shows that run's page (new points appended as the page's long poll on /api/changes reports a new
shard) and this script reads the number of points on screen every 50 ms. A point's lag is the time it appeared
on screen minus its ``wall_time`` in the store (when the run read the script's line): the run's flush (at most
1 s after the last shard), the change seen (0.1 s), the new points fetched from the shard and drawn. The UI
reads a running run's shards itself, not what the coordinator ingested (``rlbench_cli/ui/watch.py``).
The same run again with its suite's page open (curves of eval/return grouped by algorithm: the run's points),
the lag of each point logged after the page showed the first: the suite page's live refresh (the long poll
reports a new shard of one of the suite's running runs; ``/api/suite/NAME/live`` with only the curves).

Wall time: the same suite (``random`` on CartPole-v1, --runs runs) timed with no UI, then with the UI open on
the suite's page (curves grouped by algorithm, the table, the leaderboard not asked), alternating, --repeat
times each; medians and their ratio.

Load: the CPU seconds the UI server and the browser (every Chromium process) use per minute of an open page,
on the run's page during the lag run and on the suite's page during the wall-time runs (from the page's load
to the run's end): a figure the other processes of a shared machine move far less than wall times; and, for
scale, a Chromium idle on about:blank.

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
import os, sys, time
from rlbench_cli import client
points, every, go, early = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], int(sys.argv[4])
for k in range(early):  # logged before the page is open (the suite page picks eval/return when it is there)
    client.log(k * 100, **{"eval/return": float(k)})
deadline = time.time() + 300
while not os.path.exists(go) and time.time() < deadline:  # the page open first
    time.sleep(0.05)
for k in range(early, points):
    client.log(k * 100, **{"eval/return": float(k)})
    time.sleep(every)
"""


def cpu_seconds(pid: int, tree: bool = False) -> float:
    """User + system CPU seconds of process ``pid`` (and of its descendants, ``tree``) so far."""
    import psutil

    procs = [psutil.Process(pid)]
    if tree:
        procs += procs[0].children(recursive=True)
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:  # ended meanwhile
            pass
    return total


class Load:
    """CPU seconds of the UI server and of the browser from ``start()`` to ``stop()``, per minute."""

    def __init__(self, ui: subprocess.Popen, driver) -> None:
        self.ui, self.browser = ui.pid, driver.service.process.pid
        self.t0 = time.monotonic()
        self.ui0, self.browser0 = cpu_seconds(self.ui), cpu_seconds(self.browser, tree=True)

    def stop(self) -> tuple[float, float]:
        minutes = (time.monotonic() - self.t0) / 60
        return ((cpu_seconds(self.ui) - self.ui0) / minutes,
                (cpu_seconds(self.browser, tree=True) - self.browser0) / minutes)  # fmt: skip


def idle_browser(seconds: float = 20.0) -> float:
    """CPU seconds per minute of a Chromium on about:blank: the floor under the browser's figures."""
    driver = browser()
    try:
        driver.get("about:blank")
        time.sleep(2)
        pid, t0 = driver.service.process.pid, time.monotonic()
        before = cpu_seconds(pid, tree=True)
        time.sleep(seconds)
        return (cpu_seconds(pid, tree=True) - before) / ((time.monotonic() - t0) / 60)
    finally:
        driver.quit()


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
        "const x = new XMLHttpRequest(); x.open('GET', '/api/changes?wait=0', false); x.send();"
        "return {hash: location.hash, seen: state.seen, now: x.responseText,"
        " live: document.getElementById('live').className, refreshed: document.body.getAttribute('data-refreshed'),"
        " chart: !!document.getElementById('run-chart'), error: (document.querySelector('.error') || {}).textContent}"
    )


def shown_on_run_page(driver) -> int:
    """Points of eval/return on the run's chart (0 while a sys/ metric is shown first)."""
    chart = driver.find_element("id", "run-chart")
    return (
        int(chart.get_attribute("data-points") or 0)
        if chart.get_attribute("data-metric") == "eval/return"
        else 0
    )


def shown_on_suite_page(driver) -> int:
    """Points of eval/return on the suite's curves (one run: its steps), 0 while another metric is shown."""
    if driver.find_element("id", "metric").get_attribute("value") != "eval/return":
        return 0
    return int(driver.find_element("id", "chart").get_attribute("data-points") or 0)


def lag(work: Path, points: int, every: float, page: str = "run") -> tuple[list[float], tuple[float, float]]:
    """Seconds from each logged row's wall_time to its point on screen, on the run's page (``page="run"``)
    or on its suite's page (``"suite"``: curves grouped by algorithm, its one run); the UI's and the
    browser's CPU seconds per minute on that page."""
    import duckdb

    (work / "logger.py").write_text(LOGGER)
    name = f"lag{page}"
    early = 0 if page == "run" else 1  # the suite page shows eval/return from its load: one point before
    suite = work / f"{name}.yaml"
    suite.write_text(f"name: {name}\nseeds: 1\nbudget: {{steps: {points * 100}}}\nenvs: [CartPole-v1]\nalgorithms:\n"
                     f"  - {{name: logger, command: '{sys.executable} {work}/logger.py {points} {every} {work}/go-{page} {early}'}}\n")  # fmt: skip
    db = work / f"{name}.duckdb"
    run = subprocess.Popen([str(BIN / "rlbench"), "run", str(suite), "--db", str(db)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)  # fmt: skip
    ui, driver, seen = None, None, {}
    try:
        wait_until(db.exists, 120)
        ui, url = start_ui(db)
        driver = browser()
        driver.get(url + f"#/suite/{name}")
        if page == "run":
            link = wait_until(lambda: driver.find_element("css selector", "#runs-table tr[data-run] a"), 60)
            link.click()
            wait_until(lambda: driver.find_element("id", "run-status"), 60)
            shown_now = shown_on_run_page
        else:  # loaded again until the first point is in the store and the page shows it

            def first() -> bool:
                driver.refresh()
                wait_until(lambda: driver.find_element("css selector", "body[data-ready]"), 60)
                return shown_on_suite_page(driver) >= early

            wait_until(first, 120)
            shown_now = shown_on_suite_page
        (work / f"go-{page}").touch()  # every point measured is logged while the page is open
        load = Load(ui, driver)
        ended = None  # when the run ended: the page has 30 s more to show every point, then it has failed
        while len(seen) < points - early:
            try:
                n = shown_now(driver)
            except Exception:  # between two renders
                n = 0
            for k in range(early, n):
                seen.setdefault(k, time.time())
            if ended is None and run.poll() is not None:
                ended = time.time()
            if ended is not None and time.time() - ended > 30:
                raise SystemExit(f"the {page} page showed {len(seen)} of {points - early} points 30 s after the run ended; "
                                 f"the server's log: {''.join(ui.log)[-3000:]}; page: {page_state(driver)}")  # fmt: skip
            time.sleep(0.05)
        cpu = load.stop()
    finally:
        close(driver, ui)
        run.wait(timeout=120)
    with duckdb.connect(str(db), read_only=True) as con:
        walls = [w for (w,) in con.execute(
            "SELECT wall_time FROM metrics WHERE name = 'eval/return' ORDER BY step").fetchall()]  # fmt: skip
    return [seen[k] - w for k, w in enumerate(walls) if k in seen], cpu


def wall_times(
    work: Path, runs: int, repeat: int
) -> tuple[list[float], list[float], list[tuple[float, float]]]:
    """rlbench run's wall time without and with the UI open on the suite's page, alternating; the UI's and
    the browser's CPU seconds per minute of each open page."""
    seeds = max(1, runs // 2)
    suite = work / "wall.yaml"
    suite.write_text(f"name: wall\nseeds: {seeds}\nbudget: {{steps: 20000, eval_every: 2000, eval_episodes: 3}}\n"
                     "envs: [CartPole-v1, Acrobot-v1]\nalgorithms: [random]\n")  # fmt: skip
    closed, open_, cpu = [], [], []
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
                    load = Load(ui, driver)
                run.wait(timeout=1800)
                if with_ui:
                    cpu.append(load.stop())
                (open_ if with_ui else closed).append(time.perf_counter() - t0)
            finally:
                close(driver, ui)
    return closed, open_, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--points", type=int, default=20, help="points the lag run logs")
    parser.add_argument("--every", type=float, default=0.5, help="seconds between them")
    parser.add_argument("--runs", type=int, default=40, help="runs of the wall-time suite")
    parser.add_argument("--repeat", type=int, default=3, help="wall-time runs with and without the UI")
    parser.add_argument("--idle", type=float, default=20.0,
                        help="seconds an idle Chromium on about:blank is measured (the floor)")  # fmt: skip
    parser.add_argument("--json", type=Path, help="also write the numbers to this JSON file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rlbench-ui-live-") as tmp:
        work = Path(tmp)
        floor = idle_browser(args.idle)
        lags, run_page = lag(work, args.points, args.every, "run")
        suite_lags, suite_lag_page = lag(work, args.points, args.every, "suite")
        closed, open_, suite_page = wall_times(work, args.runs, args.repeat)
    ratio = statistics.median(open_) / statistics.median(closed)
    for where, found in (("run's page", lags), ("suite's page", suite_lags)):
        worst = max(found) if found else float("nan")
        print(f"live lag on the {where}, {len(found)} points: median {statistics.median(found):.2f} s, max "
              f"{worst:.2f} s   target <= 2 s: {'met' if worst <= 2.0 else 'NOT met'}")  # fmt: skip
    print(f"rlbench run wall time: UI closed {statistics.median(closed):.2f} s, open {statistics.median(open_):.2f} s "
          f"(x{ratio:.3f})   target <= x1.05: {'met' if ratio <= 1.05 else 'NOT met'}")  # fmt: skip
    ui_suite = statistics.median(c[0] for c in suite_page)
    browser_suite = statistics.median(c[1] for c in suite_page)
    print(f"CPU seconds per minute of an open page: UI server {run_page[0]:.2f} (run's page), {ui_suite:.2f} "
          f"(suite's page); browser {browser_suite:.2f} (suite's page; on the run's page this script's own "
          f"reads every 50 ms dominate: {run_page[1]:.2f}); an idle browser on about:blank {floor:.2f}")  # fmt: skip
    print(
        f"  during the suite page's lag run (this script reads it every 50 ms): UI server "
        f"{suite_lag_page[0]:.2f}, browser {suite_lag_page[1]:.2f}"
    )
    print(f"  together on the suite's page: {ui_suite + browser_suite:.2f} CPU-s/min, {100 * (ui_suite + browser_suite) / 120:.1f}% "
          "of a 2-core machine (target 5%)")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"lags_s": lags, "suite_lags_s": suite_lags,
                                         "cpu_suite_lag_page": suite_lag_page, "closed_s": closed, "open_s": open_, "ratio": ratio,
                                         "cpu_run_page": run_page, "cpu_suite_page": suite_page,
                                         "cpu_idle_browser": floor}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

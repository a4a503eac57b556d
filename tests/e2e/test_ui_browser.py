"""`rlbench ui` in Debian's headless Chromium driven by Selenium, while the real `rlbench run` writes: curve points
appear and the table updates without a reload, groups form by a config key, a paired-by-seed table draws, a run
opens (its error text holding <script> stays text, a video in its folder plays, a text episode's transcript shows
as text), two runs are compared with their differences highlighted, and the console stays clean.
Screenshots go to $RLBENCH_UI_SCREENSHOTS (default: the test's tmp folder)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "cli"))
from ui_suite import RLBENCH, XSS, run_suite, write_suite  # noqa: E402

pytestmark = pytest.mark.slow


def wait_for(check, timeout: float, what: str, every: float = 0.2):
    """``check()``'s first truthy value, polled; fails naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = check()
        except Exception:  # an element not there yet, a page between two renders
            value = None
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def stop(*procs: subprocess.Popen | None, timeout: float = 30) -> None:
    for proc in procs:
        if proc is None or proc.poll() is not None:
            continue
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)


def console_is_clean(browser) -> None:
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe


@pytest.fixture
def browser(chromium, chromedriver):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1600"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(chromedriver), options=options)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def test_live_curves_groups_a_run_and_a_comparison_in_a_real_browser(tmp_path, browser):
    from selenium.webdriver.common.by import By

    shots = Path(os.environ.get("RLBENCH_UI_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    db = tmp_path / "rlbench.duckdb"
    suite = write_suite(tmp_path, pause=0.4, steps=1500)  # each script run logs 16 points over ~6 s
    env = {**os.environ, "MPLBACKEND": "Agg"}
    run = subprocess.Popen([RLBENCH, "run", str(suite), "--db", str(db)], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, env=env)  # fmt: skip
    ui = None
    try:
        wait_for(db.exists, 120, "rlbench run to create the database")
        ui = subprocess.Popen([RLBENCH, "ui", "--db", str(db), "--port", "0"], stderr=subprocess.PIPE, text=True,
                              env=env)  # fmt: skip
        url = re.search(r"http://127\.0\.0\.1:\d+/", ui.stderr.readline()).group(0)
        browser.get(url + "#/suite/uit")
        wait_for(lambda: browser.find_element(By.ID, "runs-table"), 60, "the runs table")

        def points() -> int:
            return int(browser.find_element(By.ID, "chart").get_attribute("data-points") or 0)

        # live: points appear while the run writes, with no reload (the page's own polling)
        first = wait_for(points, 120, "the first curve points")
        assert run.poll() is None, "the suite ended before the page saw it run; make the script slower"
        wait_for(lambda: points() > first, 120, "more curve points while rlbench run writes")
        # by the page's polling (set when a refresh it started on a changed stamp ends), not a reload
        wait_for(
            lambda: browser.find_element(By.TAG_NAME, "body").get_attribute("data-refreshed"),
            30,
            "a live refresh",
        )
        browser.save_screenshot(str(shots / "ui-live.png"))
        assert run.wait(timeout=300) == 1  # the failing runs fail; rlbench run was never blocked
        wait_for(
            lambda: "12 runs" in browser.find_element(By.ID, "pager").text, 60, "the table to count 12 runs"
        )
        # the table follows the run to its end without a reload: no run left pending or running
        wait_for(lambda: not re.search(r"\b(pending|running)\b", browser.find_element(By.ID, "runs-table").text),
                 60, "every run's final status in the table")  # fmt: skip
        groups = browser.find_element(By.ID, "chart")
        wait_for(lambda: groups.get_attribute("data-groups") == "3", 60, "three groups by algo")
        legend = browser.find_element(By.ID, "chart").text
        assert "algo=script (n=4)" in legend and "algo=random (n=4)" in legend
        browser.find_element(By.CSS_SELECTOR, "#group-by input[data-key='env']").click()
        wait_for(lambda: browser.find_element(By.ID, "chart").get_attribute("data-groups") == "6", 60,
                 "six groups by algo and env")  # fmt: skip
        browser.find_element(By.ID, "per-seed").click()
        wait_for(lambda: "algo=script, env=Acrobot-v1 (n=2)" in browser.find_element(By.ID, "chart").text, 60,
                 "the groups' legend")  # fmt: skip
        browser.find_element(By.ID, "load-board").click()
        board = wait_for(lambda: browser.find_element(By.ID, "leaderboard").text, 120, "the leaderboard")
        assert "script" in board and "random" in board and "IQM" in browser.find_element(By.ID, "board").text
        assert browser.find_element(By.ID, "poi").text and browser.find_element(By.ID, "decisions").text
        browser.save_screenshot(str(shots / "ui-suite.png"))
        # paired by seed: the baselines listed once asked for; each pick draws compare --paired's table
        from selenium.webdriver.support.ui import Select

        browser.find_element(By.ID, "load-paired").click()
        wait_for(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#paired-baseline option")) == 5, 60,
                 "the paired baselines (two tasks, two algorithms)")  # fmt: skip
        Select(browser.find_element(By.ID, "paired-baseline")).select_by_value("algo:random")
        paired = wait_for(lambda: browser.find_element(By.ID, "paired-table").text, 60, "the paired table")
        # 2 seeds: p >= 0.5 whatever they show, so the rows carry the dagger
        assert "CartPole-v1 script 2" in paired and "2 / 0 / 0" in paired and "†" in paired
        assert "rlbench compare uit --paired 'algo:random'" in browser.find_element(By.ID, "paired").text
        # two steps: one family, a step column, Holm over the four rows
        step = browser.find_element(By.ID, "paired-step")
        step.send_keys("500, 1500")
        browser.execute_script("arguments[0].blur()", step)  # its change event, as a user's leaving it gives
        wait_for(
            lambda: "(one family)" in browser.find_element(By.ID, "paired").text, 60, "the two steps' table"
        )
        paired = browser.find_element(By.ID, "paired").text
        assert "at steps 500, 1500 (one family)" in paired and "over the 4 tests" in paired
        assert "--paired 'algo:random' --step-max 500 --step-max 1500" in paired
        assert browser.find_element(By.CSS_SELECTOR, "#paired-table th").text == "step"
        browser.execute_script("document.getElementById('paired').scrollIntoView()")
        browser.save_screenshot(str(shots / "ui-paired.png"))
        drawn = browser.find_element(By.ID, "paired-out").get_attribute("data-drawn")

        # a failed run: its error and log hold <script>, shown as text; an episode video in its folder plays
        failed = browser.find_element(By.XPATH, "//tr[td[contains(@class,'status-failed')]]//a")
        failed_id = failed.text
        video = db.parent / "runs" / "uit" / failed_id / "videos" / "episode.mp4"
        video.parent.mkdir()
        import imageio.v2 as imageio

        imageio.mimwrite(video, [np.full((64, 64, 3), 25 * i, np.uint8) for i in range(10)], fps=10)
        transcript = video.parent / "episode-transcript.txt"
        transcript.write_text("env: <script>alert(3)</script> you are in a maze\nagent: go north\n")
        from rlbench_cli.store import Store

        # listed as section 2's artifacts table will list it; the UI reads meanwhile, so wait for turns as rlbench
        # run does
        refreshed = browser.find_element(By.TAG_NAME, "body").get_attribute("data-refreshed")
        with Store(db, wait=60).writer() as con:
            con.execute("INSERT INTO artifacts (run_id, kind, path) VALUES (?, 'transcript', ?)",
                        [failed_id, str(transcript)])  # fmt: skip
        # the database changed: the live page draws the paired table again (the same numbers), no click
        wait_for(lambda: browser.find_element(By.ID, "paired-out").get_attribute("data-drawn") != drawn, 60,
                 "the paired table redrawn by a live refresh")  # fmt: skip
        assert "at steps 500, 1500 (one family)" in browser.find_element(By.ID, "paired").text
        # the rest of that refresh (the runs table redrawn) ends before the click: a link clicked as its table
        # is replaced can miss, in a browser as for a user
        body = browser.find_element(By.TAG_NAME, "body")
        wait_for(lambda: body.get_attribute("data-refreshed") != refreshed, 60, "the live refresh's end")
        browser.find_element(By.LINK_TEXT, failed_id).click()
        error = wait_for(lambda: browser.find_element(By.ID, "run-error").text, 60, "the run's error")
        assert XSS in error and "<script>alert('xss')</script> diverged" in error
        wait_for(lambda: "diverged" in browser.find_element(By.ID, "log").text, 60, "the log's tail")
        assert len(browser.find_elements(By.TAG_NAME, "script")) == 4  # the page's own, nothing injected
        assert "output.log" in browser.find_element(By.ID, "files").text
        wait_for(lambda: browser.execute_script("return document.querySelector('#videos video').readyState >= 1"), 60,
                 "the episode video's metadata")  # fmt: skip
        assert browser.execute_script("return document.querySelector('#videos video').duration") > 0
        text = wait_for(
            lambda: browser.find_element(By.ID, "transcripts").text, 60, "the episode's transcript"
        )
        assert "env: <script>alert(3)</script> you are in a maze" in text and "agent: go north" in text
        browser.save_screenshot(str(shots / "ui-run.png"))
        browser.execute_script("document.getElementById('files').scrollIntoView()")
        browser.save_screenshot(str(shots / "ui-run-media.png"))

        # compare two runs: their config differences are highlighted, what they share is not
        browser.get(url + "#/suite/uit")
        wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "input.pick"), 60, "the rows' checkboxes")
        picks = browser.find_elements(By.CSS_SELECTOR, "input.pick")
        picks[0].click()
        picks[1].click()
        browser.find_element(By.ID, "compare").click()
        table = wait_for(lambda: browser.find_element(By.ID, "compare-table"), 60, "the comparison")
        differs = [r.text for r in table.find_elements(By.CSS_SELECTOR, "tr.differs")]
        assert any(r.startswith("config.run_id") for r in differs)
        assert not any(r.startswith("config.suite") for r in differs)
        browser.save_screenshot(str(shots / "ui-compare.png"))

        console_is_clean(browser)
    finally:
        stop(run, ui)


def test_a_running_runs_page_appends_its_new_points_to_one_chart(tmp_path, browser):
    from selenium.webdriver.common.by import By

    from rlbench_cli.store import Store

    db = tmp_path / "rlbench.duckdb"
    suite = write_suite(tmp_path, pause=0.4, steps=1500, seeds=1)  # each script run logs 16 points over ~6 s
    run = subprocess.Popen([RLBENCH, "run", str(suite), "--db", str(db)], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, env={**os.environ, "MPLBACKEND": "Agg"})  # fmt: skip
    ui = None
    try:
        wait_for(db.exists, 120, "rlbench run to create the database")
        store = Store(db, wait=60)

        def script_run() -> str | None:
            with store.reader() as con:
                row = con.execute("SELECT run_id FROM runs WHERE algo = 'script' AND status = 'running' "
                                  "ORDER BY run_id LIMIT 1").fetchone()  # fmt: skip
            return row[0] if row else None

        run_id = wait_for(script_run, 120, "a script run to start", every=0.1)
        ui = subprocess.Popen(
            [RLBENCH, "ui", "--db", str(db), "--port", "0"], stderr=subprocess.PIPE, text=True
        )
        url = re.search(r"http://127\.0\.0\.1:\d+/", ui.stderr.readline()).group(0)
        browser.get(url + "#/run/" + run_id)
        chart = wait_for(lambda: browser.find_element(By.ID, "run-chart"), 60, "the run's chart")

        def points() -> int:
            shown = chart.get_attribute("data-metric") == "eval/return"
            return int(chart.get_attribute("data-points") or 0) if shown else 0

        first = wait_for(points, 60, "the run's first eval/return points")
        # the chart drawn then is the one that grows: new points are appended, the chart is not drawn anew
        browser.execute_script("document.querySelector('#run-chart canvas').setAttribute('data-first', '1')")
        wait_for(lambda: points() > first, 60, "more points while the run writes")
        assert browser.find_element(By.CSS_SELECTOR, "#run-chart canvas").get_attribute("data-first") == "1"
        # and, when the run ends, every point it logged is on the page
        wait_for(lambda: "finished" in browser.find_element(By.ID, "run-status").text, 120, "the run's end")
        with store.reader() as con:
            (logged,) = con.execute("SELECT count(*) FROM metrics WHERE run_id = ? AND name = 'eval/return'",
                                    [run_id]).fetchone()  # fmt: skip
        wait_for(lambda: points() == logged == 16, 60, "all 16 points on the page")
        assert "output.log" in browser.find_element(By.ID, "files").text
        console_is_clean(browser)
    finally:
        stop(run, ui)


def start_ui(db: Path) -> tuple[subprocess.Popen, str]:
    ui = subprocess.Popen([RLBENCH, "ui", "--db", str(db), "--port", "0"], stderr=subprocess.PIPE, text=True)
    return ui, re.search(r"http://127\.0\.0\.1:\d+/", ui.stderr.readline()).group(0)


def test_a_suite_page_shows_a_running_runs_new_shard_before_rlbench_run_ingests_it(tmp_path, browser):
    """The suite page's long poll watches its running runs' shard folders: a new shard's row is drawn on the
    curves with the database unchanged (no whole refresh), as it is one flush after the run logs it."""
    from selenium.webdriver.common.by import By

    from rlbench_cli.sink import ShardSink
    from rlbench_cli.store import Store

    db = tmp_path / "rlbench.duckdb"
    run_suite(write_suite(tmp_path, steps=300), db)
    with Store(db, wait=60).writer() as con:  # one script run as rlbench run leaves it while running
        run_id, attempts = con.execute("SELECT run_id, attempts FROM runs WHERE algo = 'script' ORDER BY run_id "
                                       "LIMIT 1").fetchone()  # fmt: skip
        con.execute("UPDATE runs SET status = 'running' WHERE run_id = ?", [run_id])
    ui, url = start_ui(db)
    try:
        browser.get(url + "#/suite/uit")
        chart = wait_for(lambda: browser.find_element(By.ID, "chart"), 60, "the curves")

        def points() -> int:
            return int(chart.get_attribute("data-points") or 0)

        before = wait_for(points, 60, "the curves' points")
        wait_for(
            lambda: browser.find_element(By.TAG_NAME, "body").get_attribute("data-ready"), 60, "the page"
        )
        # the chart drawn at the load is the one that gets the new point (uPlot's setData): neither a new
        # chart nor a new legend
        browser.execute_script(
            "document.querySelector('#chart canvas').setAttribute('data-first', '1');"
            "document.querySelector('#chart .u-legend').setAttribute('data-first', '1')"
        )
        sink = ShardSink(
            db.parent / "runs" / "uit" / run_id / f"attempt-{attempts}" / "metrics", background=False
        )
        sink.log(99_999, **{"eval/return": 500.0})  # a step no run has: one more point in the script group
        sink.close()
        wait_for(lambda: points() == before + 1, 60, "the new shard's row on the suite's curves")
        assert browser.find_element(By.CSS_SELECTOR, "#chart canvas").get_attribute("data-first") == "1"
        assert browser.find_element(By.CSS_SELECTOR, "#chart .u-legend").get_attribute("data-first") == "1"
        # drawn by the curves' live path: the database never changed, so no whole refresh ran
        assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-refreshed") is None
        console_is_clean(browser)
    finally:
        stop(ui)


def test_a_compact_legend_finds_hides_and_shows_a_group_among_many(tmp_path, browser):
    """Above 50 groups the chart's legend is a search box and a short list (uPlot's is a row per series): a
    user finds a group by typing, hides it and shows it again, shows the matches alone, then every group."""
    from selenium.webdriver.common.by import By

    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    import store_scale

    shots = Path(os.environ.get("RLBENCH_UI_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    db = tmp_path / "many.duckdb"
    store_scale.build_store(
        db, store_scale.Shape(2, 30, 2, 20), work=tmp_path / "shards"
    )  # 2 algos x 30 tasks
    ui, url = start_ui(db)
    try:
        browser.get(url + "#/suite/" + store_scale.SUITE)
        chart = wait_for(lambda: browser.find_element(By.ID, "chart"), 60, "the curves")
        wait_for(lambda: chart.get_attribute("data-groups") == "2", 60, "two groups by algo")
        assert not browser.find_elements(By.ID, "curve-legend")  # few groups: uPlot's own legend
        assert "algo=algo00 (n=60)" in browser.find_element(By.CSS_SELECTOR, "#chart .u-legend").text
        browser.find_element(By.CSS_SELECTOR, "#group-by input[data-key='env']").click()
        wait_for(lambda: chart.get_attribute("data-groups") == "60", 60, "60 groups by algo and task")
        legend = wait_for(lambda: browser.find_element(By.ID, "curve-legend"), 60, "the compact legend")
        assert not any(e.is_displayed() for e in browser.find_elements(By.CSS_SELECTOR, "#chart .u-legend"))
        rows = lambda: legend.find_elements(By.CSS_SELECTOR, "#legend-list label")  # noqa: E731
        assert len(rows()) == 40 and "60 of 60 groups" in browser.find_element(By.ID, "legend-count").text

        def shown(label: str) -> list[bool]:
            return browser.execute_script(
                "return document.getElementById('chart').chart.series"
                ".filter((s) => s.label === arguments[0]).map((s) => s.show)", label)  # fmt: skip

        browser.find_element(By.ID, "legend-search").send_keys("task017")
        wait_for(lambda: len(rows()) == 2, 10, "the two groups of task017")
        target = "algo=algo01, env=task017"
        assert [r.text for r in rows()] == ["algo=algo00, env=task017 (n=2)", f"{target} (n=2)"]
        assert shown(f"{target} (n=2)") == [True]
        legend.find_element(By.CSS_SELECTOR, f"input[data-group='{target}']").click()
        wait_for(lambda: chart.get_attribute("data-hidden") == "1", 10, "the group hidden")
        assert shown(f"{target} (n=2)") == [False] and "1 hidden" in legend.text
        browser.save_screenshot(str(shots / "ui-compact-legend.png"))
        legend.find_element(By.CSS_SELECTOR, f"input[data-group='{target}']").click()
        wait_for(lambda: chart.get_attribute("data-hidden") == "0", 10, "the group shown again")
        assert shown(f"{target} (n=2)") == [True]
        browser.find_element(By.ID, "legend-only").click()  # the matches alone
        wait_for(lambda: chart.get_attribute("data-hidden") == "58", 10, "58 groups hidden")
        browser.save_screenshot(str(shots / "ui-compact-legend-only.png"))
        browser.find_element(By.ID, "legend-all").click()
        wait_for(lambda: chart.get_attribute("data-hidden") == "0", 10, "every group shown")
        console_is_clean(browser)
    finally:
        stop(ui)

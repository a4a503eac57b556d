"""`rlbench report`: one self-contained HTML page, rendered in headless Chromium (Debian's package) and
checked as a person would see it at a laptop's width."""

import json
import subprocess

import duckdb
import numpy as np
import pytest
from e2e_cli import rl

pytestmark = pytest.mark.slow

LAPTOP = (1366, 900)


def _chromium(exe, *args, timeout=120):
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--window-size={LAPTOP[0]},{LAPTOP[1]}",
    ]
    return subprocess.run([exe, *flags, *args], capture_output=True, text=True, timeout=timeout)


def _results(db, make_results_db):
    rng = np.random.default_rng(0)
    runs = [(algo, env, seed, [(s, float(mu + 10 * s / 1000 + rng.normal(0, 5))) for s in (0, 500, 1000)])
            for algo, mu in (("ppo", 100.0), ("dqn", 60.0), ("random", 20.0))
            for env in ("CartPole-v1", "Acrobot-v1") for seed in range(3)]  # fmt: skip
    status = ["finished"] * (len(runs) - 1) + ["failed"]
    make_results_db(db, runs, suite="web", status=status)
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE runs SET error = 'RuntimeError: CUDA out of memory <script>x</script>', "
                    "host = 'node7', device = 'cpu', executor = 'local', job_id = '4242' WHERE status = 'failed'")  # fmt: skip


def test_the_report_shows_leaderboard_figures_and_runs_at_a_laptops_width(
    tmp_path, chromium, make_results_db
):
    db, page = tmp_path / "db.duckdb", tmp_path / "web.html"
    _results(db, make_results_db)
    rl("report", "web", "--db", db, "--out", page, "--reps", "2000")
    text = page.read_text()
    assert "<script>x</script>" not in text and "&lt;script&gt;x&lt;/script&gt;" in text  # escaped
    assert " src=" not in text and "<link" not in text and "@import" not in text  # nothing fetched
    for part in ("Leaderboard", "Figures", "Per-task scores", "Runs", "Suite file", "Reproducibility",
                 "CUDA out of memory", "node7", "4242"):  # fmt: skip
        assert part in text
    dom = _chromium(
        chromium, "--virtual-time-budget=5000", "--dump-dom", f"{page.as_uri()}#layout-check"
    ).stdout
    start = dom.index('<pre id="layout"')
    layout = json.loads(dom[dom.index(">", start) + 1 : dom.index("</pre>", start)].replace("&quot;", '"'))
    assert (
        layout["page_width"] <= layout["viewport"] == LAPTOP[0]
    )  # no sideways scrolling at a laptop's width
    items = {i["name"]: i for i in layout["items"]}
    figures = [n for n in items if n.startswith("figure:")]
    assert {"figure:aggregates", "figure:learning_curves", "figure:performance_profile"} <= set(figures)
    for name in ["leaderboard", "per-task", "runs", "manifest", *figures]:
        box = items[name]
        assert box["width"] > 300 and box["height"] > 50 and box["right"] <= LAPTOP[0], (name, box)
    shot = tmp_path / "shot.png"
    _chromium(chromium, f"--screenshot={shot}", page.as_uri())
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (LAPTOP[1], LAPTOP[0])
    assert pixels.std() > 0.05 and (pixels.mean(axis=2) < 0.5).mean() > 0.01  # not blank: text and figures


def test_a_suite_with_no_finished_runs_gets_a_page_that_says_so(tmp_path, chromium, make_results_db):
    db, page = tmp_path / "db.duckdb", tmp_path / "empty.html"
    make_results_db(db, [("ppo", "CartPole-v1", 0, [(0, 1.0)])], suite="empty", status="failed")
    rl("report", "empty", "--db", db, "--out", page)
    text = page.read_text()
    assert "No finished runs of" in text and "there is nothing to rank" in text
    dom = _chromium(
        chromium, "--virtual-time-budget=3000", "--dump-dom", f"{page.as_uri()}#layout-check"
    ).stdout
    assert '"name":"no-results"' in dom and '"name":"runs"' in dom

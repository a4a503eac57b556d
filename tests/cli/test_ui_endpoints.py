"""rlbench ui's JSON endpoints and files through Starlette's TestClient, on a store the real `rlbench run` wrote:
counts, the runs table (filters on columns and config keys, sorting by score, paging), curves grouped by a
config key (mean and IQM with bootstrap bands), a run, its log and files, comparisons; a suite's statistics
equal to `rlbench leaderboard` / `compare`; the live path (changes, a run's new points from its shards, no
database opened); and the attacks: `..`, symlinks out, HTML files, writes."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
from urllib.parse import urlencode

import numpy as np
import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner
from ui_suite import XSS, run_suite, write_suite

from rlbench_cli import analysis, bootstrap, stats
from rlbench_cli.cli.app import app
from rlbench_cli.sink import ShardSink
from rlbench_cli.store import Store
from rlbench_cli.ui.app import create_app
from rlbench_cli.ui.data import jsonable

pytestmark = pytest.mark.slow  # the real `rlbench run` of a suite first


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ui")
    db = folder / "rlbench.duckdb"
    r = run_suite(write_suite(folder), db)
    assert "4 failed" in r.stdout + r.stderr, r.stdout + r.stderr
    store = Store(db, wait=10)
    return {"db": db, "store": store, "client": TestClient(create_app(store)), "folder": folder}


def get(env, url, status=200):
    r = env["client"].get(url)
    assert r.status_code == status, (url, r.status_code, r.text)
    return r.json() if r.headers["content-type"].startswith("application/json") else r


def runs_of(ctx, **where):
    with ctx["store"].reader() as con:
        rows = ctx["store"].runs(con, "uit")
    return [r for r in rows if all(r[k] == v for k, v in where.items())]


def test_suites_with_counts_by_status(env):
    (suite,) = get(env, "/api/suites")["suites"]
    assert suite["name"] == "uit" and suite["total"] == 12
    assert suite["counts"] == {"finished": 8, "failed": 4}


def test_runs_table_filters_sorts_by_score_and_pages(env):
    page = get(env, "/api/runs?suite=uit&limit=5")
    assert page["total"] == 12 and len(page["rows"]) == 5
    assert [r["run_id"] for r in page["rows"]] == sorted(r["run_id"] for r in runs_of(env))[:5]
    rest = get(env, "/api/runs?suite=uit&limit=5&offset=10")["rows"]
    assert len(rest) == 2
    # the suite's score rule, as rlbench fetch --scores computes it
    scores, _ = analysis.score_runs(env["store"], {"suite": "uit"}, None, None, None)
    expected = dict(zip(scores.column("run_id").to_pylist(), scores.column("score").to_pylist()))
    by_score = get(env, "/api/runs?suite=uit&sort=score&desc=1&limit=100&f=status:finished")["rows"]
    assert len(by_score) == 8
    assert [r["score"] for r in by_score] == sorted(expected.values(), reverse=True)
    assert all(r["score"] == expected[r["run_id"]] for r in by_score)
    random_acrobot = get(env, "/api/runs?suite=uit&f=algo:random&f=env:Acrobot-v1")
    assert random_acrobot["total"] == 2 and {r["seed"] for r in random_acrobot["rows"]} == {0, 1}
    two_algos = get(env, "/api/runs?suite=uit&f=algo:random&f=algo:failing&f=status:failed")
    assert two_algos["total"] == 4 and {r["algo"] for r in two_algos["rows"]} == {"failing"}
    host = runs_of(env)[0]["host"]
    assert get(env, f"/api/runs?suite=uit&f=host:{host}&f=executor:local")["total"] == 12


def test_filter_and_sort_by_a_config_key(env):
    keys = get(env, "/api/keys?suite=uit")
    assert "command" in keys["config"] and "algo" in keys["group_keys"] and "seed" not in keys["group_keys"]
    assert "eval/return" in keys["metrics"]
    failing = next(v for v in keys["config"]["command"] if XSS in v)
    page = get(env, "/api/runs?" + "&".join(["suite=uit", "f=config.command:" + failing.replace("&", "%26")
                                              .replace("<", "%3C").replace(">", "%3E").replace(" ", "%20")]))  # fmt: skip
    assert page["total"] == 4 and {r["algo"] for r in page["rows"]} == {"failing"}
    by_budget = get(env, "/api/runs?suite=uit&sort=budget.steps&limit=100")
    assert by_budget["total"] == 12
    assert get(env, "/api/runs?suite=uit&f=budget.steps:600")["total"] == 12
    assert "error" in get(env, "/api/runs?suite=uit&f=config%3B%20DROP:1", 400)
    assert "error" in get(env, "/api/runs?suite=nope", 404)


def test_a_suites_live_refresh_is_the_table_curves_and_keys_of_one_read_leaving_out_what_the_page_has(env):
    q = "suite=uit&limit=5&config=0&metric=eval/return&group=algo&reps=100"
    out = get(env, f"/api/suite/uit/live?{q}&keys=1")
    assert out["runs"] == get(env, f"/api/runs?{q}") and "config" not in out["runs"]["rows"][0]
    assert out["curves"] == get(env, f"/api/curves?{q}") and out["keys"] == get(env, "/api/keys?suite=uit")
    assert out["same"] == [] and set(out["tags"]) == {"runs", "curves", "keys"}
    # the page names the tags of what it shows: those parts are left out, the others come
    again = get(
        env, f"/api/suite/uit/live?{q}&have={out['tags']['runs']}&have={out['tags']['curves']}&keys=1"
    )
    assert again["same"] == ["runs", "curves"] and "runs" not in again and "curves" not in again
    assert again["keys"] == out["keys"] and again["tags"] == out["tags"]
    other = get(env, f"/api/suite/uit/live?suite=uit&limit=5&offset=5&have={out['tags']['runs']}")
    assert other["same"] == [] and other["runs"]["rows"] != out["runs"]["rows"] and "curves" not in other
    assert "seed" in get(env, "/api/suite/uit/live?metric=eval/return&group=seed", 400)["error"]


def test_curves_grouped_by_algo_with_mean_and_iqm_bands(env):
    out = get(env, "/api/curves?suite=uit&metric=eval/return&group=algo&stat=mean&reps=500&lines=1")
    groups = {g["label"]: g for g in out["groups"]}
    assert set(groups) == {"algo=random", "algo=script", "algo=failing"}
    script = groups["algo=script"]
    assert script["runs"] == 4 and script["step"] == [0, 100, 200, 300, 400, 500, 600]
    # the logger logs step / 10 + seed: the mean over seeds 0, 1 (two envs each) is step / 10 + 0.5
    assert np.allclose(script["y"], np.array(script["step"]) / 10 + 0.5)
    assert all(lo <= y <= hi for lo, y, hi in zip(script["lower"], script["y"], script["upper"]))
    assert len(script["lines"]) == 4 and {ln["seed"] for ln in script["lines"]} == {0, 1}
    # wall time: the median over the group's runs of the seconds since each run's first row
    assert script["wall"][0] == 0 and all(a <= b for a, b in zip(script["wall"], script["wall"][1:]))
    # the band is rlbench's own bootstrap of the group's runs, seeded by the group's label
    est = bootstrap.run_curve_interval(np.array([ln["y"] for ln in script["lines"]]), "mean", reps=500, seed=0,
                                       key="algo=script")  # fmt: skip
    assert np.allclose(script["lower"], est.lower) and np.allclose(script["upper"], est.upper)
    iqm = get(env, "/api/curves?suite=uit&metric=eval/return&group=algo&group=env&stat=iqm&reps=200")
    assert len(iqm["groups"]) == 6 and all(g["runs"] == 2 for g in iqm["groups"])
    smooth = get(env, "/api/curves?suite=uit&metric=eval/return&group=algo&smooth=0.6&reps=100")
    assert {g["label"] for g in smooth["groups"]} == set(groups)
    assert "seed" in get(env, "/api/curves?suite=uit&metric=eval/return&group=seed", 400)["error"]
    assert get(env, "/api/curves?suite=uit&metric=nothing&group=algo")["groups"] == []
    # pack=1 (the page's): each list of numbers as base64 of float64, NaN for a gap: the same numbers exactly
    packed = get(env, "/api/curves?suite=uit&metric=eval/return&group=algo&stat=mean&reps=500&lines=1&pack=1")
    assert packed["packed"] and not out["packed"] and len(packed["groups"]) == len(out["groups"])

    def unpacked(text):
        return [None if np.isnan(v) else v for v in np.frombuffer(base64.b64decode(text), "<f8").tolist()]

    for g, p in zip(out["groups"], packed["groups"]):
        assert all(unpacked(p[k]) == g[k] for k in ("step", "wall", "y", "lower", "upper"))
        assert all(unpacked(pl[k]) == gl[k] for pl, gl in zip(p["lines"], g["lines"]) for k in ("step", "y"))


def test_a_run_its_manifest_attempts_log_and_files(env):
    failing = runs_of(env, algo="failing")[0]
    out = get(env, f"/api/run/{failing['run_id']}")
    assert out["run"]["status"] == "failed" and XSS in out["run"]["config"]["command"]
    assert "<script>alert('xss')</script>" in out["run"]["error"]
    assert out["manifest"]["host"] == failing["host"] and out["manifest"]["python"]
    assert out["attempts"][0]["attempt"] == 1 and out["attempts"][0]["result"]["status"] == "failed"
    assert {"attempt-1/output.log", "attempt-1/result.json"} <= {f["path"] for f in out["files"]}
    assert out["artifacts"] == [] and out["latest"]["eval/return"]["step"] == 600
    log = get(env, f"/api/run/{failing['run_id']}/log")
    assert "<script>alert('xss')</script> diverged" in log["text"]
    text = get(env, f"/files/{failing['run_id']}/attempt-1/output.log")
    assert text.headers["content-type"].startswith("text/plain") and "diverged" in text.text


def test_compare_marks_the_config_keys_that_differ(env):
    a, b = runs_of(env, algo="random", env="CartPole-v1")
    out = get(env, f"/api/compare?run={a['run_id']}&run={b['run_id']}")
    differs = {k["key"] for k in out["keys"] if k["differs"]}
    assert "config.seed" in differs and "config.run_id" in differs and "config.algo" not in differs
    get(env, f"/api/compare?run={a['run_id']}&run=nope", 404)


def test_suite_statistics_equal_the_commands(env):
    runner = CliRunner()
    cli = runner.invoke(
        app, ["leaderboard", "uit", "--db", str(env["db"]), "--format", "json", "--reps", "1000"]
    )
    assert cli.exit_code == 0, cli.output
    assert get(env, "/api/suite/uit/leaderboard?reps=1000")["board"] == json.loads(cli.stdout)
    cli = runner.invoke(app, ["compare", "uit", "--db", str(env["db"]), "--json"])
    # JSON has no NaN: the page gets null where the command prints NaN (a mean of no runs yet)
    assert get(env, "/api/suite/uit/decisions") == jsonable(json.loads(cli.stdout))
    for what in ("leaderboard", "improvement"):  # an unknown suite: 404 and one line, as the commands say it
        assert "no suite 'nope'" in get(env, f"/api/suite/nope/{what}", 404)["error"]
    assert "'nope' has no finished runs" in get(env, "/api/suite/nope/decisions", 400)["error"]
    assert get(env, "/api/suite/uit/tuning") == {"study": None}  # not a suite rlbench tune made
    assert "no suite 'nope'" in get(env, "/api/suite/nope/tuning", 404)["error"]
    table = analysis.score_table(env["store"], "uit")
    imp = get(env, "/api/suite/uit/improvement?reps=300")
    poi = stats.probability_of_improvement(table, reps=300)
    assert [r["estimate"] for r in imp["poi"]] == poi["estimate"].tolist()
    assert [r["lower"] for r in imp["poi"]] == poi["lower"].tolist()
    profile = stats.performance_profile(table, reps=300)
    assert [r["estimate"] for r in imp["profile"]] == profile["estimate"].tolist()


def test_paired_comparisons_equal_compare_paired_and_list_the_baselines(env):
    runner = CliRunner()
    choices = get(env, "/api/suite/uit/paired")  # no baseline: what there is to pick, nothing compared
    assert choices == {"choices": {"tasks": ["Acrobot-v1", "CartPole-v1"], "algos": ["random", "script"]},
                       "comparisons": [], "paired": None}  # fmt: skip
    for query, flags in [
        ("baseline=algo:random&reps=1000", ["--paired", "random", "--reps", "1000"]),
        ("baseline=task:CartPole-v1&alternative=greater&reps=500&seed=3",
         ["--paired", "CartPole-v1", "--alternative", "greater", "--reps", "500", "--seed", "3"]),
        ("baseline=task:Acrobot-v1&metric=train/loss&step=300&reps=200",
         ["--paired", "Acrobot-v1", "--metric", "train/loss", "--step-max", "300", "--reps", "200"]),
        ("baseline=algo:random&step=200&step=600&reps=300",  # several steps: one family, a step in each row
         ["--paired", "random", "--step-max", "200", "--step-max", "600", "--reps", "300"]),
    ]:  # fmt: skip
        cli = runner.invoke(app, ["compare", "uit", "--db", str(env["db"]), "--json", *flags])
        assert cli.exit_code == 0, cli.output
        want = jsonable(json.loads(cli.stdout))
        got = get(env, f"/api/suite/uit/paired?{query}")
        assert got["comparisons"] == want["comparisons"] and got["paired"] == want["paired"], query
        if "step=200" in query:
            assert (
                got["paired"]["step_max"] == [200, 600]
                and [r["step"] for r in got["comparisons"]] == [200] * 2 + [600] * 2
            )
        # the baselines are those with runs scored: random logs no train/loss
        assert got["choices"]["algos"] == (["script"] if "loss" in query else ["random", "script"])
    # script's seed adds to its return: above random's on both seeds of both tasks
    rows = get(env, "/api/suite/uit/paired?baseline=algo:random&reps=100")["comparisons"]
    assert [(r["group"], r["other"], r["pairs"], r["above"]) for r in rows] == [
        ("Acrobot-v1", "script", 2, 2), ("CartPole-v1", "script", 2, 2)]  # fmt: skip
    # bad input: one line, as the command says it
    assert "names no task or algorithm" in get(env, "/api/suite/uit/paired?baseline=nope", 400)["error"]
    assert "alternative must be one of" in get(env, "/api/suite/uit/paired?baseline=algo:random&alternative=up",
                                               400)["error"]  # fmt: skip
    assert "step='x': a whole number" in get(env, "/api/suite/uit/paired?step=x", 400)["error"]
    assert "step='x': a whole number" in get(env, "/api/suite/uit/paired?step=200&step=x", 400)["error"]
    assert "200 is given twice" in get(env, "/api/suite/uit/paired?step=200&step=200", 400)["error"]
    assert "reps 0" in get(env, "/api/suite/uit/paired?baseline=algo:random&reps=0", 400)["error"]
    assert "no suite 'nope'" in get(env, "/api/suite/nope/paired", 404)["error"]


def test_files_only_from_the_run_folder(env, tmp_path):
    run = runs_of(env, algo="random")[0]
    folder = env["db"].parent / "runs" / "uit" / run["run_id"]
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    (folder / "out.txt").symlink_to(secret)
    (folder / "outdir").symlink_to(tmp_path, target_is_directory=True)
    (folder / "page.html").write_text("<script>alert(1)</script>")
    client = env["client"]
    for path in ("../../../rlbench.duckdb", "attempt-1/../../x", "%2e%2e/%2e%2e/rlbench.duckdb", "out.txt",
                 "outdir/secret.txt", "/etc/hostname", "%2Fetc%2Fhostname", "nothing.txt", "attempt-1"):  # fmt: skip
        r = client.get(f"/files/{run['run_id']}/{path}")
        assert r.status_code == 404 and "top secret" not in r.text and "Traceback" not in r.text, path
        assert r.headers["content-type"].startswith("text/html")
    r = client.get("/files/nope/attempt-1/output.log")
    assert r.status_code == 404 and "<h1>Not found</h1>" in r.text
    html = client.get(f"/files/{run['run_id']}/page.html")
    assert html.headers["content-type"] == "application/octet-stream"
    assert html.headers["content-disposition"].startswith("attachment")
    listed = {f["path"] for f in get(env, f"/api/run/{run['run_id']}")["files"]}
    assert "page.html" in listed and not {"out.txt", "outdir/secret.txt"} & listed
    for link in ("out.txt", "outdir", "page.html"):
        os.unlink(folder / link)


def test_no_route_writes_and_no_connection_is_kept(env):
    before = hashlib.sha256(env["db"].read_bytes()).hexdigest()
    client = env["client"]
    run_id = runs_of(env)[0]["run_id"]
    urls = ["/", "/api/suites", "/api/runs?suite=uit", "/api/curves?suite=uit&metric=eval/return",
            f"/api/run/{run_id}", f"/files/{run_id}/attempt-1/result.json", "/api/suite/uit/leaderboard"]  # fmt: skip
    for url in urls:
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            assert client.request(method, url).status_code == 405, (method, url)
    for url in urls[:6]:
        client.get(url)
    assert hashlib.sha256(env["db"].read_bytes()).hexdigest() == before
    # every request closed its connection: a writer gets the file at once
    con = env["store"].open_writer(migrated=True, wait=0)
    con.close()


HOLD = "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('held', flush=True); time.sleep(float(sys.argv[2]))"


def test_a_request_waits_out_a_writers_burst_and_says_busy_after_its_wait(env):
    # a writer holding the file (as rlbench run does in a burst): the request retries until it lets go
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(env["db"]), "1.5"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert get(env, "/api/suites")["suites"][0]["name"] == "uit"
    finally:
        holder.wait(timeout=60)
    # one that keeps it longer than the UI waits: 503 and one line, never a traceback
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(env["db"]), "60"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        r = TestClient(create_app(Store(env["db"], wait=0.3))).get("/api/runs?suite=uit")
        assert r.status_code == 503 and "another process has held the database" in r.json()["error"]
    finally:
        holder.kill()
        holder.wait(timeout=60)


def test_the_query_box_reads_the_database_and_nothing_else(env, tmp_path):
    out = get(
        env,
        "/api/sql?q=SELECT%20algo%2C%20count(*)%20AS%20n%20FROM%20runs%20GROUP%20BY%20ALL%20ORDER%20BY%20ALL",
    )
    assert out["columns"] == ["algo", "n"] and out["rows"] == [["failing", 4], ["random", 4], ["script", 4]]
    (tmp_path / "secret.csv").write_text("a\ntop secret\n")
    attacks = {
        f"SELECT * FROM read_csv('{tmp_path}/secret.csv')": "disabled",
        f"SELECT * FROM read_text('{tmp_path}/secret.csv')": "disabled",
        f"SELECT * FROM '{tmp_path}/secret.csv'": "disabled",
        f"COPY runs TO '{tmp_path}/out.csv'": "refused",
        "INSERT INTO suites (name) VALUES ('x')": "refused",
        "ATTACH ':memory:' AS m": "refused",
        "SET enable_external_access = true": "refused",
        "SELECT 1; DROP TABLE runs": "2 statements",
    }  # fmt: skip
    for sql, why in attacks.items():
        r = env["client"].get("/api/sql", params={"q": sql})
        assert r.status_code == 400 and why in r.json()["error"] and "top secret" not in r.text, (sql, r.text)
    assert not (tmp_path / "out.csv").exists()
    assert get(env, "/api/suites")["suites"][0]["total"] == 12


def test_artifacts_are_listed_and_linked_only_inside_the_run_folder(env, tmp_path):
    import duckdb

    run = runs_of(env, algo="script")[0]
    folder = env["db"].parent / "runs" / "uit" / run["run_id"]
    (folder / "videos").mkdir()
    (folder / "videos" / "step-600.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42")
    outside = tmp_path / "elsewhere.mp4"
    outside.write_bytes(b"not yours")
    with duckdb.connect(
        str(env["db"])
    ) as con:  # as the artifacts table will list them (issue #40, section 2)
        con.execute("INSERT INTO artifacts (run_id, kind, path) VALUES (?, 'video', ?), (?, 'video', ?), "
                    "(?, 'video', '../../../../elsewhere.mp4')",
                    [run["run_id"], str(folder / "videos" / "step-600.mp4"), run["run_id"], str(outside),
                     run["run_id"]])  # fmt: skip
    try:
        found = {a["path"]: a["file"] for a in get(env, f"/api/run/{run['run_id']}")["artifacts"]}
        assert found == {str(folder / "videos" / "step-600.mp4"): "videos/step-600.mp4", str(outside): None,
                         "../../../../elsewhere.mp4": None}  # fmt: skip
        video = env["client"].get(f"/files/{run['run_id']}/videos/step-600.mp4")
        assert video.status_code == 200 and video.headers["content-type"] == "video/mp4"
    finally:
        with duckdb.connect(str(env["db"])) as con:
            con.execute("DELETE FROM artifacts")


# -- the live path: /api/changes (a long poll on stat calls) and a run's points from its shards -------------


def copy_of(env, tmp_path):
    """The suite's database and run folders copied, and a client over the copy: a test that adds shards or
    writes changes nothing the other tests read."""
    folder = tmp_path / "copy"
    shutil.copytree(env["folder"], folder)
    store = Store(folder / "rlbench.duckdb", wait=10)
    return {
        "db": folder / "rlbench.duckdb",
        "store": store,
        "client": TestClient(create_app(store)),
        "folder": folder,
    }


def add_shard(ctx, run_id, step, value):
    """A new shard in the run's attempt folder, as the run's sink writes one."""
    run = runs_of(ctx, run_id=run_id)[0]
    sink = ShardSink(ctx["folder"] / "runs" / "uit" / run_id / f"attempt-{run['attempts']}" / "metrics",
                     background=False)  # fmt: skip
    sink.log(step, **{"eval/return": value})
    sink.close()


def stored_points(ctx, run_id):
    with ctx["store"].reader() as con:
        return con.execute("SELECT step, value FROM metrics WHERE run_id = ? AND name = 'eval/return' ORDER BY step",
                           [run_id]).fetchall()  # fmt: skip


def test_changes_answer_when_the_database_or_a_runs_folder_changes(env, tmp_path):
    ctx = copy_of(env, tmp_path)
    run_id = runs_of(ctx, algo="script")[0]["run_id"]
    now = get(ctx, f"/api/changes?run={run_id}")  # no stamps given: nothing to wait for
    assert set(now) == {"db", "files"} and now["db"] and now["files"]
    assert get(ctx, "/api/changes")["files"] == ""  # no run: the database only
    held = {"run": run_id, "db": now["db"], "files": now["files"]}
    # nothing changed: held for `wait` seconds, then the same stamps
    assert get(ctx, "/api/changes?" + urlencode({**held, "wait": 0.3})) == now
    # a new shard in the run's folder (rlbench run has not ingested it): the files change, not the database
    add_shard(ctx, run_id, 99_999, 7.0)
    after = get(ctx, "/api/changes?" + urlencode({**held, "wait": 20}))
    assert after["files"] != now["files"] and after["db"] == now["db"]
    # a commit: the database changes
    with ctx["store"].writer() as con:
        con.execute("UPDATE runs SET host = 'elsewhere' WHERE run_id = ?", [run_id])
    assert get(ctx, "/api/changes?" + urlencode({"db": now["db"], "wait": 20}))["db"] != now["db"]
    assert "no run" in get(ctx, "/api/changes?run=nope", 404)["error"]
    assert "a number of seconds" in get(ctx, "/api/changes?wait=soon", 400)["error"]


def test_a_runs_points_come_from_its_shards_only_the_new_ones_after_the_pages(env, tmp_path):
    ctx = copy_of(env, tmp_path)
    run_id, other = (r["run_id"] for r in runs_of(ctx, algo="script")[:2])
    stored = stored_points(ctx, run_id)
    full = get(ctx, f"/api/run/{run_id}/points?metric=eval/return")
    assert full["reset"] and full["attempt"] == 1 and full["total"] == len(stored) > 2
    assert list(zip(full["step"], full["value"])) == stored and {"eval/return", "train/loss"} <= set(
        full["names"]
    )
    n = len(stored)
    tail = get(ctx, f"/api/run/{run_id}/points?metric=eval/return&after={n - 2}&attempt=1")
    assert not tail["reset"] and list(zip(tail["step"], tail["value"])) == stored[-2:]
    # a shard written since: only its rows, before rlbench run ingests it
    add_shard(ctx, run_id, 99_999, 7.0)
    new = get(ctx, f"/api/run/{run_id}/points?metric=eval/return&after={n}&attempt=1")
    assert (new["step"], new["value"], new["total"], new["reset"]) == ([99_999], [7.0], n + 1, False)
    # a cursor of another attempt, or past the end: every point again
    for query in (f"after={n}&attempt=2", f"after={n + 5}&attempt=1"):
        again = get(ctx, f"/api/run/{run_id}/points?metric=eval/return&{query}")
        assert again["reset"] and again["step"][-1] == 99_999 and len(again["step"]) == n + 1
    assert get(ctx, f"/api/run/{run_id}/points")["step"] == []  # no metric: its names only
    # a run whose folder is gone (an imported run, say) is read from the database
    shutil.rmtree(ctx["folder"] / "runs" / "uit" / other)
    from_store = get(ctx, f"/api/run/{other}/points?metric=eval/return")
    assert list(zip(from_store["step"], from_store["value"])) == stored_points(ctx, other)
    get(ctx, "/api/run/nope/points?metric=eval/return", 404)


def test_the_live_path_reads_no_database_while_a_writer_holds_it(env, tmp_path):
    ctx = copy_of(env, tmp_path)
    run_id = runs_of(ctx, algo="script")[0]["run_id"]
    client = TestClient(create_app(Store(ctx["db"], wait=0.3)))
    assert client.get(f"/api/changes?run={run_id}").status_code == 200  # the run's suite looked up once
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(ctx["db"]), "60"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        # what a run's page asks while the run writes: answered from the files, never 503 (busy)
        for url in (f"/api/changes?run={run_id}", f"/api/run/{run_id}/points?metric=eval/return",
                    f"/api/run/{run_id}/log"):  # fmt: skip
            r = client.get(url)
            assert r.status_code == 200, (url, r.text)
        assert client.get("/api/runs?suite=uit").status_code == 503  # the database itself is held
    finally:
        holder.kill()
        holder.wait(timeout=60)


def test_a_suite_pages_long_poll_answers_a_running_runs_new_shard_and_its_curves_come_alone(env, tmp_path):
    """A suite's page sees a running run's new shard one flush after it is written, before rlbench run
    ingests it (the database unchanged), and asks for the curves alone, which hold the shard's rows."""
    ctx = copy_of(env, tmp_path)
    run_id = runs_of(ctx, algo="script")[0]["run_id"]
    with ctx["store"].writer() as con:  # as while rlbench run runs it
        con.execute("UPDATE runs SET status = 'running' WHERE run_id = ?", [run_id])
    now = get(ctx, "/api/changes?suite=uit&metric=eval/return")
    assert now["db"] and run_id in now["files"]
    held = {"suite": "uit", "metric": "eval/return", "db": now["db"], "files": now["files"]}
    # nothing new: held for `wait` seconds, then the same stamps
    assert get(ctx, "/api/changes?" + urlencode({**held, "wait": 0.3})) == now
    # a shard of another metric only (say the run's system metrics): nothing the curves of eval/return show
    sink = ShardSink(ctx["folder"] / "runs" / "uit" / run_id / "attempt-1" / "metrics", background=False)
    sink.log(99_998, **{"train/loss": 0.5})
    sink.close()
    assert get(ctx, "/api/changes?" + urlencode({**held, "wait": 0.3})) == now
    assert (
        get(ctx, "/api/changes?" + urlencode({**held, "metric": "train/loss", "wait": 0}))["files"]
        != now["files"]
    )
    add_shard(ctx, run_id, 99_999, 7.0)
    after = get(ctx, "/api/changes?" + urlencode({**held, "wait": 20}))
    assert after["files"] != now["files"] and after["db"] == now["db"]
    # a finished run's folder is not watched: the stamps are those of the suite's running runs only
    assert get(ctx, "/api/changes?suite=nope")["files"] == "[][]"
    q = "suite=uit&metric=eval/return&group=algo&reps=50"
    curves_only = get(ctx, f"/api/suite/uit/live?{q}&runs=0")
    assert "runs" not in curves_only and set(curves_only["tags"]) == {"curves"}
    (script,) = [g for g in curves_only["curves"]["groups"] if g["label"] == "algo=script"]
    assert script["step"][-1] == 99_999  # the shard's row, not yet in the database
    assert curves_only["curves"] == get(ctx, f"/api/suite/uit/live?{q}")["curves"]


def test_a_running_runs_new_shard_reaches_the_suites_curves_from_its_files_while_a_writer_holds_the_db(
    env, tmp_path
):
    """After one read of the database while a run runs, a curves-only refresh takes the running run's rows
    from its attempt's shards (ingested or not) and the other runs' rows from that read: the same curves as
    the database and the pending shards give, answered while rlbench run holds the file; still from its
    shards once the run has ended (its result.json), and a run started since (its folder made) joins its
    group from its shards. A run's new attempt reads the database again."""
    ctx = copy_of(env, tmp_path)
    run = runs_of(ctx, algo="script")[0]
    run_id = run["run_id"]
    attempt = ctx["folder"] / "runs" / "uit" / run_id / "attempt-1"
    result = (attempt / "result.json").read_text()
    (attempt / "result.json").unlink()  # running: no result yet
    # the other seed of its group not started yet: pending, no rows, no folder
    (later,) = [r["run_id"] for r in runs_of(ctx, algo="script", env=run["env"]) if r["run_id"] != run_id]
    later_folder = ctx["folder"] / "runs" / "uit" / later
    later_folder.rename(tmp_path / "later")
    with ctx["store"].writer() as con:
        con.execute("UPDATE runs SET status = 'running' WHERE run_id = ?", [run_id])
        con.execute("UPDATE runs SET status = 'pending' WHERE run_id = ?", [later])
        con.execute("DELETE FROM metrics WHERE run_id = ?", [later])
        con.execute("DELETE FROM shards WHERE run_id = ?", [later])
    q = "suite=uit&metric=eval/return&group=algo&group=env&reps=50"
    client = TestClient(create_app(Store(ctx["db"], wait=0.3)))
    first = client.get(f"/api/suite/uit/live?{q}").json()  # the page's whole refresh: reads the database
    add_shard(ctx, run_id, 99_999, 7.0)
    want = client.get(f"/api/suite/uit/live?{q}").json()["curves"]  # the database and the pending shard
    assert want != first["curves"]
    label = f"algo=script, env={run['env']}"

    def group(curves):
        (found,) = [g for g in curves["groups"] if g["label"] == label]
        return found

    assert group(want)["runs"] == 1
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(ctx["db"]), "60"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        r = client.get(f"/api/suite/uit/live?{q}&runs=0")
        assert r.status_code == 200, r.text
        assert r.json()["curves"] == want
        (attempt / "result.json").write_text(result)  # the run ended: its rows are still its shards
        r = client.get(f"/api/suite/uit/live?{q}&runs=0")
        assert r.status_code == 200, r.text
        assert r.json()["curves"] == want
        (tmp_path / "later").rename(later_folder)  # the pending run started: its folder and shards
        r = client.get(f"/api/suite/uit/live?{q}&runs=0")
        assert r.status_code == 200, r.text
        assert group(r.json()["curves"])["runs"] == 2
        (attempt.parent / "attempt-2").mkdir()  # a new attempt: what the store holds of the run changed
        assert client.get(f"/api/suite/uit/live?{q}&runs=0").status_code == 503
    finally:
        holder.kill()
        holder.wait(timeout=60)

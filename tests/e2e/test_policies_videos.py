"""End to end, as a user would: ``rlbench run`` of a tiny ppo suite with ``video_every: 1`` lists its videos
and saved policies in the store (every file there, as recorded), ``rlbench enjoy`` plays the saved policy
(the final one's returns are its last evaluation's) and writes a video imageio reads back."""

import hashlib
from pathlib import Path

import duckdb
import pytest
from e2e_cli import rl

pytestmark = pytest.mark.slow

SUITE = """
name: keep
seeds: 1
budget: {steps: 1024, eval_every: 256, eval_episodes: 2, video_every: 1}
envs: [CartPole-v1]
algorithms:
  - {name: ppo, params: {num_envs: 4, num_steps: 64}}
"""


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    d = tmp_path_factory.mktemp("keep")
    (d / "keep.yaml").write_text(SUITE)
    rl("run", d / "keep.yaml", "--db", d / "rlbench.duckdb")
    return d


def _sql(db: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_the_store_lists_every_video_and_policy_as_it_is_on_disk(done):
    ((run_id,),) = _sql(done / "rlbench.duckdb", "SELECT run_id FROM runs")
    rows = _sql(done / "rlbench.duckdb", "SELECT step, kind, path, bytes, sha256 FROM artifacts ORDER BY ALL")
    assert [s for s, k, *_ in rows if k == "video"] == [0, 256, 512, 768, 1024]
    assert {k for _, k, *_ in rows} == {"video", "policy_best", "policy_final"}
    for _, _, path, size, digest in rows:
        f = done / "runs" / "keep" / run_id / path
        assert f.stat().st_size == size and hashlib.sha256(f.read_bytes()).hexdigest() == digest
    rl(
        "run", done / "keep.yaml", "--db", done / "rlbench.duckdb"
    )  # nothing to train: the rows stay as they are
    assert (
        _sql(done / "rlbench.duckdb", "SELECT step, kind, path, bytes, sha256 FROM artifacts ORDER BY ALL")
        == rows
    )


def test_enjoy_plays_the_saved_policy_and_writes_a_video(done):
    import imageio.v3 as iio

    db = done / "rlbench.duckdb"
    ((run_id,),) = _sql(db, "SELECT run_id FROM runs")
    r = rl("enjoy", run_id, "--which", "final", "--episodes", "2", "--video", done / "out.mp4", "--db", db)
    returns = [float(line.split()[-1]) for line in r.stdout.splitlines() if line.startswith("episode ")]
    ((final,),) = _sql(db, "SELECT value FROM metrics WHERE name = 'eval/return' ORDER BY step DESC LIMIT 1")
    assert len(returns) == 2 and sum(returns) / 2 == final  # the run's own last evaluation, replayed
    frames = iio.imread(done / "out.mp4")
    assert frames.ndim == 4 and len(frames) >= sum(returns)
    best = rl("enjoy", run_id, "--db", db)
    assert "best policy (step " in best.stdout


def test_kill_9_of_the_coordinator_loses_no_artifact_and_doubles_none(tmp_path):
    import os
    import signal
    import subprocess
    import time

    from e2e_cli import RLBENCH

    from rlbench_cli.artifacts import current, read_index

    suite = tmp_path / "k9.yaml"
    suite.write_text(SUITE.replace("name: keep", "name: k9").replace("seeds: 1", "seeds: 3")
                     .replace("steps: 1024", "steps: 4096").replace("video_every: 1", "video_every: 3"))  # fmt: skip
    db = tmp_path / "rlbench.duckdb"
    proc = subprocess.Popen([RLBENCH, "run", str(suite), "--db", str(db), "--workers", "2"], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not proc.stdout.readline().strip().startswith("done"):
        pass
    time.sleep(1.0)  # the other runs are in flight, some of their files listed
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    rl("run", suite, "--db", db)
    runs = _sql(db, "SELECT run_id, attempts, status FROM runs")
    assert len(runs) == 3 and all(status == "finished" for *_, status in runs)
    for run_id, attempts, _ in runs:
        folder = tmp_path / "runs" / "k9" / run_id / f"attempt-{attempts}"
        listed = [
            (r["step"], r["kind"], r["path"], r["bytes"], r["sha256"]) for r in current(read_index(folder))
        ]
        stored = _sql(db, f"SELECT step, kind, path, bytes, sha256 FROM artifacts WHERE run_id = '{run_id}' "
                          "ORDER BY step, kind, path")  # fmt: skip
        assert stored == listed and len(listed) == len(set(listed))
        videos = [s for s, k, *_ in stored if k == "video"]
        assert videos == [
            512,
            1280,
            2048,
            2816,
            3584,
        ]  # the 3rd, 6th, ... of 17 evaluations (every 256 steps)
        assert {k for _, k, *_ in stored} >= {"policy_best", "policy_final"}


def test_the_report_embeds_the_latest_episode_video(done):
    import base64
    import re

    db = done / "rlbench.duckdb"
    rl("report", "keep", "--db", db, "--out", done / "page.html")
    page = (done / "page.html").read_text()
    (data,) = re.findall(r'<video [^>]*src="data:video/mp4;base64,([A-Za-z0-9+/=]+)"', page)
    ((run_id, path),) = _sql(
        db, "SELECT run_id, path FROM artifacts WHERE kind = 'video' ORDER BY step DESC LIMIT 1"
    )
    assert base64.b64decode(data) == (done / "runs" / "keep" / run_id / path).read_bytes()
    assert "evaluation at step 1024" in page


def test_a_bundle_with_videos_shows_them_in_the_importers_report_and_ui(done, tmp_path):
    import base64
    import re

    from starlette.testclient import TestClient

    from rlbench_cli.store import Store
    from rlbench_cli.ui.app import create_app

    db, bundle, other = done / "rlbench.duckdb", tmp_path / "bundle", tmp_path / "elsewhere" / "o.duckdb"
    rl("export", "keep", "--out", bundle, "--with-videos", "--db", db)
    stored = _sql(db, "SELECT run_id, path, sha256 FROM artifacts WHERE kind = 'video' ORDER BY step")
    assert sorted(p.name for p in bundle.glob("video-*")) == sorted(f"video-{sha}" for *_, sha in stored)
    assert not list(bundle.glob("policy-*"))
    rl("fetch", "--from", f"bundle:{bundle}", "--db", other)
    assert (
        _sql(other, "SELECT run_id, path, sha256 FROM artifacts WHERE kind = 'video' ORDER BY step") == stored
    )
    for run_id, path, _ in stored:  # each video where the importer's run folder has it, as recorded
        assert (other.parent / "runs" / "keep" / run_id / path).read_bytes() == (
            done / "runs" / "keep" / run_id / path
        ).read_bytes()
    rl("report", "keep", "--db", other, "--out", tmp_path / "page.html")
    (data,) = re.findall(
        r'<video [^>]*src="data:video/mp4;base64,([A-Za-z0-9+/=]+)"', (tmp_path / "page.html").read_text()
    )
    run_id, path, _ = stored[-1]
    assert base64.b64decode(data) == (other.parent / "runs" / "keep" / run_id / path).read_bytes()
    client = TestClient(create_app(Store(other)))
    listed = client.get(f"/api/run/{run_id}").json()["artifacts"]
    videos = [a for a in listed if a["kind"] == "video"]
    assert len(videos) == len(stored) and all(a["file"] for a in videos)  # linked: the file is there
    got = client.get(f"/files/{run_id}/{videos[-1]['file']}")
    assert got.status_code == 200 and got.headers["content-type"] == "video/mp4"

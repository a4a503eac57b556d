"""``rlbench enjoy`` and ``--with-policies`` on bad input (CliRunner): one line naming the problem and the
fix, exit 2, before any policy is loaded; a bundle carrying policies puts them in the importing store's run
folders, and one whose policy file was changed imports nothing."""

import json
import time

import pytest
from typer.testing import CliRunner

from rlbench_cli.artifacts import ArtifactLog, current, read_index
from rlbench_cli.cli.app import app
from rlbench_cli.store import Store

pytestmark = pytest.mark.fast

RUNS = [
    {"run_id": "p1", "suite": "s", "algo": "ppo", "algo_name": "ppo", "env": "CartPole-v1", "seed": 0, "config": {}},
    {"run_id": "r1", "suite": "s", "algo": "random", "algo_name": "random", "env": "CartPole-v1", "seed": 0,
     "config": {}},
]  # fmt: skip


@pytest.fixture()
def db(tmp_path):
    """A store whose ppo run saved only its best policy (files as a run writes them) and whose random run
    saved none."""
    path = tmp_path / "rlbench.duckdb"
    attempt = tmp_path / "runs" / "s" / "p1" / "attempt-1"
    best = attempt / "policy" / "best-000000100"
    best.mkdir(parents=True)
    (best / "policy.pt").write_bytes(b"weights")
    (best / "policy.json").write_text(json.dumps({"format": "rlbench-saved-policy-1", "loader": "ppo.policy:load_policy",
                                                  "file": "policy.pt", "env_id": "CartPole-v1", "seed": 0}))  # fmt: skip
    ArtifactLog(attempt).add(100, "policy_best", [best / "policy.pt", best / "policy.json"])
    store = Store(path)
    with store.writer() as con:
        store.register_suite(con, "s", "", {}, "")
        store.add_runs(con, RUNS)
        for r in RUNS:
            store.start_attempt(con, r["run_id"], 1, {"started_at": time.time()})
            store.end_attempt(con, r["run_id"], "finished", {})
        store.ingest_artifacts(con, [("p1", current(read_index(attempt)))])
    return path


def _one_line(r, *needles):
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("rlbench: error: "), r.stderr
    assert "Traceback" not in r.output
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_enjoy_of_an_unknown_run(db):
    _one_line(invoke("enjoy", "nosuchrun", "--db", db), "nosuchrun: no such run", "rlbench fetch")


def test_enjoy_of_a_run_with_no_saved_policy(db):
    _one_line(invoke("enjoy", "r1", "--db", db), "run r1 (random) has no saved policy")


def test_enjoy_of_a_kind_the_run_did_not_save(db):
    _one_line(invoke("enjoy", "p1", "--which", "final", "--db", db), "--which final", "use --which best")
    _one_line(invoke("enjoy", "p1", "--which", "worst", "--db", db), "--which worst: use best or final")


def test_enjoy_of_a_policy_file_changed_since_it_was_saved(db, tmp_path):
    (tmp_path / "runs/s/p1/attempt-1/policy/best-000000100/policy.pt").write_bytes(b"other!!")
    _one_line(invoke("enjoy", "p1", "--db", db), "policy.pt: differs from what run p1 recorded")
    (tmp_path / "runs/s/p1/attempt-1/policy/best-000000100/policy.pt").unlink()
    _one_line(invoke("enjoy", "p1", "--db", db), "policy.pt: missing")


def test_enjoy_of_no_episodes(db):
    _one_line(invoke("enjoy", "p1", "--episodes", "0", "--db", db), "--episodes 0")


def test_with_policies_needs_a_bundle(db, tmp_path):
    _one_line(
        invoke("fetch", "--suite", "s", "--with-policies", "--db", db), "--with-policies", "--format bundle"
    )


def test_a_bundle_carries_the_policies_into_the_other_stores_run_folders(db, tmp_path):
    r = invoke("export", "s", "--out", tmp_path / "b", "--with-policies", "--db", db)
    assert r.exit_code == 0, r.output
    carried = sorted(p.name for p in (tmp_path / "b").glob("policy-*"))
    assert len(carried) == 2 and all(n in (tmp_path / "b" / "MANIFEST.sha256").read_text() for n in carried)
    other = tmp_path / "other" / "o.duckdb"
    for _ in range(2):
        assert invoke("fetch", "--from", f"bundle:{tmp_path / 'b'}", "--db", other).exit_code == 0
    placed = tmp_path / "other/runs/s/p1/attempt-1/policy/best-000000100/policy.pt"
    assert placed.read_bytes() == b"weights"
    with Store(other).reader() as con:
        rows = [a for a in Store(other).artifacts(con, run_id="p1") if a["kind"] == "policy_best"]
    assert sorted(a["path"] for a in rows) == ["attempt-1/policy/best-000000100/policy.json",
                                               "attempt-1/policy/best-000000100/policy.pt"]  # fmt: skip


def test_a_bundle_whose_policy_was_changed_imports_nothing(db, tmp_path):
    assert invoke("export", "s", "--out", tmp_path / "b", "--with-policies", "--db", db).exit_code == 0
    victim = sorted((tmp_path / "b").glob("policy-*"))[0]
    victim.write_bytes(victim.read_bytes()[:-1] + b"X")
    other = tmp_path / "other" / "o.duckdb"
    _one_line(invoke("fetch", "--from", f"bundle:{tmp_path / 'b'}", "--db", other), victim.name, "sha256")
    assert not (tmp_path / "other" / "runs").exists()


def test_export_with_a_policy_gone_is_refused_and_leaves_nothing(db, tmp_path):
    (tmp_path / "runs/s/p1/attempt-1/policy/best-000000100/policy.pt").unlink()
    r = invoke("export", "s", "--out", tmp_path / "b", "--with-policies", "--db", db)
    _one_line(r, "policy.pt: missing or changed", "without --with-policies")
    assert not (tmp_path / "b").exists() and not list(tmp_path.glob(".b.partial-*"))


def _add_videos(db, tmp_path):
    """The ppo run of ``db`` also recorded a video and a transcript (files as a run writes them)."""
    attempt = tmp_path / "runs" / "s" / "p1" / "attempt-1"
    (attempt / "videos").mkdir()
    (attempt / "videos" / "eval-000000100.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42 frames")
    (attempt / "videos" / "eval-000000100.txt").write_text("# seed 0\n> left\n# return 1\n")
    log = ArtifactLog(attempt)
    log.add(100, "video", [attempt / "videos" / "eval-000000100.mp4"])
    log.add(100, "transcript", [attempt / "videos" / "eval-000000100.txt"])
    store = Store(db)
    with store.writer() as con:
        store.ingest_artifacts(con, [("p1", current(read_index(attempt)))])


def test_with_videos_needs_a_bundle(db):
    _one_line(
        invoke("fetch", "--suite", "s", "--with-videos", "--db", db), "--with-videos", "--format bundle"
    )


def test_a_bundle_with_videos_carries_videos_and_transcripts_but_not_policies_unless_asked(db, tmp_path):
    _add_videos(db, tmp_path)
    r = invoke(
        "fetch", "--suite", "s", "--format", "bundle", "-o", tmp_path / "b", "--with-videos", "--db", db
    )
    assert r.exit_code == 0, r.output
    carried = sorted(p.name.split("-")[0] for p in (tmp_path / "b").iterdir() if "-" in p.name)
    assert carried == ["transcript", "video"]  # no policy-<sha256> without --with-policies
    manifest = (tmp_path / "b" / "MANIFEST.sha256").read_text()
    assert all(p.name in manifest for p in (tmp_path / "b").glob("*-*"))
    other = tmp_path / "other" / "o.duckdb"
    for _ in range(2):  # idempotent
        assert invoke("fetch", "--from", f"bundle:{tmp_path / 'b'}", "--db", other).exit_code == 0
    folder = tmp_path / "other/runs/s/p1/attempt-1"
    assert (folder / "videos/eval-000000100.mp4").read_bytes() == b"\x00\x00\x00\x18ftypmp42 frames"
    assert (folder / "videos/eval-000000100.txt").read_text().startswith("# seed 0")
    assert not (folder / "policy").exists()
    with Store(other).reader() as con:
        rows = sorted((a["kind"], a["path"]) for a in Store(other).artifacts(con, run_id="p1")
                      if a["kind"] != "source")  # fmt: skip
    assert rows == [("transcript", "attempt-1/videos/eval-000000100.txt"),
                    ("video", "attempt-1/videos/eval-000000100.mp4")]  # fmt: skip


def test_a_bundle_whose_video_was_changed_imports_nothing(db, tmp_path):
    _add_videos(db, tmp_path)
    r = invoke("export", "s", "--out", tmp_path / "b", "--with-videos", "--with-policies", "--db", db)
    assert r.exit_code == 0, r.output
    (victim,) = (tmp_path / "b").glob("video-*")
    victim.write_bytes(victim.read_bytes()[:-1] + b"X")
    other = tmp_path / "other" / "o.duckdb"
    _one_line(invoke("fetch", "--from", f"bundle:{tmp_path / 'b'}", "--db", other), victim.name, "sha256")
    assert not (tmp_path / "other" / "runs").exists()


def test_export_with_a_video_gone_is_refused_naming_the_flag(db, tmp_path):
    _add_videos(db, tmp_path)
    (tmp_path / "runs/s/p1/attempt-1/videos/eval-000000100.mp4").unlink()
    r = invoke("export", "s", "--out", tmp_path / "b", "--with-videos", "--db", db)
    _one_line(r, "eval-000000100.mp4: missing or changed", "without --with-videos")
    assert not (tmp_path / "b").exists()
    assert invoke("export", "s", "--out", tmp_path / "b", "--db", db).exit_code == 0  # without: fine

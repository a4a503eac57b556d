"""CLI tests with Typer's CliRunner: every command has help, bad input gives one line and exit code 2."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlbench_cli.cli.app import app

runner = CliRunner()
ROOT = Path(__file__).parents[2]
COMMANDS = ["run", "status", "fetch", "plot", "leaderboard", "validate", "compare", "report", "sql", "export"]


def invoke(*args, **kw):
    return runner.invoke(app, [str(a) for a in args], **kw)


@pytest.mark.parametrize("cmd", COMMANDS)
def test_every_command_has_help_with_an_example(cmd):
    r = invoke(cmd, "--help")
    assert r.exit_code == 0, r.output
    assert "Example: rlbench " + cmd in " ".join(r.output.split())


def test_every_command_is_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    for cmd in COMMANDS:
        assert f"rlbench {cmd}" in readme


def test_top_level_help_and_version():
    r = invoke("--help")
    assert r.exit_code == 0
    for cmd in COMMANDS:
        assert cmd in r.output
    assert invoke("--version").output.startswith("rlbench ")


def _one_line_error(r, code=2):
    assert r.exit_code == code, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("rlbench: error: ")
    assert "Traceback" not in r.output + r.stderr
    return lines[0]


def test_validate_ok_and_dry_run_json():
    r = invoke("validate", ROOT / "suites/smoke.yaml", ROOT / "suites/quickstart.yaml")
    assert r.exit_code == 0, r.output
    assert r.output.count("ok: ") == 2
    r = invoke("run", ROOT / "suites/quickstart.yaml", "--dry-run", "--json")
    grid = json.loads(r.output)
    assert len(grid) == 18
    assert {g["algo"] for g in grid} == {"ppo", "dqn", "random"}
    assert len({g["run_id"] for g in grid}) == 18


def test_bad_suite_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: b\nenvs: [CartPole-v1]\nalgorithms: [random]\nbudget: {stepz: 10}\n")
    line = _one_line_error(invoke("validate", bad))
    assert str(bad) in line and "budget.stepz" in line and "unknown field" in line
    line = _one_line_error(invoke("run", tmp_path / "nope.yaml", "--db", tmp_path / "db.duckdb"))
    assert "no such suite file" in line
    assert not (tmp_path / "db.duckdb").exists()


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--workers", "0"], "--workers must be at least 1"),
        (["--retries", "-1"], "--retries must be 0 or more"),
        (["--timeout", "-3"], "--timeout must be a positive number"),
    ],
)
def test_bad_run_flags(args, needle, tmp_path):
    assert needle in _one_line_error(
        invoke("run", ROOT / "suites/smoke.yaml", "--db", tmp_path / "x.duckdb", *args)
    )


def test_reading_commands_without_a_database(tmp_path):
    db = tmp_path / "none.duckdb"
    for args in (["status"], ["fetch"], ["plot", "smoke"]):
        line = _one_line_error(invoke(*args, "--db", db))
        assert "no results database here" in line


def test_not_a_database(tmp_path):
    db = tmp_path / "junk.duckdb"
    db.write_bytes(b"\x00garbage" * 1000)
    assert "not a usable DuckDB results file" in _one_line_error(invoke("status", "--db", db))


def test_fetch_parquet_needs_output_and_unknown_suite(tmp_path):
    from rlbench_cli.store import Store

    with Store(tmp_path / "db.duckdb").writer():
        pass
    db = tmp_path / "db.duckdb"
    assert "--output" in _one_line_error(invoke("fetch", "--db", db, "--format", "parquet"))
    assert "no suite 'nosuch'" in _one_line_error(invoke("status", "nosuch", "--db", db))
    assert "no suite 'nosuch'" in _one_line_error(invoke("plot", "nosuch", "--db", db))
    assert "--score 'median'" in _one_line_error(invoke("plot", "x", "--db", db, "--score", "median"))


def test_env_var_selects_the_database(tmp_path, monkeypatch):
    monkeypatch.setenv("RLBENCH_DB", str(tmp_path / "env.duckdb"))
    line = _one_line_error(invoke("status"))
    assert str(tmp_path / "env.duckdb") in line


# -- fetch --from (import) and leaderboard ---------------------------------------------------------------
def _d3rlpy_run(root, name, env_rows=("1,1000,10.0", "2,2000,30.0"), params='{"lr": 0.001}'):
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "environment.csv").write_text("\n".join(env_rows) + "\n")
    (folder / "loss.csv").write_text("1,1000,0.5\n2,2000,0.25\n")
    (folder / "params.json").write_text(params)
    return folder


def test_fetch_from_needs_a_known_format_and_into(tmp_path):
    db = tmp_path / "db.duckdb"
    line = _one_line_error(invoke("fetch", "--from", "mlflow:mlruns", "--into", "s", "--db", db))
    assert "unknown format 'mlflow'" in line and "known: d3rlpy:PATH" in line and "tensorboard:PATH" in line
    line = _one_line_error(invoke("fetch", "--from", "runs", "--into", "s", "--db", db))
    assert "FORMAT:PATH" in line and "d3rlpy:PATH" in line
    line = _one_line_error(invoke("fetch", "--from", f"d3rlpy:{tmp_path}", "--db", db))
    assert "add --into SUITE" in line
    assert "add --from FORMAT:PATH" in _one_line_error(invoke("fetch", "--into", "s", "--db", db))
    line = _one_line_error(invoke("fetch", "--from", f"d3rlpy:{tmp_path}", "--into", "a b", "--db", db))
    assert "--into 'a b'" in line
    line = _one_line_error(
        invoke("fetch", "--from", f"d3rlpy:{tmp_path}", "--into", "s", "--suite", "x", "--db", db)
    )
    assert "--suite" in line
    assert "no d3rlpy run folders" in _one_line_error(invoke("fetch", "--from", f"d3rlpy:{tmp_path}", "--into", "s",
                                                            "--db", db))  # fmt: skip
    assert "no such folder" in _one_line_error(
        invoke("fetch", "--from", "d3rlpy:/no/such", "--into", "s", "--db", db)
    )
    assert not db.exists()


@pytest.mark.parametrize(
    "name, rows, needle",
    [
        ("DQN_pong_0_2024", ("1,1000,1.0",), "DQN_pong_0_2024: cannot read a d3rlpy run from this folder name"),
        ("DQN_pong_x_20240101120000", ("1,1000,1.0",), "'x' before the timestamp is not an integer seed"),
        ("DQN_pong_0_20240101120000", ("1,1000,1.0", "2,2000,abc"), "environment.csv: line 2: value 'abc' is not a number"),
        ("DQN_pong_0_20240101120000", ("1,1000",), "environment.csv: line 1: 2 column(s), expected 3"),
        ("DQN_pong_0_20240101120000", ("epoch,step,value",), "line 1: epoch 'epoch' is not an integer"),
        ("DQN_pong_0_20240101120000", ("1,1.5e3,2.0",), "line 1: step '1.5e3' is not an integer"),
    ],
    ids=["no-timestamp", "seed-not-int", "value-garbage", "two-columns", "header-row", "float-step"],
)  # fmt: skip
def test_malformed_d3rlpy_logs_import_nothing(tmp_path, name, rows, needle):
    db = tmp_path / "db.duckdb"
    _d3rlpy_run(tmp_path / "good", "CQL_pong_0_20240101120000")
    r = invoke("fetch", "--from", f"d3rlpy:{tmp_path / 'good'}", "--into", "ok", "--db", db)
    assert r.exit_code == 0 and "imported 1 runs (4 metric rows) into suite 'ok'" in r.output, r.output
    logs = tmp_path / "logs"
    _d3rlpy_run(logs, "CQL_pong_1_20240101120000")  # a good run first: it must not be half-imported
    _d3rlpy_run(logs, name, env_rows=rows)
    line = _one_line_error(invoke("fetch", "--from", f"d3rlpy:{logs}", "--into", "bad", "--db", db))
    assert needle in line and str(logs) in line
    r = invoke("status", "--db", db)
    assert "ok: 1 runs" in r.output and "bad" not in r.output


def test_bad_params_json_names_the_file(tmp_path):
    _d3rlpy_run(tmp_path / "logs", "CQL_pong_0_20240101120000", params="{not json")
    line = _one_line_error(invoke("fetch", "--from", f"d3rlpy:{tmp_path / 'logs'}", "--into", "s", "--db",
                                  tmp_path / "db.duckdb"))  # fmt: skip
    assert "params.json: not valid JSON" in line


def test_import_then_leaderboard_per_task(tmp_path):
    db = tmp_path / "db.duckdb"
    logs = tmp_path / "d3rlpy_logs"
    for seed, (a, b) in enumerate([(10.0, 30.0), (20.0, 50.0)]):
        _d3rlpy_run(logs, f"CQL_my_game_{seed}_2024010112000{seed}", env_rows=(f"1,1000,{a}", f"2,2000,{b}"))
        _d3rlpy_run(
            logs / "more", f"BC_my_game_{seed}_2024010112000{seed}", env_rows=(f"1,1000,{b}", f"2,2000,{a}")
        )
    r = invoke("fetch", "--from", f"d3rlpy:{logs}", "--into", "mine", "--db", db)
    assert r.exit_code == 0, r.output
    assert (
        "imported 4 runs (16 metric rows) into suite 'mine'" in r.output and "0 already present" in r.output
    )
    r = invoke("fetch", "--from", f"d3rlpy:{logs}", "--into", "mine", "--db", db)
    assert "imported 0 runs (0 metric rows)" in r.output and "4 already present" in r.output
    r = invoke("leaderboard", "mine", "--db", db, "--per-task", "--normalize", "none")
    assert r.exit_code == 0, r.output
    assert "score rule: final" in r.output and "ddof=0" in r.output
    assert "| CQL | my_game | 2 | 40.000 | 10.000 | 40.000 | 30.000 | 50.000 |" in r.output
    assert "| BC | my_game | 2 | 15.000 | 5.000 |" in r.output
    r = invoke("leaderboard", "mine", "--db", db, "--per-task", "--score", "best", "--format", "json")
    js = json.loads(r.output)
    assert js["meta"]["score_rule"] == "best" and js["meta"]["kind"] == "per_task"
    assert {(row["algo"], row["mean"]) for row in js["rows"]} == {("BC", 40.0), ("CQL", 40.0)}
    out = tmp_path / "table.tex"
    r = invoke("leaderboard", "mine", "--db", db, "--per-task", "--format", "latex", "-o", out)
    assert r.exit_code == 0, r.output
    tex = out.read_text()
    assert "\\toprule" in tex and "my\\_game" in tex and "\\caption{Suite: mine." in tex


def test_leaderboard_errors(tmp_path):
    from rlbench_cli.store import Store

    db = tmp_path / "db.duckdb"
    assert "no results database here" in _one_line_error(invoke("leaderboard", "x", "--per-task", "--db", db))
    with Store(db).writer():
        pass
    line = _one_line_error(invoke("leaderboard", "nosuch", "--per-task", "--db", db))
    assert "no suite 'nosuch'" in line
    assert "--score 'top'" in _one_line_error(invoke("leaderboard", "x", "--db", db, "--score", "top"))
    assert "--drop-first must be 0 or more" in _one_line_error(invoke("leaderboard", "x", "--db", db,
                                                                      "--drop-first", "-1"))  # fmt: skip


def test_status_shows_placement_and_watch_ends_when_every_run_has_ended(tmp_path, make_results_db):
    db = tmp_path / "db.duckdb"
    make_results_db(db, [("ppo", "CartPole-v1", 0, [(0, 10.0), (100, 20.0)]),
                         ("ppo", "CartPole-v1", 1, [(0, 12.0)])], suite="w", status=["finished", "failed"])  # fmt: skip
    r = invoke("status", "w", "--db", db)
    assert r.exit_code == 0, r.output
    header = r.output.splitlines()[1].split()
    assert header[:7] == ["run_id", "algo", "env", "seed", "status", "tries", "time"]
    assert {"executor", "host", "device", "job", "steps/s", "cpu%", "eval/return"} <= set(header)
    r = invoke("status", "w", "--db", db, "--watch", "--interval", "0.1")  # no terminal: plain, once
    assert r.exit_code == 0 and r.output.count("w: 2 runs: 1 failed, 1 finished") == 1, r.output
    runs = json.loads(invoke("status", "w", "--db", db, "--json").output)["runs"]
    assert {"executor", "host", "device", "job_id", "sys"} <= set(runs[0])
    assert "--watch needs a suite" in _one_line_error(invoke("status", "--db", db, "--watch"))
    assert "--interval must be a positive" in _one_line_error(
        invoke("status", "w", "--db", db, "--interval", "0")
    )


# -- plot: figure flags and task groups (#13) ------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["6", "6,4,2", "a,b", "0,4", "-1,3", "nan,4", "1000,4", ""])
def test_plot_figsize_is_validated_in_one_line(bad, tmp_path):
    line = _one_line_error(invoke("plot", "s", "--db", tmp_path / "db.duckdb", "--figsize", bad))
    assert line == (f"rlbench: error: --figsize {bad!r}: give WIDTH,HEIGHT in inches, two numbers from 0 to 100 "
                    "such as 6,4")  # fmt: skip
    assert not (tmp_path / "db.duckdb").exists()  # checked before anything is opened


def test_plot_help_documents_the_figure_flags_with_an_example():
    text = " ".join(invoke("plot", "--help").output.split())
    for flag in ("--title", "--xlabel", "--ylabel", "--figsize"):
        assert flag in text
    assert "--figsize 6,3.5" in text and "--format pdf" in text


def test_plot_flags_reach_every_figure_and_task_groups_are_said(tmp_path, make_results_db, monkeypatch):
    from rlbench_cli import plots
    from rlbench_cli.plots import write as plot_files

    runs = [(a, e, s, [(1000, 10.0 * s + len(a)), (2000, 20.0 * s + len(a))])
            for a, envs in (("dqn", ("Acrobot-v1", "CartPole-v1")), ("td3", ("Pendulum-v1",)),
                            ("ppo", ("Acrobot-v1", "CartPole-v1", "Pendulum-v1")))
            for e in envs for s in (0, 1)]  # fmt: skip
    db = tmp_path / "db.duckdb"
    make_results_db(db, runs, suite="mix")
    figs = {}
    real = plots.save_figure

    def save(fig, path, dpi=150):
        figs[Path(path).name] = fig
        return real(fig, path, dpi)

    monkeypatch.setattr(plot_files, "save_figure", save)
    monkeypatch.setenv(
        "RLBENCH_FIGURE_PROCESS", "0"
    )  # every figure saved in this process, where save() sees it
    r = invoke("plot", "mix", "--db", db, "--reps", 200, "--out", tmp_path / "fig", "--format", "pdf",
               "--title", "My suite", "--xlabel", "Steps", "--ylabel", "Score", "--figsize", "5,3")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "the algorithms do not all run on the same tasks" in r.stdout
    assert (
        "  dqn-ppo: 2 algorithms (dqn, ppo) on 2 tasks (Acrobot-v1, CartPole-v1) -> aggregates-dqn-ppo.pdf"
        in (r.stdout)
    )
    expected = {f"{n}-{g}.pdf" for n in ("aggregates", "performance_profile", "probability_of_improvement",
                                         "sample_efficiency") for g in ("dqn-ppo", "Pendulum-v1")}  # fmt: skip
    assert set(figs) == expected | {"learning_curves.pdf"}
    for name, fig in figs.items():
        assert tuple(fig.get_size_inches()) == (5.0, 3.0), name
        assert fig.get_suptitle().startswith("My suite"), name
        assert b"/Type3" not in (tmp_path / "fig" / name).read_bytes(), name
    assert figs["aggregates-Pendulum-v1.pdf"].get_suptitle() == (
        "My suite: task group Pendulum-v1 (the tasks run by ppo, td3)"
    )
    assert figs["aggregates-dqn-ppo.pdf"].get_supxlabel() == "Score"
    assert {
        (ax.get_xlabel(), ax.get_ylabel()) for ax in figs["learning_curves.pdf"].axes if ax.get_visible()
    } == {("Steps", "Score")}


def test_step_kinds_of_the_reference_suites(tmp_path):
    from rlbench_cli.analysis import step_kinds
    from rlbench_cli.store import Store

    db = tmp_path / "db.duckdb"
    for name in ("classic-control", "offline-classic"):
        r = invoke("fetch", "--from", f"rlbench:{ROOT}/results/reference/{name}", "--into", name, "--db", db)
        assert r.exit_code == 0, r.output
    store = Store(db)
    assert step_kinds(store, "classic-control") == dict.fromkeys(
        ["Acrobot-v1", "CartPole-v1", "MountainCar-v0", "Pendulum-v1"], "online"
    )
    offline = step_kinds(store, "offline-classic")
    assert len(offline) == 6 and set(offline.values()) == {"offline"}


def test_progress_counts_stopped_runs_as_interrupted_not_failed(capsys):
    from types import SimpleNamespace

    from rlbench_cli.cli.run import Progress
    from rlbench_cli.executors.base import Outcome, Placement

    p = Progress(live=False)
    p("plan", {"total": 5, "todo": 4, "skipped": 1, "recovered": 0})
    where = Placement("cpu", "host", "local", "1")
    runs = [SimpleNamespace(algo="ppo", env="CartPole-v1", seed=s, run_id=f"r{s}") for s in range(4)]
    for s in runs[:3]:
        p("started", {"spec": s, "placement": where, "attempt": 1})
    p("ended", {"spec": runs[0], "outcome": Outcome("finished", 0, None, 2.0), "retry": False})
    p("ended", {"spec": runs[1], "outcome": Outcome("failed", 1, "ValueError: x", 1.0), "retry": True})
    p("ended", {"spec": runs[1], "outcome": Outcome("failed", 1, "ValueError: x", 1.0), "retry": False})
    p("ended", {"spec": runs[2], "outcome": Outcome("interrupted", None, "interrupted", 1.0), "retry": False})
    assert p._status() == "[3/4] running 0, finished 1, failed 1, interrupted 1, ETA 0m00s"
    said = p.stopped("quick", Path("results/rlbench.duckdb"), 12.34)
    assert said.splitlines()[0] == (
        "quick: stopped after 12.3s: 1 finished, 1 interrupted, 1 failed, 1 not started; "
        "results in results/rlbench.duckdb"
    )
    assert "run the same command again" in said.splitlines()[1]
    p("started", {"spec": runs[3], "placement": where, "attempt": 1})  # a second Ctrl-C: stopped at once
    assert p.stopped("quick", Path("db"), 1.0).splitlines()[0] == (
        "quick: stopped after 1.0s: 1 finished, 1 interrupted, 1 failed, 1 cut short (the next run records them "
        "interrupted), 0 not started; results in db"
    )
    assert p.stopped_counts() == {"total": 5, "skipped": 1, "finished": 1, "failed": 1, "interrupted": 1,
                                  "cut_short": 1, "not_started": 0}  # fmt: skip
    out = capsys.readouterr().out
    assert "retrying ppo CartPole-v1 seed=1" in out and "INTERRUPTED ppo CartPole-v1 seed=2" in out


def test_a_stopped_adaptive_run_counts_the_runs_of_every_batch():
    """--adaptive plans each batch on its own; a Ctrl-C in batch 2 says what became of batch 1's runs too."""
    from types import SimpleNamespace

    from rlbench_cli.cli.run import Progress
    from rlbench_cli.executors.base import Outcome, Placement

    p = Progress(live=False, quiet=True)
    where = Placement("cpu", "host", "local", "1")
    runs = [SimpleNamespace(algo="ppo", env="CartPole-v1", seed=s, run_id=f"r{s}") for s in range(7)]
    p("plan", {"total": 4, "todo": 4, "skipped": 0, "recovered": 0})
    for s, status in zip(runs[:4], ["finished", "finished", "finished", "failed"]):
        p("started", {"spec": s, "placement": where, "attempt": 1})
        p("ended", {"spec": s, "outcome": Outcome(status, 0, None, 1.0), "retry": False})
    p("plan", {"total": 3, "todo": 3, "skipped": 0, "recovered": 0})  # batch 2: seeds of undecided pairs
    assert p._status().startswith("[0/3] running 0, finished 0, failed 0,")  # the line is the batch's
    p("started", {"spec": runs[4], "placement": where, "attempt": 1})
    p("ended", {"spec": runs[4], "outcome": Outcome("interrupted", None, "interrupted", 1.0), "retry": False})
    assert p.stopped_counts() == {"total": 7, "skipped": 0, "finished": 3, "failed": 1, "interrupted": 1,
                                  "cut_short": 0, "not_started": 2}  # fmt: skip
    assert p.stopped("ada", Path("db"), 9.0).splitlines()[0] == (
        "ada: stopped after 9.0s in batch 2: 3 finished, 1 interrupted, 1 failed, 2 not started; results in db"
    )


def test_the_logs_status_line_is_printed_when_its_counts_hold(capsys):
    """Not live (a log file): the status line follows a start, or an end with nothing left to start, never an
    end that a worker's next start follows at once (it said `running 1` of two workers all through a run)."""
    from types import SimpleNamespace

    from rlbench_cli.cli.run import Progress
    from rlbench_cli.executors.base import Outcome, Placement

    p = Progress(live=False)
    p("plan", {"total": 3, "todo": 3, "skipped": 0, "recovered": 0})
    runs = [SimpleNamespace(algo="ppo", env="CartPole-v1", seed=s, run_id=f"r{s}") for s in range(3)]

    def lines(event: str, info: dict) -> list[str]:
        capsys.readouterr()
        p.last_line = 0.0  # as if 30 s had passed since the last status line
        p(event, info)
        return [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[")]

    def started(r):  # noqa: ANN001
        return {"spec": r, "attempt": 1, "placement": Placement("cpu", "here", "local", "1")}

    def ended(r):  # noqa: ANN001
        return {"spec": r, "outcome": Outcome("finished", 0, None, 2.0), "retry": False}

    assert lines("started", started(runs[0])) == ["[0/3] running 1, finished 0, failed 0, ETA ?"]
    assert lines("started", started(runs[1]))[0].startswith("[0/3] running 2,")
    assert lines("ended", ended(runs[0])) == []  # runs[2] starts next: no line between
    assert lines("started", started(runs[2]))[0].startswith("[1/3] running 2, finished 1,")
    assert lines("ended", ended(runs[1]))[0].startswith("[2/3] running 1, finished 2,")  # nothing left
    assert lines("ended", ended(runs[2]))[0].startswith("[3/3] running 0, finished 3,")


def test_progress_counts_runs_found_running_in_slurm_as_running(capsys):
    """A run that re-attaches to Slurm jobs an earlier (detached or killed) run submitted: the ones already
    on a node are running from the start, the queued ones once they start; a Ctrl-C then says so."""
    from types import SimpleNamespace

    from rlbench_cli.cli.run import Progress
    from rlbench_cli.executors.base import Outcome, Placement

    p = Progress(live=False)
    p("plan", {"total": 3, "todo": 3, "skipped": 0, "recovered": 0, "attached": 3, "attached_in": "Slurm"})
    runs = [SimpleNamespace(algo="ppo", env="CartPole-v1", seed=s, run_id=f"r{s}") for s in range(3)]
    p("attached", {"spec": runs[0], "attempt": 1, "placement": Placement("cpu", "node7", "slurm", "4_0")})
    p("attached", {"spec": runs[1], "attempt": 2, "placement": Placement("cpu", "node7", "slurm", "4_1")})
    p("attached", {"spec": runs[2], "attempt": 1, "placement": Placement("", "", "slurm", "4_2")})
    assert p._status() == "[0/3] running 2, finished 0, failed 0, ETA ?"
    p("ended", {"spec": runs[0], "outcome": Outcome("finished", 0, None, 2.0), "retry": False})
    assert p._status().startswith("[1/3] running 1, finished 1,")
    assert p.stopped_counts() == {"total": 3, "skipped": 0, "finished": 1, "failed": 0, "interrupted": 0,
                                  "cut_short": 1, "not_started": 1}  # fmt: skip
    out = capsys.readouterr().out
    assert "  running on node7 ppo CartPole-v1 seed=0 [r0] slurm job 4_0 (submitted earlier)" in out
    assert (
        "  running on node7 ppo CartPole-v1 seed=1 [r1] (attempt 2) slurm job 4_1 (submitted earlier)" in out
    )
    assert "  queued ppo CartPole-v1 seed=2 [r2] slurm job 4_2 (submitted earlier)" in out


def test_a_param_typo_stops_run_before_anything_is_recorded_in_a_store_that_has_runs(tmp_path):
    """The params of the runs about to launch are checked as each run would check them (in a worker of the
    local pool) before anything is written: the store keeps what it had, byte for byte."""
    import duckdb

    db, suite = tmp_path / "r.duckdb", tmp_path / "s.yaml"
    base = "name: s\nseeds: 2\nbudget: {steps: 200, eval_episodes: 1}\nenvs: [CartPole-v1]\nalgorithms:\n  - random\n"
    suite.write_text(base)
    r = invoke("run", suite, "--db", db)
    assert r.exit_code == 0, r.output
    before = db.read_bytes()
    suite.write_text(base + "  - {name: ppo, params: {num_envs: 2, clip_cof: 0.1}}\n")
    line = _one_line_error(invoke("run", suite, "--db", db))
    assert line.startswith(
        f"rlbench: error: {suite}: algorithm 'ppo' on CartPole-v1: unknown ppo param(s) 'clip_cof'"
    )
    assert db.read_bytes() == before
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT algo, status, count(*) FROM runs GROUP BY ALL").fetchall() == [
        ("random", "finished", 2)
    ]
    con.close()
    suite.write_text(base + "  - {name: ppo, params: {num_envs: 2, clip_coef: 0.1, num_steps: 32}}\n")
    r = invoke("run", suite, "--db", db)  # fixed: the new runs run, the finished ones are skipped
    assert r.exit_code == 0 and "2 finished, 0 failed, 2 skipped" in r.output, r.output

"""`rlbench compare --paired`: one task (or algorithm) against a baseline, seed by seed, through the CLI."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from rlbench_cli.cli.app import app

pytestmark = pytest.mark.fast

runner = CliRunner()
REAL, MIX = "Nav[mix=real]", "Nav[mix=real+imagined]"
GAINS = [0.3, 0.2, 0.1, 0.0, 0.25, 0.15]  # real + imagined minus real, per seed


@pytest.fixture
def db(tmp_path, make_results_db):
    runs = []
    for seed, gain in enumerate(GAINS):
        runs.append(("bc", REAL, seed, [(50, 0.1), (100, 0.5)]))
        runs.append(("bc", MIX, seed, [(50, 0.2), (100, 0.5 + gain)]))
        runs.append(("ilql", REAL, seed, [(100, 0.4 + 0.01 * seed)]))
        runs.append(("ilql", MIX, seed, [(100, 0.4)]))
    runs.append(("ilql", MIX, 9, [(100, 0.9)]))  # no partner on real
    make_results_db(tmp_path / "p.duckdb", runs, suite="mixes")
    return tmp_path / "p.duckdb"


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_the_table_pairs_each_task_with_the_baseline_within_each_algorithm(db):
    from scipy import stats as scipy_stats

    r = invoke("compare", "mixes", "--db", db, "--paired", REAL)
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].startswith(f"Paired by seed: each task against {REAL} within each algorithm; eval/return "
                               "scored by final; difference = other - baseline")  # fmt: skip
    assert "Holm's correction over the 2 tests (* below 0.05)" in lines[0]
    bc = next(line for line in lines if line.startswith("| bc |")).split(" | ")
    wilcoxon = scipy_stats.wilcoxon(GAINS).pvalue
    assert bc[1:4] == [MIX, "6", "0.5"] and bc[6] == "5 / 0 / 1"
    assert bc[5].startswith("0.1667 [") and bc[8] == f"{wilcoxon:.3f}"
    ilql = next(line for line in lines if line.startswith("| ilql |")).split(" | ")
    assert ilql[2] == "6 (1 unpaired)" and ilql[6] == "0 / 5 / 1"
    # 5 seeds off level: no two-sided outcome could reach 0.05 (2 / 2^5 = 0.0625), and the table says so
    assert bc[9].endswith(" † |") and ilql[9].endswith(" † |")
    assert lines[-1].startswith(
        "† too few seeds off level for these tests to reach 0.05 whatever their outcome"
    )
    one_sided = invoke("compare", "mixes", "--db", db, "--paired", REAL, "--alternative", "greater")
    assert "†" not in one_sided.output  # 1 / 2^5 < 0.05


def test_json_has_every_number_and_a_one_sided_test(db):
    r = invoke("compare", "mixes", "--db", db, "--paired", REAL, "--alternative", "greater", "--reps", "500",
               "--seed", "3", "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["paired"] == {"baseline": REAL, "dimension": "task", "metric": "eval/return", "rule": "final",
                             "drop_first": 0, "alternative": "greater", "reps": 500, "seed": 3, "step_max": None,
                             "comparisons": 2, "tested": 2}  # fmt: skip
    bc, ilql = out["comparisons"]
    assert (bc["group"], bc["other"], bc["seeds"], bc["above"]) == ("bc", MIX, [0, 1, 2, 3, 4, 5], 5)
    assert bc["wilcoxon_p"] == pytest.approx(1 / 32) and bc["sign_p"] == pytest.approx(1 / 32)
    assert ilql["unpaired"] == [9] and ilql["wilcoxon_p"] == pytest.approx(1.0)
    assert bc["lower"] <= bc["mean_diff"] <= bc["upper"]
    assert bc["holm_p"] == pytest.approx(2 / 32)
    assert bc["min_p"] == pytest.approx(1 / 32) and ilql["min_p"] == pytest.approx(1 / 32)


def test_algorithms_within_each_task_and_the_score_rule(db):
    r = invoke("compare", "mixes", "--db", db, "--paired", "bc", "--score", "best", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["paired"]["dimension"] == "algo" and out["paired"]["rule"] == "best"
    assert [(c["group"], c["other"]) for c in out["comparisons"]] == [(MIX, "ilql"), (REAL, "ilql")]


def test_a_step_scores_each_run_as_if_it_ended_there(db):
    r = invoke("compare", "mixes", "--db", db, "--paired", REAL, "--step-max", "50", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["paired"]["step_max"] == 50
    (bc,) = out["comparisons"]  # ilql logged nothing before step 100
    assert bc["group"] == "bc" and bc["above"] == 6 and bc["mean_diff"] == pytest.approx(0.1)
    table = invoke("compare", "mixes", "--db", db, "--paired", REAL, "--step-max", "50").output
    assert "eval/return scored by final at step 50;" in table.splitlines()[0]


def test_several_steps_are_one_family_holm_over_all_their_rows(db):
    from rlbench_cli import stats

    r = invoke(
        "compare", "mixes", "--db", db, "--paired", REAL, "--step-max", "50", "--step-max", "100", "--json"
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["paired"]["step_max"] == [50, 100] and out["paired"]["comparisons"] == 3
    rows = out["comparisons"]
    assert [(c["step"], c["group"]) for c in rows] == [(50, "bc"), (100, "bc"), (100, "ilql")]
    holm = stats.holm([c["wilcoxon_p"] for c in rows])
    assert [c["holm_p"] for c in rows] == holm and holm[0] > rows[0]["wilcoxon_p"]  # adjusted over 3, not 1
    for c in rows:  # each step's numbers are that step's alone
        one = json.loads(invoke("compare", "mixes", "--db", db, "--paired", REAL, "--step-max", c["step"],
                                "--json").output)  # fmt: skip
        (same,) = [o for o in one["comparisons"] if o["group"] == c["group"]]
        assert {k: v for k, v in c.items() if k not in ("step", "holm_p")} == {
            k: v for k, v in same.items() if k != "holm_p"}  # fmt: skip
    table = invoke(
        "compare", "mixes", "--db", db, "--paired", REAL, "--step-max", "50", "--step-max", "100"
    ).output
    lines = table.splitlines()
    assert (
        "scored by final at steps 50, 100 (one family);" in lines[0]
        and "over the 3 tests (* below" in lines[0]
    )
    assert lines[2].startswith("| step | algo | task |") and lines[4].startswith(f"| 50 | bc | {MIX} |")


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--paired", "Nav"], "--paired 'Nav' names no task or algorithm with finished runs; close: "),
        (
            ["--paired", REAL, "--alternative", "up"],
            "--alternative 'up': use one of two-sided, greater, less",
        ),
        (
            ["--paired", REAL, "--batch", "3"],
            "--batch: AdaStop's settings do not apply with --paired; drop them",
        ),
        (["--alternative", "less"], "--alternative applies to --paired BASELINE only; add --paired or drop"),
        (["--paired", REAL, "--reps", "0"], "--reps 0: the bootstrap needs at least 1 replicate"),
        (["--paired", REAL, "--metric", "eval/nope"], "has no finished run with metric 'eval/nope'"),
        (
            ["--paired", REAL, "--step-max", "10"],
            "--step-max 10: no finished run of suite 'mixes' has 'eval/return'",
        ),
        (["--step-max", "10"], "--step-max applies to --paired BASELINE only"),
        (
            ["--paired", REAL, "--step-max", "50", "--step-max", "50"],
            "--step-max 50 is given twice; give each",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(db, args, needle):
    r = invoke("compare", "mixes", "--db", db, *args)
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.output


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--alternative", "less"], "--alternative applies to --paired BASELINE only"),
        (
            ["--paired", REAL, "--alternative", "up"],
            "--alternative 'up': use one of two-sided, greater, less",
        ),
        (["--step-max", "50"], "--step-max applies to --paired BASELINE only"),
        (["--paired", REAL, "--step-max", "10"], "--step-max 10: no finished run of suite 'mixes' has"),
        (["--paired", REAL, "--step-max", "50", "--step-max", "50"], "--step-max 50 is given twice"),
    ],
)
def test_the_reports_paired_flags_are_checked_before_anything_is_drawn(db, tmp_path, args, needle):
    r = invoke("report", "mixes", "--db", db, "--out", tmp_path / "r.html", *args)
    assert r.exit_code == 2 and needle in r.output and not (tmp_path / "r.html").exists()


def test_nothing_to_pair_is_said(tmp_path, make_results_db):
    make_results_db(tmp_path / "one.duckdb", [("bc", REAL, s, [(1, 0.5)]) for s in range(3)], suite="one")
    r = invoke("compare", "one", "--db", tmp_path / "one.duckdb", "--paired", REAL)
    assert r.exit_code == 2
    assert "no other task of suite 'one' shares an algorithm with it" in r.output


def test_a_comparison_level_on_every_seed_is_no_test_and_leaves_holms_family(tmp_path, make_results_db):
    runs = []
    for seed in range(
        7
    ):  # a copy of the baseline (the same clone, say) and one that ends lower on every seed
        runs += [("clone", "t", seed, [(0, 0.9), (10, 0.9)]), ("copy", "t", seed, [(0, 0.9), (10, 0.9)]),
                 ("drifts", "t", seed, [(0, 0.9), (10, 0.5)])]  # fmt: skip
    make_results_db(tmp_path / "l.duckdb", runs, suite="level")
    r = invoke("compare", "level", "--db", tmp_path / "l.duckdb", "--paired", "clone", "--step-max", "0",
               "--step-max", "10")  # fmt: skip
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert "Holm's correction over the 1 test (3 comparisons with no seed off level or none paired: no test)" in (
        lines[0])  # fmt: skip
    copy_at_10 = next(line for line in lines if line.startswith("| 10 | t | copy |"))
    assert copy_at_10.endswith("| 0 / 0 / 7 | - | - | - † |")
    drifts = next(line for line in lines if line.startswith("| 10 | t | drifts |")).split(" | ")
    assert drifts[-3] == drifts[-2].removesuffix(" *") == "0.016" and drifts[-1] == "0.016 * |"

"""Per-task tables, common tasks, the suite leaderboard builder and its JSON / LaTeX / CSV renderings."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

from rlbench_cli import leaderboard as lb
from rlbench_cli import stats

pytestmark = pytest.mark.fast


def per_run(scores: dict[tuple[str, str], list[float]], norm: float | None = None) -> pd.DataFrame:
    rows = [(f"{a}/{t}/{i}", a, t, i, s) for (a, t), ss in scores.items() for i, s in enumerate(ss)]
    df = pd.DataFrame(rows, columns=["run_id", "algo", "env", "seed", "score"])
    if norm is not None:
        df["norm_score"] = df["score"] * norm
    return df


def test_per_task_table_uses_population_std() -> None:
    table = lb.per_task_table(
        per_run({("b", "pong"): [1.0, 2.0, 4.0], ("a", "pong"): [3.0], ("a", "qbert"): [0, 10]})
    )
    assert list(table.columns) == ["algo", "task", "runs", "mean", "std", "median", "min", "max"]
    assert table[["algo", "task"]].values.tolist() == [["a", "pong"], ["a", "qbert"], ["b", "pong"]]
    b = table.iloc[2]
    assert b["runs"] == 3 and b["mean"] == pytest.approx(7 / 3)
    assert b["std"] == pytest.approx(np.std([1.0, 2.0, 4.0])) and b["std"] != pytest.approx(
        np.std([1, 2, 4], ddof=1)
    )
    assert (b["median"], b["min"], b["max"]) == (2.0, 1.0, 4.0)
    assert table.iloc[0]["std"] == 0.0  # one run: 0, not NaN (ddof=0)
    assert table.iloc[1]["std"] == 5.0


def test_per_task_table_adds_normalised_columns_only_when_they_differ() -> None:
    raw = lb.per_task_table(per_run({("a", "t"): [1.0, 3.0]}, norm=1.0))
    assert "norm_mean" not in raw.columns
    normed = lb.per_task_table(per_run({("a", "t"): [1.0, 3.0]}, norm=0.5))
    assert normed.iloc[0][["norm_mean", "norm_std", "norm_median", "norm_min", "norm_max"]].tolist() == [
        1.0, 0.5, 1.0, 0.5, 1.5,
    ]  # fmt: skip
    with pytest.raises(stats.StatsError, match="norm_score"):
        lb.per_task_table(per_run({("a", "t"): [1.0]}), normalized=True)
    with pytest.raises(stats.StatsError, match="lack column"):
        lb.per_task_table(pd.DataFrame({"algo": ["a"]}))


def metric_rows() -> pd.DataFrame:
    """Three algorithms, 3 seeds; 'c' never ran task 't2'. Two evaluations per run."""
    rows = []
    for algo, base in (("a", 10.0), ("b", 20.0), ("c", 30.0)):
        for task in ("t1", "t2") if algo != "c" else ("t1",):
            for seed in range(3):
                for step, bump in ((100, 0.0), (200, 1.0)):
                    rows.append((f"{algo}/{task}/{seed}", algo, task, seed, step, base + seed + bump))
    return pd.DataFrame(rows, columns=["run_id", "algo", "env", "seed", "step", "value"])


def test_common_tasks_keeps_the_tasks_every_algorithm_has() -> None:
    data, tasks, left_out = lb.common_tasks(metric_rows())
    assert tasks == ["t1"] and left_out == {"t2": ["c"]}
    assert set(data["env"]) == {"t1"} and set(data["algo"]) == {"a", "b", "c"}
    split = metric_rows().query("(algo == 'a' and env == 't1') or (algo == 'b' and env == 't2')")
    with pytest.raises(stats.StatsError, match="no task has runs of every algorithm"):
        lb.common_tasks(split)


def test_build_aggregate_ranks_every_algorithm_on_common_tasks() -> None:
    board = lb.build("s", metric_rows(), metric="eval/return", normalize=None, reps=200, seed=0)
    assert board.kind == "aggregate"
    assert board.frame["algo"].tolist() == ["c", "b", "a"]
    assert board.frame["tasks"].tolist() == [1, 1, 1]
    text = "\n".join(board.header)
    assert "Tasks left out, as not every algorithm has runs there: t2 (no runs of c)" in text
    assert board.meta["tasks"] == ["t1"] and board.meta["left_out_tasks"] == {"t2": ["c"]}
    md = lb.render(board, "md")
    assert md.startswith("- Suite: s\n") and "| 1 | c |" in md


def test_build_per_task_states_rule_and_ddof() -> None:
    board = lb.build("s", metric_rows(), metric="eval/return", rule="best", drop_first=1, normalize=None,
                     per_task=True)  # fmt: skip
    assert board.kind == "per_task" and len(board.frame) == 5  # c/t2 absent, nothing else dropped
    text = "\n".join(board.header)
    assert "score rule: best, first 1 evaluations dropped" in text and "ddof=0" in text
    assert "optimality gap" not in text
    assert not board.warnings  # seed matching across tasks concerns rliable's matrices, not this table
    a_t1 = board.frame.query("algo == 'a' and task == 't1'").iloc[0]
    assert a_t1["mean"] == 12.0 and a_t1["std"] == pytest.approx(np.std([11, 12, 13]))


def test_build_per_task_passes_on_dropped_runs() -> None:
    df = metric_rows()
    df.loc[df["run_id"] == "a/t1/0", "value"] = np.nan
    board = lb.build("s", df, metric="eval/return", normalize=None, per_task=True)
    assert any("non-finite" in w for w in board.warnings)


def test_csv_is_plain_and_round_trips_with_no_arguments() -> None:
    board = lb.build("s", metric_rows(), metric="eval/return", normalize=None, per_task=True)
    text = lb.render(board, "csv")
    assert not any(line.startswith("#") for line in text.splitlines())
    back = pd.read_csv(io.StringIO(text))
    pd.testing.assert_frame_equal(back, board.frame, check_dtype=False)
    meta = json.loads(lb.meta_json(board))
    assert meta["suite"] == "s" and meta["score_rule"] == "final" and meta["header"][0] == "Suite: s"
    # the comment lines are still there for a caller who asks for them
    assert lb.to_csv(board.frame, header_lines=board.header).startswith("# Suite: s\n")


def test_json_keeps_full_precision_and_nulls_nan() -> None:
    df = pd.DataFrame({"algo": ["a"], "x": [1 / 3], "y": [np.nan], "n": [np.int64(3)]})
    out = json.loads(lb.to_json(df, {"suite": "s", "left": {"t": ["a"]}}))
    assert out == {
        "meta": {"suite": "s", "left": {"t": ["a"]}},
        "rows": [{"algo": "a", "x": 1 / 3, "y": None, "n": 3}],
    }


def test_latex_is_booktabs_and_escaped() -> None:
    df = pd.DataFrame({"algo": ["my_algo&co"], "task": ["50%"], "mean": [-6.02], "std": [np.nan]})
    tex = lb.to_latex(df, ["Metric: eval/return; score rule: final", "Runs: 3 #1"])
    assert r"\begin{tabular}{llrr}" in tex and r"\toprule" in tex and r"\bottomrule" in tex
    assert r"\caption{Metric: eval/return; score rule: final. Runs: 3 \#1.}" in tex
    assert r"my\_algo\&co & 50\% & $-$6.020 & -- \\" in tex
    assert lb.latex_escape(r"a_b%c$d#e{f}g~h^i\j") == (
        r"a\_b\%c\$d\#e\{f\}g\textasciitilde{}h\textasciicircum{}i\textbackslash{}j"
    )


def test_latex_aggregate_titles() -> None:
    board = lb.build("s", metric_rows(), metric="eval/return", normalize=None, reps=200, seed=0)
    tex = lb.render(board, "latex")
    assert r"iqm [95\% CI] & median" in tex and r"p\_improve\_over\_next" in tex
    with pytest.raises(stats.StatsError, match="unknown table format"):
        lb.render(board, "html")


def test_one_number_of_decimals_per_column_and_no_negative_zero() -> None:
    df = pd.DataFrame(
        {
            "algo": ["a", "b", "c"],
            "mean": [-1378.42, -89.233, 5.0],  # reaches 1,000: one decimal for the whole column
            "std": [127.34, 5.683, 0.0],  # reaches 100: two
            "norm": [-0.0004, 0.95, np.nan],  # below 100: three; -0.0004 rounds to 0.000, not -0.000
        }
    )
    md = lb.to_markdown(df)
    rows = [line.split(" | ") for line in md.splitlines()[2:]]
    assert [r[1] for r in rows] == ["-1,378.4", "-89.2", "5.0"]
    assert [r[2] for r in rows] == ["127.34", "5.68", "0.00"]
    assert [r[3].rstrip(" |") for r in rows] == ["0.000", "0.950", "n/a"]
    assert "-0.0" not in md
    tex = lb.to_latex(df)
    assert r"a & $-$1,378.4 & 127.34 & 0.000 \\" in tex and r"c & 5.0 & 0.00 & -- \\" in tex
    assert lb.decimals([0.5, np.nan, 99.9]) == 3 and lb.decimals([100.0]) == 2 and lb.decimals([-1e4]) == 1
    assert lb.decimals([]) == 3


def test_per_task_board_columns_keep_their_decimals_in_md_and_latex() -> None:
    df = metric_rows()
    df.loc[df["algo"] == "c", "value"] *= 100  # c's scores reach 3,300; a's and b's stay below 100
    board = lb.build("s", df, metric="eval/return", normalize=None, per_task=True)
    md = lb.render(board, "md")
    rows = [line.split(" | ") for line in md.splitlines() if line.startswith(("| a ", "| b ", "| c "))]
    assert [r[3] for r in rows] == ["12.0", "12.0", "22.0", "22.0", "3,200.0"]  # mean: one decimal in all
    assert [r[4] for r in rows] == ["0.816", "0.816", "0.816", "0.816", "81.650"]  # std: three, below 100
    tex = lb.render(board, "latex")
    assert "a & t1 & 3 & 12.0 & 0.816 & 12.0 & 11.0 & 13.0 \\\\" in tex
    assert "a,t1,3,12.0,0.816496580927726," in lb.render(board, "csv")  # CSV keeps full precision

"""Figures of rlbench_cli.plots: they draw into given axes, return figures, and keep one colour per algorithm."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rlbench_cli import plots, stats
from rlbench_cli.plots import write as plot_files

COLS = ["run_id", "algo", "env", "seed", "step", "value"]


def synthetic(algos: tuple[str, ...] = ("dqn", "ppo", "random"), points: int = 11) -> pd.DataFrame:
    """3 algos x 2 envs x 3 seeds x ``points`` evaluations with distinct learning curves."""
    rng = np.random.default_rng(0)
    finals = {"dqn": 0.9, "ppo": 0.6, "random": 0.02}
    rows = []
    for algo in algos:
        for env in ("Acrobot-v1", "CartPole-v1"):
            low, high = stats.REFERENCES["classic-control"][env]
            for s in range(3):
                for k in range(points):
                    frac = finals[algo] * (1 - np.exp(-3.0 * k / (points - 1))) / (1 - np.exp(-3.0))
                    frac += rng.normal(0.0, 0.1)
                    rows.append((f"{algo}/{env}/{s}", algo, env, s, k * 5000, low + frac * (high - low)))
    df = pd.DataFrame(rows, columns=COLS)
    df["name"] = "eval/return"
    return df


@pytest.fixture(scope="module")
def data() -> dict[str, object]:
    df = synthetic()
    table = stats.score_table(df, rule="final")
    return {
        "df": df,
        "table": table,
        "agg": stats.aggregates(table, reps=100),
        "poi": stats.probability_of_improvement(table, reps=30),
        "profile": stats.performance_profile(table, reps=50),
        "se": stats.sample_efficiency(df, normalize=table.normalized, reps=50),
        "lc": stats.learning_curves(df),
    }


def new_axes(n: int = 1):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4 * n, 3))
    return fig, list(np.ravel(fig.subplots(1, n, squeeze=False)))


def rgb(color: object) -> tuple[float, float, float]:
    from matplotlib.colors import to_rgb

    return tuple(round(c, 4) for c in to_rgb(color))


def line_colors(fig) -> dict[str, tuple[float, float, float]]:
    out = {}
    for ax in fig.axes:
        for line in ax.get_lines():
            if not line.get_label().startswith("_"):
                out[line.get_label()] = rgb(line.get_color())
    return out


# ----------------------------------------------------------------------------------------------- colours
def _lab(hex_color: str, deficiency: str | None = None) -> np.ndarray:
    """CIELAB of a colour, optionally as seen with a colour-vision deficiency (Machado et al. 2009, severity 1)."""
    machado = {
        "deutan": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]],
        "protan": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]],
        "tritan": [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]],
    }  # fmt: skip
    srgb = np.array([int(hex_color[i : i + 2], 16) / 255 for i in (1, 3, 5)])
    lin = np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)
    if deficiency:
        lin = np.clip(np.array(machado[deficiency]) @ lin, 0, 1)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ lin
    f = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(f > 0.008856, np.cbrt(f), 7.787 * f + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


@pytest.mark.parametrize("vision", [None, "deutan", "protan", "tritan"])
def test_first_eight_colours_are_apart_for_colour_blind_readers(vision) -> None:
    first = plots.PALETTE[:8]
    worst = min(
        (float(np.linalg.norm(_lab(a, vision) - _lab(b, vision))), a, b)
        for i, a in enumerate(first)
        for b in first[i + 1 :]
    )
    assert worst[0] > 15, worst  # CIELAB distance; the former palette had 10.8 (deutan) and 12.8 (protan)
    assert len(set(plots.PALETTE)) == len(plots.PALETTE) == 16


def test_algo_colors_are_deterministic_and_distinct() -> None:
    a = plots.algo_colors(["ppo", "dqn", "random"])
    assert a == plots.algo_colors(["random", "ppo", "dqn", "ppo"])
    assert a == {"dqn": plots.PALETTE[0], "ppo": plots.PALETTE[1], "random": plots.PALETTE[2]}
    many = plots.algo_colors([f"algo{i:02d}" for i in range(16)])
    assert len(set(many.values())) == 16


def test_every_algorithm_has_its_own_colour_style_and_marker() -> None:
    colors = plots.algo_colors([f"algo{i:02d}" for i in range(40)])
    styles = plots.algo_styles(colors)
    cues = {(colors[a], *styles[a]) for a in colors}
    assert len(cues) == 40  # past 16 algorithms the colour repeats, not the whole cue
    eight = plots.algo_styles(plots.algo_colors([f"a{i}" for i in range(8)]))
    assert len({m for _, m in eight.values()}) == 8 and len({ls for ls, _ in eight.values()}) == 4
    # the cue follows the colour, so a subset drawn with the suite's colours keeps its styles
    suite = plots.algo_colors(["ddpg", "double_dqn", "dqn", "ppo", "sac", "td3"])
    subset = {a: suite[a] for a in ("ppo", "td3")}
    assert plots.algo_styles(subset) == {a: plots.algo_styles(suite)[a] for a in subset}


def test_ppo_and_td3_on_classic_control_differ_in_colour_style_and_marker() -> None:
    colors = plots.algo_colors(["ddpg", "double_dqn", "dqn", "ppo", "sac", "td3"])
    styles = plots.algo_styles(colors)
    assert np.linalg.norm(_lab(colors["ppo"], "deutan") - _lab(colors["td3"], "deutan")) > 30
    assert styles["ppo"][0] != styles["td3"][0] and styles["ppo"][1] != styles["td3"][1]


# ------------------------------------------------------------------------------------------------ labels
def test_steps_label_says_only_what_applies() -> None:
    assert plots.steps_label(["online", "online"]) == "Environment steps"
    assert plots.steps_label(["offline"]) == "Gradient steps"
    assert plots.steps_label(["online", "offline", None]).startswith(
        "Training steps (environment steps online"
    )
    assert plots.steps_label([None]) == plots.steps_label([]) == "Training steps"


def test_score_and_metric_labels_read_as_words(data) -> None:
    assert plots.score_label(data["table"]) == ("Normalised score", "0 = random policy, 1 = reference agent")
    raw = stats.score_table(data["df"], normalize=None)
    assert plots.score_label(raw) == ("Return", None)
    loss = stats.score_table(data["df"].assign(name="train/loss/critic"), normalize=None)
    assert plots.score_label(loss) == ("train/loss/critic", None)  # not a return: keeps its own name
    assert plots.metric_label("eval/success") == "Success rate"
    suite = stats.score_table(
        data["df"],
        normalize={"references": {"Acrobot-v1": [-500, -100], "CartPole-v1": [0, 500]}, "scale": 100,
                   "source": "each dataset's random and expert returns"},
    )  # fmt: skip
    assert plots.score_label(suite) == (
        "Normalised score",
        "0 to 100: each dataset's random and expert returns",
    )


# ------------------------------------------------------------------------------------- into given axes
def test_plot_aggregates_draws_into_given_axes(data) -> None:
    table = data["table"]
    fig, axes = new_axes(4)
    assert plots.plot_aggregates(data["agg"], table, axes=axes) is fig
    for ax, metric in zip(axes, stats.METRICS, strict=True):
        assert len(ax.patches) == 3  # one CI bar per algorithm
        assert ax.get_title().startswith(stats.METRIC_LABELS[metric])
        assert ax.get_xlabel() == "Normalised score (0 = random policy, 1 = reference agent)"
    fig1, (ax,) = new_axes(1)
    assert plots.plot_aggregates(data["agg"], table, axes=ax, metrics=["iqm"], xlabel="Score") is fig1
    assert ax.get_xlabel() == "Score"
    with pytest.raises(ValueError, match="needs 4 axes"):
        plots.plot_aggregates(data["agg"], table, axes=axes[:2])


def test_aggregates_are_ranked_best_at_top_and_compact() -> None:
    df = synthetic(algos=("dqn", "ppo", "random"))
    df.loc[df["algo"] == "random", "value"] += 600.0  # random now scores best, dqn and ppo keep their order
    table = stats.score_table(df)
    agg = stats.aggregates(table, reps=100)
    assert plots.rank_order(agg) == ["random", "dqn", "ppo"]
    fig = plots.plot_aggregates(agg, table)
    ax = fig.axes[0]
    top_down = [t.get_text() for t in sorted(ax.get_yticklabels(), key=lambda t: -t.get_position()[1])]
    assert top_down == ["random", "dqn", "ppo"]
    width, height = fig.get_size_inches()
    assert width <= 11 and height <= 3  # was 15.2 x 2.7 inches for 4 panels
    assert fig.get_supxlabel() == (
        "Normalised score (0 = random policy, 1 = reference agent); optimality gap: lower is better"
    )
    assert all(a.get_xlabel() == "" for a in fig.axes)  # one shared label, not four


def test_plot_performance_profile_draws_into_given_ax(data) -> None:
    fig, (ax,) = new_axes()
    assert plots.plot_performance_profile(data["profile"], data["table"], ax=ax) is fig
    assert set(line_colors(fig)) == {"dqn", "ppo", "random"}
    assert ax.get_xlabel() == "Threshold \u03c4: Normalised score (0 = random policy, 1 = reference agent)"
    assert ax.get_legend() is not None


def test_plot_probability_of_improvement_draws_into_given_ax(data) -> None:
    fig, (ax,) = new_axes()
    assert plots.plot_probability_of_improvement(data["poi"], data["table"], ax=ax) is fig
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == 3 and all(lbl.startswith("P(") for lbl in labels)
    assert "P(dqn > random)" in labels  # unique pairs, oriented so P >= 0.5
    assert any(line.get_xdata()[0] == 0.5 for line in ax.get_lines())  # the 0.5 reference line
    fig2, (ax2,) = new_axes()
    plots.plot_probability_of_improvement(data["poi"], data["table"], ax=ax2, pairs="all")
    assert len(ax2.get_yticklabels()) == 6


def test_plot_sample_efficiency_draws_into_given_ax(data) -> None:
    fig, (ax,) = new_axes()
    assert plots.plot_sample_efficiency(data["se"], data["table"], ax=ax) is fig
    assert ax.get_ylabel() == "IQM of normalised score\n(0 = random policy, 1 = reference agent)"
    assert ax.get_xlabel() == "Training steps"  # not known which kind
    kinds = {"Acrobot-v1": "online", "CartPole-v1": "online"}
    fig, (ax,) = new_axes()
    plots.plot_sample_efficiency(data["se"], data["table"], ax=ax, step_kinds=kinds)
    assert ax.get_xlabel() == "Environment steps"
    fig, (ax,) = new_axes()
    plots.plot_sample_efficiency(
        data["se"], data["table"], ax=ax, step_kinds={**kinds, "CartPole-v1": "offline"}
    )
    assert ax.get_xlabel() == "Training steps (environment steps online, gradient steps offline)"
    fig, (ax,) = new_axes()
    plots.plot_sample_efficiency(data["se"], data["table"], ax=ax, xlabel="Steps", ylabel="IQM")
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("Steps", "IQM")


def test_plot_learning_curves_draws_into_given_axes(data) -> None:
    fig, axes = new_axes(2)
    kinds = {"Acrobot-v1": "online", "CartPole-v1": "offline"}
    assert plots.plot_learning_curves(data["lc"], axes=axes, step_kinds=kinds) is fig
    assert [ax.get_title() for ax in axes] == ["Acrobot-v1", "CartPole-v1"]
    assert [ax.get_xlabel() for ax in axes] == ["Environment steps", "Gradient steps"]  # each panel its own
    assert all(ax.get_ylabel() == "Return" for ax in axes)
    assert all(len(ax.get_lines()) == 3 for ax in axes)
    cues = {(line.get_color(), line.get_linestyle(), line.get_marker()) for line in axes[0].get_lines()}
    assert len({c[1] for c in cues}) == 3 and len({c[2] for c in cues}) == 3  # greyscale-safe second cue
    with pytest.raises(ValueError, match="needs 2 axes"):
        plots.plot_learning_curves(data["lc"], axes=axes[:1])
    fig, axes = new_axes(2)
    plots.plot_learning_curves(data["lc"], axes=axes, xlabel="Frames", ylabel="Score")
    assert {(ax.get_xlabel(), ax.get_ylabel()) for ax in axes} == {("Frames", "Score")}


def test_new_figures_compose_without_pyplot(data) -> None:
    fig = plots.plot_learning_curves(data["lc"])
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 2
    fig = plots.plot_aggregates(data["agg"], data["table"])
    assert len(fig.axes) == 4


def test_colours_are_the_same_in_every_figure(data) -> None:
    expected = {a: rgb(c) for a, c in plots.algo_colors(["dqn", "ppo", "random"]).items()}
    figs = [
        plots.plot_performance_profile(data["profile"], data["table"]),
        plots.plot_sample_efficiency(data["se"], data["table"]),
        plots.plot_learning_curves(data["lc"]),
    ]
    for fig in figs:
        assert line_colors(fig) == expected
    agg = plots.plot_aggregates(data["agg"], data["table"])
    bars = [rgb(p.get_facecolor()[:3]) for p in agg.axes[0].patches]
    assert bars == [expected["dqn"], expected["ppo"], expected["random"]]

    # an explicit mapping wins, so a subset of algorithms keeps the suite's colours
    colors = plots.algo_colors(["a2c", "dqn", "ppo", "random"])
    fig = plots.plot_sample_efficiency(data["se"], data["table"], colors=colors)
    assert line_colors(fig)["ppo"] == rgb(colors["ppo"])


# ---------------------------------------------------------------------------------------------- files
def test_write_all_writes_readable_pngs(data, tmp_path: Path) -> None:
    from PIL import Image

    paths = plots.write_all(
        "synthetic", data["df"], data["table"], tmp_path / "figs", reps=40, seed=0, aggregates_df=data["agg"]
    )
    names = [p.name for p in paths]
    assert names == [
        "aggregates.png",
        "performance_profile.png",
        "probability_of_improvement.png",
        "sample_efficiency.png",
        "learning_curves.png",
    ]
    for path in paths:
        assert path.stat().st_size > 10_000
        with Image.open(path) as img:
            img.verify()
        with Image.open(path) as img:
            width, height = img.size
            assert img.format == "PNG"
        assert 800 <= width <= 4000 and 250 <= height <= 3000, (path.name, img.size)


def test_write_all_skips_improvement_with_one_algorithm(tmp_path: Path) -> None:
    df = synthetic(algos=("ppo",), points=5)
    table = stats.score_table(df)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to warn about in clean data
        paths = plots.write_all("one", df, table, tmp_path, fmt="svg", reps=20)
    assert [p.name for p in paths] == [
        "aggregates.svg",
        "performance_profile.svg",
        "sample_efficiency.svg",
        "learning_curves.svg",
    ]
    assert all(p.read_text().lstrip().startswith("<?xml") for p in paths)


def test_pdf_embeds_truetype_not_type3_fonts(data, tmp_path: Path) -> None:
    paths = plots.write_all("synthetic", data["df"], data["table"], tmp_path, fmt="pdf", reps=20,
                            aggregates_df=data["agg"])  # fmt: skip
    assert len(paths) == 5
    for path in paths:
        raw = path.read_bytes()
        assert raw.startswith(b"%PDF")
        assert b"/Type3" not in raw, path.name
        assert b"/FontFile2" in raw, path.name  # fonttype 42: the TrueType font program is embedded
    fig = plots.plot_learning_curves(data["lc"])  # save_figure on its own does the same, PS too
    assert b"/Type3" not in plots.save_figure(fig, tmp_path / "lc.pdf").read_bytes()
    ps = plots.save_figure(fig, tmp_path / "lc.ps").read_bytes()
    assert b"Type 3" not in ps and b"/FontType 3" not in ps and b"/FontType 42" in ps


def captured(monkeypatch) -> dict[str, object]:
    """Figures as ``write_all`` saves them: {file name: Figure}."""
    figs: dict[str, object] = {}
    real = plots.save_figure

    def save(fig, path, dpi=150):
        figs[Path(path).name] = fig
        return real(fig, path, dpi)

    monkeypatch.setattr(plot_files, "save_figure", save)  # write_all saves through it
    return figs


def test_figure_options_set_title_labels_and_size_of_every_figure(data, tmp_path: Path, monkeypatch) -> None:
    figs = captured(monkeypatch)
    opts = plots.FigureOptions(title="My title", xlabel="Frames", ylabel="Score", figsize=(6.0, 3.5))
    kinds = {"Acrobot-v1": "online", "CartPole-v1": "online"}
    plots.write_all("synthetic", data["df"], data["table"], tmp_path, reps=20, aggregates_df=data["agg"],
                    options=opts, step_kinds=kinds)  # fmt: skip
    assert len(figs) == 5
    for name, fig in figs.items():
        assert fig.get_suptitle() == "My title", name
        assert tuple(fig.get_size_inches()) == (6.0, 3.5), name
    assert figs["aggregates.png"].get_supxlabel() == "Score"
    se = figs["sample_efficiency.png"].axes[0]
    assert (se.get_xlabel(), se.get_ylabel()) == ("Frames", "Score")
    lc = [ax for ax in figs["learning_curves.png"].axes if ax.get_visible()]
    assert {(ax.get_xlabel(), ax.get_ylabel()) for ax in lc} == {("Frames", "Score")}

    figs.clear()
    plots.write_all("synthetic", data["df"], data["table"], tmp_path, reps=20, aggregates_df=data["agg"],
                    step_kinds=kinds)  # fmt: skip
    title = figs["aggregates.png"].get_suptitle()
    assert title.startswith("synthetic: 3 algorithms, 2 tasks, 18 runs; final eval/return")
    assert title.count("synthetic") == 1 and all(
        ax.get_title() != "synthetic" for ax in figs["aggregates.png"].axes
    )
    assert figs["sample_efficiency.png"].axes[0].get_xlabel() == "Environment steps"


def groups_df() -> pd.DataFrame:
    """classic-control's shape: dqn on two discrete tasks, td3 on a continuous one, ppo on all three."""
    df = synthetic(algos=("dqn", "ppo"))
    pend = synthetic(algos=("ppo", "random")).query("env == 'Acrobot-v1'")
    pend = pend.assign(env="Pendulum-v1", algo=pend["algo"].replace({"random": "td3"}))
    pend["run_id"] = pend["algo"] + "/Pendulum-v1/" + pend["seed"].astype(str)
    return pd.concat([df, pend], ignore_index=True)


def test_task_groups_group_tasks_by_the_algorithms_that_ran_them() -> None:
    groups = plots.task_groups(groups_df())
    assert [(g.name, g.algos, g.tasks) for g in groups] == [
        ("dqn-ppo", ("dqn", "ppo"), ("Acrobot-v1", "CartPole-v1")),
        ("Pendulum-v1", ("ppo", "td3"), ("Pendulum-v1",)),
    ]
    assert groups[1].describe() == "Pendulum-v1: 2 algorithms (ppo, td3) on 1 task (Pendulum-v1)"
    # every algorithm on every task: one group, with the plain file names
    (only,) = plots.task_groups(synthetic())
    assert only.name == "" and only.algos == ("dqn", "ppo", "random")
    # the group of every algorithm keeps its plain name beside the others; long names become group<N>
    df = synthetic(algos=("dqn", "ppo")).rename(columns={})
    extra = df.query("algo == 'ppo' and env == 'Acrobot-v1'").assign(env="X-long-task-a")
    extra2 = extra.assign(env="Y-other-task-b")
    names = [g.name for g in plots.task_groups(pd.concat([df, extra, extra2]), max_name=2)]
    assert names == ["", "group2"]


def test_write_all_per_task_group_names_files_and_titles(tmp_path: Path, monkeypatch) -> None:
    figs = captured(monkeypatch)
    df = groups_df()
    colors = plots.algo_colors(df["algo"])  # the suite's colours
    (group, pend) = plots.task_groups(df)
    rows = df.loc[df["env"].isin(pend.tasks)]
    table = stats.score_table(rows, normalize=None)
    paths = plots.write_all(
        "cc", rows, table, tmp_path, reps=20, colors=colors, group=pend, learning_curves=False
    )
    assert [p.name for p in paths] == [
        "aggregates-Pendulum-v1.png",
        "performance_profile-Pendulum-v1.png",
        "probability_of_improvement-Pendulum-v1.png",
        "sample_efficiency-Pendulum-v1.png",
    ]
    title = figs["aggregates-Pendulum-v1.png"].get_suptitle()
    assert title.startswith("cc, task group Pendulum-v1 (the tasks run by ppo, td3):")
    # ppo has the suite's colour in this group's figures
    assert line_colors(figs["sample_efficiency-Pendulum-v1.png"])["ppo"] == rgb(colors["ppo"])
    assert figs["aggregates-Pendulum-v1.png"].get_supxlabel() == "Return"  # raw returns


def test_report_draws_aggregates_per_task_group_and_says_so(tmp_path: Path) -> None:
    from rlbench_cli import report

    result = report.make_report("cc", groups_df(), metric="eval/return", rule="final", drop_first=0,
                                normalize=None, reps=200, seed=0, out_dir=tmp_path,
                                step_kinds={"Acrobot-v1": "online"})  # fmt: skip
    names = [p.name for p in result.paths]
    for group in ("dqn-ppo", "Pendulum-v1"):
        assert f"aggregates-{group}.png" in names and f"sample_efficiency-{group}.png" in names
    assert "aggregates.png" not in names and names.count("learning_curves.png") == 1
    assert result.notes[0].startswith("the algorithms do not all run on the same tasks")
    assert "  Pendulum-v1: 2 algorithms (ppo, td3) on 1 task (Pendulum-v1) -> aggregates-Pendulum-v1.png" in (
        result.notes
    )
    assert any("no task has runs of every algorithm" in w for w in result.warnings)
    assert "| td3 | Pendulum-v1 |" in result.leaderboard_md  # the leaderboard keeps its rule: per task


def test_a_task_group_that_cannot_be_scored_is_said_and_the_others_drawn(tmp_path: Path) -> None:
    from rlbench_cli import report

    df = groups_df()
    df.loc[df["env"] == "Pendulum-v1", "value"] = np.nan  # nothing to score in the Pendulum-v1 group
    result = report.make_report("cc", df, metric="eval/return", rule="final", drop_first=0, normalize=None,
                                reps=200, seed=0, out_dir=tmp_path)  # fmt: skip
    names = [p.name for p in result.paths]
    assert "aggregates-dqn-ppo.png" in names and not any("Pendulum" in n for n in names)
    assert any(w.startswith("task group Pendulum-v1: ") and w.endswith("its aggregate figures are not drawn")
               for w in result.warnings), result.warnings  # fmt: skip

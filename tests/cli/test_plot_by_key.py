"""`rlbench plot SUITE --x KEY` with Typer's CliRunner on a tiny store: the figure and its table, and bad keys
as one line naming --x."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from rlbench_cli.cli.app import app

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def _store(tmp_path: Path, make_results_db) -> Path:
    runs = []
    for env in ("CartPole-v1", "Acrobot-v1"):
        for lr in (1e-4, 1e-3, 1e-2):
            for width in (32, 64):
                for seed in range(3):
                    runs.append((f"dqn[learning_rate={lr:g},width={width}]", env, seed,
                                 [(50, 1.0), (100, 100 * lr * width + seed)],
                                 {"params": {"learning_rate": lr, "width": width}, "seed": seed}))  # fmt: skip
    db = tmp_path / "db.duckdb"
    make_results_db(db, runs, suite="lr", config={"score": {"metric": "eval/return", "rule": "final"}})
    return db


def _error_line(r) -> str:
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("rlbench: error: "), r.stderr
    assert "Traceback" not in r.output
    return lines[0]


def _keep_figures(monkeypatch, *names: str) -> list:
    """The figures ``plots``' drawing functions of these names return, in order, as the command draws them."""
    from rlbench_cli import plots

    figs: list = []
    for name in names:
        real = getattr(plots, name)
        monkeypatch.setattr(
            plots, name, lambda *a, _real=real, **kw: figs.append(_real(*a, **kw)) or figs[-1]
        )
    return figs


def test_plot_against_a_key_writes_one_panel_per_task_and_prints_the_points(
    tmp_path, make_results_db, monkeypatch
):
    from rlbench_cli import plots
    from rlbench_cli.plots import sweeps

    db = _store(tmp_path, make_results_db)
    real = plots.plot_by_key
    figs = _keep_figures(monkeypatch, "plot_by_key")
    r = invoke("plot", "lr", "--db", db, "--x", "params.learning_rate", "--reps", 300, "--out", tmp_path / "f",
               "--normalize", "none")  # fmt: skip
    assert r.exit_code == 0, r.output
    png = tmp_path / "f" / "by-params.learning_rate-eval_return.png"
    assert f"wrote {png}" in r.stdout and png.read_bytes()[:4] == b"\x89PNG"
    assert "| task | legend | params.learning_rate | iqm [95% CI] | runs |" in r.stdout
    # seeds 0, 1, 2 add 0, 1, 2: the IQM of three is their mean, 100 * lr * width + 1
    assert "| CartPole-v1 | width=64 | 0.01 | 65 [" in r.stdout
    (fig,) = figs
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["Acrobot-v1", "CartPole-v1"]
    assert {ax.get_xscale() for ax in panels} == {"log"}  # 1e-4 .. 1e-2: two decades
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["width=32", "width=64"]
    assert sweeps.plot_by_key is real


def test_bad_keys_are_one_line_naming_x(tmp_path, make_results_db):
    db = _store(tmp_path, make_results_db)
    line = _error_line(invoke("plot", "lr", "--db", db, "--x", "params.lr", "--out", tmp_path / "f"))
    assert line == ("rlbench: error: --x 'params.lr': no run of suite 'lr' has this config key (nor logs it as a "
                    "metric); the keys that vary there: params.learning_rate, params.width")  # fmt: skip
    line = _error_line(invoke("plot", "lr", "--db", db, "--x", "seed", "--out", tmp_path / "f"))
    assert "--x 'seed'" in line
    line = _error_line(invoke("plot", "lr", "--db", db, "--x", "params..x", "--out", tmp_path / "f"))
    assert "--x 'params..x'" in line
    assert not (tmp_path / "f").exists()


def test_the_html_report_draws_the_score_against_each_setting_an_algorithm_varies(tmp_path, make_results_db):
    from rlbench_cli.htmlreport import build_html
    from rlbench_cli.store import Store

    db = _store(tmp_path, make_results_db)
    page, _ = build_html(Store(db), "lr", metric="eval/return", rule="final", drop_first=0, normalize=None,
                         reps=300, seed=0, curves=False)  # fmt: skip
    section = page[page.index('<section id="by-key">') :]
    section = section[: section.index("</section>")]
    assert section.count("<svg") == 2  # params.learning_rate and params.width
    assert "<h3>params.learning_rate</h3>" in section and "<h3>params.width</h3>" in section
    assert "rlbench plot lr --x params.width</code>" in section
    assert '<td class="text">learning_rate=0.01</td>' in section  # the width figure's legend: the other key
    plain = tmp_path / "plain.duckdb"
    make_results_db(plain, [("ppo", "CartPole-v1", s, [(1, float(s))]) for s in range(3)], suite="p")
    page, _ = build_html(Store(plain), "p", metric="eval/return", rule="final", drop_first=0, normalize=None,
                         reps=300, seed=0, curves=False)  # fmt: skip
    assert 'id="by-key"' not in page


def test_the_ui_endpoint_gives_the_points_rlbench_plot_computes(tmp_path, make_results_db):
    from starlette.testclient import TestClient

    from rlbench_cli import analysis, report
    from rlbench_cli.store import Store
    from rlbench_cli.ui.app import create_app

    store = Store(_store(tmp_path, make_results_db))
    client = TestClient(create_app(store))
    assert client.get("/api/keys?suite=lr").json()["settings"] == ["params.learning_rate", "params.width"]
    r = client.get("/api/suite/lr/by-key?x=params.learning_rate&reps=300&seed=2")
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["axis"] == {"values": ["0.0001", "0.001", "0.01"], "positions": [1e-4, 1e-3, 1e-2], "numeric": True,
                           "log": True, "crowded": False}  # fmt: skip
    assert out["tasks"] == ["Acrobot-v1", "CartPole-v1"] and out["legends"] == ["width=32", "width=64"]
    expected = report.key_points(analysis.key_scores(store, "lr", "params.learning_rate"), "iqm", 300, 2)
    assert out["points"] == expected.to_dict(orient="records")
    bad = client.get("/api/suite/lr/by-key?x=params.lr")
    assert bad.status_code == 400 and "--x 'params.lr': no run of suite 'lr'" in bad.json()["error"]
    assert client.get("/api/suite/lr/by-key").status_code == 400
    assert client.get("/api/suite/nope/by-key?x=params.width").status_code == 404


def test_several_metrics_against_a_key_draw_a_row_each_with_the_numbers_of_one_metric_alone(
    tmp_path, make_results_db, monkeypatch
):
    runs = []
    for env in ("CartPole-v1", "Acrobot-v1"):
        for n in (8, 80, 800):
            for seed in range(3):
                points = {"eval/em": [(100, n / 1000 + seed / 100)], "eval/cr": [(100, 1 - n / 1000)]}
                runs.append((f"wm[train_episodes={n}]", env, seed, points,
                             {"params": {"train_episodes": n}, "seed": seed}))  # fmt: skip
    db = tmp_path / "db.duckdb"
    make_results_db(db, runs, suite="wm", config={"score": {"metric": "eval/em", "rule": "final"}})
    figs = _keep_figures(monkeypatch, "plot_by_key_rows")
    args = ("plot", "wm", "--db", db, "--x", "params.train_episodes", "--reps", 300, "--normalize", "none")
    r = invoke(*args, "--metric", "eval/em", "--metric", "eval/cr", "--out", tmp_path / "f")
    assert r.exit_code == 0, r.output
    png = tmp_path / "f" / "by-params.train_episodes-eval_em-eval_cr.png"
    assert f"wrote {png}" in r.stdout and png.read_bytes()[:4] == b"\x89PNG"
    assert "| metric | task | legend | params.train_episodes | iqm [95% CI] | runs |" in r.stdout
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith("| eval/")]
    assert [ln.split(" | ")[0] for ln in rows] == ["| eval/em"] * 6 + ["| eval/cr"] * 6
    # the IQM of three seeds is their mean: n/1000 + 0.01 for EM, 1 - n/1000 for CR
    assert "| eval/em | CartPole-v1 | wm | 80 | 0.09 [" in r.stdout
    assert "| eval/cr | Acrobot-v1 | wm | 800 | 0.2 [0.2, 0.2] | 3 |" in r.stdout
    for metric in ("eval/em", "eval/cr"):  # each row as the figure of that metric alone gives it
        alone = invoke(*args, "--metric", metric, "--out", tmp_path / metric.replace("/", "_"))
        assert alone.exit_code == 0, alone.output
        for line in alone.stdout.splitlines():
            if line.startswith("| ") and line[2:].split(" |")[0].endswith("-v1"):
                assert f"| {metric} {line}" in r.stdout
    (fig,) = figs
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["Acrobot-v1", "CartPole-v1"] * 2
    assert [ax.get_xlabel() for ax in panels] == ["", "", "params.train_episodes", "params.train_episodes"]
    assert panels[0].get_ylabel().startswith("IQM of EM") and panels[2].get_ylabel().startswith("IQM of CR")
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["wm"] and len(fig.legends) == 1
    assert not any(ax.get_legend() for ax in panels)


def test_metric_given_twice_or_several_without_x_is_one_line_naming_metric(tmp_path, make_results_db):
    db = _store(tmp_path, make_results_db)
    line = _error_line(invoke("plot", "lr", "--db", db, "--x", "params.width", "--metric", "eval/return",
                              "--metric", "eval/return", "--out", tmp_path / "f"))  # fmt: skip
    assert line == "rlbench: error: --metric 'eval/return' is given twice: give each metric once"
    line = _error_line(invoke("plot", "lr", "--db", db, "--metric", "eval/return", "--metric", "eval/length",
                              "--out", tmp_path / "f"))  # fmt: skip
    assert line.startswith(
        "rlbench: error: --metric is given 2 times (eval/return, eval/length): only a figure"
    )
    assert not (tmp_path / "f").exists()


def _far_apart_store(tmp_path: Path, make_results_db) -> Path:
    """Two tasks whose scores lie far apart, against train_episodes (8, 80), EM and CR."""
    runs = []
    for env, offset in (("CartPole-v1", 0.0), ("Acrobot-v1", 5.0)):
        for n in (8, 80):
            for seed in range(3):
                points = {
                    "eval/em": [(100, offset + n / 100 + seed / 10)],
                    "eval/cr": [(100, 10 * offset - n)],
                }
                runs.append((f"wm[train_episodes={n}]", env, seed, points,
                             {"params": {"train_episodes": n}, "seed": seed}))  # fmt: skip
    db = tmp_path / "db.duckdb"
    make_results_db(db, runs, suite="wm", config={"score": {"metric": "eval/em", "rule": "final"}})
    return db


def test_share_y_gives_each_metric_row_one_y_range_across_its_tasks(tmp_path, make_results_db, monkeypatch):
    db = _far_apart_store(tmp_path, make_results_db)
    figs = _keep_figures(monkeypatch, "plot_by_key", "plot_by_key_rows")
    args = ("plot", "wm", "--db", db, "--x", "params.train_episodes", "--reps", 200, "--normalize", "none")

    def ylims(*more) -> list[tuple[float, float]]:
        r = invoke(*args, *more, "--out", tmp_path / "f")
        assert r.exit_code == 0, r.output
        return [ax.get_ylim() for ax in figs.pop().axes if ax.get_visible()]

    own = ylims("--metric", "eval/em")  # Acrobot's panel then CartPole's, each fitted to its task
    assert own[0] != own[1] and own[0][0] > own[1][1]  # no overlap: 5.08.. against 0.08..
    shared = ylims("--metric", "eval/em", "--share-y")
    assert shared[0] == shared[1] == (min(own[0][0], own[1][0]), max(own[0][1], own[1][1]))
    rows = ylims("--metric", "eval/em", "--metric", "eval/cr", "--share-y")  # EM's two panels, then CR's
    assert rows[0] == rows[1] == shared[0]  # the EM row as EM alone, shared
    assert rows[2] == rows[3] and rows[2] != rows[0]  # CR's own range, shared by its tasks, not EM's
    assert rows[2][0] < -80 and rows[2][1] > 50 - 8  # CR: -8, -80 on CartPole; 42, -30 on Acrobot


def test_share_y_without_x_is_one_line_naming_it(tmp_path, make_results_db):
    db = _store(tmp_path, make_results_db)
    line = _error_line(invoke("plot", "lr", "--db", db, "--share-y", "--out", tmp_path / "f"))
    assert line == ("rlbench: error: --share-y shares the y range of the figure against a key: add --x KEY, "
                    "or leave it out")  # fmt: skip
    assert not (tmp_path / "f").exists()


def _sized_store(tmp_path: Path, make_results_db, seed_size=None) -> Path:
    """Two shapes of model at two sizes each, logging their size at step 0 as text_world_model does; the size
    differs by seed where ``seed_size`` says so."""
    runs = []
    for shape, layers, width in (("wide", 1, 64), ("wide", 2, 64), ("deep", 4, 32), ("deep", 8, 32)):
        size = layers * (12 * width * width + 13 * width) + 2 * width
        for seed in range(3):
            logged = size + (seed if seed_size else 0)
            runs.append((f"wm-{shape}[n_layer={layers}]", "TextNav", seed,
                         {"eval/em": [(100, layers / 10 + (0.5 if shape == "deep" else 0) + seed / 100)],
                          "model/parameters_non_embedding": [(0, float(logged))]},
                         {"params": {"n_layer": layers, "n_embd": width}, "seed": seed}))  # fmt: skip
    db = tmp_path / "db.duckdb"
    make_results_db(db, runs, suite="sz", config={"score": {"metric": "eval/em", "rule": "final"}})
    return db


def test_a_metric_the_runs_log_once_places_each_configuration_on_the_axis(
    tmp_path, make_results_db, monkeypatch
):
    db = _sized_store(tmp_path, make_results_db)
    figs = _keep_figures(monkeypatch, "plot_by_key")
    r = invoke("plot", "sz", "--db", db, "--x", "model/parameters_non_embedding", "--reps", 300,
               "--out", tmp_path / "f", "--normalize", "none")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert (tmp_path / "f" / "by-model_parameters_non_embedding-eval_em.png").read_bytes()[:4] == b"\x89PNG"
    # the legend is the entry (its n_layer differs along the line, its n_embd is the entry's own); sizes as
    # whole numbers; the IQM of three seeds is their mean
    assert "| TextNav | wm-wide | 50112 | 0.11 [" in r.stdout
    assert "| TextNav | wm-deep | 50880 | 0.91 [" in r.stdout
    assert "| TextNav | wm-deep | 101696 | 1.31 [" in r.stdout
    (fig,) = figs
    (panel,) = [ax for ax in fig.axes if ax.get_visible()]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["wm-deep", "wm-wide"]
    # 50,112 and 50,880 are too close for a label each: matplotlib's own ticks, not one per size
    ticks = [t for t in panel.get_xticks() if 50_000 <= t <= 102_000]
    assert 50880 not in ticks and len(ticks) >= 2


def test_a_logged_metric_that_differs_by_seed_is_one_line_naming_x(tmp_path, make_results_db):
    db = _sized_store(tmp_path, make_results_db, seed_size=True)
    line = _error_line(invoke("plot", "sz", "--db", db, "--x", "model/parameters_non_embedding",
                              "--out", tmp_path / "f"))  # fmt: skip
    assert line.startswith("rlbench: error: --x 'model/parameters_non_embedding': the seeds of wm-deep[n_layer=4] "
                           "on TextNav logged different values of it (50880, 50881, 50882)")  # fmt: skip


def test_the_report_and_the_ui_offer_the_logged_size_beside_the_settings(tmp_path, make_results_db):
    from starlette.testclient import TestClient

    from rlbench_cli.htmlreport import build_html
    from rlbench_cli.store import Store
    from rlbench_cli.ui.app import create_app

    store = Store(_sized_store(tmp_path, make_results_db))
    keys = ["params.n_layer", "model/parameters_non_embedding"]
    offered = TestClient(create_app(store)).get("/api/keys?suite=sz").json()["settings"]
    assert offered == ["params.n_embd", *keys]  # n_embd: one value per entry, still a key that varies
    page, _ = build_html(store, "sz", metric="eval/em", rule="final", drop_first=0, normalize=None, reps=300,
                         seed=0, curves=False)  # fmt: skip
    section = page[page.index('<section id="by-key">') :]
    section = section[: section.index("</section>")]
    drawn = [h.split("</h3>")[0] for h in section.split("<h3>")[1:]]
    assert drawn == keys  # n_embd splits no entry: no figure against it
    assert "rlbench plot sz --x model/parameters_non_embedding</code>" in section
    assert '<td class="text">wm-deep</td>' in section


def test_the_report_draws_its_figures_against_a_setting_on_one_y_range_with_share_y(
    tmp_path, make_results_db, monkeypatch
):
    db = _far_apart_store(tmp_path, make_results_db)
    figs = _keep_figures(monkeypatch, "plot_by_key")

    def ylims(*more) -> list[tuple[float, float]]:
        r = invoke("report", "wm", "--db", db, "--reps", 200, "--no-curves", "--normalize", "none", *more,
                   "--out", tmp_path / "r.html")  # fmt: skip
        assert r.exit_code == 0, r.output
        assert 'id="by-key"' in (tmp_path / "r.html").read_text()
        return [ax.get_ylim() for ax in figs.pop().axes if ax.get_visible()]

    own = ylims()
    assert own[0][0] > own[1][1]  # Acrobot's panel above CartPole's: no overlap
    assert ylims("--share-y") == [(own[1][0], own[0][1])] * 2

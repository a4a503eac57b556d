import os
import re
import tempfile
from pathlib import Path

import pytest

from rlbench_cli.envs.gymnax import set_xla_flags

# XLA's CPU flags for every test process before any test imports jax: a worker that computed with the default
# multi-threaded Eigen pool wedged for ever in a later vmapped program (envs/gymnax/__init__.py says why)
set_xla_flags()

os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_configure(config: pytest.Config) -> None:
    """Where Python writes no bytecode (PYTHONDONTWRITEBYTECODE, set in many CI images), each of the ~400
    `rlbench` processes the tests start, and each of their workers, would compile rlbench_cli's modules from
    source again (about 0.1 s of CPU each): the session's first process compiles them once. Not in xdist's
    workers, which the first process starts after this."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        import compileall

        import rlbench_cli

        compileall.compile_dir(Path(rlbench_cli.__file__).parent, quiet=1)


# Ray reads these when it is imported: set before any test imports it, so every Ray node a test starts in this
# process (ray.cluster_utils.Cluster) advertises loopback and the driver never waits on usage stats or auth
for _key, _value in {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
                     "RAY_AUTH_MODE": "disabled"}.items():  # fmt: skip
    os.environ.setdefault(_key, _value)
# Two test workers (pytest-xdist) keep both cores busy: torch's OpenMP threads that spin while they wait for a
# thread the other worker has descheduled made a 2-thread PPO run 2-6x slower; passive waiting avoids that.
# Set before any test imports torch, and inherited by every `rlbench` subprocess and engine the tests start.
# One math thread in a worker's own process and the commands it starts (a local run's jobs still get theirs,
# executors/base.py): three workers on two cores, each training with two threads, waited on descheduled
# threads at every parallel region (a checkpoint module took 96 s instead of 55 s for the same CPU seconds).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("OMP_NUM_THREADS", "1")

# Markers a test gets from what it uses (pyproject.toml says what each means), so a new test has them without
# saying so: the fixtures of the real engines (tests/e2e/conftest.py) and of Debian's packages (below), a test
# parametrized over the executor that asks for its engine's fixture by name, the folder of the benchmark
# scripts' tests, and a skipif whose reason names a GPU
ENGINE_FIXTURES = {"ray_head", "slurm"}
APT_FIXTURES = {"slurm", "chromium", "chromedriver", "stockfish", "wamerican", "mps_control"}
ENGINE_EXECUTORS = {"ray", "slurm"}
# Every test of one engine runs on one xdist worker (`--dist loadgroup` in pyproject.toml): one Ray head and one
# Slurm cluster a session instead of one per worker, and never two clusters of an engine competing for the cores
ENGINE_OF_FIXTURE = {"ray_head": "ray", "slurm": "slurm"}
# The modules whose tests train with JAX on the local CPU share a worker too: two XLA CPU runtimes training at
# once on two cores made the watchdog's test see false wedges (a chunk 3x slower than the one before it) and
# once a real one
JAX_MODULES = {"test_ppo_jax.py", "test_jax_run.py", "test_bench_jax_seeds.py"}
TESTS = Path(__file__).parent
BENCH = TESTS / "bench"
NEEDS_GPU = re.compile(r"\b(GPU|CUDA)\b")
# what a test of the fast tier may not be
NOT_FAST = ("slow", "engine", "apt", "bench", "gpu")
# The fast tier: a module whose every test is quick says so itself (`pytestmark = pytest.mark.fast`); these
# modules are of the tier but for the tests named (slow ones, and the only ones that import torch,
# transformers, stable-baselines3, rliable or matplotlib, which would cost the tier more than their tests)
FAST_BUT = {
    "cli/test_datasets_cli.py": {
        "test_export_to_minari",
        "test_help_imports_no_heavy_package",
        "test_list_and_show",
    },
    "cli/test_query_cli.py": {
        "test_leaderboard_csv_is_plain_with_a_sidecar",
        "test_scores_equal_the_score_rules_of_stats",
        "test_scores_use_the_suites_rule_and_honour_filters",
        "test_sql_reads_and_exports",
        "test_status_steps_and_where_filters",
        "test_the_text_table_shows_wall_time_as_a_utc_time_and_json_keeps_the_number",
        "test_wide_pivots_metrics_into_columns_and_reads_back_with_plain_read_csv",
    },
    "cli/test_ui_server.py": {"test_rlbench_ui_serves_on_a_free_loopback_port"},
    "unit/test_adaptive.py": {
        "test_a_clear_difference_stops_early_and_saves_seeds",
        "test_the_family_wise_error_stays_at_alpha_for_equal_algorithms",
    },
    "unit/test_bootstrap.py": {
        "test_intervals_agree_with_rliable_within_monte_carlo_error",
        "test_poi_interval_within_monte_carlo_error",
        "test_curve_interval_replays_rliable_on_a_3d_array",
    },
    "unit/test_bootstrap_speed.py": {"test_poi_distribution_bitwise_unchanged"},
    "unit/test_key_sweeps.py": {"test_key_intervals_equal_rliable_on_the_same_cells"},
    "unit/test_check_params.py": {
        "test_a_text_algorithms_missing_pretrained_folder_is_refused",
        "test_an_offline_algorithm_takes_a_param_of_either_of_its_configs",
        "test_every_algorithm_refuses_a_param_it_does_not_have_and_lists_the_ones_it_has",
        "test_every_shipped_suite_validates",
        "test_on_a_text_env_the_text_variant_checks",
        "test_ppo_refuses_only_what_every_kind_of_action_space_refuses",
        "test_a_value_of_the_wrong_type_is_refused_naming_algorithm_param_and_value",
        "test_yaml_ish_values_are_read_as_the_params_types",
    },
    "unit/test_entry_budget.py": {"test_validate_and_dry_run_show_entry_budgets"},
    "unit/test_import_formats.py": {
        "test_sb3_written_here_reads_back",
        "test_summarywriter_files_written_here_read_back",
    },
    "unit/test_importers.py": {
        "test_import_is_idempotent_and_registers_the_suite",
        "test_store_import_rolls_back_on_failure",
    },
    "unit/test_o2o.py": {"test_learning_curves_mark_the_phase_boundary"},
    "unit/test_security.py": {
        "test_d3rlpy_import_stores_pickle_looking_params_as_json_text_and_runs_nothing",
        "test_fetch_filters_with_injection_strings_match_nothing_and_change_nothing",
        "test_imported_names_with_sql_in_them_are_stored_verbatim",
        "test_into_names_with_sql_or_paths_are_refused",
        "test_run_folders_of_valid_suites_stay_under_the_runs_root",
        "test_store_queries_bind_every_filter",
        "test_suite_arguments_with_injection_strings_are_unknown_suites",
        "test_yaml_python_tags_are_refused_and_never_run",
    },
    "unit/test_spec.py": {"test_ready_suites_validate"},
    "unit/test_stats.py": {
        "test_aggregates_match_rliable",
        "test_every_statistic_of_plot_runs_without_rliable_arch_or_scipy",
        "test_heavy_imports_are_lazy",
        "test_learning_curves_all_points_at_once_equal_the_definition_bit_for_bit",
        "test_performance_profile_matches_rliable",
        "test_probability_of_improvement_matches_rliable",
        "test_sample_efficiency_iqm_per_point_matches_rliable",
    },
    "unit/test_text_oracle.py": {"test_a_local_transformers_model_answers_as_the_oracle"},
    "unit/test_text_scores.py": {
        "test_scripted_optimal_maze_scores_about_100_and_random_far_below_the_dataset_average"
    },
}


def fast_only(markexpr: str) -> bool:
    """Whether ``-m markexpr`` selects tests of the fast tier only: ``fast``, or ``fast and ...`` with no
    ``or`` (any other expression counts as one that may select other tests too)."""
    if re.search(r"\bor\b", markexpr):
        return False
    return re.fullmatch(r"\s*fast(\s+and\s.*)?\s*", markexpr) is not None


FAST_WORKERS = 2


def fast_tier_workers(markexpr: str, args: list[str], in_worker: bool, cores: int) -> int | None:
    """How many xdist workers ``-m markexpr`` gets (None: leave ``-n`` as it is): the fast tier runs on two
    workers, or in one process on a one-core machine (its ~800 tests took 32-35 s on two workers against 49-53 s
    in one process on two cores, and 37 s on three). An ``-n`` on the command line still counts. Never in a
    worker: its options are the controller's, and a worker given workers would start its own, and they theirs."""
    explicit = any(a.startswith(("-n", "--numprocesses")) for a in args)
    if in_worker or explicit or not fast_only(markexpr):
        return None
    return FAST_WORKERS if cores >= FAST_WORKERS else 0


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """The fast tier's workers (``fast_tier_workers``)."""
    if not hasattr(config.option, "numprocesses"):
        return  # pytest-xdist is not installed: one process anyway
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    in_worker = os.environ.get("PYTEST_XDIST_WORKER") is not None
    workers = fast_tier_workers(config.option.markexpr, list(config.invocation_params.args), in_worker, cores)
    if workers is not None:
        config.option.numprocesses = workers


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """For the fast tier, a test module that never says ``mark.fast`` is not imported: it holds no test of
    the tier, and importing every module (torch, Ray, d3rlpy) would take longer than the tier's tests."""
    module = collection_path.suffix == ".py" and collection_path.name.startswith("test_")
    if module and fast_only(config.option.markexpr) and _fast_but(collection_path) is None:
        if "mark.fast" not in collection_path.read_text():
            return True
    return None  # not False: that would stop the --ignore options from being looked at


def _fast_but(module: Path) -> set[str] | None:
    """The tests ``FAST_BUT`` leaves out of the fast tier in ``module``; None for a module it does not list."""
    return FAST_BUT.get(module.relative_to(TESTS).as_posix()) if module.is_relative_to(TESTS) else None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give each test the markers its fixtures, parameters, folder and skip conditions imply (before ``-m``
    selects), and refuse a fast test that is also slow, needs an engine, apt, a benchmark or a GPU."""
    wrong = []
    for item in items:
        fixtures = set(item.fixturenames)
        params = getattr(item, "callspec", None)
        if fixtures & ENGINE_FIXTURES or (params and params.params.get("executor") in ENGINE_EXECUTORS):
            item.add_marker("engine")
        group = (_engine_of(item, fixtures, params) or ("jax" if item.path.name in JAX_MODULES else None)
                 or _module_fixture_group(item))  # fmt: skip
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
        if fixtures & APT_FIXTURES:
            item.add_marker("apt")
        left_out = _fast_but(item.path)
        if left_out is not None and getattr(item, "originalname", item.name) not in left_out:
            item.add_marker("fast")
        if BENCH in item.path.parents:
            item.add_marker("bench")
        if any(NEEDS_GPU.search(str(m.kwargs.get("reason", ""))) for m in item.iter_markers("skipif")):
            item.add_marker("gpu")
        if item.get_closest_marker("fast"):
            clash = [name for name in NOT_FAST if item.get_closest_marker(name)]
            if clash:
                wrong.append(f"{item.nodeid} ({', '.join(clash)})")
    if wrong:
        raise pytest.UsageError("tests marked fast that are not fast:\n  " + "\n  ".join(wrong))


def _module_fixture_group(item: pytest.Item) -> str | None:
    """The worker group of a test that uses a module-scoped fixture: its module's name, so the module's tests
    that share the fixture run on one worker and it is computed once (spread over three workers, the smoke
    suite's run, the o2o suite's and others were computed on each: about 50 CPU-s a session)."""
    info = getattr(item, "_fixtureinfo", None)
    for defs in info.name2fixturedefs.values() if info is not None else ():
        if defs and defs[-1].scope == "module":
            return item.path.stem
    return None


def _engine_of(item: pytest.Item, fixtures: set[str], params) -> str | None:
    """The engine a test uses (its worker group): by its fixture, its executor parameter, or, for a test marked
    engine that starts its own cluster, by the engine its name says."""
    for fixture, engine in ENGINE_OF_FIXTURE.items():
        if fixture in fixtures:
            return engine
    if params and params.params.get("executor") in ENGINE_EXECUTORS:
        return params.params["executor"]
    if item.get_closest_marker("engine"):
        return next((e for e in sorted(ENGINE_EXECUTORS) if e in item.nodeid.lower()), "ray")
    return None


_APT_UPDATED: list[bool] = []
# Every apt-get of the tests and of tests/engines/slurm_up.sh holds this lock: under pytest-xdist two workers
# may install at once, and dpkg refuses a second apt-get rather than waiting for the first
APT_LOCK = os.path.join(tempfile.gettempdir(), "rlbench-apt.lock")


def debian_package(packages: str, present, why: str, component: str = "main") -> None:
    """Make sure Debian's ``packages`` (one, or several separated by spaces) are there for a test that needs
    them (``present()`` says whether they are): installed with apt-get when missing and this runs as root (CI
    machines start bare, as the Slurm and chromium tests find them), else the test is skipped, saying what to
    install. A ``component`` other than main (non-free) is added to apt's sources first if it is not there."""
    import fcntl
    import shutil
    import subprocess

    if present():
        return
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        with open(APT_LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            if not present():  # another worker may have installed them while this one waited
                if component != "main" and _add_component(component):
                    _APT_UPDATED.clear()  # a new source: its package lists are fetched by the update below
                if not _APT_UPDATED:
                    subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, timeout=600)
                    _APT_UPDATED.append(True)
                subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages.split()],
                               env=env, capture_output=True, timeout=900)  # fmt: skip
    if not present():
        pytest.skip(f"needs Debian's {packages} ({why}): apt-get install {packages}")


def _add_component(component: str) -> bool:
    """Add Debian's ``component`` (e.g. non-free) of this release to apt's sources unless a source has it
    already: whether one was added."""
    import glob
    import re

    for f in glob.glob("/etc/apt/sources.list.d/*") + ["/etc/apt/sources.list"]:
        try:
            text = open(f).read()
        except OSError:
            continue
        if re.search(rf"^(Components:|deb ).*(?<![\w-]){re.escape(component)}(?![\w-])", text, re.M):
            return False
    release = dict(line.strip().split("=", 1) for line in open("/etc/os-release") if "=" in line)
    codename = release.get("VERSION_CODENAME", "").strip('"')
    if not codename:
        return False
    with open(f"/etc/apt/sources.list.d/rlbench-{component}.sources", "w") as out:
        out.write(
            f"Types: deb\nURIs: http://deb.debian.org/debian\nSuites: {codename}\nComponents: {component}\n"
            "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        )
    return True


@pytest.fixture(scope="session")
def session_tmp(tmp_path_factory) -> Path:
    """A folder every xdist worker of this test session shares (the parent of the workers' own base folders);
    without xdist, the session's base folder."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture
def jax_cache(session_tmp, monkeypatch) -> Path:
    """One JAX compilation cache for the session's every worker (``$RLBENCH_JAX_CACHE``, which the Ray actors
    and Slurm tasks get too): a program the JAX tests on one worker compiled is not compiled again by the Ray
    or the Slurm tests on theirs. Concurrent writers are what users' runs sharing ~/.cache/rlbench/jax are."""
    folder = session_tmp / "jax-cache"
    monkeypatch.setenv("RLBENCH_JAX_CACHE", str(folder))
    return folder


@pytest.fixture(scope="session")
def mps_control() -> str:
    """NVIDIA's CUDA MPS control program (Debian's nvidia-cuda-mps, in non-free): its daemon starts, answers
    and quits without a GPU (a CUDA client is what needs one)."""
    import shutil

    debian_package("nvidia-cuda-mps", lambda: shutil.which("nvidia-cuda-mps-control") is not None,
                   "the CUDA MPS daemon rlbench run --mps starts and stops", component="non-free")  # fmt: skip
    return shutil.which("nvidia-cuda-mps-control")


@pytest.fixture(scope="session")
def stockfish():
    """Debian's Stockfish, which the Chess and Endgames envs play against."""
    from rlbench_cli.envs.text.chess_env import find_stockfish

    def present() -> bool:
        try:
            find_stockfish()
        except Exception:  # noqa: BLE001 - rlbench's own "not found" error
            return False
        return True

    debian_package("stockfish", present, "the Chess and Endgames envs play against it")


@pytest.fixture(scope="session")
def wamerican():
    """Debian's word list, Wordle's default five-letter words."""
    debian_package("wamerican", lambda: os.path.exists("/usr/share/dict/american-english"),
                   "Wordle's default word list, /usr/share/dict/american-english")  # fmt: skip


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's Chromium (headless, for screenshots of the HTML report) and a font for it: its path."""
    import shutil

    debian_package("chromium fonts-dejavu-core", lambda: shutil.which("chromium") is not None,
                   "to render the report")  # fmt: skip
    return shutil.which("chromium")


CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture(scope="session")
def chromedriver(chromium: str) -> str:
    """Debian's chromium-driver, which Selenium drives Chromium through (the UI's page tests): its path."""
    debian_package("chromium-driver", lambda: os.path.exists(CHROMEDRIVER),
                   "Selenium's driver of headless Chromium")  # fmt: skip
    return CHROMEDRIVER


@pytest.fixture
def suite_dict():
    return {
        "name": "t",
        "seeds": 2,
        "budget": {"steps": 1000, "eval_every": 500, "eval_episodes": 2},
        "envs": ["CartPole-v1"],
        "algorithms": ["random"],
    }


def _make_results_db(db, runs, suite="s", status="finished", config=None, metric="eval/return"):
    """A results database written the way `rlbench run` writes one: suite row, runs, shards, end status.

    ``runs``: ``(algo, env, seed, [(step, value), ...])`` tuples (``metric``'s points; or ``{metric: [(step,
    value), ...]}`` for several metrics), or with a fifth item, the run's config (a dict; run ids then also
    hash it); ``status``: one for all runs or one per run. Returns the ``Store``.
    """
    import hashlib
    import json
    import time
    from pathlib import Path

    from rlbench_cli.sink import ShardSink, list_shards
    from rlbench_cli.store import Store

    store = Store(db, wait=5)
    with store.writer() as con:
        store.register_suite(con, suite, "", config or {}, f"{suite}.yaml")
        for i, (algo, env, seed, points, *rest) in enumerate(runs):
            run_config = rest[0] if rest else {}
            run_id = f"{suite}-{algo}-{env}-{seed}"
            if run_config:
                run_id += "-" + hashlib.sha1(json.dumps(run_config, sort_keys=True).encode()).hexdigest()[:8]
            row = {"run_id": run_id, "suite": suite, "algo": algo, "algo_name": algo, "env": env, "seed": seed,
                   "config": run_config}  # fmt: skip
            store.add_runs(con, [row])
            store.start_attempt(con, run_id, 1, {"started_at": time.time()})
            folder = Path(db).parent / "shards" / suite / run_id
            sink = ShardSink(folder, background=False)
            for name, pts in points.items() if isinstance(points, dict) else [(metric, points)]:
                for step, value in pts:
                    sink.log_scalar(step, name, value)
            sink.close()
            store.ingest_shards(con, run_id, 1, list_shards(folder))
            run_status = status if isinstance(status, str) else status[i]
            store.end_attempt(con, run_id, run_status, {"exit_code": 0 if run_status == "finished" else 1,
                                                        "duration_s": 1.0})  # fmt: skip
    return store


@pytest.fixture(scope="session")
def make_results_db():
    """``make_results_db(db, runs, suite=..., status=..., config=...)``: see ``_make_results_db``."""
    return _make_results_db

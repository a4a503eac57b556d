"""The fast tier's table stays true: every test ``FAST_BUT`` (tests/conftest.py) leaves out of a module exists
there, so a renamed slow test cannot quietly join the fast tier."""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

TESTS = Path(__file__).resolve().parents[1]


@functools.cache
def _conftest():
    """tests/conftest.py as a module of its own, executed once for this module's tests."""
    spec = importlib.util.spec_from_file_location("_tiers_conftest", TESTS / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fast_but() -> dict[str, set[str]]:
    return _conftest().FAST_BUT


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test")
    }


def test_every_test_left_out_of_the_fast_tier_exists():
    stale = {}
    for module, left_out in _fast_but().items():
        path = TESTS / module
        missing = sorted(left_out - _test_names(path)) if path.exists() else ["<the module itself>"]
        if missing:
            stale[module] = missing
    assert not stale, f"FAST_BUT in tests/conftest.py names tests that are not there (renamed?): {stale}"


def test_a_stale_name_would_be_found(tmp_path):
    module = tmp_path / "test_m.py"
    module.write_text("def test_kept():\n    pass\n", encoding="utf-8")
    assert _test_names(module) == {"test_kept"}
    assert {"test_renamed"} - _test_names(module) == {"test_renamed"}


def test_every_test_module_has_a_basename_of_its_own():
    """pytest imports test modules by basename (rootdir conftest, no packages): a second test_x.py in another
    folder is a collection error that stops the whole suite."""
    seen: dict[str, list[str]] = {}
    for path in TESTS.rglob("test_*.py"):
        seen.setdefault(path.name, []).append(str(path.relative_to(TESTS)))
    assert {name: where for name, where in seen.items() if len(where) > 1} == {}


def test_the_fast_tier_runs_on_two_workers_and_a_worker_never_starts_its_own():
    workers = _conftest().fast_tier_workers
    assert workers("fast", ["-m", "fast", "-q"], in_worker=False, cores=2) == 2
    assert workers("fast and not slow", [], in_worker=False, cores=16) == 2
    assert workers("fast", [], in_worker=False, cores=1) == 0  # one core: one process
    assert workers("fast", ["-n", "0"], in_worker=False, cores=2) is None  # the command line's -n counts
    assert workers("fast", ["--numprocesses=4"], in_worker=False, cores=2) is None
    assert workers("not fast", [], in_worker=False, cores=2) is None  # addopts' -n 3 stays
    assert workers("fast or slow", [], in_worker=False, cores=2) is None
    assert workers("", [], in_worker=False, cores=2) is None
    # a worker sees the controller's -m fast: given workers, each would start its own (a fork bomb)
    assert workers("fast", ["-m", "fast"], in_worker=True, cores=2) is None


def test_tests_sharing_a_module_scoped_fixture_share_a_worker_group(tmp_path):
    """A module-scoped fixture spread over three workers was computed on each (the smoke suite's run three
    times): its tests get their module's group, so one worker computes it once."""
    from types import SimpleNamespace

    group = _conftest()._module_fixture_group

    def item(*scopes: str) -> SimpleNamespace:
        defs = {f"f{i}": [SimpleNamespace(scope=s)] for i, s in enumerate(scopes)}
        return SimpleNamespace(
            path=tmp_path / "test_mod.py", _fixtureinfo=SimpleNamespace(name2fixturedefs=defs)
        )

    assert group(item("function", "module")) == "test_mod"
    # a session fixture: per worker anyway (the engines' are grouped by engine)
    assert group(item("function", "session")) is None
    assert group(item()) is None
    # an override: the closest definition (the last) is the one a test gets
    overridden = item()
    overridden._fixtureinfo.name2fixturedefs["f"] = [
        SimpleNamespace(scope="module"),
        SimpleNamespace(scope="function"),
    ]
    assert group(overridden) is None

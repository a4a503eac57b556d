"""Property-based tests (hypothesis) of the suite loader and the grid.

(a) Whatever a suite file holds, ``load_suite`` returns a Suite or raises SuiteInvalid: one line that starts
with the file's path. Nothing else escapes (no KeyError, RecursionError, OverflowError, ...).
(b) For any valid suite, ``grid.expand`` gives seeds x algorithm variants x envs runs with unique, stable
run ids; every RunSpec round-trips through JSON; the score rule and resources do not change a run's id.
"""

from __future__ import annotations

import datetime
import itertools
import json
import math
import string

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlbench_cli.algos.registry import ALGORITHMS, jax_names, offline_names
from rlbench_cli.errors import SuiteInvalid
from rlbench_cli.suite.grid import RunSpec, expand
from rlbench_cli.suite.loader import load_suite, parse_suite
from rlbench_cli.suite.models import NAME_RE, Resources, ScoreSpec, Suite

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ENVS = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1", "MountainCarContinuous-v0"]
# online ones on gymnasium envs: the suites here have gymnasium envs only (a jax algorithm runs on gymnax tasks)
ALGOS = sorted(set(ALGORITHMS) - offline_names() - set(jax_names()))
SUITE_KEYS = ["name", "description", "seeds", "budget", "envs", "algorithms", "sweep", "score", "normalize",
              "resources", "steps", "eval_every", "eval_episodes", "timeout", "id", "kwargs", "label", "params",
              "entrypoint", "rule", "metric", "drop_first", "table", "references", "gpus_per_job"]  # fmt: skip


@pytest.fixture(scope="module")
def suite_file(tmp_path_factory):
    return tmp_path_factory.mktemp("prop") / "suite.yaml"


# -- (a) the loader on arbitrary input ----------------------------------------------------------------------
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(ENVS + ALGOS + ["final", "best", "mean_last:3", "d4rl", "../x", "a/b", "", " "]),
    st.dates(min_value=datetime.date(1990, 1, 1), max_value=datetime.date(2100, 1, 1)),
)
keys = st.one_of(st.sampled_from(SUITE_KEYS), st.text(max_size=8))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=12,
)
raw_suites = st.dictionaries(keys, values, max_size=8)
yaml_tokens = st.sampled_from(
    ["name:", "envs:", "algorithms:", "seeds:", "budget:", "sweep:", " ", "  ", "\t", "\n", "- ", "[", "]", "{",
     "}", ":", ",", "'", '"', "&a ", "*a", "*b", "<<: *a", "? ", "!!python/object/apply:os.system", "!!binary",
     "!!set", "!!str", "!!int", "!foo", "%YAML 1.1\n", "---\n", "...\n", "#", "CartPole-v1", "ppo", "random",
     "2024-01-01", ".nan", ".inf", "-1", "0", "1e400", "9" * 30, "yes", "~", "|\n", ">\n", "\x00", "\ufeff"]
)  # fmt: skip
yaml_texts = st.one_of(st.text(max_size=80), st.lists(yaml_tokens, max_size=30).map("".join))


def _valid_base() -> dict:
    return {"name": "base", "seeds": 2, "envs": ["CartPole-v1"], "algorithms": ["random", "ppo"],
            "budget": {"steps": 1000}, "score": {"rule": "final"}}  # fmt: skip


@st.composite
def mutated_suites(draw) -> dict:
    """A valid suite with one value somewhere replaced by an arbitrary one (or a key added or removed)."""
    data = _valid_base()
    path = draw(st.sampled_from([("name",), ("seeds",), ("envs",), ("envs", 0), ("algorithms",), ("algorithms", 1),
                                 ("budget",), ("budget", "steps"), ("score",), ("score", "rule"), ("sweep",),
                                 ("normalize",), ("resources",), ("extra",)]))  # fmt: skip
    target = data
    for part in path[:-1]:
        target = target[part]
    if draw(st.booleans()) and isinstance(target, dict) and path[-1] in target:
        del target[path[-1]]
    else:
        target[path[-1]] = draw(values)
    return data


def _check_outcome(load, where: str) -> None:
    try:
        suite = load()
    except SuiteInvalid as e:
        text = str(e)
        assert len(text.splitlines()) == 1, text
        assert text.startswith(f"{where}: "), text
        return
    specs = expand(suite)  # a suite that loads must expand, and its runs serialise
    assert specs
    for s in specs:
        json.dumps(s.to_dict())


@SETTINGS
@given(text=yaml_texts)
def test_loader_on_arbitrary_text_raises_only_suite_invalid(text, suite_file):
    suite_file.write_text(text, encoding="utf-8", errors="surrogatepass")
    _check_outcome(lambda: load_suite(suite_file), str(suite_file))


@SETTINGS
@given(data=st.one_of(raw_suites, mutated_suites()))
def test_loader_on_arbitrary_mappings_raises_only_suite_invalid(data, suite_file):
    suite_file.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    _check_outcome(lambda: load_suite(suite_file), str(suite_file))
    _check_outcome(lambda: parse_suite(data, "given.yaml"), "given.yaml")


@SETTINGS
@given(value=st.one_of(values, st.binary(max_size=8), st.sets(st.integers(), max_size=3)))
def test_parse_suite_on_any_python_value_raises_only_suite_invalid(value):
    _check_outcome(lambda: parse_suite(value, "obj.yaml"), "obj.yaml")
    _check_outcome(lambda: parse_suite({**_valid_base(), "description": value}, "obj.yaml"), "obj.yaml")


# -- (b) the grid of valid suites ---------------------------------------------------------------------------
def _tag(v: object) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)  # how grid labels a sweep value


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.text(string.ascii_letters + string.digits + "_-", max_size=6),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(string.ascii_lowercase, min_size=1,
                                                                                  max_size=5), inner, max_size=3)),
    max_leaves=6,
)  # fmt: skip
param_names = st.sampled_from(["learning_rate", "gamma", "num_envs", "clip_coef", "batch_size"])
sweep_values = st.lists(
    st.one_of(st.integers(0, 1000), st.floats(1e-6, 10.0), st.sampled_from(["adam", "sgd", "rms"])),
    min_size=1, max_size=3, unique_by=_tag,
)  # fmt: skip


@st.composite
def valid_suites(draw) -> dict:
    names = draw(st.lists(st.sampled_from(ALGOS), min_size=1, max_size=3))
    algorithms, labels = [], []
    for i, name in enumerate(names):
        label = name if name not in labels else f"{name}-{i}"
        labels.append(label)
        params = draw(st.dictionaries(param_names, json_values, max_size=2))
        if label == name and not params and draw(st.booleans()):
            algorithms.append(name)
        else:
            entry = {"name": name, "params": params}
            if label != name or draw(st.booleans()):
                entry["label"] = label
            algorithms.append(entry)
    sweep = {}
    for label in draw(st.lists(st.sampled_from(labels), max_size=2, unique=True)):
        for param in draw(st.lists(param_names, min_size=1, max_size=2, unique=True)):
            sweep[f"{label}.{param}"] = draw(sweep_values)
    steps = draw(st.integers(1, 10**6))
    budget = {"steps": steps, "eval_episodes": draw(st.integers(1, 50))}
    if draw(st.booleans()):
        budget["eval_every"] = draw(st.integers(1, steps))
    seeds = draw(st.one_of(st.integers(1, 4), st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=4,
                                                        unique=True)))  # fmt: skip
    envs = draw(st.lists(st.sampled_from(ENVS), min_size=1, max_size=3, unique=True))
    return {
        "name": draw(st.from_regex(NAME_RE, fullmatch=True)),
        "seeds": seeds,
        "budget": budget,
        "envs": [e if draw(st.booleans()) else {"id": e} for e in envs],
        "algorithms": algorithms,
        "sweep": sweep,
        "score": {"rule": draw(st.sampled_from(["final", "best", "auc", "mean_last:5"])),
                  "drop_first": draw(st.integers(0, 3))},
        "resources": {"gpus_per_job": draw(st.sampled_from([0, 0.25, 0.5, 1]))},
    }  # fmt: skip


def _variants(data: dict) -> int:
    total = 0
    for a in data["algorithms"]:
        label = a if isinstance(a, str) else a.get("label", a["name"])
        swept = [len(v) for k, v in data["sweep"].items() if k.partition(".")[0] == label]
        total += math.prod(swept)
    return total


@SETTINGS
@given(data=valid_suites())
def test_grid_size_unique_ids_and_determinism(data):
    suite = parse_suite(data, "gen.yaml")
    specs = expand(suite)
    n_seeds = data["seeds"] if isinstance(data["seeds"], int) else len(data["seeds"])
    assert len(specs) == n_seeds * _variants(data) * len(data["envs"])
    ids = [s.run_id for s in specs]
    assert len(set(ids)) == len(ids)
    assert len({(s.algo, s.env, s.seed) for s in specs}) == len(specs)  # one run per cell of the statistics
    assert [s.to_dict() for s in expand(suite)] == [s.to_dict() for s in specs]
    assert [s.run_id for s in expand(parse_suite(json.loads(json.dumps(data)), "again.yaml"))] == ids
    assert {s.seed for s in specs} == set(suite.seed_list)
    assert all(s.suite == data["name"] for s in specs)


@SETTINGS
@given(data=valid_suites())
def test_every_run_spec_round_trips_through_json(data):
    for spec in expand(parse_suite(data, "gen.yaml")):
        back = RunSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
        assert back == spec
        assert back.run_id == spec.run_id


@SETTINGS
@given(
    data=valid_suites(),
    rule=st.sampled_from(["final", "best", "auc", "mean_last:1", "mean_last:10"]),
    drop_first=st.integers(0, 5),
    gpus=st.sampled_from([0.0, 0.125, 1.0, 2.0]),
    threads=st.none() | st.integers(1, 64),
)
def test_run_id_ignores_score_rule_and_resources(data, rule, drop_first, gpus, threads):
    suite = parse_suite(data, "gen.yaml")
    other = suite.model_copy(update={
        "score": ScoreSpec(metric="eval/success", rule=rule, drop_first=drop_first),
        "resources": Resources(gpus_per_job=gpus, threads_per_job=threads),
    })  # fmt: skip
    before, after = expand(suite), expand(other)
    assert [s.run_id for s in after] == [s.run_id for s in before]
    assert all(s.score["rule"] == rule and s.resources["gpus_per_job"] == gpus for s in after)


@SETTINGS
@given(data=valid_suites(), seed=st.integers(0, 2**31 - 1), steps=st.integers(1, 10**7))
def test_run_id_changes_with_what_is_trained(data, seed, steps):
    spec = expand(parse_suite(data, "gen.yaml"))[0]
    fields = spec.to_dict()
    fields.pop("run_id")
    if seed != spec.seed:
        assert RunSpec(**{**fields, "seed": seed}).run_id != spec.run_id
    if steps != spec.budget["steps"]:
        assert RunSpec(**{**fields, "budget": {**spec.budget, "steps": steps}}).run_id != spec.run_id


def test_sweep_values_that_would_share_a_label_are_rejected():
    base = {"name": "s", "envs": ["CartPole-v1"], "algorithms": ["ppo"]}
    for dup in ([1, 1], [1, 1.0], [0.1, 0.1000001], ["adam", "adam"]):
        with pytest.raises(SuiteInvalid, match="same label"):
            parse_suite({**base, "sweep": {"ppo.lr": dup}}, "s.yaml")
    specs = expand(parse_suite({**base, "sweep": {"ppo.lr": [1, 2, 0.5]}}, "s.yaml"))
    assert sorted(s.algo for s in specs) == sorted(
        f"ppo[lr={v}]" for v in ("1", "2", "0.5") for _ in range(3)
    )


def test_suite_model_is_what_parse_suite_returns():
    assert isinstance(parse_suite(_valid_base(), "b.yaml"), Suite)
    assert list(itertools.islice(expand(parse_suite(_valid_base(), "b.yaml")), 1))

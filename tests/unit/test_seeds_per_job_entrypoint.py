"""``@rlbench_cli.seeds_per_job``: which entrypoints pack, and what one gets when it runs alone (run_one).

The packed path (several seeds in one job, one failing alone) is proven end to end through `rlbench run` in
tests/e2e/test_packed_entrypoint.py; these are the pure and in-process parts.
"""

import textwrap

import pytest
import user_code

import rlbench_cli
from rlbench_cli.algos.entrypoint import takes_seeds
from rlbench_cli.packed import can_pack, packable, plan_packs, unpackable
from rlbench_cli.runner import run_one
from rlbench_cli.suite.grid import expand
from rlbench_cli.suite.loader import parse_suite

pytestmark = pytest.mark.fast

USER_CODE = textwrap.dedent(
    """
    import rlbench_cli
    import numpy as np

    seen = []

    def one(ctx):
        ctx.finish(ctx.steps, lambda obs: np.zeros(len(obs), dtype=int))

    @rlbench_cli.seeds_per_job
    def many(ctxs):
        seen.append([c.seed for c in ctxs])
        for c in ctxs:
            c.finish(c.steps, lambda obs: np.zeros(len(obs), dtype=int))

    @rlbench_cli.seeds_per_job
    def fails(ctxs):
        for c in ctxs:
            c.maybe_evaluate(0, lambda obs: np.zeros(len(obs), dtype=int))
            c.fail(ValueError("loss is nan"))
            assert c.should_stop()
    """
)


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    yield from user_code.user_module(tmp_path, monkeypatch, "spj_user", USER_CODE)


def _specs(n=2):
    suite = parse_suite({
        "name": "spj", "seeds": 3, "envs": ["CartPole-v1"],
        "budget": {"steps": 10, "eval_every": 10, "eval_episodes": 1},
        "algorithms": [{"name": "one", "entrypoint": "spj_user:one"}, {"name": "many", "entrypoint": "spj_user:many"},
                       {"name": "gone", "entrypoint": "no_such_module:f"}, "ppo"],
        "resources": {"seeds_per_job": n},
    })  # fmt: skip
    return expand(suite)


def test_the_decorator_marks_the_function_and_only_marked_entrypoints_pack(user_module):
    import spj_user

    assert takes_seeds(spj_user.many) and not takes_seeds(spj_user.one)
    assert rlbench_cli.seeds_per_job(spj_user.one) is spj_user.one and takes_seeds(spj_user.one)
    spj_user.one.rlbench_packed = False
    specs = _specs()
    assert {s.algo: can_pack(s) for s in specs} == {"one": False, "many": True, "gone": False, "ppo": True}
    assert packable(specs) == ["many", "ppo"] and unpackable(specs) == ["gone", "one"]
    jobs = plan_packs(specs, 2)
    assert sorted((job[0].algo, [s.seed for s in job]) for job in jobs if len(job) > 1) == [
        ("many", [0, 1]), ("ppo", [0, 1])
    ]  # fmt: skip


def test_run_one_hands_a_marked_function_a_list_of_one_and_records_its_failure(user_module, tmp_path):
    import spj_user

    many = next(s for s in _specs(1) if s.algo == "many" and s.seed == 2)
    result = run_one(many, tmp_path / "many")
    assert result["status"] == "finished" and spj_user.seen == [[2]]
    fails = many.__class__(**{**many.__dict__, "entrypoint": "spj_user:fails"})
    result = run_one(fails, tmp_path / "fails")
    assert result["status"] == "failed" and result["error"] == "ValueError: loss is nan"

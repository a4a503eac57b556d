"""Reference runs of unpacked ``ppo`` on CPU and one hash of each run's metric rows.

CPU runs of ``ppo`` are promised bitwise stable across refactors: each run below goes through the runner
(``runner.run_one``, as a worker runs it, one torch thread), its rows (step, name, value; no ``sys/*``
timings) are sorted and hashed, and ``HASHES`` records what the code gave when they were taken.
``test_ppo_reference.py`` asserts them; ``python tests/unit/ppo_reference.py`` prints them.

Bitwise holds on one kind of machine: the same torch and numpy wheels round differently in the last bits on
CPUs whose kernels differ (MKL, numpy and libm pick their code by the CPU), and a run's rows follow. So the
hashes are recorded per kind (``OTHER_KINDS`` beside ``HASHES``, the kind they were first taken on), and a run
must give one kind's (``expected``). A new kind is recorded from a commit that gave ``HASHES`` on the first
kind, never from changed code: ``python tests/unit/ppo_reference.py`` on it prints its entry.
"""

from __future__ import annotations

import hashlib
import struct
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

COST = {"name": "SafetyCost", "kwargs": {"index": 2, "low": -1.0, "high": 1.0, "limit": 5}}

# name -> (env id, params, steps, eval_every, checkpoint_every, wrappers)
RUNS: dict[str, tuple[str, dict[str, Any], int, int, int | None, list[dict[str, Any]]]] = {
    "cartpole": ("CartPole-v1", {}, 3072, 1024, None, []),
    "pendulum": ("Pendulum-v1", {"num_steps": 512, "num_minibatches": 8}, 2048, 1024, None, []),
    "pendulum-cost": (
        "Pendulum-v1",
        {"num_envs": 2, "num_steps": 256, "num_minibatches": 8},
        2048,
        1024,
        None,
        [COST],
    ),  # fmt: skip
    "cartpole-resumed": ("CartPole-v1", {"num_envs": 2}, 2048, 512, 512, []),
    "cartpole-kl": ("CartPole-v1", {"target_kl": 0.005, "update_epochs": 6}, 2048, 1024, None, []),
    "pendulum-cost-resumed": (
        "Pendulum-v1",
        {"num_envs": 2, "num_steps": 128, "num_minibatches": 4},
        1536,
        512,
        512,
        [COST],
    ),  # fmt: skip
}

# packed ppo (``resources.seeds_per_job``): name -> (env id, params, steps, eval_every, checkpoint_every);
# seeds 7 and 8 in one pack, a hash per seed (its rows as above)
PACKED_RUNS: dict[str, tuple[str, dict[str, Any], int, int, int | None]] = {
    "packed-cartpole": ("CartPole-v1", {}, 2048, 1024, None),
    "packed-pendulum": (
        "Pendulum-v1",
        {"num_envs": 2, "num_steps": 128, "num_minibatches": 4},
        1024,
        512,
        None,
    ),  # fmt: skip
    "packed-cartpole-resumed": ("CartPole-v1", {"num_envs": 2}, 1536, 512, 512),
}
PACKED_SEEDS = (7, 8)

# run folders (the first attempt's rows and checkpoint) written by the code before ppo became one package,
# resumed by the code of the day: checkpoints of runs that were stopped before an upgrade still load
FIXTURES = Path(__file__).parent / "data" / "ppo_checkpoints"

# taken from the code before ppo became one package (ppo.py and ppo_packed.py), torch 1 thread, this venv
HASHES: dict[str, str] = {
    "cartpole": "c2bbcace3b8df3cf",
    "pendulum": "5e3cbaccd6188af0",
    "pendulum-cost": "31742bdf0d12daff",
    "cartpole-resumed": "9fd07716340acbd1",
    "cartpole-kl": "d4a456c381f0fb66",
    "pendulum-cost-resumed": "8dba634c01ae9932",
    "packed-cartpole": "6c3fd3976aadfef6/69be78df9635f8ca",
    "packed-pendulum": "2600e743e9298869/10c602056c74425c",
    "packed-cartpole-resumed": "04f75417ea1c70f2/3dbbc74b2b02d0bd",
}

# The same runs on other kinds of machine, taken from a commit that gave HASHES on the first kind (5831c0f, whose
# CI passed there); "NAME-fixture": NAME resumed from its fixture, whose first attempt the first kind wrote (on
# the first kind that is NAME's own hash)
OTHER_KINDS: dict[str, dict[str, str]] = {
    "Xeon with AVX512-FP16, 2 cores (2026-11-30)": {
        "cartpole": "ed84c3f0e1675f95",
        "pendulum": "4d12b8c3e513297c",
        "pendulum-cost": "32ebd1e3bbf6e322",
        "cartpole-resumed": "3c7d926dc01a016f",
        "cartpole-kl": "f4ed52756ae570d9",
        "pendulum-cost-resumed": "6c08b817e2dbb142",
        "packed-cartpole": "73ea9482717512b9/c62d782a69140447",
        "packed-pendulum": "376e4e3d555c2812/a364683f9fa06df7",
        "packed-cartpole-resumed": "963995fd7212701e/3b0c14424e7f0d8a",
        "pendulum-cost-resumed-fixture": "e636f6cfc5125dc3",
        "packed-cartpole-resumed-fixture": "f32cf86d3b7395c9/9f6a97cffce909bf",
    },
    # the first kind's hashes (its fixtures' too) but for one-env Pendulum (5831c0f gives the same here: the
    # CPU, not the code)
    "AMD EPYC Zen 5 (family 26) with AVX512, 2 cores (2026-12-02)": {
        **HASHES,
        "pendulum": "3568974ec04c1a0e",
    },
}


def expected(name: str) -> set[str]:
    """The hashes of reference run ``name`` on every kind of machine recorded."""
    first = HASHES.get(name) or HASHES[name.removesuffix("-fixture")]
    return {first, *(kind[name] for kind in OTHER_KINDS.values() if name in kind)}


def spec_of(name: str, seed: int = 7) -> Any:
    from rlbench_cli.algos.base import RunSpec  # the run spec a RunContext holds, wherever it is defined

    env_id, params, steps, eval_every, every, wrappers = (
        RUNS[name] if name in RUNS else (*PACKED_RUNS[name], [])
    )
    budget = {"steps": steps, "eval_every": eval_every, "eval_episodes": 2, "timeout": None,
              "checkpoint_every": every}  # fmt: skip
    return RunSpec(suite="ref", algo="ppo", algo_name="ppo", params=params, env_id=env_id, env_kwargs={},
                   seed=seed, budget=budget, env_wrappers=wrappers)  # fmt: skip


def rows_of(folder: Path) -> list[tuple[int, str, float]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rlbench_cli.sink import list_shards

    table = pa.concat_tables([pq.read_table(p) for p in list_shards(folder / "metrics")])
    rows = zip(table["step"].to_pylist(), table["name"].to_pylist(), table["value"].to_pylist())
    return sorted((int(s), str(n), float(v)) for s, n, v in rows if not str(n).startswith("sys/"))


def digest(rows: list[tuple[int, str, float]]) -> str:
    h = hashlib.sha256()
    for step, name, value in rows:
        h.update(struct.pack("<q", step) + name.encode() + b"\0" + struct.pack("<d", value))
    return h.hexdigest()[:16]


class _StopAfterCheckpoint(threading.Event):
    """Stops the first attempt a few polls after its first checkpoint (as tests/unit/test_checkpoint.py)."""

    def __init__(self, folder: Path, after: int = 1):
        super().__init__()
        self.folder, self.after, self.polls = folder, after, 0

    def is_set(self) -> bool:
        from rlbench_cli import checkpoint

        if not super().is_set() and checkpoint.latest_step(self.folder) is not None:
            self.polls += 1
            if self.polls > self.after:
                self.set()
        return super().is_set()


def run(name: str, root: Path, first_only: bool = False, video_every: int | None = None) -> str:
    """The hash of reference run ``name``, trained in folders under ``root``; a checkpointed run is stopped
    after its first checkpoint and resumed by a second attempt, whose rows are hashed. ``video_every``: the
    run also records episodes (``budget.video_every``), which must change none of its rows."""
    from rlbench_cli.algos.base import RunContext
    from rlbench_cli.datagen.behaviour import one_torch_thread
    from rlbench_cli.runner import attempt_dir, run_one

    with one_torch_thread():  # the rows depend on it
        spec = spec_of(name)
        if video_every is not None:
            import dataclasses

            spec = dataclasses.replace(spec, budget={**spec.budget, "video_every": video_every})
        base = root / name
        if RUNS[name][4] is None:
            result = run_one(spec, attempt_dir(base, spec, attempt=1))
            folder = attempt_dir(base, spec, attempt=1)
        else:
            a1 = attempt_dir(base, spec, attempt=1)
            saved = RunContext.checkpoint_on_stop
            RunContext.checkpoint_on_stop = False
            try:
                first = run_one(spec, a1, stop_event=_StopAfterCheckpoint(a1.parent / "checkpoint"))
            finally:
                RunContext.checkpoint_on_stop = saved
            assert first["status"] == "interrupted", first
            if first_only:
                return ""
            folder = attempt_dir(base, spec, attempt=2)
            result = run_one(spec, folder)
            assert result.get("resumed_from_step"), result
        assert result["status"] == "finished", result
        return digest(rows_of(folder))


def run_packed(name: str, root: Path, fixture: Path | None = None, first_only: bool = False) -> str:
    """The hashes of packed reference run ``name``'s seeds, joined by '/'; a checkpointed run is stopped
    after its first checkpoint and resumed (or, given ``fixture``, resumed from a copy of that folder)."""
    import shutil

    from rlbench_cli.algos.base import RunContext
    from rlbench_cli.datagen.behaviour import one_torch_thread
    from rlbench_cli.packed import run_packed as run_pack
    from rlbench_cli.runner import attempt_dir

    with one_torch_thread():  # the rows depend on it
        specs = [spec_of(name, seed) for seed in PACKED_SEEDS]
        base = root / name
        if fixture is not None:
            shutil.copytree(fixture, base)
        attempt = 1
        if PACKED_RUNS[name][4] is not None:
            if fixture is None:
                first = [attempt_dir(base, s, attempt=1) for s in specs]
                saved = RunContext.checkpoint_on_stop
                RunContext.checkpoint_on_stop = False
                try:
                    stop = _StopAfterCheckpoint(first[-1].parent / "checkpoint")
                    results = run_pack(specs, first, stop_event=stop)
                finally:
                    RunContext.checkpoint_on_stop = saved
                assert all(r["status"] == "interrupted" for r in results), results
                if first_only:
                    return ""
            attempt = 2
        folders = [attempt_dir(base, s, attempt=attempt) for s in specs]
        results = run_pack(specs, folders)
        assert all(r["status"] == "finished" for r in results), results
        if attempt == 2:
            assert all(r.get("resumed_from_step") for r in results), results
        return "/".join(digest(rows_of(f)) for f in folders)


def run_fixture(name: str, root: Path) -> str:
    """Reference run ``name`` resumed from its fixture (a first attempt written by older code)."""
    if name in PACKED_RUNS:
        return run_packed(name, root, FIXTURES / name)
    import shutil

    from rlbench_cli.datagen.behaviour import one_torch_thread
    from rlbench_cli.runner import attempt_dir, run_one

    with one_torch_thread():  # the rows depend on it
        spec = spec_of(name)
        shutil.copytree(FIXTURES / name, root / name)
        folder = attempt_dir(root / name, spec, attempt=2)
        result = run_one(spec, folder)
        assert result["status"] == "finished" and result.get("resumed_from_step"), result
        return digest(rows_of(folder))


def write_fixtures() -> None:
    """Write the fixtures: the first attempt of each checkpointed reference run (stopped after its first
    checkpoint), as the code of the day leaves it."""
    import shutil

    with tempfile.TemporaryDirectory() as tmp:
        for name in ("pendulum-cost-resumed", "packed-cartpole-resumed"):
            root = Path(tmp) / name
            if name in PACKED_RUNS:
                run_packed(name, root, first_only=True)
                keep = [attempt_dir_of(name, seed, root) for seed in PACKED_SEEDS]
            else:
                run(name, root, first_only=True)
                keep = [attempt_dir_of(name, 7, root)]
            for folder in keep:
                for extra in ("spec.json", "result.json"):
                    (folder / extra).unlink(missing_ok=True)
            shutil.rmtree(FIXTURES / name, ignore_errors=True)
            shutil.copytree(root / name, FIXTURES / name)


def attempt_dir_of(name: str, seed: int, root: Path) -> Path:
    from rlbench_cli.runner import attempt_dir

    return attempt_dir(root / name, spec_of(name, seed), attempt=1)


def main() -> None:
    args = sys.argv[1:]
    if args == ["--write-fixtures"]:
        write_fixtures()
        return
    with tempfile.TemporaryDirectory() as tmp:
        for name in args or [*RUNS, *PACKED_RUNS]:
            value = run_packed(name, Path(tmp)) if name in PACKED_RUNS else run(name, Path(tmp))
            print(f'    "{name}": "{value}",', flush=True)
        if not args:
            for name in ("pendulum-cost-resumed", "packed-cartpole-resumed"):
                print(f'    "{name}-fixture": "{run_fixture(name, Path(tmp) / "fixture")}",', flush=True)


if __name__ == "__main__":
    main()

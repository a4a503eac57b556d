"""Parity of ppo_jax and torch ppo on one task: the same algorithm at the same params, so their final-return
distributions over N seeds are statistically compatible (the check tests/unit/test_ppo_jax.py makes on
CartPole at 6,144 steps, here at any size and on Acrobot by default).

ppo_jax trains seeds 0..N-1 of gymnax/<ENV> in one pack (``loop.train``); torch ppo seeds 100..100+N-1 of
gymnasium's <ENV> in one pack (``algos.ppo.train_packed``); each seed's final eval/return (its last
evaluation's mean over --episodes seeded episodes) and its step-0 one. Printed: both sets of finals, their IQM
with 95% stratified-bootstrap intervals (2,000 reps, seed 0), the two-sided permutation test of equal means
(p > 0.05: compatible), whether the IQM intervals overlap, the power check (ppo_jax's finals told apart from its
untrained step-0 returns, p < 0.05), and each side's wall time.

    python benchmarks/jax_parity.py                                   # Acrobot-v1, 10 seeds, 50k steps
    python benchmarks/jax_parity.py --env CartPole-v1 --steps 6144 --params '{"num_steps": 64, "learning_rate": 1e-3}'
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _evals(folder: Path) -> dict[int, float]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pa.concat_tables([pq.read_table(p) for p in sorted(folder.glob("*.parquet"))])
    return {s: v for n, s, v in zip(t["name"].to_pylist(), t["step"].to_pylist(), t["value"].to_pylist())
            if n == "eval/return"}  # fmt: skip


def train(env_id: str, algo: str, seeds: list[int], steps: int, episodes: int, params: dict[str, Any],
          tmp: Path) -> tuple[np.ndarray, np.ndarray, float]:  # fmt: skip
    """(final eval/return per seed, step-0 eval/return per seed, wall seconds) of one pack."""
    from rlbench_cli.algos.base import RunContext
    from rlbench_cli.sink import ShardSink
    from rlbench_cli.suite.grid import RunSpec

    ctxs = []
    for s in seeds:
        spec = RunSpec(suite="parity", algo=algo, algo_name=algo, params=dict(params), env_id=env_id, env_kwargs={},
                       seed=s, budget={"steps": steps, "eval_every": steps, "eval_episodes": episodes,
                                       "timeout": None})  # fmt: skip
        ctxs.append(RunContext(spec=spec, sink=ShardSink(tmp / f"{algo}-{s}", background=False)))
    t0 = time.perf_counter()
    if algo == "ppo_jax":
        from rlbench_cli.algos.gymnax import PPOJax

        outcome = PPOJax.train_packed(ctxs)
    else:
        import torch

        from rlbench_cli.algos.ppo import train_packed

        torch.set_num_threads(1)  # as the packed-ppo tests run it

        outcome = train_packed(ctxs)
    wall = time.perf_counter() - t0
    for c in ctxs:
        c.sink.close()
    assert all(v is None for v in outcome.values()), outcome
    evals = [_evals(tmp / f"{algo}-{s}") for s in seeds]
    return np.array([e[max(e)] for e in evals]), np.array([e[0] for e in evals]), wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--env", default="Acrobot-v1", help="a classic-control task gymnax and gymnasium both have"
    )
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--steps", type=int, default=50_000)
    ap.add_argument("--episodes", type=int, default=5, help="evaluation episodes per seed")
    ap.add_argument("--params", default='{"learning_rate": 1e-3}', help="both algorithms' params (JSON)")
    args = ap.parse_args()
    params = json.loads(args.params)

    from rlbench_cli.bootstrap import interval_estimates

    sys.path.insert(0, str(ROOT / "tests" / "unit"))
    from test_ppo_packed import permutation_p  # the packed-ppo test's own check (imports torch, as ppo does)

    with tempfile.TemporaryDirectory(prefix="jax-parity-") as d:
        tmp = Path(d)
        n = args.seeds
        x, x0, wall_jax = train(f"gymnax/{args.env}", "ppo_jax", list(range(n)), args.steps, args.episodes,
                                params, tmp)  # fmt: skip
        y, _, wall_torch = train(args.env, "ppo", [100 + s for s in range(n)], args.steps, args.episodes,
                                 params, tmp)  # fmt: skip
    ci = interval_estimates({"x": x[:, None], "y": y[:, None]}, ["iqm"], reps=2000, seed=0)
    overlap = ci["x"].lower[0] <= ci["y"].upper[0] and ci["y"].lower[0] <= ci["x"].upper[0]
    p, power = permutation_p(x, y), permutation_p(x, x0)
    print(f"{args.env}, {n} seeds x {args.steps:,} steps, params {params}, {args.episodes} eval episodes")
    print(f"  ppo_jax (gymnax, one pack): finals {np.round(x, 1).tolist()}; {wall_jax:.1f} s")
    print(f"  ppo (gymnasium, one pack):  finals {np.round(y, 1).tolist()}; {wall_torch:.1f} s")
    for name, key in (("ppo_jax", "x"), ("ppo", "y")):
        print(f"  IQM {name}: {ci[key].point[0]:.1f} [{ci[key].lower[0]:.1f}, {ci[key].upper[0]:.1f}]")
    print(f"  permutation p (equal means) {p:.3f} ({'compatible' if p > 0.05 else 'NOT compatible'}); IQM "
          f"intervals {'overlap' if overlap else 'do NOT overlap'}; power: ppo_jax's finals vs its step-0 "
          f"returns p {power:.4f} ({'trained' if power < 0.05 else 'NOT told apart'})")  # fmt: skip


if __name__ == "__main__":
    main()

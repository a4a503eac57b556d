"""How stable ``ilql`` (or another text algorithm) is on LMRL-Gym's Maze FO, separated from evaluation noise.

Trains the lmrl-small suite's ilql Maze FO entry (its params, over which ``--params`` goes) on each seed, and at
every evaluation point plays the greedy policy from EVERY start cell (the maze is deterministic and so is the
greedy policy, so the mean over the 25 start cells is the policy's exact expected return under the env's uniform
start), for several policy extractions (``--betas``: the weight of Q in the logits; 0 is behaviour cloning,
1000 is Q alone, as LMRL-Gym's Maze ILQL reranks the four moves by Q - V). It prints, per seed and evaluation
point, the lmrl-normalised score of the run's own 10 evaluation episodes (``eval10``), the exact score of each
extraction, what the suite entry's 50 evaluation episodes would score (``eval50``: their start cells' exact
returns), and the cells where the policy never reaches the goal. Datasets come from ``$RLBENCH_DATASETS``
(built there when missing): a Maze FO dataset built before time-limit ends were marked (``"truncated"``)
trains ilql as before that fix; build a new one in an empty folder.

    python benchmarks/ilql_maze_stability.py --seeds 0 1 2 --steps 4000
    python benchmarks/ilql_maze_stability.py --seeds 0 --params '{"polyak": 0.05}' --jobs 1 --out /tmp/a.json

With ``--jobs N`` the seeds train in N processes of one thread each.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

ENV, DATASET = "rlbench/MazeFO-v0", "MazeFO-v0-mixed"
# suites/lmrl-small.yaml's ilql entry on Maze FO
ENTRY = {"n_embd": 64, "n_layer": 2, "n_head": 2, "batch_size": 64, "max_context": 128, "learning_rate": 1e-3,
         "tau": 0.9, "gamma": 0.99, "polyak": 0.3, "value_model": "separate"}  # fmt: skip


def normalised(ret: float) -> float:
    from rlbench_cli import references

    table = references.BUILTIN["lmrl"]
    return float(references.normalise(ret, table.lookup(DATASET), table.scale))


def start_cells(seed: int, episodes: int) -> list[tuple[int, int]]:
    """The start cells of a run's evaluation episodes (their seeds are fixed by the run seed)."""
    from rlbench_cli.algos.base import eval_seeds
    from rlbench_cli.envs.text.maze import MazeFO

    env = MazeFO()
    return [tuple(env.reset(seed=s)[1]["position"]) for s in eval_seeds(seed, episodes)]


def rollouts(policy: object, beta: float) -> dict[tuple[int, int], float]:
    """The return of the greedy policy (its logits plus ``beta`` times Q) from every start cell."""
    from rlbench_cli.algos.text.policy import TextPolicy
    from rlbench_cli.envs.text.maze import FREE, GOAL, MazeFO

    p = TextPolicy(policy.model, policy.tok, policy.settings, policy.device, beta=beta)  # type: ignore[attr-defined]
    cells = [c for c in FREE if c != GOAL]
    envs = [MazeFO() for _ in cells]
    obs = [e.reset(options={"init_position": c})[0] for e, c in zip(envs, cells)]
    p.bind(envs)
    p.reset(len(envs))
    rets, alive = np.zeros(len(envs)), list(range(len(envs)))
    while alive:
        acts = p.act(np.array([obs[i] for i in alive], dtype=object), np.zeros(len(alive)), np.array(alive))
        still = []
        for a, i in zip(acts, alive):
            obs[i], r, term, trunc, _ = envs[i].step(str(a))
            rets[i] += r
            if not (term or trunc):
                still.append(i)
        alive = still
    return dict(zip(cells, rets.tolist()))


def run_seed(algo: str, params: dict, seed: int, steps: int, eval_every: int, betas: list[float],
             stream: str | None = None, save: str | None = None) -> dict:  # fmt: skip
    import torch

    torch.set_num_threads(1)
    from rlbench_cli.algos.base import RunContext
    from rlbench_cli.algos.text import offline
    from rlbench_cli.datagen.text import ensure_text_dataset
    from rlbench_cli.sink import ShardSink
    from rlbench_cli.suite.grid import RunSpec

    ensure_text_dataset(ENV, "mixed")
    cls = {"bc": offline.TextBC, "filtered_bc": offline.FilteredBC, "ilql": offline.ILQL}[algo]
    settings = {**ENTRY, **params}
    budget = {"steps": steps, "eval_every": eval_every, "eval_episodes": 10, "timeout": None}
    spec = RunSpec(suite="bench", algo=algo, algo_name=algo, params=settings, env_id=ENV, env_kwargs={},
                   seed=seed, budget=budget, dataset=DATASET)  # fmt: skip
    starts = start_cells(seed, 10)
    starts50 = start_cells(seed, 50)  # the start cells of the suite entry's 50 evaluation episodes
    points: list[dict] = []
    t0 = time.perf_counter()

    def on_eval(step: int, ret: float, policy: object) -> None:
        row: dict = {"step": step, "eval10": normalised(ret), "exact": {}, "fail": {}, "eval10_of": {},
                     "eval50_of": {}}  # fmt: skip
        played = betas if getattr(policy.model, "values", False) else [0.0]  # type: ignore[attr-defined]
        for b in played if step > 0 else []:  # the untrained policy fails everywhere: not worth playing
            per = rollouts(policy, b)
            row["exact"][str(b)] = normalised(float(np.mean(list(per.values()))))
            row["eval10_of"][str(b)] = normalised(float(np.mean([per[c] for c in starts])))
            row["eval50_of"][str(b)] = normalised(float(np.mean([per[c] for c in starts50])))
            row["fail"][str(b)] = sorted(str(c) for c, r in per.items() if r <= -100)
        row["seconds"] = time.perf_counter() - t0
        points.append(row)
        if save:  # the model at this point, to play other policy extractions on later
            import torch

            torch.save(policy.model.state_dict(), f"{save}/seed{seed}-step{step}.pt")  # type: ignore[attr-defined]
        if stream:  # one line a point as it comes, for runs that may be stopped early
            with open(stream, "a") as f:
                f.write(
                    json.dumps({"algo": algo, "params": params, "seed": seed, "starts": starts, **row}) + "\n"
                )

    sink = ShardSink(tempfile.mkdtemp(prefix="ilql-stab-") + "/metrics", background=False)
    ctx = RunContext(spec=spec, sink=sink, on_evaluate=on_eval)
    cls().train(ctx)
    sink.close()
    return {"seed": seed, "params": settings, "seconds": time.perf_counter() - t0, "starts": starts,
            "points": points}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--algo", default="ilql", choices=["ilql", "bc", "filtered_bc"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--params", default="{}", help="JSON: params over the lmrl-small ilql Maze FO entry's")
    ap.add_argument("--betas", default="0,4,16,1000", help="weights of Q in the logits to play at each point")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", default=None, help="write every point as JSON here")
    ap.add_argument("--stream", default=None, help="append each point as a JSON line to this file")
    ap.add_argument("--save", default=None, help="save the model at each point in this folder")
    args = ap.parse_args()
    betas = [float(b) for b in args.betas.split(",")]
    params = json.loads(args.params)
    from rlbench_cli.datagen.text import ensure_text_dataset

    ensure_text_dataset(ENV, "mixed")  # once, before the seeds' processes
    job = (args.algo, params, args.steps, args.eval_every, betas)
    with ProcessPoolExecutor(args.jobs) as pool:
        futs = [pool.submit(run_seed, *job[:2], s, *job[2:], args.stream, args.save) for s in args.seeds]
        results = [f.result() for f in futs]
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"algo": args.algo, "params": params, "runs": results}, f)
    for r in results:
        print(f"{args.algo} {args.params} seed {r['seed']} ({r['seconds']:.0f} s); eval starts {r['starts']}")
        for pt in r["points"]:
            ex = "  ".join(f"b{b}: {v:5.1f} ({len(pt['fail'][b])} fail, eval50 {pt['eval50_of'][b]:5.1f})"
                           for b, v in pt["exact"].items())  # fmt: skip
            print(f"  step {pt['step']:>5}  eval10 {pt['eval10']:5.1f}  exact25 {ex}")


if __name__ == "__main__":
    main()

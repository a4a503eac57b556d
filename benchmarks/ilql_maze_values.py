"""How well a text value-based algorithm (``ilql``, ``mc_returns``) or ``bc`` has learned LMRL-Gym's Maze FO,
measured against the maze's exact solution: breadth-first search gives every cell's distance to the goal, so
the optimal V* and Q* under the run's gamma are known. Trains in this process on the ``MazeFO-v0-mixed``
dataset (built in ``$RLBENCH_DATASETS`` or ``results/datasets`` when missing), then prints per cell the
learned V and target Q of each move next to V* and Q*, and for the policy's logits alone (beta 0), the run's
beta, and Q alone, the fraction of cells whose chosen move is a shortest-path move, with the evaluation return
and its LMRL-normalised score. The mixed data is mostly random walkers in the top corridor, so behaviour
cloning cannot learn those cells: only correct Q values can.

    python benchmarks/ilql_maze_values.py --steps 2000 --params '{"gamma": 0.99, "batch_size": 64}'
    python benchmarks/ilql_maze_values.py --algo ilql --params '{"value_model": "shared"}'
    python benchmarks/ilql_maze_values.py --algo bc --steps 500
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import deque

import numpy as np
import torch

ENV, DATASET = "rlbench/MazeFO-v0", "MazeFO-v0-mixed"
MOVES = {"move up": (-1, 0), "move down": (1, 0), "move left": (0, -1), "move right": (0, 1)}
# the lmrl-small suite's model and optimiser
BASE = {"n_embd": 64, "n_layer": 2, "n_head": 2, "batch_size": 32, "max_context": 128, "learning_rate": 1e-3}


def distances() -> dict[tuple[int, int], int]:
    from rlbench_cli.envs.text.maze import GOAL, MAZE

    dist, queue = {GOAL: 0}, deque([GOAL])
    while queue:
        r, c = queue.popleft()
        for dr, dc in MOVES.values():
            nxt = (r + dr, c + dc)
            if nxt not in dist and MAZE[nxt] == 0:
                dist[nxt] = dist[(r, c)] + 1
                queue.append(nxt)
    return dist


def exact(dist: dict, gamma: float) -> tuple:
    """V*(cell) and Q*(cell, move) under LMRL-Gym's reward: -1 a step, 0 for the step that reaches the goal."""
    from rlbench_cli.envs.text.maze import GOAL

    def v(c: tuple[int, int]) -> float:
        return -(1 - gamma ** (dist[c] - 1)) / (1 - gamma) if dist[c] > 0 else 0.0

    def q(c: tuple[int, int], move: str) -> float:
        nxt = (c[0] + MOVES[move][0], c[1] + MOVES[move][1])
        nxt = nxt if nxt in dist else c  # a wall: the agent stays
        return (0.0 if nxt == GOAL else -1.0) + gamma * v(nxt)

    return v, q


def train(algo: str, steps: int, params: dict, seed: int) -> tuple[float, object, dict]:
    from rlbench_cli.algos.base import RunContext
    from rlbench_cli.algos.text import offline
    from rlbench_cli.datagen.text import ensure_text_dataset
    from rlbench_cli.sink import ShardSink
    from rlbench_cli.suite.grid import RunSpec

    ensure_text_dataset(ENV, "mixed")
    cls = {"bc": offline.TextBC, "filtered_bc": offline.FilteredBC, "ilql": offline.ILQL,
           "mc_returns": offline.MCReturns}[algo]  # fmt: skip
    settings = {**BASE, **({"tau": 0.9, "gamma": 0.95, "polyak": 0.3} if algo == "ilql" else {}), **params}
    budget = {"steps": steps, "eval_every": steps, "eval_episodes": 20, "timeout": None}
    spec = RunSpec(suite="bench", algo=algo, algo_name=algo, params=settings, env_id=ENV, env_kwargs={},
                   seed=seed, budget=budget, dataset=DATASET)  # fmt: skip
    got: dict = {}
    sink = ShardSink(tempfile.mkdtemp(prefix="ilql-maze-") + "/metrics", background=False)
    ctx = RunContext(
        spec=spec, sink=sink, on_evaluate=lambda step, ret, policy: got.update({step: (ret, policy)})
    )
    cls().train(ctx)
    sink.close()
    ret, policy = got[steps]
    return ret, policy, settings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--algo", default="ilql", choices=["ilql", "mc_returns", "bc", "filtered_bc"])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--params", default="{}", help="JSON: the algorithm's params over lmrl-small's")
    args = ap.parse_args()
    torch.set_num_threads(1)
    from rlbench_cli import references
    from rlbench_cli.algos.text.policy import _gather_pos, action_batch, context_ids, score_actions
    from rlbench_cli.envs.text.maze import GOAL, describe_fo

    t0 = time.perf_counter()
    ret, policy, settings = train(args.algo, args.steps, json.loads(args.params), args.seed)
    took = time.perf_counter() - t0
    dist = distances()
    cells = sorted(c for c in dist if c != GOAL)
    tok, model = policy.tok, policy.model
    ctxs = [context_ids(tok, [], describe_fo(c), int(settings["max_context"]), 0) for c in cells]
    moves = list(MOVES)
    betas = sorted({0.0, float(policy.beta)} | ({1000.0} if model.values else set()))
    right = {}
    for beta in betas:
        scores = score_actions(model, tok, ctxs, [[tok.encode(m) for m in moves]] * len(cells), "cpu", beta)
        picked = [moves[int(np.argmax(s))] for s in scores]
        right[beta] = np.mean([dist.get((c[0] + MOVES[m][0], c[1] + MOVES[m][1]), 99) == dist[c] - 1
                               for c, m in zip(cells, picked)])  # fmt: skip
    if model.values:
        v_star, q_star = exact(dist, float(settings.get("gamma", 0.99)))
        print(f"{'cell':>8} {'dist':>4} {'V*':>6} {'V':>6}   target Q / Q* of each move")
        errors = []
        with torch.no_grad():
            for c, ctx in zip(cells, ctxs):
                b = action_batch(tok, [ctx] * 4, [tok.encode(m) for m in moves], "cpu")
                h = _gather_pos(model(b.ids, b.mask)[1], b.pos)
                th = _gather_pos(model.target_hidden(b.ids, b.mask), b.pos)  # the target network's
                q = model.target_values(th).gather(-1, b.tok[..., None])[..., 0][
                    :, 1
                ]  # at the direction token
                v = float(model.v_head(h)[0, 0, 0])
                errors.append(v - v_star(c))
                qs = "  ".join(
                    f"{m[5:]:>5} {float(q[i]):6.2f}/{q_star(c, m):6.2f}" for i, m in enumerate(moves)
                )
                print(f"{str(c):>8} {dist[c]:>4} {v_star(c):6.2f} {v:6.2f}   {qs}")
        print(f"V - V*: mean {np.mean(errors):+.2f}, mean absolute {np.mean(np.abs(errors)):.2f}")
    table = references.BUILTIN["lmrl"]
    score = references.normalise(ret, table.lookup(DATASET), table.scale)
    print(f"{args.algo} {args.params} seed {args.seed}, {args.steps} steps ({took:.0f} s): eval/return {ret:.1f} "
          f"(lmrl-normalised {float(score):.1f}); cells where the chosen move is a shortest-path move: "
          + ", ".join(f"beta {b:g}: {right[b]:.2f}" for b in betas))  # fmt: skip


if __name__ == "__main__":
    main()

"""Scoring an env's candidate actions with a text policy: one pass over each context whose key/value cache the
candidates reuse (``policy.score_actions``, what ``TextPolicy`` does) vs every (context, candidate) pair as its
own padded sequence (``policy.action_logprobs``, how it was done before). Maze FO-sized: 10 envs x 4 moves, and
Endgames-sized: 10 envs x 30 moves of a spaced FEN. CPU, one torch thread.

    python benchmarks/text_candidate_scoring.py
"""

from __future__ import annotations

import time

import torch

from rlbench_cli.algos.text.common import settings_of
from rlbench_cli.algos.text.offline import ILQL
from rlbench_cli.algos.text.policy import (
    action_batch,
    action_logprobs,
    build_model,
    build_tokenizer,
    context_ids,
    score_actions,
)


def main() -> None:
    torch.set_num_threads(1)
    settings = settings_of("ilql", {"n_embd": 64, "n_layer": 2, "n_head": 2}, ILQL.own)
    maze_obs = (
        "The goal is at position 8, 6. Your current position is at position 1, 2. There are walls above you."
    )
    fen = " ".join("rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1")
    moves = [f"{c}{r}" for c in "abcdefgh" for r in "3456"][:30]
    tok = build_tokenizer(
        settings, [maze_obs, fen, "move up", "move down", "move left", "move right", *moves]
    )
    model = build_model(settings, tok, values=True).eval()
    cases = {
        "maze 10 x 4": ([maze_obs] * 10, ["move up", "move down", "move left", "move right"]),
        "endgames 10 x 30": ([fen] * 10, moves),
    }
    print(f"{'case':<18} {'shared context (ms)':>20} {'per pair (ms)':>14} {'ratio':>7}")
    for name, (obs, cands) in cases.items():
        ctxs = [context_ids(tok, [], o, 256, 0) for o in obs]
        ids = [[tok.encode(a) for a in cands] for _ in ctxs]

        def shared(ctxs=ctxs, ids=ids) -> None:  # noqa: ANN001
            score_actions(model, tok, ctxs, ids, "cpu", beta=4.0)

        def pairs(ctxs=ctxs, ids=ids, cands=cands) -> None:  # noqa: ANN001
            with torch.no_grad():
                b = action_batch(
                    tok, [c for c in ctxs for _ in cands], [a for row in ids for a in row], "cpu"
                )
                action_logprobs(model, b, 4.0)

        times = {}
        for label, fn in (("shared", shared), ("pairs", pairs)):
            fn()
            t = time.perf_counter()
            for _ in range(10):
                fn()
            times[label] = (time.perf_counter() - t) / 10 * 1000
        print(
            f"{name:<18} {times['shared']:>20.1f} {times['pairs']:>14.1f} {times['pairs'] / times['shared']:>6.1f}x"
        )


if __name__ == "__main__":
    main()

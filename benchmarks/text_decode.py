"""Decoding text with a small GPT-2: what a text world model does for every prediction (the verifier's check,
an imagined turn, its EM on held-out turns) and a text policy for an open action (Wordle's guess).

Side by side, on the same model and contexts, each generating exactly ``--tokens`` tokens (the end token is
banned so that no row stops early):

- rlbench ``decode_tokens``: the contexts read once, then one step on their key/value cache per token;
- rlbench before (``decode_tokens_uncached``): every sequence read whole at each step;
- the peer, ``transformers``' ``generate`` (greedy, its own cache, left-padded batch).

Sizes: a TextNav world model's prediction (2 x 64 GPT-2, contexts of 256 tokens, 160 tokens out, 64 at once,
as ``predict_chunked`` batches them) and a Maze FO one (contexts of 96 tokens, 40 out). CPU, one torch thread.

    python benchmarks/text_decode.py
    python benchmarks/text_decode.py --batch 16 --context 256 --tokens 160 --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def _time(fn, repeat: int) -> tuple[float, float, float]:  # noqa: ANN001
    fn()  # untimed: one-time set-up
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs), min(runs), max(runs)


def case(batch: int, context: int, tokens: int, repeat: int) -> None:
    from rlbench_cli.algos.text.common import settings_of
    from rlbench_cli.algos.text.offline import TextBC
    from rlbench_cli.algos.text.policy import (
        build_model,
        build_tokenizer,
        decode_tokens,
        decode_tokens_uncached,
    )

    settings = settings_of("bc", {"n_embd": 64, "n_layer": 2, "n_head": 2, "n_positions": context + tokens + 8},
                           TextBC.own)  # fmt: skip
    words = [f"w{i}" for i in range(200)]
    tok = build_tokenizer(settings, [" ".join(words)])
    torch.manual_seed(0)
    model = build_model(settings, tok, values=False).eval()
    g = torch.Generator().manual_seed(1)
    low = max(tok.eoa_id, tok.unk_id, tok.act_id, tok.bos_id, tok.pad_id) + 1
    vocab = model.lm.get_output_embeddings().weight.shape[0]
    # contexts of unequal lengths (between 3/4 of the size and the size), as a batch of turns has
    lens = torch.randint(context * 3 // 4, context + 1, (batch,), generator=g).tolist()
    contexts = [torch.randint(low, vocab, (n,), generator=g).tolist() for n in lens]
    banned = [tok.pad_id, tok.bos_id, tok.act_id, tok.unk_id, tok.eoa_id]

    def cached() -> list:
        return decode_tokens(model, tok, contexts, tokens, banned, "cpu")

    def uncached() -> list:
        return decode_tokens_uncached(model, tok, contexts, tokens, banned, "cpu")

    width = max(lens)
    ids = torch.full((batch, width), tok.pad_id, dtype=torch.long)
    mask = torch.zeros((batch, width), dtype=torch.long)
    for r, c in enumerate(contexts):  # left-padded, as generate wants a batch
        ids[r, width - len(c) :] = torch.as_tensor(c)
        mask[r, width - len(c) :] = 1

    def peer() -> None:
        with torch.no_grad():
            model.lm.generate(input_ids=ids, attention_mask=mask, max_new_tokens=tokens, min_new_tokens=tokens,
                              do_sample=False, pad_token_id=tok.pad_id, eos_token_id=None,
                              bad_words_ids=[[b] for b in banned])  # fmt: skip

    same = [g_ for g_, _ in cached()] == [g_ for g_, _ in uncached()]
    rows = {"rlbench decode_tokens": _time(cached, repeat), "rlbench before (uncached)": _time(uncached, repeat),
            "transformers generate": _time(peer, repeat)}  # fmt: skip
    ours = rows["rlbench decode_tokens"][0]
    print(f"\n{batch} contexts of {context * 3 // 4}-{context} tokens, {tokens} tokens out each "
          f"(cached tokens == uncached tokens: {same})")  # fmt: skip
    print(f"{'':<28} {'median s':>9} {'min':>7} {'max':>7} {'tokens/s':>10} {'x rlbench':>10}")
    for name, (med, lo, hi) in rows.items():
        print(
            f"{name:<28} {med:>9.3f} {lo:>7.3f} {hi:>7.3f} {batch * tokens / med:>10,.0f} {med / ours:>10.2f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int)
    ap.add_argument("--context", type=int)
    ap.add_argument("--tokens", type=int)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.batch or a.context or a.tokens:
        case(a.batch or 64, a.context or 256, a.tokens or 160, a.repeat)
        return
    case(64, 256, 160, a.repeat)  # a TextNav world model's prediction
    case(64, 96, 40, a.repeat)  # a Maze FO one


if __name__ == "__main__":
    main()

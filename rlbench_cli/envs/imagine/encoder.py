"""Instruction embeddings: rlbench's own small sentence encoder, or a local one the user names.

The default, ``rlbench-bow-ridge-v1``, is built and trained here, with no download and no randomness: a
sentence is a bag of its words weighted by position (each known word counts once as ``1 - p`` and once
as ``p``, p its relative position in the sentence, so word order tells "put A next to B" from "put B next to
A"), plus the numbers it holds in the same two weightings; a ridge regression (closed form) maps that to
what the sentence asks for, per part (family, colour, type, speed; ``tasks.corpus``), trained on every
instruction of every level of rlbench's tasks. The same request in other words (``rephrase``) lands on the
same vector. Unknown words are ignored.

A local encoder: a folder holding a Hugging Face ``transformers`` model (``config.json`` and its tokenizer);
sentences are the mean of its last hidden states over their tokens. Nothing is ever downloaded.
``describe(encoder)`` is what a dataset's metadata and a run's manifest record.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["DEFAULT_ENCODER", "Encoder", "get_encoder", "check_encoder"]

DEFAULT_ENCODER = "rlbench-bow-ridge-v1"
_TOKEN = re.compile(r"[a-z]+|[0-9]+(?:\.[0-9]+)?")
_FAMILIES = ("goto", "pickup", "open", "putnext", "forward", "backward", "jump")
_RIDGE = 1e-2


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class Encoder:
    """Sentences -> float32 vectors of ``dim``; ``name`` says which encoder it is."""

    name: str
    dim: int

    def encode(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError


class BowRidgeEncoder(Encoder):
    """rlbench's default encoder (see the module docstring)."""

    def __init__(self) -> None:
        from .tasks import COLORS, TYPES, corpus

        data = corpus()
        vocab = sorted({w for text, _ in data for w in _tokens(text) if not w[0].isdigit()})
        self._index = {w: i for i, w in enumerate(vocab)}
        self._colors = {c: i for i, c in enumerate(COLORS)}
        self._types = {t: i for i, t in enumerate((*TYPES, "door"))}
        part = len(_FAMILIES) + len(self._colors) + len(self._types) + 1
        self.dim = 2 * part
        self.name = DEFAULT_ENCODER
        x = self._features([t for t, _ in data])
        y = np.zeros((len(data), self.dim))
        fam = {f: i for i, f in enumerate(_FAMILIES)}
        for row, (_, parts) in enumerate(data):
            for slot, (family, color, typ, speed) in enumerate(parts):
                base = slot * part
                y[row, base + fam[family]] = 1.0
                if color:
                    y[row, base + len(fam) + self._colors[color]] = 1.0
                if typ:
                    y[row, base + len(fam) + len(self._colors) + self._types[typ]] = 1.0
                y[row, base + part - 1] = speed
        gram = x.T @ x + _RIDGE * np.eye(x.shape[1])
        self._w = np.linalg.solve(gram, x.T @ y)

    def _features(self, texts: list[str]) -> np.ndarray:
        v = len(self._index)
        out = np.zeros((len(texts), 2 * v + 3))
        for row, text in enumerate(texts):
            toks = _tokens(text)
            for k, w in enumerate(toks):
                p = k / max(1, len(toks) - 1)
                if w[0].isdigit():
                    out[row, 2 * v] += (1 - p) * float(w)
                    out[row, 2 * v + 1] += p * float(w)
                elif w in self._index:
                    out[row, self._index[w]] += 1 - p
                    out[row, v + self._index[w]] += p
            out[row, -1] = 1.0  # bias
        return out

    def encode(self, texts: list[str]) -> np.ndarray:
        return (self._features(list(texts)) @ self._w).astype(np.float32)


class TransformersEncoder(Encoder):
    """A local ``transformers`` model folder: mean of the last hidden states over each sentence's tokens."""

    def __init__(self, path: str) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        self._tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self._model = AutoModel.from_pretrained(path, local_files_only=True).eval()
        self._torch = torch
        self.dim = int(self._model.config.hidden_size)
        self.name = f"transformers:{Path(path).resolve()}"

    def encode(self, texts: list[str]) -> np.ndarray:
        torch = self._torch
        batch = self._tok(list(texts), return_tensors="pt", padding=True)
        with torch.no_grad():
            hidden = self._model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        return ((hidden * mask).sum(1) / mask.sum(1).clamp(min=1)).numpy().astype(np.float32)


def check_encoder(encoder: str | None) -> str | None:
    """None if ``encoder`` names an encoder rlbench can load, else a one-line problem and its fix."""
    if encoder in (None, "", DEFAULT_ENCODER):
        return None
    p = Path(str(encoder))
    if not p.is_dir() or not (p / "config.json").is_file():
        return (f"encoder {encoder!r} is neither {DEFAULT_ENCODER!r} nor a local folder holding a transformers "
                "model (config.json and its tokenizer); name such a folder, or leave it out for the default")  # fmt: skip
    return None


@lru_cache(maxsize=4)
def get_encoder(encoder: str | None = None) -> Encoder:
    """The encoder ``encoder`` names (None: rlbench's default), built once per process."""
    if encoder in (None, "", DEFAULT_ENCODER):
        return BowRidgeEncoder()
    problem = check_encoder(encoder)
    if problem:
        raise ValueError(problem)
    return TransformersEncoder(str(encoder))


def describe(encoder: Encoder) -> dict[str, Any]:
    return {"encoder": encoder.name, "encoder_dim": encoder.dim}

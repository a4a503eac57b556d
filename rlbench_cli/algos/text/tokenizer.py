"""Tokenizers for text policies, built locally from a task's own text: nothing is downloaded.

``TextTokenizer`` splits text into words and single punctuation marks (with the space before them, as GPT-2's
byte-level pieces do) and other runs of whitespace; the pieces seen in the
task's text (its dataset's observations and actions, the env's valid actions) up to ``max_words`` of them, most
frequent first, are tokens of their own, and any other piece is spelt out in printable ASCII characters, which
are always in the vocabulary. So ``decode(encode(s)) == s`` for every ASCII string, whatever the vocabulary; a
character outside printable ASCII (and not in the task's text) becomes ``<unk>``.

A user's own pretrained checkpoint (a local folder that ``transformers`` can load) brings its own tokenizer;
``HFTokenizer`` gives it the same small interface.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable
from typing import Any

__all__ = ["TextTokenizer", "HFTokenizer", "SPECIALS", "split_pieces"]

# <pad>, <unk>, <bos>: start of a sequence; <act>: an action follows; <eoa>: the action ended;
# <obs>, <rew>, <done>, <cont>: what a world model predicts after an action (next observation, reward, whether
# the episode ended)
SPECIALS = ("<pad>", "<unk>", "<bos>", "<act>", "<eoa>", "<obs>", "<rew>", "<done>", "<cont>")
_PIECE = re.compile(r" ?\w+| ?[^\w\s]|\s+")
_CHARS = [c for c in string.printable if c not in "\x0b\x0c"]


def split_pieces(text: str) -> list[str]:
    """``text`` as words and punctuation marks (each with its leading space) and other whitespace runs;
    joined back they are ``text``."""
    return _PIECE.findall(text)


class TextTokenizer:
    """A word-level tokenizer with printable-ASCII characters as fallback (see the module docstring)."""

    def __init__(self, tokens: list[str]):
        self.tokens = list(tokens)
        self.index = {t: i for i, t in enumerate(self.tokens)}
        self._cache: dict[str, tuple[int, ...]] = {}  # text -> ids: turns and candidates repeat
        for s in SPECIALS:
            setattr(self, s.strip("<>") + "_id", self.index[s])

    @classmethod
    def build(cls, texts: Iterable[str], max_words: int = 2000) -> TextTokenizer:
        """A tokenizer for the pieces of ``texts`` (the task's vocabulary) plus every printable character."""
        counts: Counter[str] = Counter()
        chars: set[str] = set(_CHARS)
        for t in texts:
            counts.update(p for p in split_pieces(t) if len(p) > 1)
            chars.update(t)
        base = [*SPECIALS, *sorted(chars)]
        words = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if w not in chars]
        return cls(base + words[:max_words])

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def encode(self, text: str) -> list[int]:
        hit = self._cache.get(text)
        if hit is not None:
            return list(hit)
        ids: list[int] = []
        for p in split_pieces(text):
            i = self.index.get(p)
            if i is not None:
                ids.append(i)
            else:
                ids.extend(self.index.get(c, self.unk_id) for c in p)  # type: ignore[attr-defined]
        if len(self._cache) < 100_000:
            self._cache[text] = tuple(ids)
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        n = len(self.tokens)
        return "".join(self.tokens[i] for i in ids if 0 <= i < n and self.tokens[i] not in SPECIALS)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "text", "tokens": self.tokens}


class HFTokenizer:
    """A ``transformers`` tokenizer from a local checkpoint, with rlbench's special tokens added."""

    def __init__(self, tok: Any):
        tok.add_special_tokens({"additional_special_tokens": [s for s in SPECIALS if s != "<pad>"]})
        if tok.pad_token is None:
            tok.add_special_tokens({"pad_token": "<pad>"})
        self.tok = tok
        for s in SPECIALS:
            setattr(
                self, s.strip("<>") + "_id", tok.convert_tokens_to_ids(tok.pad_token if s == "<pad>" else s)
            )

    @property
    def vocab_size(self) -> int:
        return len(self.tok)

    def encode(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False))

    def decode(self, ids: Iterable[int]) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=True)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "hf"}

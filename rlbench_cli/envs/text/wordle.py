"""LMRL-Gym's Wordle: guess a hidden five-letter word in 6 tries.

Rules and reward as LMRL-Gym (llm_rl_scripts/wordle/env): -1 per guess, 0 for the guess that finds the word
(which ends the episode); a guess that is not a five-letter word of the word list is a bad word: -1, no
feedback (an empty line), and it uses up a try; the episode ends after 6 tries. Feedback per letter: ``g``
when the letter is in place, ``y`` when the word holds it elsewhere, ``b`` when the word lacks it.

The observation is LMRL-Gym's reformatted history: ``Wordle:`` then, for each try, the guess with its letters
spaced and the feedback spaced, each on its own line::

    Wordle:
    a p p l e
    b y b b g

LMRL-Gym redraws the hidden word at each step among the words consistent with the feedback so far; here it is
drawn once at reset (uniformly, seeded), which gives every guess sequence the same feedback distribution.

Word list (``word_list=``): a file with one word a line, every line five letters a-z (else a one-line error
naming the file and line); default the Debian ``wamerican`` dictionary (/usr/share/dict/american-english),
keeping its lowercase five-letter words.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from ...errors import UsageError
from .base import TextEnv

__all__ = ["WordleEnv", "DEFAULT_WORD_LIST", "load_word_list", "feedback", "consistent"]

DEFAULT_WORD_LIST = "/usr/share/dict/american-english"
N_TRIES = 6
_WORD = re.compile(r"^[a-z]{5}$")


@lru_cache(maxsize=8)
def load_word_list(path: str | None = None) -> tuple[str, ...]:
    """The words of ``path`` (strict: every non-empty line a five-letter a-z word), or of the Debian dictionary
    (its lowercase five-letter words)."""
    if path is None:
        p = Path(DEFAULT_WORD_LIST)
        if not p.exists():
            raise UsageError(
                f"word_list: the default {DEFAULT_WORD_LIST} is missing; install Debian's wamerican package "
                "or set word_list: to a file of five-letter words"
            )
        words = {w.strip() for w in p.read_text(encoding="utf-8", errors="replace").splitlines()}
        return tuple(sorted(w for w in words if _WORD.match(w)))
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(
            f"word_list {path}: cannot read it ({e}); give a text file, one word a line"
        ) from None
    words = []
    for lineno, line in enumerate(lines, 1):
        w = line.strip().lower()
        if not w:
            continue
        if not _WORD.match(w):
            raise UsageError(
                f"word_list {path}:{lineno}: {line.strip()!r} is not a five-letter word (letters a-z); "
                "fix that line or remove it"
            )
        words.append(w)
    if not words:
        raise UsageError(f"word_list {path}: holds no words; one five-letter word a line")
    return tuple(sorted(set(words)))


def feedback(guess: str, target: str) -> str:
    """LMRL-Gym's per-letter feedback: g in place, y elsewhere in the word, b not in it; e.g. ``bygbb``."""
    return "".join("g" if c == t else "y" if c in target else "b" for c, t in zip(guess, target, strict=True))


def consistent(word: str, history: list[tuple[str, str]]) -> bool:
    """Whether ``word`` gives the same feedback as every (guess, feedback) so far."""
    return all(feedback(g, word) == fb for g, fb in history)


def _spaced(s: str) -> str:
    return " ".join(s)


class WordleEnv(TextEnv):
    def __init__(self, word_list: str | None = None, max_tries: int = N_TRIES) -> None:
        super().__init__()
        self.words = load_word_list(word_list)
        self._word_set = frozenset(self.words)
        self.max_tries = int(max_tries)
        self.target = ""
        self.tries: list[tuple[str, str]] = []  # (guess, feedback or "" for a bad word)

    def _observation(self) -> str:
        lines = ["Wordle:"]
        for guess, fb in self.tries:
            lines += [_spaced(guess), _spaced(fb)]
        self._last_obs = "\n".join(lines)
        return self._last_obs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        target = (options or {}).get("word")
        if target is not None and target not in self._word_set:
            raise ValueError(f"options word {target!r} is not in the word list")
        self.target = target or self.words[int(self.np_random.integers(len(self.words)))]
        self.tries = []
        return self._observation(), {"words": self.words, "history": []}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        guess = str(action).strip().lower().replace(" ", "")
        bad = guess not in self._word_set
        fb = "" if bad else feedback(guess, self.target)
        self.tries.append((guess, fb))
        solved = guess == self.target
        reward = 0.0 if solved else -1.0
        terminated = solved or len(self.tries) >= self.max_tries
        info = {
            "words": self.words,
            "history": [(g, f) for g, f in self.tries if f],
            "bad_word": bad,
            "success": solved,
        }
        return self._observation(), reward, terminated, False, info

    def valid_actions(self) -> list[str]:
        return list(self.words)

"""The LMRL-Gym tasks whose other side is a language model: Twenty Questions, Guess My City, Car Dealer.

Each env takes an ``oracle``: ``"scripted"`` (default: the rule-based oracle below, what tests and the
generated datasets use), a path to a local transformers causal-LM folder (``TransformersOracle``; nothing is
downloaded), or any object with ``answer(task: str, secret: dict, history: str, utterance: str) -> str``.

- **Twenty Questions** (``rlbench/TwentyQuestions-v0``): the oracle thinks of a word (``WORDS``); the agent
  asks yes/no questions; -1 a question, 0 for the question that names the word (``Is it a <word>?``), which
  ends the episode; 20 questions at most. As LMRL-Gym.
- **Guess My City** (``rlbench/GuessMyCity-v0``): the same game about a city (``CITIES``), ``Is the city
  <name>?`` names it; 20 questions at most. As LMRL-Gym.
- **Car Dealer** (``rlbench/CarDealer-v0``): the agent sells a car to a buyer with a hidden budget; the agent
  names prices (``$<amount>``), the buyer accepts one at or under the budget; reward the sale price in
  thousands of dollars when the buyer buys (0 when no sale in 10 turns). LMRL-Gym's buyer is an LLM with a
  persona; this scripted buyer keeps only its budget (an assumption, stated).

The observation is the whole conversation so far (the task line, then each utterance and answer).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Protocol

from ...errors import UsageError
from .base import TextEnv

__all__ = ["Oracle", "ScriptedOracle", "TransformersOracle", "make_oracle", "WORDS", "CITIES", "QUESTIONS",
           "TwentyQuestionsEnv", "GuessMyCityEnv", "CarDealerEnv"]  # fmt: skip

# word -> attributes a yes/no question can ask about
WORDS: dict[str, set[str]] = {
    "dog": {"animal", "alive", "pet", "mammal"}, "cat": {"animal", "alive", "pet", "mammal"},
    "horse": {"animal", "alive", "mammal", "big"}, "eagle": {"animal", "alive", "bird", "flies"},
    "shark": {"animal", "alive", "fish", "water", "big"}, "goldfish": {"animal", "alive", "fish", "water", "pet"},
    "apple": {"food", "fruit", "plant", "alive"}, "carrot": {"food", "vegetable", "plant", "alive"},
    "oak": {"plant", "alive", "big"}, "rose": {"plant", "alive"},
    "car": {"object", "machine", "vehicle", "big"}, "bicycle": {"object", "vehicle"},
    "airplane": {"object", "machine", "vehicle", "flies", "big"}, "boat": {"object", "vehicle", "water", "big"},
    "hammer": {"object", "tool"}, "spoon": {"object", "tool", "kitchen"}, "laptop": {"object", "machine"},
    "chair": {"object", "furniture"}, "table": {"object", "furniture", "big"}, "bread": {"food", "kitchen"},
}  # fmt: skip
# city -> attributes
CITIES: dict[str, set[str]] = {
    "paris": {"europe", "capital", "france", "river"}, "marseille": {"europe", "france", "coast"},
    "berlin": {"europe", "capital", "germany", "river"}, "hamburg": {"europe", "germany", "coast", "river"},
    "tokyo": {"asia", "capital", "japan", "coast"}, "osaka": {"asia", "japan", "coast"},
    "new york": {"america", "usa", "coast", "river"}, "chicago": {"america", "usa", "lake"},
    "washington": {"america", "usa", "capital", "river"}, "rio de janeiro": {"america", "brazil", "coast"},
    "cairo": {"africa", "capital", "egypt", "river"}, "sydney": {"oceania", "australia", "coast"},
}  # fmt: skip
# attribute -> the question that asks about it
QUESTIONS: dict[str, dict[str, str]] = {
    "twenty_questions": {
        a: {"alive": "Is it alive?", "big": "Is it big?", "flies": "Can it fly?", "food": "Is it food?",
            "furniture": "Is it furniture?", "kitchen": "Is it found in a kitchen?",
            "water": "Does it live in water?"}.get(a, f"Is it {'an' if a[0] in 'aeiou' else 'a'} {a}?")
        for a in sorted(set().union(*WORDS.values()))
    },
    "guess_my_city": {a: f"Is the city in {a.title() if a != 'usa' else 'the USA'}?"
                      if a not in {"capital", "coast", "river", "lake"}
                      else {"capital": "Is the city a capital?", "coast": "Is the city on the coast?",
                            "river": "Is the city on a river?", "lake": "Is the city on a lake?"}[a]
                      for a in sorted(set().union(*CITIES.values()))},
}  # fmt: skip


def guess_question(task: str, name: str) -> str:
    if task == "twenty_questions":
        return f"Is it {'an' if name[0] in 'aeiou' else 'a'} {name}?"
    return f"Is the city {name.title()}?"


class Oracle(Protocol):
    def answer(self, task: str, secret: dict[str, Any], history: str, utterance: str) -> str: ...


class ScriptedOracle:
    """Rule-based answers: yes/no by the secret's attributes; the Car Dealer buyer by its budget."""

    def answer(self, task: str, secret: dict[str, Any], history: str, utterance: str) -> str:
        u = utterance.strip().lower().rstrip("?").strip()
        if task == "car_dealer":
            price = parse_price(utterance)
            if price is None:
                return "What price are you asking?"
            if price <= secret["budget"]:
                return f"Deal. I'll buy it for ${price:,}."
            return "That's too expensive for me."
        table = WORDS if task == "twenty_questions" else CITIES
        name = secret["name"]
        if u == guess_question(task, name).lower().rstrip("?"):
            return "Yes! You guessed it."
        for attr, q in QUESTIONS[task].items():
            if u == q.lower().rstrip("?"):
                return "Yes." if attr in table[name] else "No."
        return "No."


class TransformersOracle:
    """A local transformers causal LM (a folder with its config, weights and tokenizer) as the oracle:
    greedy decoding of a short answer to a prompt that holds the secret, the conversation and the utterance."""

    def __init__(self, path: str, max_new_tokens: int = 24) -> None:
        p = Path(path)
        if not (p.is_dir() and (p / "config.json").exists()):
            raise UsageError(
                f"oracle: no transformers model at {path} (a folder with config.json); "
                "set oracle: to a local model folder or to 'scripted'"
            )
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(p), local_files_only=True)
        self.model = AutoModelForCausalLM.from_pretrained(str(p), local_files_only=True).eval()
        self.max_new_tokens = int(max_new_tokens)

    def answer(self, task: str, secret: dict[str, Any], history: str, utterance: str) -> str:
        import torch

        what = (
            f"the budget is ${secret['budget']:,}"
            if task == "car_dealer"
            else f"the answer is {secret['name']}"
        )
        prompt = f"{task.replace('_', ' ')}; {what}.\n{history}\n{utterance}\n"
        ids = self.tokenizer(prompt, return_tensors="pt")
        with torch.no_grad():
            out = self.model.generate(**ids, max_new_tokens=self.max_new_tokens, do_sample=False,
                                      pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id)  # fmt: skip
        text = self.tokenizer.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
        return " ".join(text.split()) or "No."


def make_oracle(oracle: Any) -> Any:
    if oracle is None or oracle == "scripted":
        return ScriptedOracle()
    if isinstance(oracle, str | Path):
        return TransformersOracle(str(oracle))
    if not callable(getattr(oracle, "answer", None)):
        raise UsageError(
            "oracle: give 'scripted', a local transformers model folder, or an object with answer()"
        )
    return oracle


def parse_price(text: str) -> int | None:
    m = re.search(r"\$\s*([0-9][0-9,]*)", text)
    return int(m.group(1).replace(",", "")) if m else None


class _OracleEnv(TextEnv):
    task = ""
    intro = ""
    max_turns = 20

    def __init__(self, oracle: Any = "scripted", max_turns: int | None = None) -> None:
        super().__init__()
        self.oracle = make_oracle(oracle)
        self.max_turns = int(max_turns or self.max_turns)
        self.secret: dict[str, Any] = {}
        self.history: list[str] = []
        self.turns = 0

    def _draw(self) -> dict[str, Any]:
        raise NotImplementedError

    def _observation(self) -> str:
        self._last_obs = "\n".join(self.history)
        return self._last_obs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        self.secret = dict((options or {}).get("secret") or self._draw())
        self.history, self.turns = [self.intro], 0
        return self._observation(), {"task": self.task, "secret": self.secret, "answers": []}

    def _score(self, utterance: str, reply: str) -> tuple[float, bool]:
        raise NotImplementedError

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        utterance = " ".join(str(action).split())
        reply = self.oracle.answer(self.task, self.secret, self._observation(), utterance)
        self.turns += 1
        self.history.append(f"{utterance} {reply}")
        reward, done = self._score(utterance, reply)
        truncated = not done and self.turns >= self.max_turns
        info = {"task": self.task, "secret": self.secret, "reply": reply, "success": done and reward >= 0}
        return self._observation(), reward, done, truncated, info


class _Guessing(_OracleEnv):
    table: dict[str, set[str]] = {}

    def _draw(self) -> dict[str, Any]:
        names = sorted(self.table)
        return {"name": names[int(self.np_random.integers(len(names)))]}

    def _score(self, utterance: str, reply: str) -> tuple[float, bool]:
        named = utterance.lower().rstrip("?") == guess_question(
            self.task, self.secret["name"]
        ).lower().rstrip("?")
        return (0.0, True) if named else (-1.0, False)

    def valid_actions(self) -> list[str]:
        return list(QUESTIONS[self.task].values()) + [
            guess_question(self.task, n) for n in sorted(self.table)
        ]


class TwentyQuestionsEnv(_Guessing):
    task, table = "twenty_questions", WORDS
    intro = "Twenty Questions: I am thinking of a word. Ask yes/no questions to find it."


class GuessMyCityEnv(_Guessing):
    task, table = "guess_my_city", CITIES
    intro = "Guess My City: I am thinking of a city. Ask questions to find it."


class CarDealerEnv(_OracleEnv):
    task, max_turns = "car_dealer", 10
    intro = "Car Dealer: you sell a car to a buyer. Name your price as $<amount>."

    def _draw(self) -> dict[str, Any]:
        return {"budget": int(self.np_random.integers(15, 46)) * 1000}

    def _score(self, utterance: str, reply: str) -> tuple[float, bool]:
        price = parse_price(reply) if reply.lower().startswith("deal") else None
        return (price / 1000.0, True) if price is not None else (0.0, False)

    def valid_actions(self) -> list[str]:
        return [f"I can sell it to you for ${k * 1000:,}." for k in range(15, 51)]

"""Transformer policies for text tasks: a GPT-2 style causal language model built from a ``transformers``
config (or a user's local pretrained checkpoint), its tokenizer, how a turn is written as tokens, and how an
action is chosen.

A turn's context is the episode so far, ``<bos> obs_1 <act> action_1 <eoa> obs_2 <act> ... obs_t <act>``,
cut on the left to ``max_context`` tokens (``history`` keeps only the last turns); the action follows as its
tokens and ``<eoa>``. Acting: where the env lists its valid actions (``env.unwrapped.valid_actions()``, at
most ``max_candidates`` of them) every candidate is scored by its log-likelihood and the best one taken (or one
sampled, for online training); otherwise the action is decoded greedily (or sampled) token by token, up to
``max_action_tokens``. Value-based algorithms (``ilql``, ``mc_returns``) add ``beta`` times their target
network's token Q values (target heads on the target body) to the logits before the softmax (ILQL's policy
extraction, pi_beta(a|s) exp(beta (Q - V))).

Nothing is downloaded: the tokenizer is built from the task's text (``algos.text.tokenizer``) and the model
from its config, unless ``pretrained`` names a local folder that ``transformers`` can load (model and
tokenizer); a path that does not exist is a one-line error before any run starts.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ...suite.checks import check_pretrained
from .tokenizer import HFTokenizer, TextTokenizer

__all__ = [
    "load_policy",
    "MODEL_PARAMS",
    "TextModel",
    "TextPolicy",
    "build_tokenizer",
    "build_model",
    "context_ids",
    "ActionBatch",
    "action_batch",
    "action_logprobs",
    "score_actions",
    "check_pretrained",
    "decode_tokens",
]

MODEL_PARAMS: dict[str, Any] = {
    "n_embd": 128,  # GPT-2 width
    "n_layer": 2,
    "n_head": 2,
    "n_positions": 512,  # the longest sequence the model can take
    "max_context": 256,  # a turn's context is cut on the left to this many tokens
    "history": 0,  # earlier turns put before the observation (None: as many as fit); the text envs' observation
    # is already what a policy conditions on (the partially observed ones write the history into it)
    "max_action_tokens": 16,  # the longest action decoded when the env does not list its valid actions
    "max_candidates": 64,  # score the env's valid actions when it lists at most this many, else decode
    "max_words": 2000,  # words of the task's text that get a token of their own
    "dropout": 0.0,
    "pretrained": None,  # a local folder with a transformers causal LM and its tokenizer
}


def build_tokenizer(settings: dict[str, Any], texts: list[str]) -> Any:
    """The pretrained checkpoint's tokenizer, else one built from ``texts``."""
    if settings.get("pretrained"):
        from transformers import AutoTokenizer

        return HFTokenizer(AutoTokenizer.from_pretrained(str(settings["pretrained"]), local_files_only=True))
    return TextTokenizer.build(texts, int(settings["max_words"]))


class TextModel(torch.nn.Module):
    """A causal LM and, for value-based algorithms, token Q and V heads on its last hidden states, with a
    target network: a copy of the Q head(s) AND of the transformer body they read (``target_body``), both
    updated by Polyak averaging, so that a target Q value is a past Q function's value, as in LMRL-Gym's ILQL
    (``target_base_params`` beside its target heads), not today's features read by yesterday's head. With
    ``separate_values`` the heads read the hidden states of a transformer of their own (a copy of the LM's
    body, as LMRL-Gym's ILQL keeps its value model apart from the behaviour policy): the LM's loss and the
    value losses then do not share a representation. With ``twin_q`` there are two Q heads, and the target
    value is the smaller of the two target heads' (clipped double Q, LMRL-Gym's ``min(target_q1, target_q2)``)."""

    def __init__(self, lm: Any, values: bool, separate_values: bool = False, twin_q: bool = False):
        super().__init__()
        self.lm = lm
        width = lm.config.hidden_size if hasattr(lm.config, "hidden_size") else lm.config.n_embd
        vocab = lm.get_output_embeddings().weight.shape[0]
        self.values = values
        self.twin_q = bool(values and twin_q)
        self.vlm = copy.deepcopy(lm.base_model) if values and separate_values else None
        if values:

            def head(out: int) -> torch.nn.Module:
                return torch.nn.Sequential(
                    torch.nn.Linear(width, 2 * width), torch.nn.ReLU(), torch.nn.Linear(2 * width, out)
                )

            self.q_head = head(vocab)
            self.v_head = head(1)
            self.target_q = copy.deepcopy(self.q_head).requires_grad_(False)
            if self.twin_q:
                self.q2_head = head(vocab)
                self.target_q2 = copy.deepcopy(self.q2_head).requires_grad_(False)
            self.target_body = copy.deepcopy(self.value_body()).requires_grad_(False)

    def value_body(self) -> Any:
        """The transformer whose hidden states the value heads read: the value model, or the LM's body."""
        return self.vlm if self.vlm is not None else self.lm.base_model

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The LM's logits and the hidden states the value heads read (B, L, width)."""
        out = self.lm(input_ids=ids, attention_mask=mask, output_hidden_states=self.vlm is None)
        return out.logits, out.hidden_states[-1] if self.vlm is None else self.value_hidden(ids, mask)

    def value_hidden(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The hidden states the value heads read, without the LM's logits where they are not needed."""
        if self.vlm is None:
            return self.lm(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states[-1]
        return self.vlm(input_ids=ids, attention_mask=mask).last_hidden_state

    def target_hidden(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The target body's hidden states (B, L, width): what the target Q heads read."""
        return self.target_body(input_ids=ids, attention_mask=mask).last_hidden_state

    def q_values(self, h: torch.Tensor) -> list[torch.Tensor]:
        """The online Q heads' values (one or two) of hidden states ``h`` (..., vocab)."""
        return [self.q_head(h), self.q2_head(h)] if self.twin_q else [self.q_head(h)]

    def target_values(self, h: torch.Tensor) -> torch.Tensor:
        """The target Q of the target body's hidden states ``h`` (..., vocab): the smaller of the two target
        heads' with ``twin_q``."""
        q = self.target_q(h)
        return torch.minimum(q, self.target_q2(h)) if self.twin_q else q

    @torch.no_grad()
    def update_target(self, tau: float) -> None:
        """Polyak: every target parameter moves ``tau`` of the way to its online one (heads and body)."""
        pairs = [(self.target_q, self.q_head), (self.target_body, self.value_body())]
        if self.twin_q:
            pairs.append((self.target_q2, self.q2_head))
        for target, online in pairs:
            for t, s in zip(target.parameters(), online.parameters()):
                t.mul_(1.0 - tau).add_(s, alpha=tau)


def build_model(settings: dict[str, Any], tok: Any, values: bool = False, twin_q: bool = False) -> TextModel:
    """A GPT-2 from its config sized by ``settings`` (or the pretrained checkpoint), with value heads (on a
    transformer of their own where ``settings["value_model"]`` is "separate"; two Q heads with ``twin_q``)."""
    if settings.get("pretrained"):
        from transformers import AutoModelForCausalLM

        lm = AutoModelForCausalLM.from_pretrained(str(settings["pretrained"]), local_files_only=True)
        lm.resize_token_embeddings(tok.vocab_size)
    else:
        from transformers import GPT2Config, GPT2LMHeadModel

        p = float(settings["dropout"])
        config = GPT2Config(
            vocab_size=tok.vocab_size,
            n_positions=int(settings["n_positions"]),
            n_embd=int(settings["n_embd"]),
            n_layer=int(settings["n_layer"]),
            n_head=int(settings["n_head"]),
            resid_pdrop=p,
            embd_pdrop=p,
            attn_pdrop=p,
            bos_token_id=tok.bos_id,
            eos_token_id=tok.eoa_id,
            pad_token_id=tok.pad_id,
            activation_function="gelu_pytorch_tanh",  # GPT-2's tanh GELU as one native kernel (same values)
        )
        lm = GPT2LMHeadModel(config)
    kind = settings.get("value_model", "shared")
    if kind not in ("shared", "separate"):
        raise ValueError(f"value_model must be 'shared' or 'separate', got {kind!r}")
    return TextModel(lm, values, separate_values=kind == "separate", twin_q=twin_q)


def size_metrics(model: TextModel) -> dict[str, float]:
    """A model's size as runs log it at step 0: ``model/parameters`` (every trained parameter, tied weights
    once) and ``model/parameters_non_embedding`` (less the token and position embeddings, the count scaling
    laws are drawn against: at a small vocabulary the position table can be most of a narrow model)."""
    params = {id(p): p for p in model.parameters() if p.requires_grad}
    embed = model.lm.get_input_embeddings().weight
    position = getattr(getattr(model.lm, "transformer", None), "wpe", None)
    tables = {id(embed)} | ({id(position.weight)} if position is not None else set())
    total = sum(p.numel() for p in params.values())
    embedding = sum(params[i].numel() for i in tables if i in params)
    return {"model/parameters": float(total), "model/parameters_non_embedding": float(total - embedding)}


def context_ids(
    tok: Any, turns: list[tuple[str, str]], obs: str, max_context: int, history: int | None = None
) -> list[int]:
    """Token ids of a turn's context: the earlier ``turns`` (observation, action), then ``obs`` and ``<act>``,
    cut on the left to ``max_context`` tokens."""
    if history is not None:
        turns = turns[-history:] if history > 0 else []
    ids = [tok.bos_id]
    for o, a in turns:
        ids += tok.encode(o) + [tok.act_id] + tok.encode(a) + [tok.eoa_id]
    ids += tok.encode(obs) + [tok.act_id]
    return ids[-max_context:]


class ActionBatch:
    """Contexts followed by actions, right-padded: ``ids``, ``mask`` (B, L); for each action token (``<eoa>``
    included) the position whose output predicts it, ``pos`` (B, K), the token ``tok`` and ``valid`` (B, K);
    ``first`` (B,): the position that predicts the action's first token (the turn's state)."""

    def __init__(self, ids, mask, pos, tok, valid, first):  # noqa: ANN001 - tensors
        self.ids, self.mask, self.pos, self.tok, self.valid, self.first = ids, mask, pos, tok, valid, first


def action_batch(tok: Any, contexts: list[list[int]], actions: list[list[int]], device: str) -> ActionBatch:
    """An ``ActionBatch`` of ``contexts`` and the token ids of their ``actions`` (``<eoa>`` is added)."""
    seqs = [c + a + [tok.eoa_id] for c, a in zip(contexts, actions)]
    width = max(len(s) for s in seqs)
    k = max(len(a) for a in actions) + 1
    ids = np.full((len(seqs), width), tok.pad_id, np.int64)
    mask = np.zeros((len(seqs), width), np.int64)
    pos = np.zeros((len(seqs), k), np.int64)
    toks = np.full((len(seqs), k), tok.pad_id, np.int64)
    valid = np.zeros((len(seqs), k), np.float32)
    for i, (c, s) in enumerate(zip(contexts, seqs)):
        ids[i, : len(s)] = s
        mask[i, : len(s)] = 1
        n = len(s) - len(c)
        pos[i, :n] = np.arange(len(c) - 1, len(s) - 1)
        toks[i, :n] = s[len(c) :]
        valid[i, :n] = 1.0
    t = lambda a: torch.as_tensor(a, device=device)  # noqa: E731
    return ActionBatch(t(ids), t(mask), t(pos), t(toks), t(valid), t(pos[:, 0]))


def _gather_pos(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """x (B, L, D) at positions pos (B, K) -> (B, K, D)."""
    return x.gather(1, pos[..., None].expand(-1, -1, x.shape[-1]))


def action_logits(model: TextModel, b: ActionBatch, beta: float = 0.0) -> torch.Tensor:
    """The policy's logits (B, K, vocab) at each action token's position: the LM's, plus ``beta`` times the
    target network's Q for value-based policies."""
    logits = model.lm(input_ids=b.ids, attention_mask=b.mask).logits
    out = _gather_pos(logits, b.pos)
    if beta and model.values:
        out = out + beta * model.target_values(_gather_pos(model.target_hidden(b.ids, b.mask), b.pos))
    return out


def action_logprobs(model: TextModel, b: ActionBatch, beta: float = 0.0) -> torch.Tensor:
    """log pi(action | context) for each row (B,): the sum over its tokens."""
    logp = F.log_softmax(action_logits(model, b, beta).float(), dim=-1)
    return (logp.gather(-1, b.tok[..., None])[..., 0] * b.valid).sum(dim=1)


def _cache_of(out: Any) -> Any:
    """A forward's key/value cache: ``out.cache`` (transformers >= 5.2x; ``past_key_values`` is deprecated
    there and goes in 5.40), else ``out.past_key_values``."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


def _cache_arg(body: Any) -> str:
    """The keyword a model's forward takes its cache by: ``cache``, or ``past_key_values`` before it."""
    return _cache_arg_of(type(body))


@functools.cache
def _cache_arg_of(cls: type) -> str:
    """``_cache_arg`` per model class, looked up once (it is asked on every scoring call)."""
    import inspect

    return "cache" if "cache" in inspect.signature(cls.forward).parameters else "past_key_values"


def _right_padded(
    tok: Any, contexts: list[list[int]], device: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``contexts`` as one batch padded on the right: ids, attention mask (n, longest) and lengths (n,)."""
    lens = torch.as_tensor([len(c) for c in contexts], device=device)
    width = int(lens.max())
    ids = torch.full((len(contexts), width), tok.pad_id, dtype=torch.long)
    mask = torch.zeros((len(contexts), width), dtype=torch.long)
    for r, c in enumerate(contexts):
        ids[r, : len(c)] = torch.as_tensor(c)
        mask[r, : len(c)] = 1
    return ids.to(device), mask.to(device), lens


@torch.no_grad()
def score_actions(model: TextModel, tok: Any, contexts: list[list[int]], cands: list[list[list[int]]],
                  device: str, beta: float = 0.0) -> list[np.ndarray]:  # fmt: skip
    """log pi(action | context) of every candidate action (token ids; ``<eoa>`` is added) of every context:
    one forward pass over the contexts, whose key/value cache every candidate of that context then reuses, so
    a context is read once however many candidates it has (as ``action_logprobs`` of each pair, up to float
    rounding)."""
    n = len(contexts)
    ids, mask, lens = _right_padded(tok, contexts, device)
    q_values = bool(beta and model.values)  # the target Q heads read the target body's hidden states
    out = model.lm(input_ids=ids, attention_mask=mask, use_cache=True)
    rows = torch.arange(n, device=device)
    owner = torch.as_tensor([i for i, c in enumerate(cands) for _ in c], dtype=torch.long, device=device)
    seqs = [a + [tok.eoa_id] for c in cands for a in c]
    k = max(len(q) for q in seqs)
    new = torch.full((len(seqs), k), tok.pad_id, dtype=torch.long)
    new_mask = torch.zeros((len(seqs), k), dtype=torch.long)
    for r, q in enumerate(seqs):
        new[r, : len(q)] = torch.as_tensor(q)
        new_mask[r, : len(q)] = 1
    new, new_mask = new.to(device), new_mask.to(device)
    both_mask = torch.cat([mask[owner], new_mask], dim=1)
    positions = lens[owner, None] + torch.arange(k, device=device)[None]

    def candidates(body: Any, first: Any) -> Any:
        """``body`` run on the candidates after the contexts' key/value cache (from its output ``first``)."""
        cache = _cache_of(first)
        cache.batch_select_indices(owner)
        return body(input_ids=new, attention_mask=both_mask, position_ids=positions, use_cache=True,
                    **{_cache_arg(body): cache})  # fmt: skip

    out2 = candidates(model.lm, out)
    # the output that predicts candidate token j: the context's last for j = 0, else the candidate's token j-1
    logits = torch.cat([out.logits[rows, lens - 1][owner, None], out2.logits[:, : k - 1]], dim=1)
    if q_values:
        t1 = model.target_body(input_ids=ids, attention_mask=mask, use_cache=True)
        h1, h2 = t1.last_hidden_state, candidates(model.target_body, t1).last_hidden_state
        hidden = torch.cat([h1[rows, lens - 1][owner, None], h2[:, : k - 1]], dim=1)
        logits = logits + beta * model.target_values(hidden)
    logp = F.log_softmax(logits.float(), dim=-1).gather(-1, new[..., None])[..., 0]
    total = (logp * new_mask).sum(dim=1).cpu().numpy()
    sizes = np.cumsum([len(c) for c in cands])[:-1]
    return list(np.split(total, sizes))


class TextPolicy:
    """The ``EpisodePolicy`` of a text model (see the module docstring). ``bind(envs)`` gives it the envs it
    acts in, for their valid actions; ``sample`` draws actions instead of taking the most likely one, and then
    ``last_logprobs`` holds log pi of the actions of the last ``act``. ``save(folder)`` writes it with
    ``transformers``' own ``save_pretrained`` (the LM, and a pretrained checkpoint's tokenizer), the value
    heads as a torch state dict and what rebuilds the rest as JSON; ``load_policy`` reads it back (``loader``:
    the run's saved policies, ``algos.keep``)."""

    loader = "text.policy:load_policy"
    policy_file = "model"  # a folder

    def __init__(
        self,
        model: TextModel,
        tok: Any,
        settings: dict[str, Any],
        device: str,
        beta: float = 0.0,
        sample: bool = False,
        rng: np.random.Generator | None = None,
    ):
        self.model, self.tok, self.settings, self.device = model, tok, settings, device
        self.beta, self.sample = beta, sample
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.envs: list[Any] = []
        self.turns: list[list[tuple[str, str]]] = []
        self.pending: list[str | None] = []
        self.last_logprobs = np.zeros(0)
        self.last_contexts: list[list[int]] = []

    def bind(self, envs: list[Any]) -> None:
        self.envs = list(envs)

    def save(self, path: Any) -> None:
        _save(self, path)

    def reset(self, n: int) -> None:
        self.turns = [[] for _ in range(n)]
        self.pending = [None] * n

    def candidates(self, i: int) -> list[str] | None:
        if i >= len(self.envs):
            return None
        get = getattr(self.envs[i].unwrapped, "valid_actions", None)
        acts = get() if get is not None else None
        if acts and len(acts) <= int(self.settings["max_candidates"]):
            return [str(a) for a in acts]
        return None

    def context(self, i: int, obs: str) -> list[int]:
        h = self.settings.get("history")
        return context_ids(self.tok, self.turns[i], obs, int(self.settings["max_context"]),
                           None if h is None else int(h))  # fmt: skip

    def act(self, obs: np.ndarray, rewards: np.ndarray, idx: np.ndarray) -> np.ndarray:
        obs_list = [str(o) for o in np.asarray(obs, dtype=object).reshape(-1)]
        idx_list = [int(i) for i in np.asarray(idx).reshape(-1)]
        for i in idx_list:  # the previous action of each episode is now a whole turn
            if self.pending[i] is not None:
                self.turns[i].append(self.pending[i])  # type: ignore[arg-type]
                self.pending[i] = None
        contexts = [self.context(i, o) for i, o in zip(idx_list, obs_list)]
        cands = [self.candidates(i) for i in idx_list]
        actions, logps = self.choose(contexts, cands)
        for i, o, a in zip(idx_list, obs_list, actions):
            self.pending[i] = (o, a)  # type: ignore[call-overload]
        self.last_logprobs = np.asarray(logps, np.float64)
        self.last_contexts = contexts
        return np.array(actions, dtype=str)

    @torch.no_grad()
    def choose(
        self, contexts: list[list[int]], cands: list[list[str] | None]
    ) -> tuple[list[str], list[float]]:
        was = self.model.training
        self.model.eval()
        try:
            out: list[tuple[str, float] | None] = [None] * len(contexts)
            scored = [i for i, c in enumerate(cands) if c]
            if scored:
                lps = self._score([contexts[i] for i in scored], [cands[i] for i in scored])  # type: ignore[misc]
                for i, scores in zip(scored, lps):
                    n = len(scores)
                    if self.sample:
                        probs = np.exp(scores - scores.max())
                        j = int(self.rng.choice(n, p=probs / probs.sum()))
                    else:
                        j = int(scores.argmax())
                    out[i] = (cands[i][j], float(scores[j] - _logsumexp(scores)))  # type: ignore[index]
            rest = [i for i, c in enumerate(cands) if not c]
            if rest:
                for i, (a, lp_) in zip(rest, self._decode([contexts[i] for i in rest])):
                    out[i] = (a, lp_)
            return [o[0] for o in out], [o[1] for o in out]  # type: ignore[index]
        finally:
            self.model.train(was)

    def _score(self, contexts: list[list[int]], cands: list[list[str]], chunk: int = 64) -> list[np.ndarray]:
        """log pi of each candidate action of each context, ``chunk`` contexts per forward pass."""
        res: list[np.ndarray] = []
        for s in range(0, len(contexts), chunk):
            acts = [[self.tok.encode(a) for a in c] for c in cands[s : s + chunk]]
            res += score_actions(self.model, self.tok, contexts[s : s + chunk], acts, self.device, self.beta)
        return res

    def _decode(self, contexts: list[list[int]]) -> list[tuple[str, float]]:
        """Greedy (or sampled) decoding until ``<eoa>`` or ``max_action_tokens``: (text, log-probability)."""
        banned = [self.tok.pad_id, self.tok.bos_id, self.tok.act_id, self.tok.unk_id]
        out = decode_tokens(self.model, self.tok, contexts, int(self.settings["max_action_tokens"]), banned,
                            self.device, sample=self.sample, beta=self.beta)  # fmt: skip
        return [(self.tok.decode(g), lp) for g, lp in out]


def _next_tokens(tok: Any, lg: torch.Tensor, banned: list[int], sample: bool, live: list[int],
                 gen: list[list[int]], logp: np.ndarray, done: np.ndarray, limit: int) -> list[tuple[int, int]]:  # fmt: skip
    """One decoding step of the ``live`` rows from their logits ``lg`` (one row each, in order): a token
    each, greedy or sampled, never a ``banned`` one; its log-probability added to ``logp``; a row that picks
    ``<eoa>`` or already holds ``limit`` tokens is ``done``, else the token joins its ``gen``. Returns the
    (row, token) pairs that joined."""
    lg[:, banned] = -torch.inf
    lp = F.log_softmax(lg, dim=-1)
    nxt = torch.multinomial(lp.exp(), 1)[:, 0] if sample else lp.argmax(dim=-1)
    picked = lp[torch.arange(len(live), device=lg.device), nxt].cpu().numpy()
    joined = []
    for r, i in enumerate(live):
        t = int(nxt[r])
        logp[i] += picked[r]
        if t == tok.eoa_id or len(gen[i]) >= limit:
            done[i] = True
        else:
            gen[i].append(t)
            joined.append((i, t))
    return joined


@torch.no_grad()
def decode_tokens(model: TextModel, tok: Any, contexts: list[list[int]], limit: int, banned: list[int],
                  device: str, sample: bool = False, beta: float = 0.0) -> list[tuple[list[int], float]]:  # fmt: skip
    """Tokens generated after each context until ``<eoa>`` (not included) or ``limit`` tokens, greedily (or
    sampled from torch's generator), never a ``banned`` one; with their summed log-probability. The contexts
    are read once; each new token is one step on their key/value cache (and on the target body's, with
    ``beta`` and value heads), as ``score_actions`` reads candidates: the same tokens as reading every
    sequence whole at each step (``decode_tokens_uncached``), up to float rounding, at a fraction of the cost
    for long contexts and outcomes (a world model's predicted observation)."""
    n = len(contexts)
    if n == 0:
        return []
    gen: list[list[int]] = [[] for _ in range(n)]
    logp = np.zeros(n)
    done = np.zeros(n, bool)
    ids, mask, lens = _right_padded(tok, contexts, device)
    rows = torch.arange(n, device=device)
    q_values = bool(beta and model.values)
    bodies: list[Any] = [model.lm] + ([model.target_body] if q_values else [])
    outs = [b(input_ids=ids, attention_mask=mask, use_cache=True) for b in bodies]
    lg = outs[0].logits[rows, lens - 1].float()
    if q_values:
        lg = lg + beta * model.target_values(outs[1].last_hidden_state[rows, lens - 1]).float()
    caches = [_cache_of(o) for o in outs]
    for step in range(limit + 1):  # every row is done by step ``limit`` (it then holds ``limit`` tokens)
        live = [i for i in range(n) if not done[i]]
        # the live rows only: a sample draws as many as they are
        feed = torch.full((n,), tok.pad_id, dtype=torch.long, device=device)
        for i, t in _next_tokens(tok, lg[live], banned, sample, live, gen, logp, done, limit):
            feed[i] = t
        if done.all():
            break
        # one step on the caches: a row that is done reads a pad it never uses
        mask = torch.cat([mask, torch.ones((n, 1), dtype=torch.long, device=device)], dim=1)
        positions = (lens + step)[:, None]
        steps = [b(input_ids=feed[:, None], attention_mask=mask, position_ids=positions, use_cache=True,
                   **{_cache_arg(b): c}) for b, c in zip(bodies, caches)]  # fmt: skip
        caches = [_cache_of(o) for o in steps]
        lg = steps[0].logits[:, -1].float()
        if q_values:
            lg = lg + beta * model.target_values(steps[1].last_hidden_state[:, -1]).float()
    return [(g, float(lp_)) for g, lp_ in zip(gen, logp)]


@torch.no_grad()
def decode_tokens_uncached(model: TextModel, tok: Any, contexts: list[list[int]], limit: int, banned: list[int],
                           device: str, sample: bool = False, beta: float = 0.0) -> list[tuple[list[int], float]]:  # fmt: skip
    """``decode_tokens`` reading every sequence whole at each step (no key/value cache): the reference its
    tests and ``benchmarks/text_decode.py`` compare it with."""
    n = len(contexts)
    gen: list[list[int]] = [[] for _ in range(n)]
    logp = np.zeros(n)
    done = np.zeros(n, bool)
    for _ in range(limit + 1):
        live = [i for i in range(n) if not done[i]]
        if not live:
            break
        seqs = [contexts[i] + gen[i] for i in live]
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), tok.pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for r, s in enumerate(seqs):
            ids[r, : len(s)] = torch.as_tensor(s)
            mask[r, : len(s)] = 1
        ids, mask = ids.to(device), mask.to(device)
        logits = model.lm(input_ids=ids, attention_mask=mask).logits
        last = torch.as_tensor([len(s) - 1 for s in seqs], device=device)
        rows = torch.arange(len(seqs), device=device)
        lg = logits[rows, last].float()
        if beta and model.values:
            lg = lg + beta * model.target_values(model.target_hidden(ids, mask)[rows, last]).float()
        _next_tokens(tok, lg, banned, sample, live, gen, logp, done, limit)
    return [(g, float(lp_)) for g, lp_ in zip(gen, logp)]


def _logsumexp(x: np.ndarray) -> float:
    m = float(x.max())
    return m + float(np.log(np.exp(x - m).sum()))


_SAVED = "rlbench-text-policy.json"


def _save(policy: TextPolicy, path: Any) -> None:
    import json
    from pathlib import Path

    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    model = policy.model
    model.lm.save_pretrained(folder / "lm")
    if isinstance(policy.tok, HFTokenizer):
        policy.tok.tok.save_pretrained(folder / "tokenizer")
    heads = {k: v.detach().cpu() for k, v in model.state_dict().items() if not k.startswith("lm.")}
    if heads:
        torch.save(heads, folder / "heads.pt")
    meta = {"tokenizer": policy.tok.to_dict(), "settings": policy.settings, "beta": policy.beta,
            "values": model.values, "separate_values": model.vlm is not None,
            "twin_q": model.twin_q}  # fmt: skip
    (folder / _SAVED).write_text(json.dumps(meta, indent=1, default=str) + "\n")


def load_policy(path: Any, device: str = "cpu") -> TextPolicy:
    """Rebuild a ``TextPolicy`` saved by ``TextPolicy.save`` (greedy: it takes the most likely action)."""
    import json
    from pathlib import Path

    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = Path(path)
    meta = json.loads((folder / _SAVED).read_text())
    if meta["tokenizer"].get("kind") == "text":
        tok: Any = TextTokenizer(meta["tokenizer"]["tokens"])
    else:
        tok = HFTokenizer(AutoTokenizer.from_pretrained(str(folder / "tokenizer"), local_files_only=True))
    lm = AutoModelForCausalLM.from_pretrained(str(folder / "lm"), local_files_only=True)
    model = TextModel(lm, bool(meta["values"]), separate_values=bool(meta["separate_values"]),
                      twin_q=bool(meta.get("twin_q", False)))  # fmt: skip
    if (folder / "heads.pt").is_file():
        heads = torch.load(folder / "heads.pt", weights_only=True)
        model.load_state_dict(heads, strict=False)
        if model.values and not any(k.startswith("target_body.") for k in heads):
            # saved before the target network had a body of its own: its target Q read the value body
            model.target_body.load_state_dict(model.value_body().state_dict())
    model.to(device).eval()
    return TextPolicy(model, tok, meta["settings"], device, beta=float(meta["beta"]))

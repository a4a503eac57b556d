"""rlbench's rollout generator (``rlbench-generator``): a small GPT-2-style transformer, built from a
``transformers`` config and trained from scratch on the real data, that imagines rollouts for new
instructions. ImagineBench's imagined rollouts come from a fine-tuned LLM; these come from this model.

Each step of an episode is two tokens: the state (with the instruction's embedding) and the action. From a
state token the model predicts the action (logits for discrete actions, a mean for continuous ones); from an
action token the next state (as a change, in the real data's standardised units), the reward and whether the
episode ends there. Generation starts from an initial state of the environment for the new instruction and
alternates: sample an action, predict the next state, reward and end, for ``horizon`` steps or until the
model says the episode ended. Everything is seeded: the same data and seed give the same model and rollouts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Episode", "RolloutGenerator"]


@dataclass
class Episode:
    states: np.ndarray  # (T + 1, state_dim): the states visited, the last one after the last action
    actions: np.ndarray  # (T,) int for discrete actions, (T, act_dim) float for continuous ones
    rewards: np.ndarray  # (T,)
    terminal: bool  # the episode ended in a terminal state (else it was cut off)
    embedding: np.ndarray  # (emb_dim,) the instruction's embedding
    instruction: str = ""


class RolloutGenerator:
    """See the module docstring. ``n_actions``: the number of discrete actions, or None with ``act_dim``."""

    def __init__(self, state_dim: int, emb_dim: int, n_actions: int | None = None, act_dim: int | None = None,
                 n_layer: int = 2, n_head: int = 2, n_embd: int = 64, context: int = 16, seed: int = 0,
                 device: str = "cpu"):  # fmt: skip
        import torch
        from transformers import GPT2Config, GPT2Model

        torch.manual_seed(seed)
        self.torch, self.device = torch, device
        self.state_dim, self.emb_dim, self.context = state_dim, emb_dim, context
        self.n_actions, self.act_dim = n_actions, act_dim
        self.seed = seed
        self.config = GPT2Config(vocab_size=1, bos_token_id=0, eos_token_id=0, n_positions=2 * context, n_embd=n_embd, n_layer=n_layer,
                                 n_head=n_head, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)  # fmt: skip
        nn = torch.nn
        self.body = GPT2Model(self.config)
        self.state_in = nn.Linear(state_dim + emb_dim, n_embd)
        self.action_in = nn.Embedding(n_actions, n_embd) if n_actions else nn.Linear(act_dim or 1, n_embd)
        self.action_out = nn.Linear(n_embd, n_actions or act_dim or 1)
        self.next_out = nn.Linear(n_embd, state_dim + 2)  # state change, reward, end logit
        self.modules = nn.ModuleList(
            [self.body, self.state_in, self.action_in, self.action_out, self.next_out]
        )
        self.modules.to(device)
        self.mean = np.zeros(state_dim, np.float32)
        self.std = np.ones(state_dim, np.float32)

    def describe(self) -> dict[str, Any]:
        c = self.config
        return {"generator": "rlbench-generator", "generator_model": "GPT-2 (transformers config, from scratch)",
                "generator_layers": c.n_layer, "generator_width": c.n_embd, "generator_context": self.context}  # fmt: skip

    # -- forward ---------------------------------------------------------------------------------------
    def _forward(self, states: Any, emb: Any, actions: Any, mask: Any) -> tuple[Any, Any]:
        """states (B, L, S) standardised, emb (B, E), actions (B, L[, A]), mask (B, L) -> outputs at the
        state tokens (action predictions) and at the action tokens (next state, reward, end)."""
        torch = self.torch
        b, length = states.shape[:2]
        s_tok = self.state_in(torch.cat([states, emb[:, None, :].expand(b, length, -1)], -1))
        a_tok = self.action_in(actions)
        tokens = torch.stack([s_tok, a_tok], 2).reshape(b, 2 * length, -1)
        attn = mask.repeat_interleave(2, 1)
        h = self.body(inputs_embeds=tokens, attention_mask=attn).last_hidden_state.reshape(b, length, 2, -1)
        return self.action_out(h[:, :, 0]), self.next_out(h[:, :, 1])

    # -- training --------------------------------------------------------------------------------------
    def fit(self, episodes: list[Episode], steps: int = 500, batch_size: int = 32, lr: float = 1e-3,
            progress: Any = None) -> list[float]:  # fmt: skip
        """Train on ``episodes`` (real data) for ``steps`` updates; returns the loss every 50 updates."""
        torch = self.torch
        f = torch.nn.functional
        all_states = np.concatenate([e.states for e in episodes])
        self.mean = all_states.mean(0).astype(np.float32)
        self.std = (all_states.std(0) + 1e-3).astype(np.float32)
        rng = np.random.default_rng(self.seed)
        opt = torch.optim.AdamW(self.modules.parameters(), lr=lr, weight_decay=1e-4)
        ctx, losses = self.context, []
        self.modules.train()
        for step in range(steps):
            st, nx, ac, rw, dn, em, mk = [], [], [], [], [], [], []
            for i in rng.integers(len(episodes), size=batch_size):
                e = episodes[i]
                t_len = len(e.actions)
                start = int(rng.integers(max(1, t_len - ctx + 1)))
                end = min(t_len, start + ctx)
                n, pad = end - start, ctx - (end - start)
                s = (e.states[start : end + 1] - self.mean) / self.std
                st.append(np.pad(s[:-1], ((0, pad), (0, 0))))
                nx.append(np.pad(s[1:] - s[:-1], ((0, pad), (0, 0))))
                a = e.actions[start:end]
                ac.append(np.pad(a, ((0, pad),) + ((0, 0),) * (a.ndim - 1)))
                rw.append(np.pad(e.rewards[start:end], (0, pad)))
                d = np.zeros(n)
                d[-1] = float(e.terminal and end == t_len)
                dn.append(np.pad(d, (0, pad)))
                em.append(e.embedding)
                mk.append(np.pad(np.ones(n), (0, pad)))

            def t(x: list, dtype: Any = torch.float32) -> Any:
                return torch.as_tensor(np.stack(x), dtype=dtype, device=self.device)

            mask = t(mk)
            actions = t(ac, torch.long if self.n_actions else torch.float32)
            act_pred, nxt = self._forward(t(st), t(em), actions, mask)
            if self.n_actions:
                a_loss = f.cross_entropy(
                    act_pred.reshape(-1, self.n_actions), actions.reshape(-1), reduction="none"
                )
            else:
                a_loss = ((act_pred - actions) ** 2).mean(-1).reshape(-1)
            s_loss = ((nxt[..., : self.state_dim] - t(nx)) ** 2).mean(-1).reshape(-1)
            r_loss = ((nxt[..., -2] - t(rw)) ** 2).reshape(-1)
            d_loss = f.binary_cross_entropy_with_logits(nxt[..., -1], t(dn), reduction="none").reshape(-1)
            m = mask.reshape(-1)
            loss = ((a_loss + s_loss + r_loss + d_loss) * m).sum() / m.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 50 == 0 or step == steps - 1:
                losses.append(float(loss.detach()))
                if progress is not None:
                    progress(f"generator: update {step + 1}/{steps}, loss {losses[-1]:.4f}")
        self.modules.eval()
        return losses

    # -- generation ------------------------------------------------------------------------------------
    def generate(self, starts: np.ndarray, embeddings: np.ndarray, horizon: int, round_states: bool = False,
                 instructions: list[str] | None = None) -> list[Episode]:  # fmt: skip
        """Imagine one rollout from each initial state (B, state_dim) for its instruction's embedding."""
        torch = self.torch
        rng = np.random.default_rng(self.seed + 1)
        b = len(starts)
        states = [[(np.asarray(s, np.float32) - self.mean) / self.std] for s in starts]
        actions: list[list[Any]] = [[] for _ in range(b)]
        rewards: list[list[float]] = [[] for _ in range(b)]
        terminal = [False] * b
        alive = list(range(b))
        emb = torch.as_tensor(np.asarray(embeddings, np.float32), device=self.device)
        a_shape = () if self.n_actions else (self.act_dim or 1,)
        with torch.no_grad():
            for _ in range(horizon):
                if not alive:
                    break
                length = min(self.context, len(actions[alive[0]]) + 1)
                s = np.stack([np.stack(states[i][-length:]) for i in alive])
                prev = [actions[i][-(length - 1) :] if length > 1 else [] for i in alive]
                a = np.zeros((len(alive), length, *a_shape), np.int64 if self.n_actions else np.float32)
                for j, p in enumerate(prev):
                    if p:
                        a[j, : len(p)] = np.asarray(p)
                mask = torch.ones((len(alive), length), device=self.device)
                st = torch.as_tensor(s, device=self.device)
                act_pred, _ = self._forward(st, emb[alive], torch.as_tensor(a, device=self.device), mask)
                if self.n_actions:
                    probs = torch.softmax(act_pred[:, -1], -1).cpu().numpy().astype(np.float64)
                    chosen = np.array([rng.choice(self.n_actions, p=p / p.sum()) for p in probs])
                else:
                    chosen = act_pred[:, -1].cpu().numpy()
                a[:, -1] = chosen
                _, nxt = self._forward(st, emb[alive], torch.as_tensor(a, device=self.device), mask)
                out = nxt[:, -1].cpu().numpy()
                still = []
                for j, i in enumerate(alive):
                    new = states[i][-1] + out[j, : self.state_dim]
                    if round_states:
                        new = (np.round(new * self.std + self.mean) - self.mean) / self.std
                    states[i].append(new.astype(np.float32))
                    actions[i].append(chosen[j])
                    rewards[i].append(float(out[j, -2]))
                    if out[j, -1] > 0:  # the model says the episode ends here
                        terminal[i] = True
                    else:
                        still.append(i)
                alive = still
        return [
            Episode(
                states=np.stack(states[i]) * self.std + self.mean,
                actions=np.asarray(actions[i]),
                rewards=np.asarray(rewards[i], np.float32),
                terminal=terminal[i],
                embedding=np.asarray(embeddings[i], np.float32),
                instruction=(instructions or [""] * b)[i],
            )
            for i in range(b)
        ]

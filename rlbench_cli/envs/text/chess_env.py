"""LMRL-Gym's Chess and Endgames: the agent plays white against Stockfish, positions and moves through the
``chess`` package.

As LMRL-Gym (llm_rl_scripts/chess/env/env.py): the observation is the position's FEN with its characters
spaced (LMRL-Gym's ``preprocess_state_og``), the action a move in SAN (spaces ignored, so ``e 4`` is ``e4``).
Reward: 1 when the agent mates, -1 when it is mated, 0 for a draw and for every other legal move; an illegal
move costs -1 and the game goes on (the position is unchanged, the opponent does not move). The episode ends
with the game or after ``max_moves`` agent moves (400; legal or not), truncated.

The opponent is Debian's ``stockfish`` (``stockfish=`` a path or a command name; default ``stockfish`` on the
PATH, else /usr/games/stockfish) at LMRL-Gym's setting: one thread, limited strength at ``elo=1200`` (raised
to the engine's lowest UCI_Elo where it is higher: 1350 for Stockfish 15), ``movetime=0.1`` seconds a move;
``skill_level=`` sets Stockfish's "Skill Level" instead. The engine starts once per env and stops with
``env.close()``.

Endgames start from a position drawn (seeded) from a small set generated here (``endgame_positions()``:
king and queen or king and rook against a lone king, white to move, legal, not in check), or from the user's
LMRL-Gym position file (``positions=``: one FEN a line, or JSON lines with a ``fen`` / ``position`` field).
"""

from __future__ import annotations

import json
import random
import shutil
from functools import lru_cache
from pathlib import Path
from typing import Any

from ...errors import UsageError
from .base import TextEnv

__all__ = [
    "ChessEnv",
    "EndgamesEnv",
    "find_stockfish",
    "endgame_positions",
    "load_positions",
    "spaced_fen",
    "unspaced_fen",
]

MAX_MOVES = 400
DEBIAN_STOCKFISH = "/usr/games/stockfish"


def spaced_fen(fen: str) -> str:
    return " ".join(fen)


def unspaced_fen(text: str) -> str:
    """LMRL-Gym's spaced FEN (``4 K 3 / 8 ...   w   -``) back to a FEN (its ``postprocess_state``)."""
    return text.replace("  ", "\0").replace(" ", "").replace("\0", " ").strip()


def find_stockfish(setting: str | None = None) -> str:
    """The Stockfish executable ``setting`` names (a path or a command), or the default; a one-line error
    naming the ``stockfish`` setting when there is none."""
    name = setting or "stockfish"
    found = shutil.which(name) or (shutil.which(DEBIAN_STOCKFISH) if setting is None else None)
    if found is None:
        raise UsageError(
            f"stockfish: no executable {name!r} found; install Debian's stockfish package "
            "(apt-get install stockfish) or set stockfish: to the engine's path in the env kwargs"
        )
    return found


class Uci:
    """A minimal UCI client over pipes (no threads, so an env left unclosed never holds the interpreter up
    at exit: the engine sees end-of-file and quits)."""

    def __init__(self, path: str) -> None:
        import subprocess

        self.proc = subprocess.Popen(
            [path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        self.options: dict[str, dict[str, str]] = {}
        self._send("uci")
        for line in self._until("uciok"):
            if line.startswith("option name "):
                name, _, rest = line[len("option name ") :].partition(" type ")
                words = rest.split()
                self.options[name] = dict(zip(words[1::2], words[2::2], strict=False)) | {"type": words[0]}

    def _send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def _until(self, token: str) -> list[str]:
        assert self.proc.stdout is not None
        lines = []
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise OSError(f"the engine stopped before answering {token!r}")
            line = line.strip()
            lines.append(line)
            if line.split(" ", 1)[0] == token:
                return lines

    def configure(self, options: dict[str, Any]) -> None:
        for name, value in options.items():
            v = str(value).lower() if isinstance(value, bool) else value
            self._send(f"setoption name {name} value {v}")
        self._send("isready")
        self._until("readyok")

    def best_move(self, fen: str, movetime: float | None = None, depth: int | None = None) -> str:
        self._send(f"position fen {fen}")
        self._send(
            f"go depth {int(depth)}" if depth else f"go movetime {max(1, round(1000 * (movetime or 0.1)))}"
        )
        return self._until("bestmove")[-1].split()[1]

    def quit(self) -> None:
        try:
            self._send("quit")
            self.proc.wait(timeout=5)
        except Exception:  # noqa: BLE001 - gone already, or stuck: make sure it ends
            self.proc.kill()


def _open_engine(path: str, elo: int | None, skill_level: int | None) -> Uci:
    try:
        engine = Uci(path)
    except OSError as e:
        raise UsageError(
            f"stockfish: cannot start {path!r} as a UCI engine ({e}); check the stockfish setting"
        ) from None
    opts: dict[str, Any] = {}
    if "Threads" in engine.options:
        opts["Threads"] = 1
    if skill_level is not None and "Skill Level" in engine.options:
        opts["Skill Level"] = int(skill_level)
    elif elo is not None and "UCI_Elo" in engine.options:
        o = engine.options["UCI_Elo"]
        opts["UCI_LimitStrength"] = True
        opts["UCI_Elo"] = max(int(o.get("min", elo)), min(int(elo), int(o.get("max", elo))))
    engine.configure(opts)
    return engine


class ChessEnv(TextEnv):
    """Full games from the standard start (or ``fen=``)."""

    def __init__(
        self,
        stockfish: str | None = None,
        elo: int | None = 1200,
        skill_level: int | None = None,
        movetime: float = 0.1,
        max_moves: int = MAX_MOVES,
        fen: str | None = None,
    ) -> None:
        try:
            import chess
        except ImportError:
            raise UsageError(
                "the Chess and Endgames envs need the chess package: pip install 'rlbench-cli[text]'"
            ) from None

        super().__init__()
        self.stockfish_path = find_stockfish(stockfish)
        self.movetime, self.max_moves = float(movetime), int(max_moves)
        self._start_fen = fen or chess.STARTING_FEN
        self.board = chess.Board(self._start_fen)
        self.moves = 0
        self.engine = _open_engine(self.stockfish_path, elo, skill_level)

    def _start(self, options: dict[str, Any] | None) -> str:
        return (options or {}).get("fen") or self._start_fen

    def _info(self, **extra: Any) -> dict[str, Any]:
        return {"fen": self.board.fen(), "moves": self.moves, "stockfish": self.stockfish_path, **extra}

    def _observation(self) -> str:
        self._last_obs = spaced_fen(self.board.fen())
        return self._last_obs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        import chess

        super().reset(seed=seed)
        fen = self._start(options)
        try:
            self.board = chess.Board(fen)
        except ValueError as e:
            raise ValueError(f"start position {fen!r} is not a FEN ({e})") from None
        if self.board.turn != chess.WHITE:
            raise ValueError(f"start position {fen!r}: the agent plays white, so white must be to move")
        self.moves = 0
        return self._observation(), self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        import chess

        self.moves += 1
        san = str(action).replace(" ", "").strip()
        try:
            move = self.board.parse_san(san)
            if move == chess.Move.null():
                raise ValueError("null move")
        except ValueError:
            truncated = self.moves >= self.max_moves
            return self._observation(), -1.0, False, truncated, self._info(illegal=True)
        self.board.push(move)
        if self.board.is_game_over():
            reward = 1.0 if self.board.is_checkmate() else 0.0
            return (
                self._observation(),
                reward,
                True,
                False,
                self._info(illegal=False, result=self.board.result()),
            )
        reply = chess.Move.from_uci(self.engine.best_move(self.board.fen(), movetime=self.movetime))
        reply_san = self.board.san(reply)
        self.board.push(reply)
        if self.board.is_game_over():
            reward = -1.0 if self.board.is_checkmate() else 0.0
            info = self._info(illegal=False, opponent_move=reply_san, result=self.board.result())
            return self._observation(), reward, True, False, info
        truncated = self.moves >= self.max_moves
        return self._observation(), 0.0, False, truncated, self._info(illegal=False, opponent_move=reply_san)

    def valid_actions(self) -> list[str]:
        return sorted(self.board.san(m) for m in self.board.legal_moves)

    def close(self) -> None:
        engine, self.engine = getattr(self, "engine", None), None
        if engine is not None:
            try:
                engine.quit()
            except Exception:  # noqa: BLE001 - the engine may be gone already
                pass


@lru_cache(maxsize=1)
def endgame_positions(n: int = 64, seed: int = 0) -> tuple[str, ...]:
    """``n`` endgame start positions (half KQ vs k, half KR vs k), white to move, legal, not check, not over."""
    import chess

    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n:
        pieces = "KQk" if len(out) % 2 == 0 else "KRk"
        board = chess.Board(None)
        squares = rng.sample(range(64), len(pieces))
        for sym, sq in zip(pieces, squares, strict=True):
            board.set_piece_at(sq, chess.Piece.from_symbol(sym))
        board.turn = chess.WHITE
        if board.is_valid() and not board.is_check() and not board.is_game_over():
            out.append(board.fen())
    return tuple(out)


def load_positions(path: str) -> tuple[str, ...]:
    """FENs from an LMRL-Gym position file: one FEN a line, or JSON lines with ``fen`` or ``position``."""
    import chess

    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"positions {path}: cannot read it ({e}); give a file with one FEN a line") from None
    out = []
    for lineno, line in enumerate(lines, 1):
        text = line.strip()
        if not text:
            continue
        if text.startswith("{"):
            try:
                obj = json.loads(text)
                text = str(obj.get("fen") or obj.get("position") or obj.get("from_state") or "")
            except (json.JSONDecodeError, AttributeError):
                text = ""
        try:
            board = chess.Board(unspaced_fen(text) if "   " in text else text)
            if not board.is_valid() or board.turn != chess.WHITE:
                raise ValueError("not a legal position with white to move")
        except ValueError as e:
            raise UsageError(
                f"positions {path}:{lineno}: not a legal FEN with white to move ({e}); fix or remove that line"
            ) from None
        out.append(board.fen())
    if not out:
        raise UsageError(f"positions {path}: holds no positions; one FEN a line")
    return tuple(out)


class EndgamesEnv(ChessEnv):
    """Endgames: each episode starts from a position of the set, drawn by the reset seed."""

    def __init__(self, positions: str | None = None, **kwargs: Any) -> None:
        self.positions = load_positions(positions) if positions else endgame_positions()
        super().__init__(**kwargs)

    def _start(self, options: dict[str, Any] | None) -> str:
        if (options or {}).get("fen"):
            return options["fen"]  # type: ignore[index]
        return self.positions[int(self.np_random.integers(len(self.positions)))]

"""Chess and Endgames against Debian's real Stockfish (short: tiny move times, a few moves)."""

from __future__ import annotations

import pytest

from rlbench_cli.envs import make_env
from rlbench_cli.envs.text.chess_env import endgame_positions, load_positions, spaced_fen
from rlbench_cli.errors import UsageError

FAST = {"movetime": 0.01}


@pytest.fixture
def endgames(stockfish):
    env = make_env("rlbench/Endgames-v0", FAST)
    yield env
    env.close()


def test_mate_wins_plus_one(endgames):
    fen = "7k/8/6K1/8/8/8/8/1Q6 w - - 0 1"
    obs, info = endgames.reset(seed=0, options={"fen": fen})
    assert obs == spaced_fen(fen) and "Qb8#" in endgames.unwrapped.valid_actions()
    obs, r, term, trunc, info = endgames.step("Q b 8 #")
    assert (r, term, trunc, info["result"]) == (1.0, True, False, "1-0")


def test_illegal_move_costs_one_and_the_game_goes_on(endgames):
    obs, info = endgames.reset(seed=3)
    obs2, r, term, trunc, info2 = endgames.step("Ke9")
    assert (obs2, r, term, trunc, info2["illegal"]) == (obs, -1.0, False, False, True)
    legal = endgames.unwrapped.valid_actions()[0]
    obs3, r, term, trunc, info3 = endgames.step(legal)
    assert not info3["illegal"] and r in (0.0, 1.0) and obs3 != obs
    assert info3.get("opponent_move") or term  # Stockfish answered


@pytest.mark.usefixtures("stockfish")
def test_being_mated_by_stockfish_loses_minus_one():
    # full strength (elo None): a strength-limited engine may miss the mate on purpose
    fen = "rnbqkbnr/pppp1ppp/8/4p3/8/5P2/PPPPP1PP/RNBQKBNR w KQkq - 0 2"
    env = make_env("rlbench/Chess-v0", {**FAST, "elo": None, "fen": fen})
    try:
        env.reset(seed=0)
        obs, r, term, trunc, info = env.step("g4")
        assert (r, term, info["opponent_move"], info["result"]) == (-1.0, True, "Qh4#", "0-1")
    finally:
        env.close()


@pytest.mark.usefixtures("stockfish")
def test_max_moves_truncates():
    env = make_env("rlbench/Chess-v0", {**FAST, "max_moves": 2})
    try:
        obs, _ = env.reset(seed=0)
        assert obs.startswith("r n b q k b n r /")
        assert env.step("e4")[1:4] == (0.0, False, False)
        assert env.step("xx")[1:4] == (-1.0, False, True)
    finally:
        env.close()


def test_endgame_positions_are_seeded_legal_and_white_to_move(endgames):
    import chess

    positions = endgame_positions()
    assert len(positions) == 64 and all(chess.Board(f).is_valid() and " w " in f for f in positions)
    starts = {endgames.reset(seed=s)[1]["fen"] for s in range(6)}
    assert starts <= set(positions) and len(starts) > 1
    assert endgames.reset(seed=4)[1]["fen"] == endgames.reset(seed=4)[1]["fen"]


def test_user_position_file_fen_json_and_lmrl_spaced(tmp_path):
    fen = "7k/8/6K1/8/8/8/8/1Q6 w - - 0 1"
    p = tmp_path / "positions.jsonl"
    p.write_text(f'{fen}\n{{"fen": "{fen}"}}\n{spaced_fen(fen)}\n')
    assert load_positions(str(p)) == (fen, fen, fen)
    p.write_text(f"{fen}\nnot a fen\n")
    with pytest.raises(UsageError, match=r"positions .*positions\.jsonl:2: not a legal FEN"):
        load_positions(str(p))


def test_missing_stockfish_names_the_setting(tmp_path):
    with pytest.raises(UsageError, match=r"^stockfish: no executable '.*nope' found"):
        make_env("rlbench/Chess-v0", {"stockfish": str(tmp_path / "nope")})


@pytest.mark.usefixtures("stockfish")
def test_scripted_optimal_policy_mates_in_endgames():
    from rlbench_cli.datagen.text import build_text_dataset
    from rlbench_cli.datasets.text import episode_returns

    opt = build_text_dataset("rlbench/Endgames-v0", "optimal", 3, seed=0, env_kwargs=FAST)
    assert episode_returns(opt) == [1.0, 1.0, 1.0]


@pytest.mark.usefixtures("stockfish")
def test_an_env_left_unclosed_does_not_hold_the_interpreter_at_exit():
    import subprocess
    import sys

    code = (
        "from rlbench_cli.envs import make_env\n"
        "env = make_env('rlbench/Chess-v0', {'movetime': 0.01})\n"
        "env.reset(seed=0)\n"
        "print(env.step('e4')[1])\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "0.0", r.stderr

"""LMRL-Gym's JSONL layouts read into TextEpisodes, and malformed lines as one-line errors naming file and line."""

from __future__ import annotations

import json

import pytest

from rlbench_cli.datasets.text import load_text_dataset
from rlbench_cli.errors import ImportInvalid

pytestmark = pytest.mark.fast


def _write(tmp_path, *objs, raw: str = ""):
    p = tmp_path / "lmrl.jsonl"
    p.write_text("".join(json.dumps(o) + "\n" for o in objs) + raw)
    return p


def test_maze_text_history_layout(tmp_path):
    item = {"text_history": ["walls left\n", "move right\n", "walls up\n", "move down\n"],
            "rewards": [0.0, -1.0, 0.0, 0.0], "dones": [False, False, False, True]}  # fmt: skip
    data = load_text_dataset(_write(tmp_path, item), env="rlbench/MazePO-v0")
    assert data.env == "rlbench/MazePO-v0" and data.level == "lmrl"
    assert data[0] == [
        {"observation": "walls left", "action": "move right", "reward": -1.0, "done": False},
        {
            "observation": "walls left\nmove right\nwalls up",
            "action": "move down",
            "reward": 0.0,
            "done": True,
        },
    ]


def test_sequence_layout(tmp_path):
    item = {"sequence": [["Wordle:\n", False], ["a p p l e\n", True], ["b y b b g\n", False],
                         ["c r a n e\n", True], ["g g g g g\n", False]],
            "reward": [-1.0, 0.0, 0.0, 0.0], "done": True}  # fmt: skip
    (ep,) = load_text_dataset(_write(tmp_path, item), env="rlbench/Wordle-v0")
    assert [t["action"] for t in ep] == ["a p p l e", "c r a n e"]
    assert [t["reward"] for t in ep] == [-1.0, 0.0] and [t["done"] for t in ep] == [False, True]
    assert ep[1]["observation"] == "Wordle:\na p p l e\nb y b b g"


def test_chess_transition_layout_groups_moves_into_games(tmp_path):
    lines = [{"from_state": "fen1", "action": "e4", "reward": 0, "done": False},
             {"from_state": "fen2", "action": "Qh5", "reward": 1, "done": True},
             {"from_state": "fen3", "action": "d4", "reward": -1, "done": True}]  # fmt: skip
    data = load_text_dataset(_write(tmp_path, *lines), env="rlbench/Chess-v0")
    assert [len(ep) for ep in data] == [2, 1] and data[0][1]["reward"] == 1.0


def test_malformed_lines_name_file_and_line(tmp_path):
    good = {"sequence": [["q\n", False], ["a\n", True]], "reward": [1.0], "done": True}
    with pytest.raises(ImportInvalid, match=r"lmrl\.jsonl:2: not a JSON object"):
        load_text_dataset(_write(tmp_path, good, raw="{oops\n"), env="rlbench/Wordle-v0")
    with pytest.raises(ImportInvalid, match=r"lmrl\.jsonl:2: reward must list one number per item"):
        load_text_dataset(_write(tmp_path, good, {**good, "reward": []}), env="rlbench/Wordle-v0")
    with pytest.raises(ImportInvalid, match=r"lmrl\.jsonl:1: unknown layout \(keys: foo\)"):
        load_text_dataset(_write(tmp_path, {"foo": 1}), env="rlbench/Wordle-v0")
    with pytest.raises(ImportInvalid, match="name the env"):
        load_text_dataset(_write(tmp_path, good))


def test_em_turns_are_spread_over_every_held_out_episode():
    from rlbench_cli.datasets.text import held_out_ends, held_out_turns

    def ep(name, n):
        return [{"observation": f"{name}{i}", "action": "a"} for i in range(n)]

    walk, short = (
        ep("w", 51),
        [ep(f"s{k}_", 3) for k in range(5)],
    )  # a long random walk first, then short ones
    picked = held_out_turns([walk, *short], 10)
    assert len(picked) == 10 and len(set(picked)) == 10
    assert picked[0] == ("w0", "a", "w1") and picked[-1] == ("s4_1", "a", "s4_2")  # first and last turn
    assert sum(o.startswith("s") for o, _, _ in picked) == 2  # 10 of 60 turns: 2 of the short ones' 10
    assert all(nxt == o[:-1] + str(int(o[-1]) + 1) for o, _, nxt in picked if o[0] == "s")
    assert held_out_turns([walk, *short], 100) == held_out_turns(
        [walk, *short], 60
    )  # all 60 that have a next
    assert len(held_out_turns([walk, *short], 1000)) == 60 and held_out_turns([walk], 0) == []
    walk[-1] |= {"done": True, "truncated": True}  # a time limit's cut: no goal there
    for k, e in enumerate(short):
        e[-1] |= {"done": True, "reward": float(k)}
    assert [t["reward"] for t in held_out_ends([walk, *short], 3)] == [0.0, 1.0, 2.0]

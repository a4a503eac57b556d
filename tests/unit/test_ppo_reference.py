"""CPU runs of ``ppo`` stay bitwise what they were: the reference runs of ``ppo_reference.py`` hash to the
values recorded from the code before ppo became one package (on each kind of machine recorded: see
ppo_reference.py), and checkpoints that code wrote still resume to the same rows."""

from __future__ import annotations

from pathlib import Path

import pytest
from ppo_reference import PACKED_RUNS, RUNS, expected, run, run_fixture, run_packed


@pytest.mark.parametrize("name", list(RUNS))
def test_unpacked_ppo_rows_are_bitwise_the_reference(tmp_path: Path, name: str) -> None:
    assert run(name, tmp_path) in expected(name)


@pytest.mark.parametrize("name", list(PACKED_RUNS))
def test_packed_ppo_rows_are_bitwise_the_reference(tmp_path: Path, name: str) -> None:
    assert run_packed(name, tmp_path) in expected(name)


@pytest.mark.parametrize("name", ["pendulum-cost-resumed", "packed-cartpole-resumed"])
def test_a_checkpoint_of_the_older_code_resumes_to_the_same_rows(tmp_path: Path, name: str) -> None:
    assert run_fixture(name, tmp_path) in expected(f"{name}-fixture")

"""CPU runs of ``ppo`` stay bitwise what they were: the reference runs of ``ppo_reference.py`` hash to the
values recorded from the code before ppo became one package, and checkpoints that code wrote still resume
to the same rows."""

from __future__ import annotations

from pathlib import Path

import pytest
from ppo_reference import HASHES, PACKED_RUNS, RUNS, run, run_fixture, run_packed


@pytest.mark.parametrize("name", list(RUNS))
def test_unpacked_ppo_rows_are_bitwise_the_reference(tmp_path: Path, name: str) -> None:
    assert run(name, tmp_path) == HASHES[name]


@pytest.mark.parametrize("name", list(PACKED_RUNS))
def test_packed_ppo_rows_are_bitwise_the_reference(tmp_path: Path, name: str) -> None:
    assert run_packed(name, tmp_path) == HASHES[name]


@pytest.mark.parametrize("name", ["pendulum-cost-resumed", "packed-cartpole-resumed"])
def test_a_checkpoint_of_the_older_code_resumes_to_the_same_rows(tmp_path: Path, name: str) -> None:
    assert run_fixture(name, tmp_path) == HASHES[name]

"""A task played with env kwargs that change what lmrl's reference row measured (Wordle's word list, its number
of tries) gets no row by its env label, and a suite whose dataset's label cannot say so is refused at load
unless it gives that task its own references: one line naming the field, exit 2."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from rlbench_cli.cli.app import app
from rlbench_cli.errors import SuiteInvalid
from rlbench_cli.references import LMRL, lmrl_row_kwargs, resolve
from rlbench_cli.suite.loader import load_suite

pytestmark = pytest.mark.fast

ROW = (-6.0, -4.499, -3.503)


def test_an_env_label_naming_a_word_list_or_tries_has_no_lmrl_row():
    assert LMRL.lookup("rlbench/Wordle-v0") == ROW
    assert LMRL.lookup("Wordle-v0-mixed") == ROW
    assert LMRL.lookup("rlbench/Wordle-v0[word_list=/data/words30.txt]") is None
    assert LMRL.lookup("rlbench/Wordle-v0[max_tries=8]") is None
    # kwargs that do not change a row keep it, on Wordle and elsewhere
    assert LMRL.lookup("rlbench/Endgames-v0[max_moves=50]") == LMRL.lookup("rlbench/Endgames-v0")
    # so auto leaves such a suite raw instead of giving Wordle's default row to another word list
    assert resolve(["rlbench/Wordle-v0[word_list=/data/w.txt]"], "auto").name is None


def test_the_kwargs_that_change_a_row_are_named():
    assert lmrl_row_kwargs("Wordle-v0-mixed", {"word_list": "/w.txt"}) == ["word_list"]
    assert lmrl_row_kwargs("Wordle-v0-mixed", {"max_tries": 8}) == ["max_tries"]
    assert lmrl_row_kwargs("Wordle-v0-mixed", {}) == []
    assert lmrl_row_kwargs("MazeFO-v0-mixed", {"word_list": "/w.txt"}) == []


def _suite(tmp_path, normalize: str = "") -> str:
    words = tmp_path / "words.txt"
    words.write_text("crane\nslate\nmoist\n")
    path = tmp_path / "wordle.yaml"
    path.write_text(
        "name: w\nseeds: 1\nbudget: {steps: 10, eval_every: 10, eval_episodes: 2}\n"
        f"datasets: [{{name: Wordle-v0-mixed, kwargs: {{word_list: {words}}}}}]\nalgorithms: [bc]\n"
        + normalize
    )
    return str(path)


@pytest.mark.parametrize(
    "normalize",
    [
        "",
        "normalize: {table: lmrl}\n",
        # one end measured from an algorithm: the row would still give the other (the default list's optimum)
        "normalize: {table: lmrl, low_from: bc}\n",
        "normalize: {table: lmrl, high_from: bc}\n",
    ],
)
def test_a_dataset_on_another_word_list_under_the_lmrl_table_is_refused_naming_the_field(tmp_path, normalize):
    path = _suite(tmp_path, normalize)
    with pytest.raises(SuiteInvalid) as e:
        load_suite(path)
    message = str(e.value)
    assert "field 'datasets[0].kwargs.word_list'" in message and "\n" not in message
    assert "normalize: {table: lmrl, references: {Wordle-v0-mixed: [LOW, HIGH]}}" in message
    result = CliRunner().invoke(app, ["validate", path])
    assert result.exit_code == 2 and "datasets[0].kwargs.word_list" in result.output


@pytest.mark.parametrize(
    "normalize",
    [
        "normalize: {table: lmrl, references: {Wordle-v0-mixed: [-6, -2.5]}}\n",  # its own references
        "normalize: {references: {Wordle-v0-mixed: [-6, -2.5]}}\n",
        "normalize: {table: classic-control, references: {Wordle-v0-mixed: [-6, -2.5]}}\n",
        "normalize: {table: lmrl, low_from: bc, high_from: bc}\n",  # both ends measured: no row used
    ],
)
def test_its_own_references_are_taken(tmp_path, normalize):
    suite = load_suite(_suite(tmp_path, normalize))
    assert suite.datasets[0].kwargs["word_list"].endswith("words.txt")

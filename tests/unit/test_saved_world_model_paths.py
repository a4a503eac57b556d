"""Where a saved text world model (``world_model:`` in ``verifier``, ``imagination``, ``warm_start``) is found
in a run's folders (``suite.world_models``), and the refusals that need only its JSON, each one line naming the
field before any run starts: no such folder, no world model in it, another algorithm's policy, a model kept by
a run on another env than the suite's task."""

from __future__ import annotations

import pytest
from world_model_helpers import MAZE
from world_model_helpers import json_model as _json_model

from rlbench_cli.errors import SuiteInvalid
from rlbench_cli.suite.loader import load_suite
from rlbench_cli.suite.world_models import find_world_model

pytestmark = pytest.mark.fast


def test_a_saved_world_model_is_found_from_its_run_attempt_kept_or_model_folder(tmp_path):
    run = tmp_path / "runs" / "wm" / "run-1"
    _json_model(run / "attempt-1" / "policy" / "final")
    latest = _json_model(run / "attempt-2" / "policy" / "final")
    (run / "attempt-3").mkdir()  # an attempt that kept nothing
    for given in (run, run / "attempt-2", latest, latest / "model"):
        saved = find_world_model(given, "verifier.world_model")
        assert saved.folder == latest / "model", given
        assert saved.info["env_id"] == MAZE and saved.settings["outcome"] == "full"
    assert find_world_model(run / "attempt-1", "w").folder == run / "attempt-1" / "policy" / "final" / "model"


def _bare_agent(p):
    folder = _json_model(p / "k", settings={"max_words": 2000})
    (folder / "policy.json").unlink()
    return folder / "model"


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda p: p / "nothing", "verifier.world_model: no saved world model at"),
        (
            lambda p: (p / "f.txt").write_text("x") and p / "f.txt",
            "verifier.world_model: {p}/f.txt is a file",
        ),
        (lambda p: p, "holds no saved text world model"),
        (
            lambda p: _json_model(p / "k", algo="bc", settings={"max_words": 2000}),
            "holds bc's policy, not a text_world_model's",
        ),
        (
            _bare_agent,  # no policy.json: told by its saved settings
            "holds a text agent's policy",
        ),
    ],
)
def test_a_path_without_a_saved_world_model_is_refused(tmp_path, make, says):
    path = make(tmp_path)
    with pytest.raises(ValueError, match=None) as e:
        find_world_model(path, "verifier.world_model")
    assert says.format(p=tmp_path) in str(e.value) and "\n" not in str(e.value)
    assert "give the folder of a text_world_model run" in str(e.value)


def _suite(tmp_path, params: str) -> str:
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\nbudget: {steps: 4}\ndatasets: [MazeFO-v0-mixed]\n"
                     f"algorithms:\n  - {{name: bc, params: {{{params}}}}}\n")  # fmt: skip
    return str(suite)


def test_the_suite_refuses_a_world_model_of_another_env_or_none_before_any_run(tmp_path):
    wordle = _json_model(tmp_path / "w", env="rlbench/Wordle-v0")
    with pytest.raises(SuiteInvalid) as e:
        load_suite(_suite(tmp_path, f"verifier: {{world_model: {wordle}}}"))
    msg = str(e.value)
    assert "field algorithms[0].params.verifier.world_model: the world model at" in msg, msg
    assert "trained on rlbench/Wordle-v0, and this run's task is rlbench/MazeFO-v0" in msg and "\n" not in msg
    with pytest.raises(
        SuiteInvalid, match=r"algorithms\[0\].params.imagination.world_model: no saved world model"
    ):
        load_suite(_suite(tmp_path, f"imagination: {{world_model: {tmp_path / 'none'}}}"))
    load_suite(_suite(tmp_path, f"verifier: {{world_model: {_json_model(tmp_path / 'm')}}}"))


def test_a_sweep_over_a_channel_has_each_world_model_checked_before_any_run(tmp_path):
    """A sweep's values replace the entry's whole setting, so each one's world_model is checked as the entry's
    own is: a model of another env in the second value is refused, naming that value."""
    maze, wordle = _json_model(tmp_path / "m"), _json_model(tmp_path / "w", env="rlbench/Wordle-v0")
    suite = tmp_path / "s.yaml"
    text = ("name: s\nbudget: {steps: 4}\ndatasets: [MazeFO-v0-mixed]\nalgorithms:\n  - {name: bc}\n"
            "sweep:\n  bc.verifier: [{world_model: %s}, {world_model: %s}]\n")  # fmt: skip
    suite.write_text(text % (maze, wordle))
    with pytest.raises(SuiteInvalid) as e:
        load_suite(str(suite))
    msg = str(e.value)
    assert "field sweep.bc.verifier[1].world_model: the world model at" in msg and "\n" not in msg, msg
    assert "trained on rlbench/Wordle-v0" in msg
    suite.write_text(text % (maze, tmp_path / "none"))
    with pytest.raises(SuiteInvalid, match=r"sweep.bc.verifier\[1\].world_model: no saved world model"):
        load_suite(str(suite))
    suite.write_text(text % (maze, _json_model(tmp_path / "m2")))
    assert load_suite(str(suite)).name == "s"

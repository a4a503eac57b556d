import os

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture
def suite_dict():
    return {
        "name": "t",
        "seeds": 2,
        "budget": {"steps": 1000, "eval_every": 500, "eval_episodes": 2},
        "envs": ["CartPole-v1"],
        "algorithms": ["random"],
    }

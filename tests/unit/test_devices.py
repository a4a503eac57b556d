import pytest

from rlbench_cli.executors.base import plan_devices

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(
    "gpus, per_job, workers, expected",
    [
        (0, 0.25, 2, [(None, "cpu")] * 2),
        (2, 0, 3, [(None, "cpu")] * 3),
        (1, 1, 4, [("0", "cuda:0")]),
        (2, 1, 4, [("0", "cuda:0"), ("1", "cuda:0")]),
        (2, 0.5, 8, [("0", "cuda:0"), ("1", "cuda:0"), ("0", "cuda:0"), ("1", "cuda:0")]),
        (1, 0.25, 3, [("0", "cuda:0")] * 3),
        (4, 2, 8, [("0,1", "cuda:0"), ("2,3", "cuda:0")]),
        (1, 2, 2, [(None, "cpu")] * 2),
        (1, 0.3, 8, [("0", "cuda:0")] * 3),
    ],
)
def test_plan_devices(gpus, per_job, workers, expected):
    assert plan_devices(gpus, per_job, workers) == expected


def test_gpu_count_honours_cuda_visible_devices(monkeypatch):
    from rlbench_cli.executors.base import detect_gpus

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,2")
    assert detect_gpus() == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert detect_gpus() == 0

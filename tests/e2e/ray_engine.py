"""A real Ray head on loopback for the tests that run suites with ``--executor ray`` (never a mock).

``tests/e2e/conftest.py`` makes the fixture every e2e module's; a test asks for ``ray_head``: one head per test
session, started with ``tests/engines/ray_up.sh`` on 127.0.0.1 with free ports,
2 CPUs and 2 fake GPUs (declared, no hardware: Ray schedules and sets CUDA_VISIBLE_DEVICES as for real ones)
in a private temp folder, and stopped at the end with ``ray_down.sh`` (only its own processes). Tests are
skipped when Ray is not installed (``pip install -e '.[test]'`` installs it).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ENGINES = Path(__file__).resolve().parents[1] / "engines"
RAY_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_AUTH_MODE": "disabled",
}
START_TIMEOUT_S = 120


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RayHead:
    """A running head: ``address`` (HOST:PORT) and ``resources_free()``."""

    def __init__(self, address: str, tmp: Path):
        self.address = address
        self.tmp = tmp

    def resources(self) -> tuple[dict[str, float], dict[str, float]]:
        """(total, available) resources of the cluster, asked by a separate driver (this process stays
        Ray-free)."""
        code = (
            f"import json, ray; ray.init(address={self.address!r}, log_to_driver=False, include_dashboard=False);"
            "print(json.dumps([ray.cluster_resources(), ray.available_resources()]))"
        )
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                           env={**os.environ, **RAY_ENV})  # fmt: skip
        assert r.returncode == 0, r.stderr[-2000:]
        total, free = json.loads(r.stdout.strip().splitlines()[-1])
        return total, free

    def wait_all_free(self, timeout: float = 20) -> bool:
        """True once no actor holds CPUs or GPUs any more (every actor of a run was removed)."""
        deadline = time.monotonic() + timeout
        while True:
            total, free = self.resources()
            if all(abs(free.get(k, 0.0) - total[k]) < 1e-6 for k in ("CPU", "GPU")):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(1)


@pytest.fixture(scope="session")
def ray_head():
    """A Ray head on 127.0.0.1 for this test session (2 CPUs, 2 fake GPUs); see the module docstring."""
    pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[test]'")
    if shutil.which("ray") is None:
        pytest.skip("the `ray` command is not on PATH")
    tmp = Path(tempfile.mkdtemp(prefix="rlray-"))  # short: Ray's socket paths must stay under 108 bytes
    port = _free_port()
    env = {**os.environ, **RAY_ENV, "RAY_TMP": str(tmp), "RAY_PORT": str(port),
           "RAY_CLIENT_PORT": str(_free_port()), "RAY_CPUS": "2", "RAY_GPUS": "2"}  # fmt: skip
    for k, v in RAY_ENV.items():  # the drivers started by the tests (rlbench run) inherit them
        os.environ.setdefault(k, v)
    try:
        r = subprocess.run(["bash", str(ENGINES / "ray_up.sh")], env=env, capture_output=True, text=True,
                           timeout=START_TIMEOUT_S)  # fmt: skip
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        yield RayHead(f"127.0.0.1:{port}", tmp)
    finally:
        subprocess.run(["bash", str(ENGINES / "ray_down.sh")], env=env, capture_output=True, timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)

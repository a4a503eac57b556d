"""Running the real `rlbench` command, as the end-to-end tests do."""

import fcntl
import os
import pickle
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

RLBENCH = shutil.which("rlbench")


def rl(*args, check=True, timeout=600, env=None, cwd=None):
    """`rlbench ARGS` in a subprocess (``env``: its environment, default this one's; ``cwd``: its working
    folder, default this one's); with check, a non-zero exit fails the test with its output."""
    env = {**(os.environ if env is None else env), "MPLBACKEND": "Agg"}
    r = subprocess.run([RLBENCH, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env,
                       cwd=cwd)  # fmt: skip
    if check and r.returncode != 0:
        raise AssertionError(f"rlbench {' '.join(map(str, args))} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def once_per_session(session_tmp: Path, name: str, compute: Callable[[Path], Any]) -> Any:
    """``compute(folder)`` run once in this test session however many xdist workers ask for it
    (``session_tmp``: the fixture of tests/conftest.py): the first computes it while the others wait on a lock,
    and every caller gets its pickled result. For a reference that tests on several workers compare with (a
    local run that the Ray and the Slurm tests, each on their own engine's worker, must equal)."""
    result = session_tmp / f"once-{name}.pickle"
    with open(session_tmp / f"once-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if result.exists():
            return pickle.loads(result.read_bytes())
        value = compute(Path(tempfile.mkdtemp(prefix=f"once-{name}-", dir=session_tmp)))
        result.write_bytes(pickle.dumps(value))
        return value

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


SLOW_EVALUATIONS = """
import math
import time


def train(ctx):
    lr = float(ctx.params.get("learning_rate", 1e-3))
    final = 100.0 * math.exp(-((math.log10(lr) + 3.0) ** 2) / 0.5)
    for step in ctx.eval_schedule():
        if ctx.should_stop():
            return
        time.sleep(SECONDS)
        ctx.sink.log(step, **{"eval/return": final * step / ctx.steps})
"""


def slow_algorithm(folder: Path, seconds: float, module: str = "slowland") -> str:
    """Write an algorithm into ``folder`` (``module``.py; run with ``folder`` as the working folder) that logs
    ``eval/return`` at each evaluation of its schedule, ``seconds`` apart, sleeping in between (its runs write
    all along at almost no CPU), and stops when asked; its final score is a bump in ``learning_rate`` (100 at
    1e-3, the default) times the share of steps done. Returns its ``entrypoint:``."""
    (folder / f"{module}.py").write_text(SLOW_EVALUATIONS.replace("SECONDS", repr(float(seconds))))
    return f"{module}:train"


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

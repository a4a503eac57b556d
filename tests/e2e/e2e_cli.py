"""Running the real `rlbench` command, as the end-to-end tests do."""

import os
import shutil
import subprocess

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

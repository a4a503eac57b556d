"""Making a gymnax env defers what gymnax's package imports only to render (seaborn, matplotlib.pyplot: about
1.4 s before a JAX job can start), and the deferred modules still work when something uses them."""

import os
import subprocess
import sys

import pytest

CODE = """
import sys
from rlbench_cli.envs.gymnax import make
env, params = make("gymnax/CartPole-v1")
print(sorted(m for m in ("seaborn", "scipy.stats", "pandas") if m in sys.modules and type(sys.modules[m]).__name__ == "module"))
import gymnax.environments.misc.pong as pong   # what gymnax renders with: loads the real modules on first use
palette = pong.sns.color_palette("cubehelix", 3)
figure = pong.plt.figure()
import matplotlib.pyplot as plt
import seaborn
print(len(palette), type(figure).__name__, type(seaborn).__name__, type(sys.modules["matplotlib.pyplot"]).__name__)
print(seaborn.color_palette is sys.modules["seaborn"].color_palette, plt.figure is sys.modules["matplotlib.pyplot"].figure)
"""


def test_making_a_gymnax_env_defers_its_rendering_imports_and_they_work_when_used():
    pytest.importorskip("gymnax")
    p = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "MPLBACKEND": "Agg"})  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[:3] == ["[]", "3 Figure module module", "True True"], p.stdout + p.stderr

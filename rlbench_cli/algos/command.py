"""``command:`` runs: any training script, unmodified, as a subprocess of the worker.

The command line is a template: ``{env}``, ``{seed}``, ``{steps}``, ``{run_dir}``, ``{device}`` and every
key of the algorithm's ``params`` are filled in (e.g. ``python train.py --env-id {env} --seed {seed}
--total-timesteps {steps}``). It runs without a shell, in the run's attempt folder, so files a script writes
relative to its working directory (CleanRL's ``runs/``) stay with the run; arguments that name a file in the
directory ``rlbench run`` was started from are made absolute, so ``python train.py`` finds ``train.py``.

Metrics: lines the script writes to ``$RLBENCH_METRICS`` (JSON lines, see ``rlbench_cli.client``) and the
scalars of TensorBoard event files under the attempt folder, both read about once a second while the
script runs and once more at the end. Environment: ``RLBENCH_METRICS``, ``RLBENCH_RUN_DIR``, ``RLBENCH_SEED``,
``RLBENCH_ENV``, ``RLBENCH_STEPS``, ``RLBENCH_PARAMS`` (JSON), ``RLBENCH_DEVICE``.
A non-zero exit code fails the run with the last lines of the script's output; the script is killed if the
run is stopped (SIGTERM, then SIGKILL after 5 s) or if its worker dies.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..tbevents import EventTail, find_event_files, read_from
from .base import RunContext

__all__ = ["run_command", "render"]


def render(template: str, ctx_values: dict[str, Any], cwd: Path) -> list[str]:
    """The argument list of a command template, placeholders filled in, local files made absolute."""
    try:
        args = [a.format(**ctx_values) for a in shlex.split(template)]
    except KeyError as e:
        known = ", ".join("{" + k + "}" for k in sorted(ctx_values))
        raise ValueError(
            f"command {template!r} uses {{{e.args[0]}}}, which is not known; use {known}"
        ) from None
    return [str(cwd / a) if not os.path.isabs(a) and (cwd / a).is_file() else a for a in args]


def _child_setup() -> None:  # pragma: no cover - runs in the child
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # die with the worker


class _JsonLinesTail:
    def __init__(self, path: Path):
        self.path, self.offset = path, 0

    def read(self) -> list[tuple[int, dict[str, float]]]:
        buf = read_from(self.path, self.offset)
        end = buf.rfind(b"\n") + 1  # a line still being written waits for the next read
        self.offset += end
        out = []
        for line in buf[:end].splitlines():
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                step = int(rec.pop("step"))
                out.append((step, {k: float(v) for k, v in rec.items()}))
            except (ValueError, KeyError, TypeError):
                print(f"rlbench: ignored a malformed metrics line: {line[:200]!r}", file=sys.stderr)
        return out


def run_command(ctx: RunContext, template: str) -> None:
    folder = Path(
        ctx.run_dir
    ).absolute()  # the script runs in it: a relative --db gave it paths from elsewhere
    metrics_file = folder / "metrics.jsonl"
    values = {**ctx.params, "env": ctx.spec.env_id, "seed": ctx.seed, "steps": ctx.steps,
              "run_dir": str(folder), "device": ctx.device}  # fmt: skip
    args = render(template, values, Path.cwd())
    env = {
        **os.environ,
        "RLBENCH_METRICS": str(metrics_file),
        "RLBENCH_RUN_DIR": str(folder),
        "RLBENCH_SEED": str(ctx.seed),
        "RLBENCH_ENV": ctx.spec.env_id,
        "RLBENCH_STEPS": str(ctx.steps),
        "RLBENCH_PARAMS": json.dumps(ctx.params),
        "RLBENCH_DEVICE": ctx.device,
        "PYTHONUNBUFFERED": "1",
    }
    jsonl = _JsonLinesTail(metrics_file)
    tails: dict[Path, EventTail] = {}

    def pump() -> None:
        for step, vals in jsonl.read():
            ctx.sink.log_many(step, vals)
            ctx.current_step = max(ctx.current_step, step)
        for f in find_event_files(folder):
            tails.setdefault(f, EventTail(f))
        for tail in tails.values():
            for step, tag, value, _wall in tail.read():
                ctx.sink.log_scalar(step, tag, value)
                ctx.current_step = max(ctx.current_step, step)

    try:
        proc = subprocess.Popen(args, cwd=folder, env=env, preexec_fn=_child_setup)  # noqa: PLW1509
    except FileNotFoundError:
        raise FileNotFoundError(f"command {template!r}: {args[0]!r} is not a program on PATH") from None
    try:
        while proc.poll() is None:
            time.sleep(0.5)
            pump()
            if ctx.should_stop():
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                break
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        pump()
    if proc.returncode != 0 and not ctx.should_stop():
        tail = _output_tail(folder / "output.log")
        raise RuntimeError(f"command exited with code {proc.returncode}: {' '.join(args)}{tail}")


def _output_tail(log: Path, lines: int = 8) -> str:
    try:
        text = log.read_text(errors="replace").rstrip().splitlines()[-lines:]
    except FileNotFoundError:
        return ""
    return "\n" + "\n".join(text) if text else ""

"""System metrics of one run, sampled in the background and logged like any other metric.

Every ``interval`` seconds (and once more when the run ends) a ``SystemMonitor`` logs, at the run's current
step:

- ``sys/steps_per_second``: training steps since the last sample / seconds since it;
- ``sys/cpu_percent``: CPU time of this process (all threads) over wall time, x 100 (200 = two cores busy);
- ``sys/rss_mb``: resident memory now, MiB;
- ``sys/gpu_util`` (percent) and ``sys/gpu_mem_mb`` (this process's GPU memory, else the device's) through
  NVML, when the run's device is a GPU and ``nvidia-ml-py`` can reach the driver.

The current step comes from a callable (``RunContext.current_step``); algorithms keep it up to date by
calling ``ctx.log_system(step)``, which costs an attribute store.

A pack's seeds share one monitor (``SystemMonitor.of_runs``, one thread): each sample reads the process once
and logs the same rows into every seed's sink, each at that seed's step with that seed's steps per second.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .sink import MetricSink

__all__ = ["SystemMonitor", "rss_mb", "peak_rss_mb"]

_PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20 if hasattr(os, "sysconf") else 4096 / 2**20


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MiB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mb() -> float:
    """Resident memory of this process now, in MiB."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * _PAGE_MB
    except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
        return peak_rss_mb()


class _Nvml:
    """GPU utilisation and memory of the device a run uses, through NVML; absent without a driver."""

    def __init__(self, handle: Any, nvml: Any):
        self.handle, self.nvml = handle, nvml

    @classmethod
    def open(cls, device: str) -> _Nvml | None:
        if not device.startswith("cuda"):
            return None
        try:
            import pynvml as nvml

            nvml.nvmlInit()
            visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
            local = int(device.partition(":")[2] or 0)
            index = visible[local] if local < len(visible) else str(local)
            handle = (nvml.nvmlDeviceGetHandleByIndex(int(index)) if index.isdigit()
                      else nvml.nvmlDeviceGetHandleByUUID(index))  # fmt: skip
            return cls(handle, nvml)
        except Exception:  # noqa: BLE001 - no driver, no package, a MIG device: no GPU metrics, no failure
            return None

    def sample(self) -> dict[str, float]:
        nvml, h = self.nvml, self.handle
        out: dict[str, float] = {}
        try:
            out["sys/gpu_util"] = float(nvml.nvmlDeviceGetUtilizationRates(h).gpu)
            mine = [p.usedGpuMemory for p in nvml.nvmlDeviceGetComputeRunningProcesses(h)
                    if p.pid == os.getpid() and p.usedGpuMemory]  # fmt: skip
            used = mine[0] if mine else nvml.nvmlDeviceGetMemoryInfo(h).used
            out["sys/gpu_mem_mb"] = used / 2**20
        except Exception:  # noqa: BLE001
            pass
        return out


class SystemMonitor:
    """Logs system metrics of this process every ``interval`` seconds from a daemon thread, into one run's
    sink (the constructor) or each of many runs' (``of_runs``)."""

    def __init__(self, sink: MetricSink, current_step: Callable[[], int], device: str = "cpu",
                 interval: float = 2.0):  # fmt: skip
        self._setup([(sink, current_step)], device, interval)

    @classmethod
    def of_runs(cls, runs: Sequence[tuple[MetricSink, Callable[[], int]]], device: str = "cpu",
                interval: float = 2.0) -> SystemMonitor:  # fmt: skip
        """One monitor (one thread) for the runs of a pack: ``runs`` holds each run's (sink, current step)."""
        self = cls.__new__(cls)
        self._setup(list(runs), device, interval)
        return self

    def _setup(self, runs: list[tuple[MetricSink, Callable[[], int]]], device: str, interval: float) -> None:
        self.runs = runs
        self.interval = interval
        self.gpu = _Nvml.open(device)
        self._stop = threading.Event()
        self._last = (time.monotonic(), _cpu_seconds())
        self._steps = [current_step() for _, current_step in runs]  # each run's step at the last sample
        self._thread = threading.Thread(target=self._loop, name="rlbench-sysmon", daemon=True)

    def __enter__(self) -> SystemMonitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sample()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> dict[str, float]:
        """Log one sample into every run's sink; returns the first run's values."""
        now, cpu = time.monotonic(), _cpu_seconds()
        t0, cpu0 = self._last
        dt = now - t0
        if dt <= 0:
            return {}
        common = {"sys/cpu_percent": 100.0 * (cpu - cpu0) / dt, "sys/rss_mb": rss_mb()}
        if self.gpu is not None:
            common.update(self.gpu.sample())
        self._last = (now, cpu)
        first: dict[str, float] = {}
        for i, (sink, current_step) in enumerate(self.runs):
            step = current_step()
            values = {"sys/steps_per_second": max(0, step - self._steps[i]) / dt, **common}
            self._steps[i] = step
            sink.log_many(step, values)
            first = first or values
        return first


def _cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system

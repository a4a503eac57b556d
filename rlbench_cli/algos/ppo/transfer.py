"""Host <-> device traffic of ppo: every iteration reaches the device in as few copies as it can (one byte
buffer there, one concatenation back), and where the host acts and values instead of the device."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = ["HOST_VALUES_MACS", "Staging", "host_side", "to_device", "to_host", "values_on_host"]


def host_side(device: torch.device) -> bool:
    """Whether training acts on the host through its NumPy copy of the actor everywhere, evaluation
    included, and may value the batch there too (``values_on_host``), so that an iteration waits for the
    device once (see to_device): away from the CPU. On CPU torch evaluates and computes the values (the
    rollout samples through the NumPy actor either way)."""
    return device.type != "cpu"


# The host values a batch itself when that takes about as long as a trip to the device and back (under a
# millisecond of NumPy: a 512-row CartPole batch through 64x64 is 2.3M multiply-adds); a larger batch or
# critic is valued on the device, at the price of one more wait an iteration.
HOST_VALUES_MACS = 4_000_000


def values_on_host(device: torch.device, agent: Any, rows: int) -> bool:
    """Whether a run's batch of ``rows`` is valued by the NumPy copy of the critic (``host_side``, and
    cheap: ``HOST_VALUES_MACS``) rather than on the device."""
    macs = sum(m.in_features * m.out_features for m in agent.critic if isinstance(m, nn.Linear))
    return host_side(device) and rows * macs <= HOST_VALUES_MACS


def to_device(arrays: list[np.ndarray], staging: Staging) -> list[torch.Tensor]:
    """``arrays`` as tensors on ``staging.device`` through one host-to-device copy.

    A blocking copy to a GPU waits for everything queued on the device before it; when several runs share
    a GPU (``gpus_per_job`` < 1) each such wait can also wait for the other runs' turns on it. So the
    arrays are laid out in one byte buffer (each at an 8-byte-aligned offset), copied once, and viewed
    back as their dtypes and shapes on the device. On a CUDA device the ``staging`` buffer is pinned and
    reused, and the copy is queued without waiting for it. On CPU the copy is a no-op and the values are
    the same.
    """
    offsets, total = [], 0
    for a in arrays:
        offsets.append(total)
        total += -(-a.nbytes // 8) * 8
    host = staging.buffer(total)
    view = host.numpy()
    for a, off in zip(arrays, offsets, strict=True):
        view[off : off + a.nbytes] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    buf = staging.send(host)
    return [buf[off : off + a.nbytes].view(_TORCH_DTYPES[a.dtype]).view(a.shape)
            for a, off in zip(arrays, offsets, strict=True)]  # fmt: skip


class Staging:
    """A reusable host buffer for ``to_device``: on a CUDA device pinned, so the copy out of it is queued
    on the stream and the host goes on without waiting (the kernels that read the values are queued after
    it). The buffer is written again only once that copy is done (an event). Elsewhere a fresh buffer each
    time: on CPU the tensors are views of it."""

    def __init__(self, device: torch.device):
        self.device = device
        self.pinned = device.type == "cuda"
        self.host = torch.empty(0, dtype=torch.uint8)
        self.copied: Any = None  # a CUDA event recorded after the last copy out of ``host``

    def buffer(self, nbytes: int) -> torch.Tensor:
        if not self.pinned:
            return torch.empty(nbytes, dtype=torch.uint8)
        if self.copied is not None:
            self.copied.synchronize()
        if len(self.host) < nbytes:
            self.host = torch.empty(max(nbytes, 2 * len(self.host)), dtype=torch.uint8, pin_memory=True)
        return self.host[:nbytes]

    def send(self, host: torch.Tensor) -> torch.Tensor:
        if not self.pinned:
            return host.to(self.device)
        out = host.to(self.device, non_blocking=True)  # queued on the device's current stream
        self.copied = torch.cuda.Event()
        self.copied.record(torch.cuda.current_stream(self.device))
        return out


def to_host(tensors: list[torch.Tensor]) -> list[np.ndarray]:
    """Host copies of float32 ``tensors`` (any shapes, one device) through one device-to-host copy."""
    flat = torch.cat([t.detach().reshape(-1) for t in tensors]).cpu().numpy()
    out, off = [], 0
    for t in tensors:
        out.append(flat[off : off + t.numel()].reshape(t.shape))
        off += t.numel()
    return out


_TORCH_DTYPES = {np.dtype(d): t for d, t in ((np.float32, torch.float32), (np.int64, torch.int64))}

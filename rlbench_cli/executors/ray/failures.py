"""Why a Ray actor's job ended without a result: the cause recorded for an actor that died under a job (the
fatal signal its process reported, or a kill without report), and whether its node was lost with it (Ray says
so, the GCS lists the node dead, or its raylet's port no longer answers), which the coordinator retries apart
from ``--retries``.
"""

from __future__ import annotations

import re
import signal
import socket
from pathlib import Path
from typing import Any

from .cluster import CONNECT_TIMEOUT_S


def _ray_says(err: BaseException) -> str:
    text = str(err)
    detail = (
        text.split("Worker exit detail:", 1)[1].strip().split(". ")[0].strip()
        if "Worker exit detail:" in text
        else ""
    )
    return f"Ray: {type(err).__name__}" + (f": {detail}" if detail else "")


def says_node_died(err: BaseException) -> bool:
    """Whether Ray's error tells that the actor died with its node (not that its worker process died)."""
    low = str(err).lower()
    return (
        "node" in low
        and ("died" in low or "dead" in low or "lost" in low)
        and "worker process has died" not in low
    )


def node_gone(ray: Any, node_id: str | None) -> bool:
    """Whether node ``node_id`` is gone: the cluster's GCS lists it dead (or no longer knows it), or its
    raylet no longer answers on its port. The GCS declares a node dead only after missed health checks (15 s
    and more by default) and meanwhile an actor of a SIGKILLed node reports ``ActorUnavailableError``
    ("Socket closed"), so the raylet's port is what tells at once."""
    if not node_id:
        return False
    try:
        nodes = ray.nodes()
    except Exception:  # noqa: BLE001 - the GCS itself is unreachable: not a node loss we can name
        return False
    for n in nodes:
        if n.get("NodeID") == node_id:
            if not n.get("Alive", True):
                return True
            host, port = n.get("NodeManagerAddress"), n.get("NodeManagerPort")
            if not host or not port:
                return False
            try:
                socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
            except OSError:
                return True
            return False
    return bool(nodes)


def lost_cause(err: BaseException, info: dict[str, Any] | None) -> str:
    """The cause recorded for an attempt whose Ray node died or left the cluster under it."""
    info = info or {}
    node = str(info.get("node_id") or "?")[:12]
    where = info.get("ip") or info.get("host") or "?"
    return f"node lost: Ray node {node} at {where} died or left the cluster; {_ray_says(err)}"


def death_cause(err: BaseException, log: Path) -> tuple[str, int | None]:
    """(one clear line, exit code) for an actor that died under a job, from Ray's error and the fatal-signal
    report the process left in the job's ``output.log`` (Ray's workers print one on SIGSEGV, SIGABRT, ...)."""
    ray_says = _ray_says(err)
    try:
        with open(log, "rb") as fh:
            fh.seek(max(0, log.stat().st_size - 64 * 1024))
            tail = fh.read().decode(errors="replace")
    except OSError:
        tail = ""
    m = re.search(r"\*\*\* (SIG[A-Z]+) received", tail)
    if m:
        name = m.group(1)
        what = {"SIGSEGV": "segmentation fault in native code", "SIGABRT": "aborted in native code",
                "SIGBUS": "bus error in native code", "SIGFPE": "arithmetic error in native code"}  # fmt: skip
        code = getattr(signal, name, None)
        return f"worker killed by {name} ({what.get(name, 'fatal signal')}); {ray_says}", -int(
            code
        ) if code else None
    if says_node_died(err):
        return f"node lost: the Ray node running this job died or left the cluster; {ray_says}", None
    return (
        "worker died: the Ray actor's process exited without a fatal-signal report (killed with SIGKILL, e.g. "
        f"by the out-of-memory killer, or by hand?); {ray_says}",
        None,
    )

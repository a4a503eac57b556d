"""Ray itself: importing it (lazily, with the environment that keeps a driver from hanging), checking and
joining a cluster at ``--address``, starting rlbench's own lean Ray instance on this machine through Ray's
private hooks (guarded: where one has changed, Ray does that part as before), and how many runs a node holds.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import UsageError, error_line

# Without these a driver may hang (Ray rewrites 127.0.0.1 to another address, or turns token auth on after
# a local ray.init wrote ~/.ray/auth_token); set before the first `import ray`, unless the user set them.
RAY_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_AUTH_MODE": "disabled",
}
INSTALL_HINT = 'pip install "rlbench-cli[ray]"'
CONNECT_TIMEOUT_S = 3.0  # TCP check of --address
INIT_TIMEOUT_S = 30.0  # ray.init once the port answers


def import_ray() -> Any:
    for key, value in RAY_ENV.items():
        os.environ.setdefault(key, value)
    try:
        import ray
    except ImportError:
        raise UsageError(
            f"--executor ray needs Ray, which is not installed here; install it: {INSTALL_HINT}"
        ) from None
    return ray


def _host_port(address: str) -> tuple[str, int]:
    rest = address.removeprefix("ray://")
    default = 10001 if address.startswith("ray://") else 6379
    host, sep, port = rest.rpartition(":")
    if not sep:
        return rest, default
    try:
        return host.strip("[]"), int(port)
    except ValueError:
        raise UsageError(f"--address {address}: expected auto, HOST:PORT or ray://HOST:PORT") from None


def _resolve_auto() -> str:
    """What ``--address auto`` means to Ray: $RAY_ADDRESS, else the cluster `ray start` left on this machine."""
    env = os.environ.get("RAY_ADDRESS")
    if env and env != "auto":
        return env
    current = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
    try:
        found = current.read_text().strip()
    except OSError:
        found = ""
    if not found:
        raise UsageError("--address auto: no Ray cluster is running on this machine; start one with "
                         "`ray start --head`, or pass --address HOST:PORT")  # fmt: skip
    return found


def check_reachable(address: str) -> None:
    target = _resolve_auto() if address == "auto" else address
    host, port = _host_port(target)
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        raise UsageError(
            f"--address {address}: no Ray cluster answers at {host}:{port} ({e.strerror or e}); start one there "
            f"with `ray start --head --port {port}`, or fix the host and port"
        ) from None


def _quiet_driver(ray: Any) -> None:
    """Keep Ray from printing worker deaths on the driver's stdout (it would break ``--json`` output):
    rlbench reports them as the failed run's error instead. Private to Ray, hence guarded."""
    mod = getattr(getattr(ray, "_private", None), "worker", None)
    orig = getattr(mod, "print_to_stdstream", None)
    if orig is None or getattr(orig, "_rlbench_quiet", False):
        return

    def filtered(data: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        if data.get("pid") != "raylet":
            orig(data, *args, **kwargs)

    filtered._rlbench_quiet = True  # type: ignore[attr-defined]
    mod.print_to_stdstream = filtered


def kill_monitor(ray: Any) -> None:
    """SIGKILL the autoscaler monitor of the Ray instance this process started, before ``ray.shutdown``: it
    sits out the whole second of grace ``ray.shutdown`` gives it after SIGTERM (of 1.4 s that shutdown takes,
    measured), and holds nothing a finished run needs. Ray's own process table is used (a private API: if it
    changes, ``ray.shutdown`` alone stops the monitor, as before)."""
    try:
        node = ray._private.worker._global_node
        if node is not None:
            node._kill_process_type("monitor", allow_graceful=False, check_alive=False, wait=False)
    except Exception:  # noqa: BLE001 - only a faster path to what ray.shutdown does anyway
        pass


def start_local(ray: Any, cpus: int, gpus: int) -> None:
    """Start a Ray instance on this machine for this run, in the main thread (Ray ties its daemons' lives to
    the thread that starts them), keeping the signal handlers of ``rlbench run``."""
    import logging

    logging.getLogger("ray").setLevel(logging.ERROR)
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    _quiet_driver(ray)
    try:
        with _lean_start(ray):
            ray.init(address="local", num_cpus=cpus, num_gpus=gpus, include_dashboard=False,
                     log_to_driver=False, configure_logging=False)  # fmt: skip
    finally:
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)


@contextlib.contextmanager
def _lean_start(ray: Any) -> Iterator[None]:
    """While ``ray.init`` starts rlbench's own short-lived instance, three of Ray's start-up costs go, none of
    which the executor needs (it uses only actors, ``ray.wait`` / ``ray.get`` and the GCS):

    - no API-server ("dashboard") process: ``include_dashboard=False`` still starts one (for Ray's job and
      state APIs) and waits for it to register, a second or more of every start here;
    - the raylet's agents start in Ray's "minimal" mode, and the driver skips importing the dashboard's web
      stack (aiohttp, ~0.3 s) only to find out whether they could do more;
    - the driver waits for its raylet to register with the GCS by asking every 20 ms, where Ray's own wait
      answers only at whole seconds (the raylet registers ~1 s after it starts, once its agents are up, so
      the start often took up to a second longer than needed).

    Private hooks of Ray, hence guarded: where one has changed, Ray does that part as before.
    ``RLBENCH_RAY_API_SERVER=1`` keeps Ray's own start as it is."""
    if rays_own_start():
        yield
        return
    private = getattr(ray, "_private", None)
    node_cls = getattr(getattr(private, "node", None), "Node", None)
    utils, services = getattr(private, "utils", None), getattr(private, "services", None)
    original: dict[str, Any] = {}

    def skip_api_server(self: Any, *args: Any, **kwargs: Any) -> None:
        self._webui_url = None

    def minimal_agents() -> str:
        return "rlbench starts Ray's agents in minimal mode"

    def get_node_when_registered(gcs_address: str, node_id: str) -> Any:
        _wait_registered(gcs_address, node_id)
        return original["get_node"](gcs_address, node_id)

    patched = ((node_cls, "start_api_server", skip_api_server),
               (utils, "get_dashboard_dependency_error", minimal_agents),
               (services, "get_node", get_node_when_registered))  # fmt: skip
    for owner, name, replacement in patched:
        if callable(getattr(owner, name, None)):
            original[name] = getattr(owner, name)
            setattr(owner, name, replacement)
    try:
        yield
    finally:
        for owner, name, _ in patched:
            if name in original:
                setattr(owner, name, original[name])


def rays_own_start() -> bool:
    """``RLBENCH_RAY_API_SERVER=1``: rlbench's own Ray instance starts as Ray starts it (see ``_lean_start``)."""
    return os.environ.get("RLBENCH_RAY_API_SERVER") == "1"


def _wait_registered(gcs_address: str, node_id: str, limit_s: float = 30.0, every_s: float = 0.02) -> None:
    """Return once the GCS at ``gcs_address`` lists node ``node_id`` (the raylet has registered), asking every
    ``every_s``; after ``limit_s``, or if the GCS client is not what this expects, return and let Ray's own
    wait decide."""
    try:
        from ray._raylet import GcsClient

        client = GcsClient(address=gcs_address)
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if any(
                (k.hex() if hasattr(k, "hex") else str(k)) == node_id
                for k in client.get_all_node_info(timeout=5)
            ):
                return
            time.sleep(every_s)
    except Exception:  # noqa: BLE001 - only a faster path to Ray's own wait
        return


def init_ray(ray: Any, address: str) -> None:
    """``ray.init``, given up after INIT_TIMEOUT_S instead of hanging. It runs in a thread, which also keeps
    Ray from replacing the SIGTERM handler of ``rlbench run`` (a stop request, not an exit)."""
    import logging

    logging.getLogger("ray").setLevel(logging.ERROR)  # e.g. "SIGTERM handler is not set ...": meant so
    box: dict[str, BaseException | None] = {"err": None}
    _quiet_driver(ray)

    def connect() -> None:
        try:
            ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, include_dashboard=False,
                     configure_logging=False)  # fmt: skip
        except BaseException as e:  # noqa: BLE001 - reported below
            box["err"] = e

    t = threading.Thread(target=connect, name="rlbench-ray-init", daemon=True)
    t.start()
    t.join(INIT_TIMEOUT_S)
    if t.is_alive():
        raise UsageError(f"--address {address}: the port answers but Ray did not connect within "
                         f"{INIT_TIMEOUT_S:g}s; is it a Ray head (`ray start --head`) of the same Ray version?")  # fmt: skip
    if box["err"] is not None:
        raise UsageError(f"--address {address}: cannot connect to Ray ({error_line(box['err'])}); check that a head runs there "
                         "(`ray start --head`) with the same Ray and Python versions")  # fmt: skip


def fit(node: dict[str, float], cpus: float, gpus: float) -> int:
    """How many actors needing cpus/gpus one node holds."""
    n = math.floor(node.get("CPU", 0.0) / cpus + 1e-9) if cpus > 0 else 10**6
    if gpus > 0:
        n = min(n, math.floor(node.get("GPU", 0.0) / gpus + 1e-9))
    return n


def too_big(cpus: float, gpus: float, where: str, nodes: list[dict[str, float]]) -> UsageError:
    best = max(nodes, key=lambda n: (n.get("GPU", 0.0), n.get("CPU", 0.0))) if nodes else {}
    return UsageError(
        f"resources.cpus_per_job={cpus:g}, resources.gpus_per_job={gpus:g}: no node of {where} has that much "
        f"(largest node: {best.get('CPU', 0.0):g} CPUs, {best.get('GPU', 0.0):g} GPUs); lower them in the "
        "suite's resources, or add a bigger node"
    )

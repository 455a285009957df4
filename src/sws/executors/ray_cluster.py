"""Connecting to the Ray cluster `executor.address` names, and checking it can hold what a role asks for.

Both fail with one line naming the setting: a cluster that cannot be reached, or a role that asks for GPUs
on a cluster without enough of them (`executor.roles.<role>.gpus`).
"""

from __future__ import annotations

import logging
import socket

from sws.errors import UserError

CONNECT_TIMEOUT_S = 5.0
START_HINT = "start one with `ray start --head`, or set executor.address (`local` starts one for this command)"


def require_ray():
    try:
        import ray
    except ImportError:
        raise UserError("executor.kind is 'ray' but Ray is not installed; `pip install 'sws-rlvr[ray]'` "
                        "(in a checkout: `make install-ray`), or set executor.kind: local") from None
    return ray


def connect(address: str) -> None:
    """Join the cluster at `address` unless this process already has; UserError when none answers."""
    ray = require_ray()
    if not ray.is_initialized():
        _init(ray, address)
    quiet_ray_data()


def _init(ray, address: str) -> None:
    host, _, port = address.rpartition(":")
    if host and port.isdigit() and not address.startswith("ray://"):
        _check_reachable(address, host, int(port))
    extra = {"include_dashboard": False} if address == "local" else {}
    try:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False, **extra)
    except (ConnectionError, RuntimeError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"executor.address '{address}': no Ray cluster could be reached ({reason}); "
                        f"{START_HINT}") from None


def quiet_ray_data() -> None:
    """sws draws its own progress bars; Ray Data's per-dataset logs and bars would bury them."""
    from ray.data import DataContext

    logging.getLogger("ray.data").setLevel(logging.WARNING)
    DataContext.get_current().enable_progress_bars = False


def _check_reachable(address: str, host: str, port: int) -> None:
    """Ray retries an unreachable head for minutes; a plain connect says at once whether anything listens."""
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise UserError(f"executor.address '{address}': no Ray cluster could be reached ({exc.strerror or exc}); "
                        f"{START_HINT}") from None


def check_gpus(role_name: str, gpus: float) -> None:
    """UserError when a replica of `role_name` asks for more GPUs than any cluster total offers."""
    if gpus <= 0:
        return
    available = require_ray().cluster_resources().get("GPU", 0)
    if available < gpus:
        raise UserError(f"executor.roles.{role_name}.gpus: each replica asks for {gpus:g} GPU(s) but the Ray "
                        f"cluster has {available:g}; set it to 0 to run the role on CPUs, or add GPU nodes")

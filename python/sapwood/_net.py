"""Network helpers shared by the distributed front ends (Dask, Spark)."""
from __future__ import annotations

import socket


def free_port() -> int:
    """A port free on this host (bound, then closed, as lightgbm.dask finds one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        port: int = s.getsockname()[1]
        return port

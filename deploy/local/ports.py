"""Loopback ports for the local stack, the stand-ins, the demo and the tests: one place to pick or probe them.

Dev tooling: nothing a service runs in production may import it (deploy/local/demo.py, a dev tool, may).
"""

from __future__ import annotations

import socket

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A loopback port nothing is bound to right now. The OS picks it; it is free only until someone binds
    it, so bind soon (or bind port 0 yourself where the caller can take a socket)."""
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def port_in_use(port: int) -> bool:
    """True if something accepts connections on the loopback `port` (a stranger would clash with us)."""
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((LOOPBACK, port)) == 0

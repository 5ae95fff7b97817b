"""Hostile HTTP clients, run as their own process (so they share no GIL with the measuring client):

    python -m tests.reliability.hostile_http PORT SECONDS [SLOWLORIS] [BIG] [BIG_MB] [PAUSE]

- SLOWLORIS connections (20) each send a request line, then one more header line every second,
  never ending the head; when the server closes one, it reconnects at once and starts again.
- BIG connections (4) each send one header of BIG_MB (100) MB, in 1 MiB writes, then the end of the
  head; when the server cuts it off, it waits PAUSE seconds (0: none) and starts again on a new
  connection. With no pause this is a connection flood (~1,000+ connections/s on loopback).

Prints one JSON line of what happened (answers seen, how long slowloris connections were held, how
many bytes of each big header the server let in before it closed)."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from typing import Any


def _status(data: bytes) -> str:
    return (
        data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/1.1 ") else ("closed" if not data else "?")
    )


def slowloris(port: int, until: float, out: dict[str, Any], lock: threading.Lock) -> None:
    while time.monotonic() < until:
        started = time.monotonic()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(b"POST /slack/events HTTP/1.1\r\nHost: ingest\r\n")
                sock.settimeout(1.0)
                answer, n = b"", 0
                while time.monotonic() < until:
                    try:
                        answer = sock.recv(4096)
                        break  # an answer, or the server closed (b"")
                    except TimeoutError:
                        sock.sendall(b"X-Slow-%d: y\r\n" % n)
                        n += 1
                else:
                    continue  # the run ended with this connection still held
        except OSError as exc:
            answer = f"error:{type(exc).__name__}".encode()
        with lock:
            status = _status(answer) if not answer.startswith(b"error:") else answer.decode()
            out["slowloris_answers"][status] = out["slowloris_answers"].get(status, 0) + 1
            out["slowloris_held_s"].append(round(time.monotonic() - started, 2))


def big_header(
    port: int, until: float, size_mb: int, pause: float, out: dict[str, Any], lock: threading.Lock
) -> None:
    chunk = b"a" * (1 << 20)
    first = True
    while time.monotonic() < until:
        if not first:
            time.sleep(pause)
        first = False
        sent, answer = 0, b""
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: ingest\r\nX-Big: ")
                for _ in range(size_mb):
                    sock.sendall(chunk)
                    sent += len(chunk)
                sock.sendall(b"\r\n\r\n")
                answer = sock.recv(4096)
        except OSError as exc:
            answer = f"error:{type(exc).__name__}".encode()
        with lock:
            status = _status(answer) if not answer.startswith(b"error:") else answer.decode()
            out["big_answers"][status] = out["big_answers"].get(status, 0) + 1
            out["big_sent_mib"].append(sent >> 20)


def main(
    port: int, seconds: float, n_slow: int = 20, n_big: int = 4, big_mb: int = 100, pause: float = 0.0
) -> dict[str, Any]:
    until = time.monotonic() + seconds
    out: dict[str, Any] = {
        "slowloris_answers": {},
        "slowloris_held_s": [],
        "big_answers": {},
        "big_sent_mib": [],
    }
    lock = threading.Lock()
    threads = [threading.Thread(target=slowloris, args=(port, until, out, lock)) for _ in range(n_slow)]
    threads += [
        threading.Thread(target=big_header, args=(port, until, big_mb, pause, out, lock))
        for _ in range(n_big)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    held, sent = out.pop("slowloris_held_s"), out.pop("big_sent_mib")
    out["slowloris_held_s_max"] = max(held, default=0)
    out["slowloris_connections"] = len(held)
    out["big_attempts"] = len(sent)
    out["big_sent_mib_max"] = max(sent, default=0)
    return out


if __name__ == "__main__":
    n_slow, n_big, big_mb = (int(a) for a in (sys.argv[3:6] + ["20", "4", "100"][len(sys.argv[3:6]) :]))
    pause = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0
    print(json.dumps(main(int(sys.argv[1]), float(sys.argv[2]), n_slow, n_big, big_mb, pause)), flush=True)

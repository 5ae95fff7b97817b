"""A real Prometheus for the dev tools and the integration tests: built, started, stopped (never shipped).

The binary comes from the Go module proxy through `gobin` (pinned, cached); `Server` runs one with its
storage and log in a directory of the caller's and waits for `/-/ready`. `promtool`, the same release's
rule checker, is built the same way into the same Go caches (deploy/validate.sh runs it on
deploy/monitoring/):

    python -m deploy.local.prometheus promtool      (prints the binary's path, building it once)
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx

from deploy.local import gobin, loopback_http
from services.runtime.errors import UserFacingError

PROMETHEUS_MODULE = "github.com/prometheus/prometheus/cmd/prometheus"
PROMETHEUS_VERSION = "v0.316.0"
PROMTOOL_MODULE = "github.com/prometheus/prometheus/cmd/promtool"


def prometheus() -> Path:
    """The pinned Prometheus, built once (about 5 minutes cold) and then reused."""
    return gobin.ensure("prometheus", PROMETHEUS_MODULE, PROMETHEUS_VERSION)


def promtool() -> Path:
    """The pinned promtool (the same version as Prometheus), built once and then reused."""
    return gobin.ensure("promtool", PROMTOOL_MODULE, PROMETHEUS_VERSION)


BINARIES = {"prometheus": prometheus, "promtool": promtool}


class Server:
    """One Prometheus process, its storage and log in `home`."""

    def __init__(self, binary: Path, home: Path, name: str, port: int, cfg: str) -> None:
        self.binary, self.port = binary, port
        self.dir = home / name
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "prometheus.yml").write_text(cfg)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        log = (self.dir / "log.txt").open("ab")
        self.proc = subprocess.Popen(
            [
                str(self.binary),
                f"--config.file={self.dir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=log,
            stderr=log,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited {self.proc.returncode}: see {self.dir / 'log.txt'}")
            try:
                if loopback_http.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"prometheus on {self.port} not ready in 60s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in BINARIES:
        print(f"usage: python -m deploy.local.prometheus {{{','.join(BINARIES)}}}", file=sys.stderr)
        return 2
    try:
        print(BINARIES[argv[0]]())
    except UserFacingError as exc:
        print(f"{argv[0]}: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

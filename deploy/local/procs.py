"""Background processes of the local stack: start detached, find by pid file, stop by pid.

Only processes whose pid file this stack wrote are ever signalled, and a pid is trusted only
while its command line still contains the marker it was started with (pids get reused).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path


def tail(path: Path, lines: int = 40) -> str:
    """The last lines of a log file, for error messages."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def is_running(pid: int, marker: str) -> bool:
    """True if `pid` is alive (not a zombie) and was started with `marker` in its command line."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if stat.rpartition(")")[2].split()[0] == "Z":
        return False
    return marker in cmdline(pid)


def read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def running_pid(pid_file: Path, marker: str) -> int | None:
    """The pid in `pid_file` if that process is still ours and alive, else None."""
    pid = read_pid(pid_file)
    return pid if pid is not None and is_running(pid, marker) else None


def spawn(
    argv: Sequence[str], log_file: Path, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start `argv` in its own session (so a Ctrl-C of the caller does not reach it), output to `log_file`."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("ab") as out:
        return subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )


def stop(pid: int, marker: str, timeout: float = 30.0) -> bool:
    """SIGTERM the process (and its process group), wait, then SIGKILL. Returns True if it had been running."""
    if not is_running(pid, marker):
        return False
    _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_running(pid, marker):
            return True
        time.sleep(0.1)
    _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and is_running(pid, marker):
        time.sleep(0.1)
    return True


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        if os.getpgid(pid) == pid:  # started by spawn(): it leads its own group
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)  # reap it if it is our child

"""CPU time of processes, from Linux /proc: where a load's cores went, measured, not guessed; and
how long they waited for a core, which tells a CPU-starved process from one that waits on I/O."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU the process has used so far; 0.0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


def waited_seconds(pid: int) -> float:
    """Time the process's threads spent runnable but waiting for a core so far (the scheduler's run
    queue: /proc/<pid>/task/*/schedstat, second field, nanoseconds); 0.0 once it is gone."""
    total = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    for task in tasks:
        try:
            total += int((task / "schedstat").read_text().split()[1])
        except (FileNotFoundError, ProcessLookupError, IndexError):  # a thread gone meanwhile
            continue
    return total / 1e9


def pids_named(name: str) -> list[int]:
    """Processes whose executable's name is `name` (e.g. every `postgres` backend)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == name:
                    out.append(int(entry.name))
            except OSError:  # gone meanwhile
                continue
    return out


def snapshot(
    groups: Mapping[str, Iterable[int]], measure: Callable[[int], float] = cpu_seconds
) -> dict[str, dict[int, float]]:
    """label -> pid -> seconds so far (CPU by default, or `waited_seconds`)."""
    return {label: {pid: measure(pid) for pid in pids} for label, pids in groups.items()}


def cores_between(
    before: Mapping[str, Mapping[int, float]], after: Mapping[str, Mapping[int, float]], seconds: float
) -> dict[str, float]:
    """label -> seconds per wall second between two snapshots (cores used, for CPU snapshots); a pid
    in one only counts from 0 (it started, or ended, in between)."""
    out = {}
    for label in after:
        pids = set(before.get(label, {})) | set(after[label])
        used = sum(after[label].get(p, 0.0) - before.get(label, {}).get(p, 0.0) for p in pids)
        out[label] = round(max(used, 0.0) / seconds, 2) if seconds > 0 else 0.0
    return out

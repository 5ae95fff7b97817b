"""CPU time of processes, from Linux /proc: where a load's cores went, measured, not guessed."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU the process has used so far; 0.0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


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


def snapshot(groups: Mapping[str, Iterable[int]]) -> dict[str, dict[int, float]]:
    """label -> pid -> CPU seconds so far."""
    return {label: {pid: cpu_seconds(pid) for pid in pids} for label, pids in groups.items()}


def cores_between(
    before: Mapping[str, Mapping[int, float]], after: Mapping[str, Mapping[int, float]], seconds: float
) -> dict[str, float]:
    """label -> cores used between two snapshots (CPU seconds / wall seconds); a pid in one only counts
    from 0 (it started, or ended, in between)."""
    out = {}
    for label in after:
        pids = set(before.get(label, {})) | set(after[label])
        used = sum(after[label].get(p, 0.0) - before.get(label, {}).get(p, 0.0) for p in pids)
        out[label] = round(max(used, 0.0) / seconds, 2) if seconds > 0 else 0.0
    return out

"""The benchmarks' CPU accounting (benchmarks/proc_cpu.py): where a load's cores went."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.proc_cpu import cores_between, cpu_seconds, pids_named, snapshot, waited_seconds


def test_cores_between_counts_each_pid_and_one_that_came_or_went() -> None:
    before = {"a": {1: 10.0, 2: 5.0}, "b": {3: 1.0}}
    after = {"a": {1: 12.0, 4: 1.0}, "b": {3: 1.5}}  # pid 2 ended (counted as 0 afterwards), pid 4 began
    assert cores_between(before, after, 2.0) == {"a": 0.0, "b": 0.25}  # a: (2 - 5 + 1) / 2, floored at 0
    assert cores_between({"a": {1: 10.0}}, {"a": {1: 13.0, 4: 1.0}}, 2.0) == {"a": 2.0}
    assert cores_between({}, {"a": {}}, 0.0) == {"a": 0.0}


def test_a_busy_child_is_measured_and_a_gone_one_reads_zero() -> None:
    """The child spins for half a second of its own CPU time, not of wall time: on a loaded machine it gets
    less than a core, and what is measured must still be the CPU it used."""
    spin = (
        "import sys, time\nsys.stdin.readline()\nstart = time.process_time()\n"
        "while time.process_time() - start < 0.5: pass\nprint('done', flush=True)\nsys.stdin.read()"
    )
    child = subprocess.Popen([sys.executable, "-c", spin], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        groups = {"child": [child.pid]}
        time.sleep(0.3)  # the interpreter's start-up CPU lands before the first snapshot
        first, started = snapshot(groups), time.time()
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(b"go\n")
        child.stdin.flush()
        assert child.stdout.readline() == b"done\n"  # spun 0.5 s of CPU, still alive
        elapsed = time.time() - started
        used = cores_between(first, snapshot(groups), elapsed)
    finally:
        child.kill()
        child.wait(10)
    assert 0.45 <= used["child"] * elapsed <= 0.8, (used, elapsed)  # its CPU seconds, whatever the load
    assert used["child"] <= 1.2, used  # one thread: at most about one core
    assert cpu_seconds(child.pid) == 0.0  # reaped: gone from /proc
    assert os.getpid() in pids_named(Path(f"/proc/{os.getpid()}/comm").read_text().strip())


def test_three_spinners_on_one_core_wait_for_it_and_a_sleeper_does_not() -> None:
    """Run-queue wait (`waited_seconds`): three busy children pinned to the same core take turns, so
    while one runs two wait: together about 2 s of waiting per second, against 1 s of CPU. A sleeping
    child is never runnable, so it waits ~0."""
    spin = "import time\nend = time.time() + 1.0\nwhile time.time() < end: pass\n"
    core = min(os.sched_getaffinity(0))

    def pinned() -> None:
        os.sched_setaffinity(0, {core})

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    spinners = [subprocess.Popen([sys.executable, "-c", spin], preexec_fn=pinned) for _ in range(3)]
    groups = {"spinners": [p.pid for p in spinners], "sleeper": [sleeper.pid]}
    try:
        time.sleep(0.2)
        before = snapshot(groups, waited_seconds)
        time.sleep(0.6)  # both spinners still spinning
        waited = cores_between(before, snapshot(groups, waited_seconds), 0.6)
    finally:
        for p in [*spinners, sleeper]:
            p.kill()
            p.wait(10)
    assert waited["spinners"] >= 1.5, waited  # not their CPU (1.0 s/s): their wait
    assert waited["sleeper"] <= 0.05, waited
    assert waited_seconds(sleeper.pid) == 0.0  # reaped: gone from /proc

"""Grouping rules that hold on all sixteen loghub systems (issue 36 item 4), each on lines of a shape
the rule is about, written here (not loghub's): a statement's lines are one pattern whatever its
variables are, and two statements stay two.

Each positive case failed before its rule (see the commit that added it).
"""

from __future__ import annotations

from typing import Any

from services.compaction.loki import _fields, _parse, _patterns, line_patterns

_T0 = 1773457957000000000


def _raw(lines: list[str]) -> dict[str, Any]:
    values = [[str(_T0 + i * 10**6), line] for i, line in enumerate(lines)]
    return {"data": {"resultType": "streams", "result": [{"stream": {"job": "t"}, "values": values}]}}


def _groups(lines: list[str]) -> list[int]:
    return [p for _, p in line_patterns(_raw(lines))]


def _same(groups: list[int], indexes: range | list[int]) -> bool:
    return len({groups[i] for i in indexes}) == 1


def test_a_syslog_tag_and_the_host_before_it_are_header() -> None:
    hosts = ("calvisitor-10-105-160-95", "authorMacBook-Pro", "build-7")
    progs = ("kernel[0]", "com.apple.cts[258]", "sharingd[30299]", "QQ[10018]")
    messages = (
        "AppleCamIn::systemWakeCall - messageType = 0xE00003{i:02d}",
        "ARPT: {i}.{i}: wl0: MDNS: IPV4 Addr",
    )
    lines = [
        f"Jul  1 09:{i % 60:02d}:55 {hosts[i % 3]} {progs[i % 4]}: {messages[i % 2].format(i=i)}"
        for i in range(60)
    ]
    groups = _groups(lines)
    assert _same(groups, range(0, 60, 2)) and _same(groups, range(1, 60, 2))
    assert groups[0] != groups[1]


def test_a_program_then_a_separator_is_a_source_and_host_port_one_value() -> None:
    progs = ("chrome.exe", "chrome.exe *64", "QQ.exe", "YodaoDict.exe", "AcroRd32.exe", "git.exe")
    hosts = (
        "proxy.example.org:5070",
        "www.baidu.com:80",
        "182.254.114.110:80",
        "qa.sockets.stackexchange.com:443",
    )
    lines = [
        f"[10.30 16:49:{i % 60:02d}] {progs[i % 6]} - {hosts[i % 4]} open through proxy proxy.example.org:5070 HTTPS"
        for i in range(48)
    ]
    lines += [
        f"[10.30 16:50:{i:02d}] {progs[i % 6]} - {hosts[i % 4]} close, {i} bytes sent" for i in range(12)
    ]
    groups = _groups(lines)
    assert _same(groups, range(48)) and _same(groups, range(48, 60))
    assert groups[0] != groups[48]


def test_a_size_with_its_unit_and_a_run_of_values_are_one_statement() -> None:
    shapes = (
        "close, {i} bytes sent, {i} bytes received, lifetime 00:{i:02d}",
        "close, {i} bytes sent, {i} bytes received, lifetime 01:{i:02d}",
        "close, {i} bytes sent, 815 bytes received, lifetime <1 sec",
        "close, 1{i}90 bytes (1.{i} KB) sent, 1671 bytes (1.63 KB) received, lifetime 02:02:{i:02d}",
    )
    lines = [
        f"[10.30 16:49:{i % 60:02d}] proxy.example.org:{5000 + i} {shapes[i % 4].format(i=i)}"
        for i in range(44)
    ]
    lines += [
        f"[10.30 16:51:{i:02d}] resolve failed for host{i}, data source name an{i} an{i + 1} an{i + 2}"
        for i in range(5)
    ]
    lines += [f"[10.30 16:52:{i:02d}] resolve failed for host{i}, data source name an{i}" for i in range(5)]
    lines += [
        f"[10.30 16:53:{i:02d}] proxy.example.org:{i} open through proxy p.example.org:5070"
        for i in range(25)
    ]
    groups = _groups(lines)
    assert _same(groups, range(44))
    assert _same(groups, range(44, 54))  # a list of 1 or 3 names: one statement
    assert groups[0] != groups[44]


def test_a_word_and_its_number_in_one_chunk_are_one_value() -> None:
    lines = [
        f"Nov  9 12:{i % 60:02d}:01 dn{i} ntpd[{100 + i}]: synchronized to 10.100.20.{i}, stratum 3"
        for i in range(30)
    ]
    lines.insert(7, "Nov  9 12:07:01 dn7 ntpd[107]: synchronized to LOCAL(0), stratum 10")
    assert _same(_groups(lines), range(31))


def test_true_and_false_are_values() -> None:
    lines = [
        f"03-17 16:13:{i % 60:02d}.811  1702  {2395 + i} D StackScrollAlgorithm: updateDimmed overlap:{'true' if i % 4 else 'false'}"
        for i in range(40)
    ]
    assert _same(_groups(lines), range(40))


def test_word_fields_between_a_headers_numbers_are_header() -> None:
    fields = ("node status", "partition state_change.unavailable", "unix.hw boot_cmd", "domain status")
    lines = []
    for i in range(60):
        node = "full" if i % 10 == 3 else f"node-{i}"  # one host named by a word
        message = "running" if i % 2 else "boot (command 1902)"
        lines.append(f"{134681 + i} {node} {fields[i % 3]} {1077804742 + i} 1 {message}"[:None])
    groups = _groups([line.replace("full partition status", "partition status") for line in lines])
    assert _same(groups, range(1, 60, 2)) and _same(groups, range(0, 60, 2))
    assert groups[0] != groups[1]


def test_a_logger_then_its_bracketed_context_is_header() -> None:
    loggers = ("nova.osapi_compute.wsgi.server", "nova.metadata.wsgi.server")
    contexts = ("[req-38101a0b-2096 113d3a99c3 54fadb412c - - -]", "[-]", "[req-b40b44ea - - - - -]")
    lines = [
        f"nova-api.log.1 2017-05-16 00:00:{i % 60:02d}.008 25746 INFO {loggers[i % 2]} {contexts[i % 3]} "
        f'10.11.10.1 "GET /v2/servers/detail HTTP/1.1" status: 200 len: {1800 + i} time: 0.24{i}'
        for i in range(40)
    ]
    assert _same(_groups(lines), range(40))


def test_distinct_statements_stay_apart() -> None:
    """The rules merge variables, never statements: a column of few recurring words still splits."""
    words = ("read", "write")
    lines = [
        f"2026-03-14 03:12:{i % 60:02d} INFO disk {words[i % 2]} mode on for volume {i}" for i in range(40)
    ]
    lines += [f"2026-03-14 03:13:{i % 60:02d} INFO Connection accepted from 10.0.0.{i}" for i in range(20)]
    lines += [f"2026-03-14 03:14:{i % 60:02d} INFO Connection refused from 10.0.0.{i}" for i in range(20)]
    groups = _groups(lines)
    assert len({groups[0], groups[1], groups[40], groups[60]}) == 4
    assert _same(groups, range(0, 40, 2)) and _same(groups, range(40, 60)) and _same(groups, range(60, 80))


def test_a_merged_patterns_fields_are_read_on_its_templates_shape_only() -> None:
    lines = [f"2026-03-14 03:12:{i:02d} INFO finished job {5 + i % 5} in {100 + i} ms" for i in range(20)]
    lines += [f"2026-03-14 03:13:{i:02d} INFO finished job in {777 + i} ms" for i in range(3)]
    entries, streams, hidden = _parse(_raw(lines))
    patterns, _, raws = _patterns(entries, streams, hidden)
    assert len(patterns) == 1 and len(patterns[0].members) == 23
    ranges, _ = _fields(patterns[0], raws)
    # the job field holds the long lines' numbers only: the short lines' `in` is not read as a job
    assert ranges == ["job 5..9", "in 100..119"]


def test_a_unit_after_a_number_is_part_of_the_value() -> None:
    sizes = ("93.0 B", "5.2 KB", "1.1 MB")
    lines = [
        f"17/06/09 20:10:{i % 60:02d} INFO storage.MemoryStore: Block broadcast_{i} stored as bytes in memory "
        f"(estimated size {sizes[i % 3]}, free {300 + i}.1 KB)"
        for i in range(30)
    ]
    assert _same(_groups(lines), range(30))


def test_names_that_recur_after_the_same_word_in_two_statements_are_one_variable() -> None:
    """Few distinct users made the user column look constant, so each statement split by user; the
    same three names after `user` in both statements say it is an entity: one pattern per statement."""
    users = ("alice", "mallory", "trent")
    lines = []
    for i in range(60):
        user = users[i % 3]
        lines.append(
            f"2026-03-14 03:12:{i % 60:02d} host app[{100 + i}]: login accepted for user {user} port {i}"
        )
        lines.append(f"2026-03-14 03:13:{i % 60:02d} host app[{200 + i}]: logout for user {user}")
    groups = _groups(lines)
    assert _same(groups, range(0, 120, 2)) and _same(groups, range(1, 120, 2))
    assert groups[0] != groups[1]


def test_an_opposition_that_recurs_in_two_statements_still_splits() -> None:
    """Two words after the same word in two statements (`Starting`/`Ending`) are as likely an
    opposition as two names: the columns stay constants of two templates each."""
    lines = []
    for i in range(40):
        verb = ("Starting", "Ending")[i % 2]
        lines.append(f"2026-03-14 03:12:{i % 60:02d} INFO svc {verb} the installer main loop, round {i}")
        lines.append(f"2026-03-14 03:13:{i % 60:02d} INFO svc {verb} the installer initialization {i}")
    groups = _groups(lines)
    assert len({groups[0], groups[1], groups[2], groups[3]}) == 4
    assert _same(groups, range(0, 80, 4)) and _same(groups, range(2, 80, 4))

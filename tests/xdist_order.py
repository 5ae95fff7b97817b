"""The order in which `make test`'s parallel pass hands modules to its workers: the heavy ones first.

Under `--dist loadscope` a worker takes a whole module at a time, and pytest-xdist by default hands the
modules out by how many tests they hold, most first: a module of one long test (the seed thread, the long
thread, the plans' property) went out last and ran alone at the end while the other workers sat idle. The
Makefile passes `--no-loadscope-reorder`, so the collection order below is the order they are handed out:
modules with a slow, reliability or browser test first, then the other modules on the stack, then the
rest, which fill the tail. Kept apart from tests/conftest.py so tests can import it by a name no other
module has.
"""

from __future__ import annotations

from typing import Any

HEAVY_MARKERS = ("slow", "reliability", "browser")


def module_of(item: Any) -> str:
    return str(item.nodeid).split("::", 1)[0]


def heavy_modules_first(items: list[Any]) -> None:
    """Sort `items` in place by their module's tier; stable, so each module's tests stay together and
    in order (its module fixtures start once)."""
    tier: dict[str, int] = {}
    for item in items:
        if any(item.get_closest_marker(m) is not None for m in HEAVY_MARKERS):
            mine = 0
        elif item.get_closest_marker("stack") is not None:
            mine = 1
        else:
            mine = 2
        module = module_of(item)
        tier[module] = min(tier.get(module, 2), mine)
    items.sort(key=lambda item: tier[module_of(item)])

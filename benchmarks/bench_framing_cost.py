"""What framing untrusted text as data costs the seed thread's model calls (tokens, cl100k_base).

Plays the seed thread's two rounds in process (the local deterministic model, the recorded
telemetry server), once with the framing and the preamble rule as shipped and once with both
turned into no-ops, and prints every model call's input tokens side by side.

    .venv/bin/python -m benchmarks.bench_framing_cost
"""

from __future__ import annotations

import asyncio
from unittest import mock

from services.agent.mcp_client import McpToolbox
from services.boundary.framing import PREAMBLE_RULE
from services.context_render import context, judge_input, preamble, prompts
from tests.agent.inprocess import Seeded, telemetry_server


async def play() -> list[tuple[int, str, int]]:
    thread = Seeded()
    async with McpToolbox((telemetry_server(),)) as toolbox:
        await thread.play_seed(toolbox)
    return thread.calls


def main() -> None:
    framed = asyncio.run(play())
    plain_frame = lambda source, row_id, content: content  # noqa: E731
    with (
        mock.patch.object(context, "frame", plain_frame),
        mock.patch.object(preamble, "PREAMBLE_RULE", ""),
        mock.patch.object(judge_input, "frame", plain_frame),
        mock.patch.object(prompts, "JUDGE", prompts.JUDGE.replace("\n" + PREAMBLE_RULE, "")),
    ):
        plain = asyncio.run(play())
    print("round node         plain  framed  added")
    for (r, node, a), (_, _, b) in zip(plain, framed, strict=True):
        print(f"{r:>5} {node:<12} {a:>6} {b:>7} {b - a:>6}")
    print(f"largest call: plain {max(c[2] for c in plain)}, framed {max(c[2] for c in framed)}")


if __name__ == "__main__":
    main()

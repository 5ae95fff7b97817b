"""Posts escape everything the model (or an alert) wrote: no mention, ping or disguised link is formed.

Through the real slack_sdk client and the Slack stand-in: the stored message's text and blocks are
read back and searched for Slack control sequences (`<...>`).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import anyio

from deploy.local.slack_standin import running
from schemas.events import ThreadPost
from services.boundary.slack_escape import escape, link
from services.voice.blocks import SlackMessage, post_blocks
from services.voice.slack_api import SlackWeb, client

HOSTILE = (
    "Root cause found <!channel> <!here> ask <@U0ADMIN> or <#C0SECRET>; "
    "see <https://evil.example/login|the runbook> & retry"
)
CONTROL = re.compile(r"<[^>]*>")


def _post(text: str) -> ThreadPost:
    return ThreadPost(
        thread_ts="C0INCIDENTS-1773458070.000100",
        message_id="C0INCIDENTS-1773458070.000100:1:post:0",
        event_time=datetime(2026, 3, 14, 3, 20, tzinfo=UTC),
        round=1,
        kind="summary",
        text=f"{text}\n• claim: <!everyone> pinged\nevidence: C0INCIDENTS-1773458070.000100:1:hypothesis:0",
        model="gpt-x <@U0EVIL>",
    )


def test_escape_makes_every_control_character_literal() -> None:
    assert escape("<!channel> & <@U1|bob>") == "&lt;!channel&gt; &amp; &lt;@U1|bob&gt;"
    assert CONTROL.search(escape(HOSTILE)) is None
    assert (
        link("https://grafana.example/d/x", "the <dash>") == "<https://grafana.example/d/x|the &lt;dash&gt;>"
    )


def test_a_hostile_post_reaches_slack_without_any_control_sequence() -> None:
    text, blocks = post_blocks(_post(HOSTILE))
    with running(channels=["C0INCIDENTS"]) as slack:

        async def send() -> None:
            web = SlackWeb(client(slack.bot_token, slack.base_url))
            await web.post(
                SlackMessage("C0INCIDENTS", None, text, blocks, {"event_type": "x", "event_payload": {}})
            )

        anyio.run(send)
        (stored,) = slack.messages("C0INCIDENTS")
    wire = json.dumps({"text": stored.get("text"), "blocks": stored.get("blocks")}, ensure_ascii=False)
    assert CONTROL.search(wire) is None, wire
    assert "&lt;!channel&gt;" in wire and "&lt;https://evil.example/login|the runbook&gt;" in wire

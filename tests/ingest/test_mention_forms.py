"""A mention of the bot is recognised in both forms Slack writes: `<@U123>` and `<@U123|label>`."""

from __future__ import annotations

import pytest

from services.ingest.slack_events import mentions

from .helpers import BOT


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"<@{BOT}> look at this", True),
        (f"hey <@{BOT}|incident-memory> what broke?", True),
        (f"<@{BOT}X> is someone else", False),
        (f"@{BOT} plain text is no mention", False),
        ("<@U0SOMEONE|bot> another user", False),
    ],
)
def test_mention_forms(text: str, expected: bool) -> None:
    assert mentions(text, BOT) is expected


def test_no_bot_configured_means_no_mention() -> None:
    assert mentions(f"<@{BOT}>", None) is False

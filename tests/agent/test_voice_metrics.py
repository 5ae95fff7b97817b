"""`slack_post_failures_total{error}`: a post the poster cannot make is counted (SlackPosterCannotPost)
with Slack's own error code, through the real slack_sdk client against the Slack stand-in."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY
from slack_sdk.errors import SlackApiError

from deploy.local.ports import free_port
from deploy.local.slack_standin import DEFAULT_CHANNEL, SlackStandin, running
from services.voice import slack_api
from services.voice.blocks import SlackMessage

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def slack() -> Iterator[SlackStandin]:
    with running(channels=[DEFAULT_CHANNEL]) as standin:
        yield standin


def failures(error: str) -> float:
    return REGISTRY.get_sample_value("slack_post_failures_total", {"error": error}) or 0.0


def post(web: slack_api.SlackWeb, channel: str = DEFAULT_CHANNEL) -> str:
    return asyncio.run(
        web.post(SlackMessage(channel, None, "hello", [], {"event_type": "x", "event_payload": {}}))
    )


def test_a_post_slack_refuses_is_counted_by_its_error_then_raised(slack: SlackStandin) -> None:
    web = slack_api.SlackWeb(slack_api.client(slack.bot_token, slack.base_url))
    before = {e: failures(e) for e in ("channel_not_found", "token_revoked", "unreachable")}
    assert post(web)  # a good post counts nothing
    assert {e: failures(e) for e in before} == before
    with pytest.raises(SlackApiError):
        post(web, "C0NOPE")
    slack.revoke(slack.bot_token)
    with pytest.raises(SlackApiError):
        post(web)
    assert failures("channel_not_found") == before["channel_not_found"] + 1
    assert failures("token_revoked") == before["token_revoked"] + 1
    assert failures("unreachable") == before["unreachable"]


def test_slack_not_answering_is_counted_as_unreachable() -> None:
    before = failures("unreachable")
    dead = slack_api.client("xoxb-any", f"http://127.0.0.1:{free_port()}/api/", timeout=2)
    with pytest.raises(Exception):  # noqa: B017 - whatever aiohttp raises for a refused connection
        post(slack_api.SlackWeb(dead))
    assert failures("unreachable") == before + 1

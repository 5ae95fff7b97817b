"""Recall with the optional embedding signal, over profiles the real projector SQL wrote and the OpenAI
stand-in's `/v1/embeddings` over HTTP (its vectors are hashed words: the plumbing, never a model's meaning)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from deploy.local.openai_embeddings import EMBEDDING_MODEL
from deploy.local.openai_standin import OpenAIStandin, running
from schemas.recall import recall
from schemas.recall_open import recall_at_open
from schemas.recall_scoring import Hit
from services.agent.mcp_client import THREAD_ARG
from services.runtime.embeddings import EndpointEmbeddings, openai_request
from services.telemetry_mcp.client import raw_of, session

from .helpers import apply_events
from .test_recall import (
    ALERT_KEY,
    CONCURRENT_PAY,
    LOOKALIKE,
    PAST,
    PAYMENTS,
    PRIVATE_SAME,
    PUBLIC,
    QUERY,
    SECRET,
    TEXTS,
    six_incidents,
)  # fmt: skip

pytestmark = pytest.mark.stack

PRIVATE_WORDS = "secret customer escalation"
ALL_MAPPED = (frozenset({PUBLIC, SECRET, PAYMENTS}),)  # even mapped together, a private channel stays its own


@pytest.fixture
def projected(pg_conn: psycopg.Connection, pg_schema: str) -> Iterator[psycopg.Connection]:
    """test_recall's incidents, their discussions worded for the vectors (the private ones' words their own)."""
    texts = {
        **TEXTS,
        PAST: "checkout heap grows with the payload cache; rolled back to 3.13.2 and it held",
        PRIVATE_SAME: f"{PRIVATE_WORDS}: checkout heap again",
        ALERT_KEY: f"{PRIVATE_WORDS} on the alert thread",
        QUERY: "checkout OOMKilled again, heap grows",
    }
    assert apply_events(pg_conn, six_incidents(texts), pg_schema, batch=7) == []
    yield pg_conn


@pytest.fixture(scope="module")
def oai() -> Iterator[OpenAIStandin]:
    with running() as standin:
        yield standin


def provider(oai: OpenAIStandin) -> EndpointEmbeddings:
    request = openai_request(EMBEDDING_MODEL, base_url=oai.base_url, api_key=oai.api_key, timeout=2.0)
    return EndpointEmbeddings(EMBEDDING_MODEL, request)


def sent_texts(oai: OpenAIStandin, since: int) -> list[str]:
    return [t for c in oai.calls()[since:] if c.path == "/v1/embeddings" for t in c.body["input"]]


def view(hits: list[Hit]) -> list[tuple[str, str, float, tuple[str, ...]]]:
    return [(h.thread_ts, h.kind, h.score, h.reasons) for h in hits]


def test_with_an_endpoint_each_hit_gets_the_labelled_part_in_one_request(
    projected: psycopg.Connection, oai: OpenAIStandin
) -> None:
    plain = recall(projected, QUERY, k=3)
    before = len(oai.calls())
    hits = recall(projected, QUERY, k=3, embed=provider(oai))
    assert len([c for c in oai.calls()[before:] if c.path == "/v1/embeddings"]) == 1  # one batch per recall
    assert [h.thread_ts for h in hits] == [h.thread_ts for h in plain] == [PAST, LOOKALIKE]
    best = {h.thread_ts: h for h in hits}[PAST]
    assert 0 < best.parts["embedding"] <= 1
    assert (
        f"discussion alike by embeddings ({EMBEDDING_MODEL}, {best.parts['embedding']:.2f})" in best.reasons
    )
    assert best.score > plain[0].score and all("embedding" not in h.parts for h in plain)


def test_only_the_query_and_visible_candidates_discussions_reach_the_endpoint(
    projected: psycopg.Connection, oai: OpenAIStandin
) -> None:
    before = len(oai.calls())
    hits = recall(projected, QUERY, k=10, groups=ALL_MAPPED, embed=provider(oai))
    sent = sent_texts(oai, before)
    assert {PAST, LOOKALIKE, CONCURRENT_PAY} <= {h.thread_ts for h in hits}
    assert "checkout OOMKilled again, heap grows" in sent and "payments pods OOM" in sent  # query, mapped
    assert not any(PRIVATE_WORDS in t for t in sent)  # another channel's private incidents: never sent


def test_an_endpoint_failure_or_timeout_scores_without_the_signal(
    projected: psycopg.Connection, oai: OpenAIStandin
) -> None:
    plain = view(recall(projected, QUERY, k=3, groups=ALL_MAPPED))
    for fault in ("status_500", "slow"):
        embed = EndpointEmbeddings(
            EMBEDDING_MODEL,
            openai_request(EMBEDDING_MODEL, base_url=oai.base_url, api_key=oai.api_key, timeout=0.5),
        )
        oai.slow_s = 2.0
        oai.embedding_faults.append(fault)
        assert view(recall(projected, QUERY, k=3, groups=ALL_MAPPED, embed=embed)) == plain
        assert embed.counts.failures == 1


def test_the_agents_recall_at_open_uses_the_endpoint(
    projected: psycopg.Connection, oai: OpenAIStandin
) -> None:
    found = recall_at_open(projected, QUERY, k=3, groups=ALL_MAPPED, embed=provider(oai))
    scored = {h.thread: h for h in found.hits}
    plain = {h.thread: h for h in recall_at_open(projected, QUERY, k=3, groups=ALL_MAPPED).hits}
    assert scored.keys() == plain.keys() and PRIVATE_SAME not in scored
    assert scored[PAST].score_milli > plain[PAST].score_milli


def test_the_recall_tool_of_the_mcp_server_uses_the_operators_endpoint(
    projected: psycopg.Connection, pg_schema: str, pg_dsn: str, oai: OpenAIStandin
) -> None:
    """The model's `recall_incidents`, through the real server over stdio, scores as the command and the recall
    at open do: with RECALL_EMBEDDINGS_MODEL set each hit carries the labelled part; unset, none does."""
    projected.commit()
    args = ["--backend", "recorded", "--dsn", pg_dsn, "--schema", pg_schema]
    call = {"query": "heap", THREAD_ARG: QUERY}  # as McpToolbox.call sets the thread

    async def ask(env: dict[str, str]) -> list[dict[str, Any]]:
        async with session(args, env=env) as client:
            hits: list[dict[str, Any]] = raw_of(await client.call_tool("recall_incidents", call))["hits"]
            return hits

    base = {k: v for k, v in os.environ.items() if k != "RECALL_EMBEDDINGS_MODEL"}
    with_endpoint = anyio.run(ask, {**base, **oai.env(), "RECALL_EMBEDDINGS_MODEL": EMBEDDING_MODEL})
    without = anyio.run(ask, {**base, **oai.env()})
    labelled = [h["thread"] for h in with_endpoint if any("by embeddings" in r for r in h["reasons"])]
    assert PAST in labelled
    assert [h["thread"] for h in without] == [h["thread"] for h in with_endpoint]
    assert not any("by embeddings" in r for h in without for r in h["reasons"])


def test_the_command_takes_the_model_by_flag_or_env(
    projected: psycopg.Connection, pg_schema: str, pg_dsn: str, oai: OpenAIStandin
) -> None:
    cli = str(Path(sys.executable).parent / "incident-memory")
    env = {**os.environ, **oai.env(), "DATABASE_URL": pg_dsn}
    env.pop("RECALL_EMBEDDINGS_MODEL", None)
    base = [cli, "recall", QUERY, "--k", "1", "--json", "--schema", pg_schema]
    runs = [
        subprocess.run([*base, "--embeddings", EMBEDDING_MODEL], env=env, capture_output=True, text=True),
        subprocess.run(
            base, env={**env, "RECALL_EMBEDDINGS_MODEL": EMBEDDING_MODEL}, capture_output=True, text=True
        ),
        subprocess.run(base, env=env, capture_output=True, text=True),
        subprocess.run(  # nothing listens there: scored without, said on stderr, not an error
            [*base, "--embeddings", EMBEDDING_MODEL],
            env={**env, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"},
            capture_output=True,
            text=True,
        ),
    ]
    assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs]
    labelled = [
        any("by embeddings" in r for h in json.loads(run.stdout) for r in h["reasons"]) for run in runs
    ]
    assert labelled == [True, True, False, False]
    assert json.loads(runs[3].stdout) == json.loads(runs[2].stdout)
    assert f"embeddings ({EMBEDDING_MODEL}) unavailable: scored without them" in runs[3].stderr

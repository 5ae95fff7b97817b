"""The stand-in's `POST /v1/embeddings` in OpenAI's wire format, through the real clients over HTTP, and the
provider recall uses (services/runtime/embeddings.py): one request per batch, a cache, redaction, failures."""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_openai import OpenAIEmbeddings
from prometheus_client import REGISTRY

from deploy.local import loopback_http
from deploy.local.openai_embeddings import DIMENSIONS, EMBEDDING_MODEL
from deploy.local.openai_standin import LABEL_HEADER, OpenAIStandin, running
from services.runtime import embeddings as provider
from services.runtime.embeddings import EmbeddingsUnavailable, EndpointEmbeddings, from_env, openai_request
from services.runtime.errors import BadInput, UserFacingError

TEXTS = ["checkout pods OOMKilled, heap grows", "rolled back to 3.13.2 and it held"]


@pytest.fixture(scope="module")
def oai() -> Iterator[OpenAIStandin]:
    with running() as standin:
        yield standin


def post(oai: OpenAIStandin, body: Any, key: str | None = None) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {key or oai.api_key}"}
    response = loopback_http.post(f"{oai.base_url}/embeddings", json=body, headers=headers)
    assert response.headers[LABEL_HEADER] == "deterministic, not a model"
    return response.status_code, response.json()


def client(oai: OpenAIStandin, **kwargs: Any) -> OpenAIEmbeddings:
    return OpenAIEmbeddings(
        model=EMBEDDING_MODEL, base_url=oai.base_url, api_key=oai.api_key,  # type: ignore[arg-type]
        check_embedding_ctx_length=False, max_retries=0, **kwargs,
    )  # fmt: skip


def test_the_response_is_openais_shape_with_unit_vectors(oai: OpenAIStandin) -> None:
    status, body = post(oai, {"model": EMBEDDING_MODEL, "input": TEXTS, "encoding_format": "float"})
    assert status == 200 and set(body) == {"object", "data", "model", "usage"}
    assert body["object"] == "list" and body["model"] == EMBEDDING_MODEL
    assert [(d["object"], d["index"]) for d in body["data"]] == [("embedding", 0), ("embedding", 1)]
    assert all(len(d["embedding"]) == DIMENSIONS for d in body["data"])
    assert all(math.isclose(sum(x * x for x in d["embedding"]), 1.0) for d in body["data"])
    usage = body["usage"]
    assert usage["prompt_tokens"] == usage["total_tokens"] > 0
    status, one = post(oai, {"model": EMBEDDING_MODEL, "input": TEXTS[0], "dimensions": 8})
    assert status == 200 and len(one["data"]) == 1 and len(one["data"][0]["embedding"]) == 8


def test_base64_is_little_endian_float32_of_the_same_vector(oai: OpenAIStandin) -> None:
    _, floats = post(oai, {"model": EMBEDDING_MODEL, "input": TEXTS, "encoding_format": "float"})
    _, packed = post(oai, {"model": EMBEDDING_MODEL, "input": TEXTS, "encoding_format": "base64"})
    for f, b in zip(floats["data"], packed["data"], strict=True):
        raw = base64.b64decode(b["embedding"])
        decoded = struct.unpack(f"<{len(raw) // 4}f", raw)
        assert decoded == pytest.approx(f["embedding"], abs=1e-7)


def test_the_real_client_reads_both_formats(oai: OpenAIStandin) -> None:
    before = len(oai.calls())
    by_default = client(oai).embed_documents(TEXTS)  # the openai client asks for base64 and decodes it
    as_float = client(oai, model_kwargs={"encoding_format": "float"}).embed_documents(TEXTS)
    sent = [c.body for c in oai.calls()[before:]]
    assert [b["encoding_format"] for b in sent] == ["base64", "float"]
    assert all(b["input"] == TEXTS for b in sent)  # strings, not tokens: no tiktoken download
    assert all(a == pytest.approx(b, abs=1e-7) for a, b in zip(by_default, as_float, strict=True))
    assert by_default[0] != by_default[1]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"model": EMBEDDING_MODEL, "input": [[1, 2, 3]]}, 400, "standin_unsupported"),  # token arrays
        ({"model": EMBEDDING_MODEL, "input": [1, 2, 3]}, 400, "standin_unsupported"),
        ({"model": EMBEDDING_MODEL, "input": ""}, 400, "invalid_value"),
        ({"model": EMBEDDING_MODEL, "input": []}, 400, "invalid_value"),
        ({"model": EMBEDDING_MODEL, "input": "x", "encoding_format": "int8"}, 400, "invalid_value"),
        ({"model": EMBEDDING_MODEL, "input": "x", "dimensions": 0}, 400, "invalid_value"),
        ({"model": EMBEDDING_MODEL}, 400, "missing_required_parameter"),
        ({"model": EMBEDDING_MODEL, "input": "x", "truncate": True}, 400, None),
        ({"model": "text-embedding-3-small", "input": "x"}, 404, "model_not_found"),
    ],
)
def test_bad_requests_get_openais_error_shape(
    oai: OpenAIStandin, body: dict[str, Any], status: int, code: str | None
) -> None:
    got, answer = post(oai, body)
    assert got == status and set(answer) == {"error"}
    assert set(answer["error"]) == {"message", "type", "param", "code"} and answer["error"]["code"] == code


def test_a_wrong_key_is_401(oai: OpenAIStandin) -> None:
    status, body = post(oai, {"model": EMBEDDING_MODEL, "input": "x"}, key="sk-wrong")
    assert status == 401 and body["error"]["code"] == "invalid_api_key"


def provider_for(oai: OpenAIStandin, timeout: float = 2.0) -> EndpointEmbeddings:
    request = openai_request(EMBEDDING_MODEL, base_url=oai.base_url, api_key=oai.api_key, timeout=timeout)
    return EndpointEmbeddings(EMBEDDING_MODEL, request)


def embedding_calls(oai: OpenAIStandin, since: int) -> list[Any]:
    return [c for c in oai.calls()[since:] if c.path == "/v1/embeddings"]


def test_the_provider_sends_one_request_for_the_misses_and_caches_by_text(oai: OpenAIStandin) -> None:
    embed = provider_for(oai)
    before = len(oai.calls())
    first = embed(TEXTS)
    again = embed([TEXTS[1], "a new text", TEXTS[0]])
    calls = embedding_calls(oai, before)
    assert [c.body["input"] for c in calls] == [TEXTS, ["a new text"]]  # one per call, misses only
    assert again[0] == first[1] and again[2] == first[0]
    assert (embed.counts.requests, embed.counts.cached, embed.counts.failures) == (2, 2, 0)


def test_the_provider_redacts_and_clips_what_it_sends(oai: OpenAIStandin) -> None:
    before = len(oai.calls())
    provider_for(oai)(["tried password=hunter2 on the replica", "word " * 5000])
    (call,) = embedding_calls(oai, before)
    assert "hunter2" not in str(call.body) and "[REDACTED:password]" in call.body["input"][0]
    assert len(call.body["input"][1]) == provider.TEXT_CHARS  # the head of a long discussion


@pytest.mark.parametrize("fault", ["status_500", "slow"])
def test_a_failure_or_timeout_raises_once_counted_and_is_not_cached(oai: OpenAIStandin, fault: str) -> None:
    embed = provider_for(oai, timeout=0.5)
    oai.slow_s = 2.0
    oai.embedding_faults.append(fault)
    failed = REGISTRY.get_sample_value("recall_embedding_requests_total", {"outcome": "failed"})
    with pytest.raises(EmbeddingsUnavailable):
        embed(TEXTS)
    assert (embed.counts.requests, embed.counts.failures) == (1, 1)  # no retry: a recall waits once
    assert REGISTRY.get_sample_value("recall_embedding_requests_total", {"outcome": "failed"}) == failed + 1  # type: ignore[operator]
    assert len(embed(TEXTS)) == 2 and embed.counts.requests == 2  # the next recall asks again


def test_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provider, "_shared", {})
    assert from_env({}) is None  # unset: recall uses no endpoint
    env = {"RECALL_EMBEDDINGS_MODEL": "m", "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    made = from_env(env)
    assert made is not None and made.model == "m" and from_env(env) is made  # one cache per configuration
    assert from_env({**env, "RECALL_EMBEDDINGS_MODEL": ""}, model="n").model == "n"  # type: ignore[union-attr]
    with pytest.raises(BadInput, match="RECALL_EMBEDDINGS_TIMEOUT"):
        from_env({**env, "RECALL_EMBEDDINGS_TIMEOUT": "soon"})
    with pytest.raises(UserFacingError, match="OPENAI_API_KEY"):
        from_env({"RECALL_EMBEDDINGS_MODEL": "m"})


def test_the_agents_recall_step_takes_the_configured_provider(
    oai: OpenAIStandin, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import UTC, datetime

    from schemas.events import Wake
    from services.agent.recall_step import check_channel_groups, recall_step
    from services.context_render.context import ContextRow, LoadedContext

    alert = ContextRow("T:-:alert:0", "alert", None, {"alertname": "X"}, 10)
    wake = Wake(thread_ts="T", message_id="T:-:wake:0", event_time=datetime.now(UTC), reason="alert",
                trigger_message_id=alert.id)  # fmt: skip
    ctx = LoadedContext("T", (alert,), None)
    monkeypatch.setattr(provider, "_shared", {})
    monkeypatch.delenv("RECALL_EMBEDDINGS_MODEL", raising=False)
    step = recall_step(None, ctx, None, wake)  # type: ignore[arg-type]
    assert step is not None and step.embed is None  # the default: no endpoint
    for name, value in {**oai.env(), "RECALL_EMBEDDINGS_MODEL": EMBEDDING_MODEL}.items():
        monkeypatch.setenv(name, value)
    step = recall_step(None, ctx, None, wake)  # type: ignore[arg-type]
    assert step is not None and step.embed is not None and step.embed.model == EMBEDDING_MODEL
    monkeypatch.setenv("RECALL_EMBEDDINGS_TIMEOUT", "-1")
    with pytest.raises(BadInput, match="RECALL_EMBEDDINGS_TIMEOUT"):
        check_channel_groups()  # checked when the agent starts

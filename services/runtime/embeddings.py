"""The embedding endpoint recall may use (OpenAI-compatible `/v1/embeddings`): I/O at the edge, off by default.

`RECALL_EMBEDDINGS_MODEL` names the model; unset, recall uses none (`from_env` returns None). The endpoint
is the one the agent's models use (`OPENAI_BASE_URL`, `OPENAI_API_KEY`), unless
`RECALL_EMBEDDINGS_BASE_URL` names another. Through langchain-openai's `OpenAIEmbeddings` with
`check_embedding_ctx_length=False`: otherwise it loads a tiktoken encoding by name, which needs a download,
and nothing is downloaded at run time. One request per recall (the query's discussion and its candidates'),
no retry, a short timeout (`RECALL_EMBEDDINGS_TIMEOUT` seconds): a recall waits at most that long, then is
scored without the signal. Vectors are kept in an in-process LRU cache by the hash of the text as stored (only
a miss is redacted and sent).

What is sent is the profiles' discussions, redacted when they were projected; each text passes through the
redactor (`services/boundary/redact.py`) again here, so a profile projected by an older redactor, or any
future caller, cannot send a credential to the endpoint.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from services.boundary.redact import redact_text
from services.runtime.errors import BadInput, UserFacingError
from services.runtime.metric_families import Families

log = logging.getLogger("recall.embeddings")

MODEL_ENV: Final = "RECALL_EMBEDDINGS_MODEL"
BASE_URL_ENV: Final = "RECALL_EMBEDDINGS_BASE_URL"
TIMEOUT_ENV: Final = "RECALL_EMBEDDINGS_TIMEOUT"
DEFAULT_TIMEOUT_S: Final = 2.0
CACHE_SIZE: Final = 4096  # vectors kept (a recall embeds at most its ~125 candidates' discussions)
# The head of a discussion sent (a profile keeps up to 20,000 characters): about a thousand tokens each keeps a
# recall's one request of ~125 texts within OpenAI's per-request token limit and an input within an embedding
# model's context; what people wrote first (what they saw) is kept.
TEXT_CHARS: Final = 4000

Request = Callable[[list[str]], list[list[float]]]
# On the process's default registry: the agent serves it on /metrics (a failing endpoint is visible there).
REQUESTS = Families().counter(
    "recall_embedding_requests_total",
    "Embedding requests of recall, by outcome",
    "outcome",
    zero=("ok", "failed"),
)


class EmbeddingsUnavailable(RuntimeError):
    """The endpoint failed or timed out; recall goes on without the signal."""


@dataclass
class Counts:
    """What the provider did, for logs and tests: requests sent, texts served from the cache, failures."""

    requests: int = 0
    cached: int = 0
    failures: int = 0


@dataclass
class EndpointEmbeddings:
    """`texts -> vectors` for `schemas.recall.recall(embed=...)`: cached, one request for the misses, each
    redacted and cut to `TEXT_CHARS` before it is sent."""

    model: str
    request: Request  # one HTTP request for a batch (`openai_request`)
    cache_size: int = CACHE_SIZE
    counts: Counts = field(default_factory=Counts)
    _cache: OrderedDict[str, list[float]] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, texts: list[str]) -> list[list[float]]:
        # Keyed by the text as stored: redaction is a pure function of it, so only the misses are redacted
        # and cut (a recall hands over every visible candidate's discussion, most of them cached).
        keys = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        with self._lock:
            known = {k: self._cache[k] for k in keys if k in self._cache}
            for k in known:
                self._cache.move_to_end(k)
            self.counts.cached += sum(1 for k in keys if k in known)
        missing = list(dict.fromkeys(k for k in keys if k not in known))
        if missing:
            text_of = dict(zip(keys, texts, strict=True))
            known.update(self._fetch(missing, {k: redact_text(text_of[k])[:TEXT_CHARS] for k in missing}))
        return [known[k] for k in keys]

    def _fetch(self, keys: list[str], text_of: Mapping[str, str]) -> dict[str, list[float]]:
        with self._lock:
            self.counts.requests += 1
        try:
            vectors = self.request([text_of[k] for k in keys])
            if len(vectors) != len(keys):
                raise ValueError(f"{len(vectors)} vectors for {len(keys)} texts")
        except Exception as exc:
            REQUESTS.labels("failed").inc()
            with self._lock:
                self.counts.failures += 1
            log.warning("embeddings endpoint failed (%s): %s", type(exc).__name__, str(exc)[:200])
            raise EmbeddingsUnavailable(f"{self.model}: {type(exc).__name__}") from exc
        REQUESTS.labels("ok").inc()
        fetched = dict(zip(keys, ([float(x) for x in v] for v in vectors), strict=True))
        with self._lock:
            for k, v in fetched.items():
                self._cache[k] = v
                self._cache.move_to_end(k)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return fetched


def openai_request(model: str, *, base_url: str | None, api_key: str | None, timeout: float) -> Request:
    """One `POST {base_url}/embeddings` per batch, through langchain-openai, no retry."""
    from langchain_openai import OpenAIEmbeddings
    from pydantic import SecretStr

    if not api_key:
        raise UserFacingError(f"{MODEL_ENV} is set: OPENAI_API_KEY is needed for the embeddings endpoint")
    client = OpenAIEmbeddings(
        model=model,
        base_url=base_url,
        api_key=SecretStr(api_key),
        timeout=timeout,
        max_retries=0,
        check_embedding_ctx_length=False,  # else a tiktoken encoding is loaded by name: a download
    )
    return lambda texts: client.embed_documents(texts)


def timeout_of(env: Mapping[str, str]) -> float:
    raw = env.get(TIMEOUT_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_TIMEOUT_S
    except ValueError:
        raise BadInput(f"{TIMEOUT_ENV}: not a number of seconds: {raw!r}") from None
    if not 0 < value <= 60:
        raise BadInput(f"{TIMEOUT_ENV}: expected seconds in (0, 60], got {raw!r}")
    return value


_shared: dict[tuple[str, str | None, str | None, float], EndpointEmbeddings] = {}
_shared_lock = threading.Lock()


def from_env(env: Mapping[str, str] | None = None, *, model: str | None = None) -> EndpointEmbeddings | None:
    """The configured provider (`model` overrides `RECALL_EMBEDDINGS_MODEL`), or None when none is; one per
    configuration in the process, so its cache serves every recall. A bad setting is one line (exit 2)."""
    env = os.environ if env is None else env
    name = (model or env.get(MODEL_ENV, "")).strip()
    if not name:
        return None
    base_url = env.get(BASE_URL_ENV) or env.get("OPENAI_BASE_URL") or None
    key = (name, base_url, env.get("OPENAI_API_KEY"), timeout_of(env))
    with _shared_lock:
        if key not in _shared:
            request = openai_request(name, base_url=base_url, api_key=key[2], timeout=key[3])
            _shared[key] = EndpointEmbeddings(name, request)
        return _shared[key]

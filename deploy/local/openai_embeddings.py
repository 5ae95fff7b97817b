"""`POST /v1/embeddings` for the OpenAI stand-in: OpenAI's wire format, with vectors that are NOT a model's.

The request as OpenAI takes it: `model`, `input` (a string or a list of strings; token arrays are valid
OpenAI input this stand-in cannot embed, refused with `standin_unsupported`), optional `encoding_format`
(`float`, or `base64`: little-endian float32, which the openai Python client asks for by default and
decodes), optional `dimensions`, optional `user`; anything else is an unrecognized argument. The answer is
`{"object": "list", "data": [{"object": "embedding", "index": i, "embedding": ...}], "model", "usage":
{"prompt_tokens", "total_tokens"}}`.

The vectors are a hashed bag of words, L2-normalised: deterministic, so the plumbing (batching, caching,
visibility, the labelled reason, a failure) can be tested and measured. They say which words two texts share,
never what they mean: a figure measured with them is the stand-in's, never a real model's.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
import struct
from typing import Any, Final

from schemas.tokens import count_tokens

EMBEDDING_MODEL: Final = "standin-hashed-words"  # the only embedding model served: NOT a model
DIMENSIONS: Final = 256
MAX_DIMENSIONS: Final = 3072
MAX_INPUTS: Final = 2048  # OpenAI's limit on the inputs of one request
KNOWN_ARGS: Final = frozenset({"model", "input", "encoding_format", "dimensions", "user"})
_WORD = re.compile(r"[a-z0-9]+")


class EmbeddingsRequestError(ValueError):
    """A request OpenAI would refuse (400), with its `param` and `code`."""

    def __init__(self, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.param = param
        self.code = code


def texts_of(value: Any) -> list[str]:
    """`input` as OpenAI accepts it, as texts; token arrays are refused as unsupported here."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise EmbeddingsRequestError(
            "'input' must be a non-empty string or array of strings", "input", "invalid_value"
        )
    if len(items) > MAX_INPUTS:
        raise EmbeddingsRequestError(
            f"'input' must have at most {MAX_INPUTS} items", "input", "invalid_value"
        )
    if all(isinstance(x, int) for x in items) or all(isinstance(x, list) for x in items):
        raise EmbeddingsRequestError(
            "openai-standin: token arrays are valid input it cannot embed; send strings", "input",
            "standin_unsupported",
        )  # fmt: skip
    if not all(isinstance(x, str) for x in items):
        raise EmbeddingsRequestError(
            "'input' must be a string or an array of strings", "input", "invalid_type"
        )
    if any(not x for x in items):
        raise EmbeddingsRequestError("'input' cannot contain an empty string", "input", "invalid_value")
    return list(items)


def hashed_words(text: str, dimensions: int) -> list[float]:
    """Each word counted in the bucket its hash names, the vector scaled to length 1 (all zeros: no word)."""
    vector = [0.0] * dimensions
    for word in _WORD.findall(text.lower()):
        vector[
            int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big") % dimensions
        ] += 1
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector


def encoded(vector: list[float], encoding_format: str) -> list[float] | str:
    if encoding_format == "base64":
        return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
    return vector


def _options(body: dict[str, Any]) -> tuple[str, int]:
    fmt = body.get("encoding_format", "float")
    if fmt not in ("float", "base64"):
        raise EmbeddingsRequestError(
            "'encoding_format' must be one of 'float', 'base64'", "encoding_format", "invalid_value"
        )
    dims = body.get("dimensions", DIMENSIONS)
    if isinstance(dims, bool) or not isinstance(dims, int) or not 1 <= dims <= MAX_DIMENSIONS:
        raise EmbeddingsRequestError(
            f"'dimensions' must be an integer in [1, {MAX_DIMENSIONS}]", "dimensions", "invalid_value"
        )
    return fmt, dims


def check(body: dict[str, Any]) -> None:
    """The request's shape, before the model is looked at (as OpenAI answers)."""
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise EmbeddingsRequestError("you must provide a model parameter", "model")
    if "input" not in body:
        raise EmbeddingsRequestError(
            "Missing required parameter: 'input'.", "input", "missing_required_parameter"
        )
    unknown = sorted(set(body) - KNOWN_ARGS)
    if unknown:
        raise EmbeddingsRequestError(f"Unrecognized request argument supplied: {unknown[0]}")


def embeddings(body: dict[str, Any]) -> dict[str, Any]:
    """The answer to a checked request for `EMBEDDING_MODEL`."""
    texts = texts_of(body["input"])
    fmt, dims = _options(body)
    tokens = sum(count_tokens(t) for t in texts)
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": encoded(hashed_words(t, dims), fmt)}
            for i, t in enumerate(texts)
        ],
        "model": EMBEDDING_MODEL,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }

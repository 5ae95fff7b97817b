"""A failed tool call: the model is told the tool's own error, never a complaint about the raw's format.

Found live (issue 18): `get_pod_events` with Kubernetes not configured was recorded truthfully, but
its digest said "raw format: expected a Kubernetes EventList", so the reason stayed in the raw."""

from __future__ import annotations

import json

import pytest

from schemas.tokens import count_value_tokens
from schemas.tools import recorded_tool_error, tool_error_raw
from services.compaction.model import BUDGET_FLOOR
from services.compaction.registry import BUILTIN, budget_for, compact_tool_result
from services.compaction.tool_error import MESSAGE_TOKENS
from services.compactor.cli import compact_stdin

EVIDENCE = "1796304420.628023:1:tools:2"
# what the agent recorded in the live run, byte for byte
K8S = tool_error_raw(
    "get_pod_events",
    "Error executing tool get_pod_events: Kubernetes is not configured: set KUBERNETES_URL or its flag",
)


@pytest.mark.parametrize(
    "tool", ["get_pod_events", "query_loki", "query_prometheus", "query_tempo", "my_tool"]
)
def test_the_digest_of_a_failed_call_is_the_tools_own_error_with_the_evidence_id(tool: str) -> None:
    out = compact_tool_result(tool, K8S, {"evidence_id": EVIDENCE})
    error = out.compact["error"]
    assert "the tool's own error: Error executing tool get_pod_events: Kubernetes is not configured" in error
    assert error.startswith("get_pod_events failed; ")
    assert "raw format" not in error and "could not be compacted" not in error
    assert error.endswith(f"raw kept as evidence {EVIDENCE}")
    assert out.tokens == count_value_tokens(out.compact) <= budget_for(tool)
    assert out.compactor_version == BUILTIN.version_for(tool)


def test_a_long_error_is_cut_to_its_first_tokens_and_says_how_much_is_left_in_the_raw() -> None:
    message = "upstream said: " + " ".join(f"reason{i}" for i in range(2000))
    for budget in (BUDGET_FLOOR, 150, 400):
        out = compact_tool_result(
            "get_pod_events",
            tool_error_raw("get_pod_events", message),
            {"evidence_id": EVIDENCE},
            budget=budget,
        )
        error = out.compact["error"]
        assert out.tokens <= budget
        assert "the tool's own error: upstream said: reason0 reason1" in error
        assert "reason1999" not in error
        cut = error.split("the tool's own error: ", 1)[1].split("…(+", 1)
        assert len(cut) == 2 and cut[1].split(" ", 1)[0].isdigit()  # `…(+N tokens)`: never a silent cut
        assert count_value_tokens(cut[0]) <= MESSAGE_TOKENS + 1
        assert error.endswith(f"raw kept as evidence {EVIDENCE}")


def test_an_apis_own_error_envelope_is_a_tool_error_too() -> None:
    prometheus = {
        "status": "error",
        "errorType": "bad_data",
        "error": 'parse error at char 7: unexpected "}"',
    }
    out = compact_tool_result("query_prometheus", prometheus, {"evidence_id": EVIDENCE})
    assert (
        'query_prometheus failed; the tool\'s own error: bad_data: parse error at char 7: unexpected "}"'
        in (out.compact["error"])
    )
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
              "message": 'events is forbidden: User "x" cannot list resource "events"'}  # fmt: skip
    out = compact_tool_result("get_pod_events", status, {"evidence_id": EVIDENCE})
    assert 'the tool\'s own error: 403 Forbidden events is forbidden: User "x"' in out.compact["error"]


def test_a_raw_that_only_looks_alike_is_not_a_tool_error() -> None:
    assert recorded_tool_error({"error": "x", "tool": "t", "items": []}) is None
    assert recorded_tool_error({"error": 1, "tool": "t"}) is None
    assert recorded_tool_error(K8S) == ("get_pod_events", K8S["error"])
    # a real EventList is still digested as one
    events = {"kind": "EventList", "items": []}
    assert "error" not in compact_tool_result("get_pod_events", events, {"evidence_id": EVIDENCE}).compact


def test_the_cli_answers_a_failed_call_with_its_reason() -> None:
    out = json.loads(compact_stdin(json.dumps(K8S).encode(), "get_pod_events", evidence_id=EVIDENCE))
    assert "Kubernetes is not configured" in out["compact"]["error"]
    assert out["tokens"] == count_value_tokens(out["compact"])

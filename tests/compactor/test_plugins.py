"""COMPACTOR_PLUGINS: compactors for new formats, loaded by name, versioned, and held to their budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.compaction.config import COMPACTOR_VERSION, COMPACTORS, load_config
from services.compaction.registry import BudgetExceeded, compact_tool_result
from services.compactor.stream import selection_key
from services.runtime.errors import UserFacingError

PLUGINS = "tests.reliability.plugin_compactors"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def importable(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.syspath_prepend(str(ROOT))  # the plugins are importable as a deployment's would be
    yield


def plugins(entries: dict[str, str], **more: str) -> dict[str, str]:
    """An environment: COMPACTOR_PLUGINS holding `entries`, and other settings."""
    return {"COMPACTOR_PLUGINS": json.dumps(entries), **more}


def test_a_loaded_plugin_compacts_its_tools_with_its_own_version_and_budget() -> None:
    config = load_config(plugins({"shout": f"{PLUGINS}:upper"}, COMPACTOR_TOOL_MAP='{"loud_tool": "shout"}'))
    assert dict(config.plugin_versions) == {"shout": "test.1"}
    out = compact_tool_result("loud_tool", {"lines": ["a", "b"]}, {}, config=config)
    assert out.compact["lines"] == ["A", "B"]
    assert out.budget == 120  # the module's BUDGET
    assert out.compactor_version == config.version_for("loud_tool") == f"{COMPACTOR_VERSION}+shout.test.1"
    # A plugin's new version is a new replay key: a recorded selection of the old one is not reused.
    before = selection_key(out.raw_sha256, out.compactor_version)
    newer = config.with_plugin("shout", config.compactors["shout"], budget=120, version="test.2")
    assert selection_key(out.raw_sha256, newer.version_for("loud_tool")) != before
    assert config.version_for("query_loki") == COMPACTOR_VERSION  # built-ins keep theirs
    # The agent stamps the raw with the compactor's name: that name reaches the plugin too.
    assert compact_tool_result("shout", {"lines": ["c"]}, {}, config=config).compact["lines"] == ["C"]


def test_the_call_path_holds_a_plugin_to_its_budget() -> None:
    env = plugins({"greedy": f"{PLUGINS}:overshooting"}, COMPACTOR_TOOL_MAP='{"huge_tool": "greedy"}')
    with pytest.raises(BudgetExceeded, match="over its budget of 120"):
        compact_tool_result(
            "huge_tool", {"lines": [f"line {i}" for i in range(100)]}, {}, config=load_config(env)
        )
    env["COMPACTOR_BUDGETS"] = json.dumps({"greedy": 5000})  # the setting still overrides
    assert (
        compact_tool_result("huge_tool", {"lines": ["x"] * 100}, {}, config=load_config(env)).budget == 5000
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("{nope", "COMPACTOR_PLUGINS is not a JSON object: Expecting"),
        ('["a"]', "COMPACTOR_PLUGINS is not a JSON object"),
        ('{"x": "no_colon"}', "expected 'package.module:function'"),
        ('{"x": 3}', "expected 'package.module:function'"),
        ('{"x": "no_such_module_xyz:draft"}', "cannot import 'no_such_module_xyz'"),
        (json.dumps({"x": f"{PLUGINS}:missing"}), "has no function 'missing'"),
        (json.dumps({"x": f"{PLUGINS}:VERSION"}), "has no function 'VERSION'"),
        (json.dumps({"query_loki": f"{PLUGINS}:upper"}), "is built in and cannot be replaced"),
    ],
)
def test_a_plugin_that_cannot_be_loaded_is_one_clear_error(spec: str, message: str) -> None:
    with pytest.raises(UserFacingError, match=message.replace("(", r"\(")):
        load_config({"COMPACTOR_PLUGINS": spec})
    assert COMPACTORS["query_loki"].__module__ == "services.compaction.loki"


def test_the_one_shot_cli_loads_plugins_too() -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "COMPACTOR_PLUGINS": json.dumps({"shout": f"{PLUGINS}:upper"}),
        "COMPACTOR_TOOL_MAP": json.dumps({"loud_tool": "shout"}),
    }
    argv = [sys.executable, "-m", "services.cli", "compact", "--tool", "loud_tool"]
    done = subprocess.run(argv, input='{"lines": ["x"]}', capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["compact"]["lines"] == ["X"]
    env["COMPACTOR_PLUGINS"] = '{"shout": "nowhere:draft"}'
    done = subprocess.run(argv, input="{}", capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().count("\n") == 0 and "cannot import 'nowhere'" in done.stderr

"""COMPACTOR_PLUGINS: compactors for new formats, loaded by name, versioned, and held to their budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.compactor import registry
from services.compactor.plugins import load_plugins
from services.compactor.registry import BudgetExceeded, compact_tool_result, version_for
from services.compactor.stream import selection_key
from services.runtime.errors import UserFacingError

PLUGINS = "tests.reliability.plugin_compactors"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Plugins register into module-level tables: put them back after each test."""
    monkeypatch.setattr(registry, "COMPACTORS", dict(registry.COMPACTORS))
    monkeypatch.setattr(registry, "DEFAULT_BUDGETS", dict(registry.DEFAULT_BUDGETS))
    monkeypatch.setattr(registry, "PLUGIN_VERSIONS", dict(registry.PLUGIN_VERSIONS))
    monkeypatch.delenv("COMPACTOR_PLUGINS", raising=False)
    monkeypatch.syspath_prepend(str(ROOT))  # the plugins are importable as a deployment's would be
    yield


def test_a_loaded_plugin_compacts_its_tools_with_its_own_version_and_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert load_plugins(json.dumps({"shout": f"{PLUGINS}:upper"})) == {"shout": "test.1"}
    monkeypatch.setenv("COMPACTOR_TOOL_MAP", json.dumps({"loud_tool": "shout"}))
    out = compact_tool_result("loud_tool", {"lines": ["a", "b"]}, {})
    assert out.compact["lines"] == ["A", "B"]
    assert out.budget == 120  # the module's BUDGET
    assert out.compactor_version == version_for("loud_tool") == f"{registry.COMPACTOR_VERSION}+shout.test.1"
    # A plugin's new version is a new replay key: a recorded selection of the old one is not reused.
    before = selection_key(out.raw_sha256, out.compactor_version)
    registry.PLUGIN_VERSIONS["shout"] = "test.2"
    assert selection_key(out.raw_sha256, version_for("loud_tool")) != before
    assert version_for("query_loki") == registry.COMPACTOR_VERSION  # built-ins keep theirs


def test_the_call_path_holds_a_plugin_to_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    load_plugins(json.dumps({"greedy": f"{PLUGINS}:overshooting"}))
    monkeypatch.setenv("COMPACTOR_TOOL_MAP", json.dumps({"huge_tool": "greedy"}))
    with pytest.raises(BudgetExceeded, match="over its budget of 120"):
        compact_tool_result("huge_tool", {"lines": [f"line {i}" for i in range(100)]}, {})
    monkeypatch.setenv("COMPACTOR_BUDGETS", json.dumps({"greedy": 5000}))  # the env still overrides
    assert compact_tool_result("huge_tool", {"lines": ["x"] * 100}, {}).budget == 5000


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
        load_plugins(spec)
    assert registry.COMPACTORS["query_loki"].__module__ == "services.compactor.loki"


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

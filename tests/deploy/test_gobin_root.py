"""Where Go-built tools are cached: per user by default, so every clone on a machine reuses them."""

from __future__ import annotations

from pathlib import Path

import pytest

from deploy.local import gobin


def test_a_state_dir_keeps_everything_under_it(tmp_path: Path) -> None:
    assert gobin.root(tmp_path) == tmp_path / "gobin"


def test_the_default_is_per_user_not_per_checkout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("INCIDENT_MEMORY_GOBIN_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("INCIDENT_MEMORY_STATE_DIR", str(tmp_path / "state"))
    assert gobin.root() == tmp_path / "xdg" / "incident-memory" / "gobin"
    monkeypatch.setenv("INCIDENT_MEMORY_GOBIN_DIR", str(tmp_path / "mine"))
    assert gobin.root() == (tmp_path / "mine").resolve()
    assert gobin.binary_path("promtool", "v1") == (tmp_path / "mine").resolve() / "promtool-v1" / "promtool"

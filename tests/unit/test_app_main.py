"""`python -m app` / `npu-studio`: what runs before the command."""

from __future__ import annotations

import multiprocessing
import sys

import pytest

import app.__main__ as entry


@pytest.mark.parametrize("frozen", [True, False])
def test_freeze_support_runs_only_in_the_frozen_app(monkeypatch: pytest.MonkeyPatch, frozen: bool) -> None:
    calls: list[str] = []

    def run(argv: list[str]) -> int:
        calls.append(f"run {' '.join(argv)}")
        return 0

    monkeypatch.setattr(multiprocessing, "freeze_support", lambda: calls.append("freeze_support"))
    monkeypatch.setattr("app.cli.run", run)
    if frozen:
        monkeypatch.setattr(sys, "frozen", True, raising=False)
    else:
        monkeypatch.delattr(sys, "frozen", raising=False)
    assert entry.main(["devices"]) == 0
    assert calls == (["freeze_support"] if frozen else []) + ["run devices"]

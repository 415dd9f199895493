"""One version: the app reports the version the package (and so the MSI) is built with."""

from __future__ import annotations

import tomllib
from pathlib import Path

import app


def test_app_version_matches_pyproject() -> None:
    data = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    assert app.__version__ == data["project"]["version"]

"""Views hold no database: no module under ui/ imports the conversation store or any other storage module
(pyproject.toml's import-linter contract says the same, indirect imports included, and runs in CI)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _storage_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module] + ([f"app.{alias.name}" for alias in node.names] if node.module == "app" else [])
        else:
            continue
        found += [m for m in modules if m == "app.storage" or m.startswith("app.storage.")]
    return found


def test_no_view_imports_the_store() -> None:
    offenders = {str(p.relative_to(REPO)): _storage_imports(p) for p in sorted((REPO / "ui").rglob("*.py"))}
    assert {path: found for path, found in offenders.items() if found} == {}


def test_the_check_sees_an_import_of_the_store(tmp_path: Path) -> None:
    view = tmp_path / "view.py"
    view.write_text("from app.storage.conversations import ConversationStore\nfrom app import storage\n")
    assert _storage_imports(view) == ["app.storage.conversations", "app.storage"]

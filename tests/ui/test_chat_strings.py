"""Every user-visible string in the chat's widgets goes through tr() (ready for translation): no bare
string literal is handed to a Qt call that shows text."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHAT_FILES = [
    "ui/chat/view.py",
    "ui/chat/header.py",
    "ui/chat/answers.py",
    "ui/chat/model_status.py",
    "ui/chat/session.py",
    "ui/chat/safe_markdown.py",
    "ui/chat/composer.py",
    "ui/chat/state.py",
    "ui/chat/text.py",
    "ui/chat/banners.py",
    "ui/chat/transcript.py",
    "ui/chat/transcript_render.py",
    "ui/chat/code_blocks.py",
    "ui/chat/conversation_list.py",
    "ui/chat/generation_panel.py",
]
# Qt calls and constructors whose string arguments a user reads.
SHOWN = {
    "setText",
    "setToolTip",
    "setPlaceholderText",
    "setAccessibleName",
    "setWindowTitle",
    "addAction",
    "addRow",
    "show_message",
    "insertText",
    "QLabel",
    "QPushButton",
    "QCheckBox",
    "ViewHeader",
    "muted_label",
    "ChatBanner",
    "notice",
}
SEVERITIES = {"error", "warning", "info"}  # banner kinds, not words
CAUSES = {"model", "memory", "answer", "waiting", "busy", "refusal", "not-sent", "storage", "export"}  # banner causes


def _literal_strings(node: ast.AST) -> list[str]:
    """Bare literals in an argument (tr("...") calls excluded; f-strings count by their literal parts)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "tr":
        return []
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    if isinstance(node, ast.BinOp):
        return _literal_strings(node.left) + _literal_strings(node.right)
    return []


@pytest.mark.parametrize("path", CHAT_FILES)
def test_chat_strings_go_through_tr(path: str) -> None:
    tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
    bare: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name not in SHOWN:
            continue
        for arg in node.args:
            for text in _literal_strings(arg):
                if any(ch.isalpha() for ch in text) and text not in SEVERITIES | CAUSES:
                    bare.append(f"line {node.lineno}: {text!r}")
    assert not bare, f"{path}: strings shown without tr():\n" + "\n".join(bare)

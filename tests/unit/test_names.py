"""Windows' naming rules, checked on every platform in one function (engines/names.py), and the names NPU
Studio makes from user text (model names, export names) always obeying them."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engines import names
from engines.errors import ModelError
from engines.models.library import check_name, check_new_name, suggest_name

RESERVED = ["CON", "con", "Prn", "AUX", "nul", "NUL.onnx", "nul.tar.gz", "COM1", "com9.txt", "LPT1", "lpt9",
            "COM0", "COM\u00b9", "LPT\u00b3.x", "CONIN$", "conout$", "nul .txt"]  # fmt: skip
ALLOWED = ["console", "nullable", "COM10", "LPT", "com", "auxiliary.onnx", "x.y", "model-1", "CON_", "a" * 255,
           "é" * 127]  # fmt: skip


@pytest.mark.parametrize("name", RESERVED)
def test_reserved_device_names_are_refused_in_any_case_and_with_any_extension(name: str) -> None:
    assert "device name Windows reserves" in names.name_problem(name)


@pytest.mark.parametrize("name", ALLOWED)
def test_names_windows_accepts_pass(name: str) -> None:
    assert names.name_problem(name) == ""


@pytest.mark.parametrize(
    ("name", "words"),
    [("x.", "ends with a dot"), ("x ", "ends with a space"), ("a<b", "does not allow <"),
     ('a"b', 'does not allow "'), ("a|b?c*", "does not allow * ? |"), ("a\\b", "does not allow \\"),
     ("a/b", "does not allow /"), ("a:b", "does not allow :"), ("tab\there", "control character (\\x09)"),
     ("", "must not be empty"), ("..", "must not be empty"), ("a" * 256, "256 bytes long"),
     ("é" * 128, "256 bytes long")],
)  # fmt: skip
def test_each_rule_is_named(name: str, words: str) -> None:
    assert words in names.name_problem(name)


def test_names_that_differ_only_in_case_collide() -> None:
    assert names.case_collision("Vision", ["other", "vision"]) == "vision"
    assert names.case_collision("vision", ["vision"]) == ""  # the same name is not a case collision
    assert names.case_collision("STRASSE", ["straße"]) == "straße"


def test_path_length_counts_where_windows_applies_it(monkeypatch: pytest.MonkeyPatch) -> None:
    long = "C:\\" + "\\".join(["folder"] * 40)
    monkeypatch.setattr(names, "PATH_LENGTH_MATTERS", False)
    assert names.path_length_problem(long) == ""
    monkeypatch.setattr(names, "PATH_LENGTH_MATTERS", True)
    assert "Windows opens paths of at most 259" in names.path_length_problem(long)
    assert names.path_length_problem("C:\\short\\model.onnx") == ""


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_any_text_becomes_a_safe_file_name(text: str) -> None:
    name = names.safe_name(text, suffix=".md", fallback="conversation")
    assert names.name_problem(name) == "", (text, name)
    assert name.endswith(".md") and len(name.encode()) <= 120


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_a_suggested_model_name_is_always_valid(text: str) -> None:
    assert check_name(suggest_name(text)) == suggest_name(text)


def test_export_names_for_hostile_titles() -> None:
    assert names.safe_name("CON", suffix=".md") == "CON_.md"
    assert names.safe_name("nul.tar", suffix=".md") == "nul_.tar.md"
    assert names.safe_name("  ", suffix=".md", fallback="conversation") == "conversation.md"
    assert names.safe_name("a/b\\c:d", suffix=".json") == "a_b_c_d.json"
    assert len(names.default_path("/x" * 120, "title " * 50, suffix=".md")) < names.MAX_PATH


def test_model_names_follow_the_rules_and_the_library(tmp_path: Path) -> None:
    assert suggest_name("nul") == "nul-model" and suggest_name("COM1.v2") == "COM1-model.v2"
    for bad in ("CON", "nul", "x.", "LPT1.onnx"):
        with pytest.raises(ModelError, match="not a valid model name"):
            check_name(bad)
    user, bundled = tmp_path / "user", tmp_path / "bundled"
    (user / "vision").mkdir(parents=True)
    (bundled / "demo").mkdir(parents=True)
    with pytest.raises(ModelError, match="only in case"):
        check_new_name("Vision", user, bundled)
    with pytest.raises(ModelError, match="only in case"):
        check_new_name("DEMO", user, bundled)
    with pytest.raises(ModelError, match="already in your library"):
        check_new_name("vision", user, bundled)
    assert check_new_name("vision-2", user, bundled) == "vision-2"

"""The one settings schema (app/storage/settings_schema.py): every invalid value named without echoing it and
ignored, chat_options checked entry by entry against ChatOptions, and the CLI's one-line notice."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.cli import run
from app.storage.settings import Settings, load_settings, settings_path
from app.storage.settings_schema import SCHEMA, chat_option_problems, clean_values
from engines.chat.types import ChatOptions

BAIT = "BAIT-5e1f-secret"

BAD_OPTIONS = [
    ("temperature", -1), ("temperature", 0), ("temperature", "0.7"), ("temperature", float("inf")),
    ("top_p", 1.5), ("top_p", 0), ("top_p", None), ("top_k", 0), ("top_k", 2.5), ("top_k", True),
    ("max_new_tokens", 0), ("max_new_tokens", "256"), ("max_new_tokens", 2**40), ("repetition_penalty", -0.1),
    ("do_sample", "yes"), ("do_sample", 1), ("seed", -1), ("seed", 1.5), ("context_window", 1),
    ("context_window", [4096]), ("max_length", 512), ("temprature", 0.7),
]  # fmt: skip


@pytest.mark.parametrize(("key", "value"), BAD_OPTIONS, ids=[f"{k}={v!r}" for k, v in BAD_OPTIONS])
def test_each_bad_chat_option_is_named_and_dropped_alone(key: str, value: Any) -> None:
    clean, problems = chat_option_problems({key: value, "top_k": 20} if key != "top_k" else {key: value})
    assert len(problems) == 1 and problems[0].startswith(f"{key}: ")
    assert key not in clean
    ChatOptions(**clean)  # what is kept always makes valid options


def test_good_chat_options_are_kept_as_they_are() -> None:
    good = {"temperature": 0.2, "top_p": 1, "top_k": 1, "max_new_tokens": 64, "repetition_penalty": 1.0,
            "do_sample": True, "seed": 0, "context_window": None}  # fmt: skip
    assert chat_option_problems(good) == (good, [])


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from([f.name for f in dataclasses.fields(ChatOptions)] + ["x"]),
                       st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5))))
def test_whatever_a_file_holds_the_kept_options_are_valid(raw: dict[str, Any]) -> None:
    clean, problems = chat_option_problems(raw)
    ChatOptions(**clean)
    assert len(clean) + len(problems) == len(raw)


def test_no_problem_repeats_the_value_it_refuses() -> None:
    for name in SCHEMA:
        for bad in (BAIT, {BAIT: BAIT}, [BAIT], 10**30):
            if SCHEMA[name].problem(bad) or name == "chat_options":
                _, problems = clean_values({name: bad})
                assert BAIT not in "; ".join(problems).replace(f"{BAIT[:40]}: not a generation", ""), name


def test_the_cli_names_bad_values_on_one_stderr_line(capsys: pytest.CaptureFixture[str]) -> None:
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = {"allow_downloads": "yes", "chat_options": {"temperature": -1}, "theme": "dark"}
    path.write_text(json.dumps(raw), encoding="utf-8")
    assert run(["models", "catalog"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("npu-studio: settings: ")
    assert "allow_downloads: must be true or false" in err[0] and "chat_options.temperature" in err[0]
    assert json.loads(path.read_text(encoding="utf-8")) == raw  # the command read the file, nothing more
    settings_loaded, notice = load_settings()
    assert settings_loaded == Settings(theme="dark") and notice is not None

"""Chat options and message text are checked once, in the engine: the CLI, the app's chat process and
settings all get the same refusal instead of binding internals or a silently cut prompt."""

from __future__ import annotations

import math
import os
import re

import pytest

from engines.chat.generation import check_text
from engines.chat.types import ChatOptions
from engines.errors import GenerationError


@pytest.mark.parametrize(
    "overrides",
    [
        {"temperature": math.nan},
        {"temperature": math.inf},
        {"temperature": 1e308},
        {"repetition_penalty": math.nan},
        {"repetition_penalty": 0.0},
        {"top_p": math.nan},
        {"top_k": 2**40},
        {"top_k": True},
        {"seed": 2**31},
        {"seed": -1},
        {"max_new_tokens": 2**40},
        {"max_new_tokens": 1.5},
        {"context_window": 2**33},
    ],
)
def test_the_app_refuses_options_the_runtime_cannot_take(overrides: dict[str, object]) -> None:
    with pytest.raises(GenerationError, match=next(iter(overrides))):
        ChatOptions.from_overrides(overrides)


def test_sane_options_pass() -> None:
    options = ChatOptions(temperature=0.01, top_k=200_000, seed=2**31 - 1, repetition_penalty=1.0, top_p=1.0)
    assert options.search_options(64)["random_seed"] == 2**31 - 1


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("a\x00b", "NUL character (at character 2)"),
        (os.fsdecode(b"caf\xe9"), "byte 0xe9 at character 4"),
        ("\ud83d alone", "U+D83D at character 1"),
    ],
)
def test_text_the_tokenizer_would_misread(text: str, words: str) -> None:
    with pytest.raises(GenerationError, match=re.escape(words)):
        check_text(text, "The message")


def test_ordinary_text_passes() -> None:
    check_text("Bonjour, ça va? 猫 🐈\n\ttab", "The message")

"""Prompt-lookup decoding (onnxruntime-genai's n-gram speculation) in the chat engine, on the tiny random Llama:
the same greedy answers with and without it, only where that holds, and models that cannot verify drafts
(a pruned LM head, as the model builder's `prune_lm_head` makes) answering one token at a time. Also the demo
recipe's LM-head window (assets/recipes/chat_logits_window.py) on a pruned copy of the tiny model."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from engines.chat.conversation import Conversation
from engines.chat.loaded import ChatModel
from engines.chat.types import ChatOptions
from engines.errors import GenerationError
from engines.types import DeviceChoice
from tests.fixtures.tiny_llm import pruned_copy

RECIPES = Path(__file__).resolve().parents[2] / "assets" / "recipes"
REPEATING = "Repeat: the cat sat on the mat, the cat sat on the mat, the cat sat on the mat."
TURNS = (REPEATING, "Again please.", "hi")


def greedy(prompt_lookup: bool, max_new_tokens: int = 60) -> ChatOptions:
    return ChatOptions(max_new_tokens=max_new_tokens, repetition_penalty=1.0, prompt_lookup=prompt_lookup)


def talk(model: ChatModel, options: ChatOptions) -> tuple[list[tuple[str, int]], list[int], Conversation]:
    """Three turns in one conversation: each answer's text and token count, and the generator's whole sequence."""
    conversation = model.new_conversation("", options)
    answers = []
    for text in TURNS:
        stats = conversation.send(text)
        answers.append((conversation.messages[-1].content, stats.generated_tokens))
    return answers, [int(t) for t in conversation._generator.get_sequence(0)], conversation


@pytest.fixture(scope="module")
def model(tiny_llm: Path) -> ChatModel:
    return ChatModel.load(tiny_llm, DeviceChoice.parse("cpu"))


@pytest.fixture(scope="module")
def pruned(tiny_llm: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pruned_copy(tiny_llm, tmp_path_factory.mktemp("pruned") / "tiny")


@pytest.mark.parametrize("max_new_tokens", [60, 300])  # cut by the length limit / by the context window
def test_prompt_lookup_gives_the_same_greedy_answers_turn_after_turn(model: ChatModel, max_new_tokens: int) -> None:
    plain, plain_sequence, _ = talk(model, greedy(False, max_new_tokens))
    drafted, drafted_sequence, conversation = talk(model, greedy(True, max_new_tokens))
    assert drafted == plain and drafted_sequence == plain_sequence
    stats = conversation._generator.get_speculative_stats()
    assert stats["draft_tokens_accepted"] > 0, "drafts were verified and accepted, not only proposed"
    assert model.prompt_lookup is True


def test_prompt_lookup_applies_only_where_the_answer_cannot_change() -> None:
    assert ChatOptions(prompt_lookup=True, repetition_penalty=1.0).speculative_options() == {
        "ngram_size": 3, "max_draft_tokens": 4}  # fmt: skip
    assert ChatOptions(prompt_lookup=False, repetition_penalty=1.0).speculative_options() is None
    # With a repetition penalty onnxruntime-genai's n-gram path departs from the one-token path after a new
    # turn is appended; a sampled answer would differ from the same seed's.
    assert ChatOptions(prompt_lookup=True).speculative_options() is None
    assert ChatOptions(prompt_lookup=True, repetition_penalty=1.0, do_sample=True).speculative_options() is None
    with pytest.raises(GenerationError, match="prompt_lookup must be true or false"):
        ChatOptions(prompt_lookup="yes")  # type: ignore[arg-type]


def test_a_model_that_cannot_verify_drafts_answers_one_token_at_a_time(
    model: ChatModel, pruned: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plain, _, _ = talk(model, greedy(False))
    last_only = ChatModel.load(pruned, DeviceChoice.parse("cpu"))
    with caplog.at_level(logging.INFO, logger="engines.chat.conversation"):
        answers, _, conversation = talk(last_only, greedy(True))
    assert answers == plain  # the pruned head reads the same last row
    assert last_only.prompt_lookup is False
    assert conversation._generator.get_speculative_stats()["rounds"] == 0
    said = [r.getMessage() for r in caplog.records if "prompt lookup is off" in r.getMessage()]
    assert len(said) == 1 and "pruned" in said[0]


def test_the_recipes_logits_window_lets_a_pruned_model_verify_drafts(
    model: ChatModel, pruned: Path, tmp_path: Path
) -> None:
    sys.path.insert(0, str(RECIPES))
    try:
        import chat_logits_window
    finally:
        sys.path.remove(str(RECIPES))
    windowed = tmp_path / "windowed"
    import shutil

    shutil.copytree(pruned, windowed)
    assert chat_logits_window.add_window(windowed / "model.onnx") == {"rows": chat_logits_window.WINDOW_ROWS}
    with pytest.raises(chat_logits_window.WindowError, match="no pruned LM head"):
        chat_logits_window.add_window(windowed / "model.onnx")  # once only: the pruning nodes are gone
    plain, plain_sequence, _ = talk(model, greedy(False))
    loaded = ChatModel.load(windowed, DeviceChoice.parse("cpu"))
    for prompt_lookup in (False, True):
        answers, sequence, conversation = talk(loaded, greedy(prompt_lookup))
        assert answers == plain and sequence == plain_sequence
    assert loaded.prompt_lookup is True
    assert conversation._generator.get_speculative_stats()["draft_tokens_accepted"] > 0

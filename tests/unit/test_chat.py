"""The chat engine on a tiny random Llama (real onnxruntime-genai, real SmolLM2 tokenizer)."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engines.chat.conversation import Conversation
from engines.chat.generation import HeldSequence, answer_steps, render_prompt, run_steps
from engines.chat.loaded import ChatModel
from engines.chat.types import Answer, ChatMessage, ChatOptions, GenerationStats, StopReason
from engines.errors import GenerationError, ModelError
from engines.types import CPU_EP, CancelToken, DeviceChoice


def generate_answer(generator: Any, tokenizer: Any, **options: Any) -> Answer:
    """The whole answer: `answer_steps` run to its end."""
    return run_steps(answer_steps(generator, tokenizer, **options))

SYSTEM = "You are a test."
FEW = ChatOptions(max_new_tokens=6)


@pytest.fixture(scope="module")
def model(tiny_llm: Path) -> ChatModel:
    return ChatModel.load(tiny_llm, DeviceChoice.parse("cpu"))


def conversation(model: ChatModel, options: ChatOptions = FEW, system: str = SYSTEM) -> Conversation:
    return model.new_conversation(system, options)


def sequence(conv: Conversation) -> list[int]:
    return [int(t) for t in conv._generator.get_sequence(0)]


def encode(model: ChatModel, text: str) -> list[int]:
    return [int(t) for t in model.tokenizer.encode(text)]


def questions(conv: Conversation) -> list[str]:
    """The user messages, checking that questions and answers alternate."""
    messages = list(conv.messages)
    assert [m.role for m in messages] == ["user", "assistant"] * (len(messages) // 2)
    return [m.content for m in messages[::2]]


def visible(model: ChatModel, tokens: Sequence[int]) -> str:
    """Decoded text (onnxruntime-genai's decode leaves special tokens out)."""
    return str(model.tokenizer.decode(tokens))


# --------------------------------------------------------------------------------------------
# Streaming: the generation loop with scripted tokens and the real tokenizer
# --------------------------------------------------------------------------------------------


class ScriptedGenerator:
    """Stands in for og.Generator: yields a fixed token list, counting the steps taken."""

    def __init__(self, tokens: Sequence[int]) -> None:
        self.tokens = list(tokens)
        self.steps = 0

    def is_done(self) -> bool:
        return self.steps >= len(self.tokens)

    def generate_next_token(self) -> None:
        self.steps += 1

    def get_next_tokens(self) -> list[int]:
        return [self.tokens[self.steps - 1]]


MULTILINGUAL = {
    "spanish": "¿Qué tal? El niño comió paella y piñones en Logroño; ¡qué día más señalado!",
    "chinese": "你好，世界！今天天气很好，我们去公园散步吧。机器学习很有趣。",
    "emoji": "Hola 👋🏽 familia 👨‍👩‍👧‍👦, fiesta 🎉🥳 y bandera 🇪🇸 ✨",
}


@pytest.mark.parametrize("language", MULTILINGUAL)
def test_streamed_pieces_join_to_the_decoded_text(model: ChatModel, language: str) -> None:
    text = MULTILINGUAL[language]
    tokens = encode(model, text)
    pieces: list[str] = []
    answer = generate_answer(
        ScriptedGenerator(tokens),
        model.tokenizer,
        max_new_tokens=len(tokens),
        eos_token_ids=model.eos_token_ids,
        on_text=pieces.append,
    )
    assert "".join(pieces) == model.tokenizer.decode(tokens) == text == answer.text
    assert answer.tokens == tuple(tokens) and answer.stop_reason == StopReason.LENGTH
    if language != "spanish":  # byte-level BPE splits these characters across tokens
        assert any("\ufffd" in model.tokenizer.decode([t]) for t in tokens)
        assert len(pieces) < len(tokens)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cn", "Co", "Cc"]), min_size=1, max_size=40))
def test_streaming_matches_decode_for_any_text(model: ChatModel, text: str) -> None:
    tokens = encode(model, text)
    pieces: list[str] = []
    generate_answer(
        ScriptedGenerator(tokens), model.tokenizer, max_new_tokens=999, eos_token_ids=frozenset(), on_text=pieces.append
    )
    assert "".join(pieces) == model.tokenizer.decode(tokens)


def test_characters_the_tokenizer_cannot_map_are_left_out(model: ChatModel) -> None:
    assert -1 in encode(model, "a\x16b")  # the raw tokenizer's "unknown"
    assert (
        model.encode("a\x16b")
        == [t for t in encode(model, "a\x16b") if t >= 0]
        == encode(model, "a") + encode(model, "b")
    )
    conv = conversation(model)
    stats = conv.send("bell\x07 and \x16 syn")
    assert min(sequence(conv)) >= 0 and stats.generated_tokens > 0


def test_end_of_sequence_stops_and_stays_out_of_the_text(model: ChatModel) -> None:
    tokens = [*encode(model, "Paris."), 2, *encode(model, " more")]
    answer = generate_answer(
        ScriptedGenerator(tokens), model.tokenizer, max_new_tokens=50, eos_token_ids=model.eos_token_ids
    )
    assert answer.text == "Paris." and answer.stop_reason == StopReason.EOS
    assert answer.tokens[-1] == 2 and len(answer.tokens) == len(encode(model, "Paris.")) + 1


class CancelAfter(CancelToken):
    """Cancelled once `steps` tokens were generated by `generator`."""

    def __init__(self, generator: ScriptedGenerator, steps: int) -> None:
        super().__init__()
        self.generator, self.steps = generator, steps

    @property
    def cancelled(self) -> bool:
        return self.generator.steps >= self.steps


@pytest.mark.parametrize("steps", [0, 1, 5])
def test_cancel_stops_within_one_token(model: ChatModel, steps: int) -> None:
    generator = ScriptedGenerator(encode(model, MULTILINGUAL["spanish"]))
    answer = generate_answer(
        generator,
        model.tokenizer,
        max_new_tokens=100,
        eos_token_ids=model.eos_token_ids,
        cancel=CancelAfter(generator, steps),
    )
    assert generator.steps == steps and len(answer.tokens) == steps
    assert answer.stop_reason == StopReason.CANCELLED


def test_length_limit_and_full_context(model: ChatModel) -> None:
    tokens = encode(model, "one two three four five")
    capped = generate_answer(ScriptedGenerator(tokens), model.tokenizer, max_new_tokens=2, eos_token_ids=frozenset())
    assert len(capped.tokens) == 2 and capped.stop_reason == StopReason.LENGTH
    full = generate_answer(ScriptedGenerator(tokens), model.tokenizer, max_new_tokens=99, eos_token_ids=frozenset())
    assert full.stop_reason == StopReason.CONTEXT  # the generator said it is done: max_length reached


# --------------------------------------------------------------------------------------------
# Conversations on the tiny model
# --------------------------------------------------------------------------------------------


def test_first_answer_and_its_stats(model: ChatModel) -> None:
    conv = conversation(model)
    pieces: list[str] = []
    stats = conv.send("Hello there", pieces.append)
    prompt = encode(model, render_prompt(model.tokenizer, SYSTEM, [ChatMessage("user", "Hello there")]))
    assert stats.prompt_tokens == stats.prefill_tokens == len(prompt)
    assert stats.stop_reason in (StopReason.LENGTH, StopReason.EOS)
    assert stats.generated_tokens == 6 or stats.stop_reason == StopReason.EOS
    assert stats.ep == CPU_EP and stats.device == "CPU" and not stats.fell_back
    assert stats.time_to_first_token_s > 0 and stats.total_s >= stats.time_to_first_token_s
    assert stats.prefill_tokens_per_s > 0 and stats.decode_tokens_per_s > 0
    answer = conv.messages[-1]
    assert conv.messages[0] == ChatMessage("user", "Hello there")
    assert answer.role == "assistant" and answer.content == "".join(pieces) and answer.stop_reason == stats.stop_reason
    assert sequence(conv)[: len(prompt)] == prompt
    assert conv.context_used == len(sequence(conv)) == stats.context_used
    assert conv.context_length == stats.context_length == 256
    assert json.loads(json.dumps(stats.as_dict()))["stop_reason"] == stats.stop_reason.value


def test_each_turn_prefills_only_its_own_tokens(model: ChatModel) -> None:
    conv = conversation(model, ChatOptions(max_new_tokens=4))
    for turn in range(8):
        before = conv.context_used
        held = sequence(conv) if turn else []
        text = f"Question number {turn}: what comes next?"
        stats = conv.send(text)
        own = encode(model, f"<|im_end|>\n<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n")
        if turn:
            assert stats.prefill_tokens == stats.prompt_tokens - before  # nothing held was processed again
            assert stats.prefill_tokens <= len(own)  # an answer that ended on <|im_end|> needs one token less
            assert sequence(conv)[:before] == held  # the history stayed in the generator as it was
    assert len(conv.messages) == 16 and questions(conv) == [f"Question number {t}: what comes next?" for t in range(8)]


def test_the_generator_holds_the_rendered_conversation(model: ChatModel) -> None:
    conv = conversation(model, ChatOptions(max_new_tokens=5))
    conv.send("first")
    conv.send("second")
    rendered = render_prompt(model.tokenizer, SYSTEM, conv.messages[:-1])
    assert visible(model, sequence(conv)) == visible(model, encode(model, rendered)) + conv.messages[-1].content


def test_regenerate_rewinds_to_the_question(model: ChatModel) -> None:
    conv = conversation(model)
    conv.send("first")
    first = conv.send("second")
    first_answer = conv.messages[-1]
    again = conv.regenerate()
    assert again.prefill_tokens == 1  # rewound to the question; its last token is fed again for fresh logits
    assert again.prompt_tokens == first.prompt_tokens
    assert len(conv.messages) == 4 and conv.messages[2].content == "second"
    assert conv.messages[-1] == first_answer  # greedy fp32: the same answer again


def test_edit_last_replaces_the_question_and_answer(model: ChatModel) -> None:
    conv = conversation(model)
    conv.send("first")
    stats = conv.edit_last("changed my mind")
    messages = list(conv.messages)
    assert len(messages) == 2 and messages[0].content == "changed my mind"
    assert stats.prefill_tokens < stats.prompt_tokens  # the system prompt stayed in the generator
    held = conv.context_used
    conv.send("second")
    first_turn = conv.messages[:2]
    stats = conv.edit_last("second, edited")
    messages = list(conv.messages)
    assert messages[:2] == list(first_turn) and messages[2].content == "second, edited" and len(messages) == 4
    assert stats.prefill_tokens <= stats.prompt_tokens - held  # the first turn stayed in the generator


def test_regenerate_and_edit_need_a_question(model: ChatModel) -> None:
    conv = conversation(model)
    with pytest.raises(GenerationError, match="no answer to regenerate"):
        conv.regenerate()
    with pytest.raises(GenerationError, match="no message to edit"):
        conv.edit_last("x")


def test_empty_message_is_refused(model: ChatModel) -> None:
    with pytest.raises(GenerationError, match="empty"):
        conversation(model).send("   ")


def test_reset_keeps_the_system_prompt(model: ChatModel) -> None:
    conv = conversation(model)
    conv.send("first")
    conv.reset()
    assert len(conv.messages) == 0
    stats = conv.send("again")
    system_only = encode(model, f"<|im_start|>system\n{SYSTEM}<|im_end|>\n")
    assert stats.prefill_tokens <= stats.prompt_tokens - len(system_only)
    assert questions(conv) == ["again"]


def test_new_system_prompt_applies_to_the_next_answer(model: ChatModel) -> None:
    conv = conversation(model)
    conv.send("first")
    conv.set_system_prompt("Another persona.")
    conv.send("second")
    assert sequence(conv)[:8] == encode(model, "<|im_start|>system\nAnother persona.<|im_end|>\n")[:8]
    assert visible(model, sequence(conv)).startswith("system\nAnother persona.\nuser\nfirst\n")


def test_changing_sampling_options_rebuilds_the_generator(model: ChatModel) -> None:
    conv = conversation(model)
    conv.send("first")
    conv.set_options(ChatOptions(max_new_tokens=3))  # only the length: the generator stays
    stats = conv.send("second")
    assert stats.prefill_tokens < stats.prompt_tokens and stats.generated_tokens <= 3
    conv.set_options(ChatOptions(max_new_tokens=3, repetition_penalty=1.3))
    stats = conv.send("third")
    assert stats.prefill_tokens == stats.prompt_tokens  # a new generator reads the history again


def test_same_seed_same_sample(model: ChatModel) -> None:
    options = ChatOptions(max_new_tokens=12, do_sample=True, temperature=1.5, top_k=1000, top_p=1.0, seed=7)
    answers = []
    for _ in range(2):
        conv = conversation(model, options)
        conv.send("sample something")
        answers.append(conv.messages[-1].content)
    assert answers[0] == answers[1]


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("max_new_tokens", 0, "max_new_tokens"),
        ("temperature", 0.0, "temperature"),
        ("top_p", 1.5, "top_p"),
        ("top_k", 0, "top_k"),
        ("repetition_penalty", -1.0, "repetition_penalty"),
        ("seed", -3, "seed"),
        ("context_window", 1, "context_window"),
    ],
)
def test_invalid_options(field: str, value: Any, words: str) -> None:
    with pytest.raises(GenerationError, match=words):
        ChatOptions(**{field: value})


# --------------------------------------------------------------------------------------------
# Context overflow
# --------------------------------------------------------------------------------------------


def long_message(turn: int) -> str:
    """About 90 tokens, different each turn."""
    return f"Turn {turn}. Tell me about " + ", ".join(f"item {i}" for i in range(20))


def test_oldest_turns_leave_the_context_and_the_caller_is_told(model: ChatModel) -> None:
    conv = conversation(model, ChatOptions(max_new_tokens=30))
    dropped: list[int] = []
    for turn in range(5):
        stats = conv.send(long_message(turn))
        dropped.append(stats.dropped_turns)
        assert stats.prompt_tokens + 30 <= 256 and conv.context_used <= 256
    assert sum(dropped) >= 2 and dropped[0] == 0
    assert len(conv.messages) == 10  # the transcript keeps everything
    in_context = conv.context_messages
    assert in_context[0].role == "user" and len(in_context) < 10
    assert in_context == conv.messages[-len(in_context) :]
    system = encode(model, f"<|im_start|>system\n{SYSTEM}<|im_end|>\n")
    assert sequence(conv)[: len(system)] == system  # the system prompt stays
    rendered = render_prompt(model.tokenizer, SYSTEM, in_context[:-1])
    assert visible(model, sequence(conv)) == visible(model, encode(model, rendered)) + in_context[-1].content


def test_dropping_turns_reports_a_full_prefill(model: ChatModel) -> None:
    conv = conversation(model, ChatOptions(max_new_tokens=30))
    stats = [conv.send(long_message(turn)) for turn in range(3)]
    first_drop = next(s for s in stats if s.dropped_turns)
    assert first_drop.prefill_tokens > len(encode(model, long_message(0)))  # the kept turns were read again


def test_a_message_longer_than_the_context_is_refused(model: ChatModel) -> None:
    conv = conversation(model)
    conv.send("hello")
    before = conv.messages
    with pytest.raises(GenerationError, match="too long for the model's context window"):
        conv.send("word " * 300)
    assert conv.messages == before
    assert conv.send("still here").generated_tokens > 0


def test_an_answer_the_window_cuts_short_says_context(model: ChatModel) -> None:
    conv = conversation(model, ChatOptions(max_new_tokens=100))
    text = "word " * 200  # leaves room for only part of the answer
    stats = conv.send(text)
    room = 256 - stats.prompt_tokens
    assert 0 < room < 100
    assert stats.generated_tokens <= room
    assert stats.stop_reason in (StopReason.CONTEXT, StopReason.EOS)
    after = conv.send("and now?")  # the full window is emptied of the old turn for the next one
    assert after.dropped_turns == 1 and conv.context_used <= 256


def test_a_smaller_context_window(model: ChatModel) -> None:
    conv = conversation(model, ChatOptions(max_new_tokens=8, context_window=64))
    assert conv.context_length == 64
    dropped = sum(conv.send(f"message {turn} " * 4).dropped_turns for turn in range(6))
    assert dropped > 0 and conv.context_used <= 64
    conv.set_options(ChatOptions(max_new_tokens=8, context_window=100_000))
    assert conv.context_length == 256  # capped by the model's context length


def test_held_sequence_marks() -> None:
    held = HeldSequence()
    held.set_prompt([1, 2, 3], "abc")
    held.add_answer([1, 2, 3, 4], "d")
    assert held.longest_mark("abcdXYZ") == (4, 4)
    assert held.longest_mark("abcXYZ") == (3, 3)
    assert held.longest_mark("zzz") is None
    held.truncate(3)
    assert held.tokens == [1, 2, 3] and held.marks == [(3, 3)] and held.text == "abc"
    held.add_answer([1, 2, 3, 9], None)  # inexact text: no new mark
    assert held.longest_mark("abc?") == (3, 3)


# --------------------------------------------------------------------------------------------
# Cancel and threads
# --------------------------------------------------------------------------------------------


def test_cancel_keeps_the_conversation_consistent(model: ChatModel) -> None:
    conv = conversation(model, ChatOptions(max_new_tokens=50))
    cancel = CancelToken()
    pieces: list[str] = []

    def on_text(piece: str) -> None:
        pieces.append(piece)
        if len(pieces) == 2:
            cancel.cancel()

    stats = conv.send("talk a lot", on_text, cancel)
    assert stats.stop_reason == StopReason.CANCELLED
    assert conv.messages[-1] == ChatMessage("assistant", "".join(pieces), StopReason.CANCELLED)
    assert stats.generated_tokens <= 3  # stopped at the next step (a piece can need two tokens)
    before = conv.context_used
    nxt = conv.send("go on")
    assert nxt.stop_reason != StopReason.CANCELLED and nxt.prefill_tokens == nxt.prompt_tokens - before


def test_cancelled_before_start_generates_nothing(model: ChatModel) -> None:
    conv = conversation(model)
    cancel = CancelToken()
    cancel.cancel()
    stats = conv.send("never answered", cancel=cancel)
    assert stats.generated_tokens == 0 and stats.stop_reason == StopReason.CANCELLED
    assert conv.messages[-1].stop_reason == StopReason.CANCELLED
    assert conv.send("answered").generated_tokens > 0


def test_cancel_from_another_thread_and_busy_conversation(model: ChatModel) -> None:
    conv = conversation(model, ChatOptions(max_new_tokens=200))
    cancel = CancelToken()
    first_piece = threading.Event()
    release = threading.Event()
    result: list[GenerationStats] = []

    def on_text(piece: str) -> None:
        first_piece.set()
        release.wait(10)

    worker = threading.Thread(target=lambda: result.append(conv.send("go", on_text, cancel)))
    worker.start()
    assert first_piece.wait(30)
    with pytest.raises(GenerationError, match="busy"):
        conv.send("me too")
    cancel.cancel()
    release.set()
    worker.join(30)
    assert not worker.is_alive()
    assert result[0].stop_reason == StopReason.CANCELLED and result[0].generated_tokens <= 2


def test_conversations_are_independent(model: ChatModel) -> None:
    a, b = conversation(model), conversation(model, system="Other.")
    a.send("to a")
    b.send("to b")
    b.send("to b again")
    stats = a.send("to a again")
    assert stats.prefill_tokens < stats.prompt_tokens and len(a.messages) == 4 and len(b.messages) == 4


def test_a_stored_conversation_resumes_and_then_appends_only_new_turns(model: ChatModel) -> None:
    original = conversation(model)
    original.send("first question")
    original.send("second question")
    stored = list(original.messages)

    resumed = conversation(model)
    resumed.restore(stored)
    assert list(resumed.messages) == stored
    first = resumed.send("third question")
    assert questions(resumed) == ["first question", "second question", "third question"]
    assert first.prefill_tokens == first.prompt_tokens  # the history is prefilled once, on resuming
    assert visible(model, sequence(resumed)).startswith(f"system\n{SYSTEM}\nuser\nfirst question\n")
    second = resumed.send("fourth question")
    assert second.prefill_tokens < second.prompt_tokens - first.prompt_tokens + 12  # only the new turn


def test_restore_refuses_unknown_roles(model: ChatModel) -> None:
    with pytest.raises(GenerationError, match="role 'system'"):
        conversation(model).restore([ChatMessage("system", "x")])


def test_a_model_that_cannot_fit_in_memory_is_refused_before_loading(
    tiny_llm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engines.models.fit

    monkeypatch.setattr(engines.models.fit, "system_memory", lambda: (1_000, 2_000))  # a 2 kB machine
    monkeypatch.setattr("engines.chat.loaded.load_native_model", _must_not_load)
    with pytest.raises(ModelError, match="needs more memory than this machine has"):
        ChatModel.load(tiny_llm, DeviceChoice.parse("cpu"))


def test_a_tight_fit_loads_with_a_notice(tiny_llm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import engines.models.fit

    needed = engines.models.fit.estimate_fit(tiny_llm, memory=(10**12, 10**12)).needed_bytes
    monkeypatch.setattr(engines.models.fit, "system_memory", lambda: (needed, needed * 4))  # fits, barely
    loaded = ChatModel.load(tiny_llm, DeviceChoice.parse("cpu"))
    assert loaded.memory_notice.startswith("May be slow")
    monkeypatch.setattr(engines.models.fit, "system_memory", lambda: (needed * 100, needed * 100))
    assert ChatModel.load(tiny_llm, DeviceChoice.parse("cpu")).memory_notice == ""


def _must_not_load(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the model was loaded although it cannot fit")


def test_continue_writes_on_from_the_last_token_of_a_cut_answer(model: ChatModel) -> None:
    whole = conversation(model, ChatOptions(max_new_tokens=12))
    whole.send("Tell me a long story")
    conv = conversation(model, ChatOptions(max_new_tokens=6))
    first = conv.send("Tell me a long story")
    assert first.stop_reason == StopReason.LENGTH
    cut = conv.messages[-1].content
    more = conv.continue_last()
    assert more.prefill_tokens == 1  # the generator still held the answer: only its last token is fed again
    assert len(conv.messages) == 2 and conv.messages[-1].content.startswith(cut)
    assert conv.messages[-1].content == whole.messages[-1].content  # greedy: as if it had never stopped
    assert more.generated_tokens == 6 and more.context_used == first.context_used + 6


def test_continue_a_restored_answer_and_refuse_without_one(model: ChatModel) -> None:
    conv = conversation(model)
    with pytest.raises(GenerationError, match="no answer to continue"):
        conv.continue_last()
    conv.restore(
        [ChatMessage("user", "Tell me a long story"), ChatMessage("assistant", "Once upon", StopReason.LENGTH)]
    )
    pieces: list[str] = []
    stats = conv.continue_last(pieces.append)
    assert stats.generated_tokens > 0 and conv.messages[-1].content == "Once upon" + "".join(pieces)
    assert [m.role for m in conv.messages] == ["user", "assistant"]

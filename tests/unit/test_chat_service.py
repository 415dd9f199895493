"""The chat service (engines/chat/service.py): the request record, the events and their trip across the
engine child's pipe, the fair line of turns, the one rule, and both implementations on the tiny model."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from engines.chat.bounded import BoundedChat
from engines.chat.local import LocalChat
from engines.chat.opening import open_service, runs_in_child
from engines.chat.requests import (
    ChatEvent,
    ChatRequest,
    Failed,
    Finished,
    Guidance,
    PromptSize,
    Reloaded,
    Started,
    Status,
    Text,
    Turn,
    Waiting,
)
from engines.chat.service import ChatService
from engines.chat.slots import SLOTS_VARIABLE
from engines.chat.types import ChatMessage, ChatOptions, GenerationStats, StopReason
from engines.errors import BusyError, ContextOverflowError, GenerationError, StudioError
from engines.models import trial
from engines.types import CPU_EP, CancelToken, DeviceChoice, Placement
from tests.fixtures.scripted_chat import ScriptedChatModel

CPU = DeviceChoice.parse("cpu")
FEW = ChatOptions(max_new_tokens=6, repetition_penalty=1.0)
USER, ANSWER = ChatMessage("user", "Hello there"), ChatMessage("assistant", "General Kenobi")


# --- the request record --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"messages": (ANSWER,)}, "no question to answer"),
        ({"messages": (USER, ANSWER)}, "no question to answer"),
        ({"messages": (), "turn": Turn.REGENERATE}, "no answer to regenerate"),
        ({"messages": (USER, ANSWER), "turn": Turn.EDIT, "text": "  "}, "The message is empty"),
        ({"messages": (USER,), "turn": Turn.CONTINUE}, "no answer to continue"),
        ({"messages": (ChatMessage("system", "x"), USER)}, "role 'system'"),
        ({"messages": (ChatMessage("user", "a\x00b"),)}, "The message contains a NUL character"),
        ({"messages": (ChatMessage("user", "a\x00b"), ANSWER, USER)}, "Message 1 of the conversation contains"),
        ({"messages": (USER,), "system_prompt": "\udcff"}, "not valid UTF-8"),
        ({"messages": (USER,), "stop": ("",)}, "stop string must be"),
        ({"messages": (USER,), "stop": tuple("abcdefghijklmnopq")}, "Too many stop strings"),
        ({"messages": (USER,), "conversation": True}, "conversation id"),
    ],
)
def test_a_request_the_engine_cannot_answer_is_refused_before_it_waits(fields: dict[str, Any], words: str) -> None:
    with pytest.raises(GenerationError, match=words):
        ChatRequest(**fields)


@pytest.mark.parametrize(
    ("kind", "grammar", "words"),
    [
        ("yaml", "x", "Unknown guidance kind"),
        ("json_schema", "{not json", "not valid JSON"),
        ("json_schema", "[1, 2]", "must be a JSON object"),
        ("regex", "   ", "grammar is empty"),
    ],
)
def test_guidance_is_checked_in_the_request(kind: str, grammar: str, words: str) -> None:
    with pytest.raises(GenerationError, match=words):
        Guidance(kind, grammar)  # type: ignore[arg-type]


def test_each_turn_answers_the_right_messages() -> None:
    follow = ChatMessage("user", "And then?")
    history = (USER, ANSWER, follow, ChatMessage("assistant", "Then it ended"))
    assert ChatRequest.send(history, "Why?").answered() == ((*history, ChatMessage("user", "Why?")), "")
    assert ChatRequest(history, turn=Turn.REGENERATE).answered() == ((USER, ANSWER, follow), "")
    edited = ChatRequest(history, turn=Turn.EDIT, text="And before?").answered()
    assert edited == ((USER, ANSWER, ChatMessage("user", "And before?")), "")
    assert ChatRequest(history, turn=Turn.CONTINUE).answered() == ((USER, ANSWER, follow), "Then it ended")


def test_openai_style_roles_put_leading_system_messages_in_the_system_prompt() -> None:
    request = ChatRequest.from_roles([("system", "Be brief."), ("developer", "No lists."), ("user", "Hi")])
    assert request.system_prompt == "Be brief.\n\nNo lists." and request.messages == (ChatMessage("user", "Hi"),)
    with pytest.raises(GenerationError, match="Message 3 is a system message"):
        ChatRequest.from_roles([("user", "Hi"), ("assistant", "Hello"), ("system", "Now be rude.")])


def test_json_guidance_asks_for_compact_json_unless_the_schema_says_otherwise() -> None:
    kind, grammar = Guidance.json_schema({"type": "object"}).for_genai()
    assert kind == "json_schema" and json.loads(grammar)["x-guidance"] == {"whitespace_flexible": False}
    own = {"type": "object", "x-guidance": {"whitespace_flexible": True}}
    assert json.loads(Guidance.json_schema(own).for_genai()[1]) == own
    assert Guidance("regex", "(yes|no)").for_genai() == ("regex", "(yes|no)")


# --- the events, across a process boundary -------------------------------------------------------------


def _stats(reason: StopReason = StopReason.EOS) -> GenerationStats:
    return GenerationStats(12, 12, 3, 0.1, 120.0, 80.0, 0.2, CPU_EP, "CPU", reason, context_used=15, context_length=64)


def test_every_event_pickles_intact_and_errors_keep_their_class_and_fields() -> None:
    placement = Placement("CPU only", (CPU_EP,), (CPU_EP,))
    error = ContextOverflowError("Too long.", "Shorten it.", failure_code="QNN 1002", device_lost=True, native="oom")
    events: list[ChatEvent] = [
        Waiting(2), Started(7, "tiny"), Text("Hé 👋"), Status("Loading…"),
        Finished("Hé 👋", _stats(), placement, "tiny", 7), Failed(error, "Hé", _stats(StopReason.ERROR)),
    ]  # fmt: skip
    for event in events:
        back = pickle.loads(pickle.dumps(event))
        if isinstance(event, Failed):
            assert isinstance(back, Failed) and type(back.error) is ContextOverflowError
            assert back.error.as_dict() == error.as_dict() and back.error.code == "context-overflow"
            assert (back.partial, back.stats) == (event.partial, event.stats)
        else:
            assert back == event
    done = events[4]
    assert isinstance(done, Finished) and done.usage.total_tokens == 15 and done.as_dict()["text"] == "Hé 👋"


# --- turns from several threads (engines/chat/scheduler.py has the step by step rules) -------------------


def _wait_until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[LocalChat, ScriptedChatModel]]:
    monkeypatch.setenv(SLOTS_VARIABLE, "1")  # one answer at a time: a line forms behind it
    model = ScriptedChatModel()
    service = LocalChat.load("scripted", CPU, loader=lambda folder, choice: model, max_waiting=2)
    yield service, model
    model.release()
    service.close()


def test_callers_on_other_threads_wait_in_line_hear_their_place_and_may_leave(
    scripted: tuple[LocalChat, ScriptedChatModel],
) -> None:
    service, model = scripted
    model.hold()  # the engine is busy with the first answer's first token
    heard: dict[str, list[ChatEvent]] = {name: [] for name in "abc"}
    results: dict[str, Any] = {}
    stop_b = CancelToken()

    def ask(name: str, cancel: CancelToken | None = None) -> None:
        request = ChatRequest.send([], f"{name}:2", options=FEW, cancel=cancel)
        results[name] = service.generate(request, heard[name].append)

    threads = [threading.Thread(target=ask, args=("a",))]
    threads[0].start()
    _wait_until(lambda: any(isinstance(e, Started) for e in heard["a"]))
    threads.append(threading.Thread(target=ask, args=("b", stop_b)))
    threads[1].start()
    _wait_until(lambda: service.in_flight == 2)
    threads.append(threading.Thread(target=ask, args=("c",)))
    threads[2].start()
    _wait_until(lambda: service.in_flight == 3)
    assert service.waiting == 2
    with pytest.raises(BusyError, match="busy"):  # the line (2) is full: refused at once, nothing queued
        service.generate(ChatRequest.send([], "d:1", options=FEW))
    model.allow(1)  # the first answer's first token: at the next step the others hear their place
    _wait_until(lambda: bool(heard["b"]) and bool(heard["c"]))
    assert heard["b"] == [Waiting(1)] and heard["c"] == [Waiting(2)]
    stop_b.cancel()
    model.release()
    for thread in threads:
        thread.join(10)
    assert results["b"].stop_reason == StopReason.CANCELLED and results["b"].stats.generated_tokens == 0
    assert [e for e in heard["c"] if isinstance(e, Waiting)] == [Waiting(2), Waiting(1)]
    assert results["a"].text == "a0 a1 " and results["c"].text == "c0 c1 " and "b:0" not in model.log
    assert service.in_flight == 0 and service.waiting == 0


def test_a_measure_or_a_count_is_answered_between_two_tokens_of_an_answer(
    scripted: tuple[LocalChat, ScriptedChatModel],
) -> None:
    service, model = scripted
    model.hold()
    runner = threading.Thread(target=lambda: service.generate(ChatRequest.send([], "long:40", options=ChatOptions(
        max_new_tokens=40))))  # fmt: skip
    runner.start()
    _wait_until(lambda: service.in_flight == 1 and model.held == 1)  # the answer's first token is held
    measured: list[Any] = []

    def measure() -> None:
        measured.append(service.measure(ChatRequest.send([], "one two three")))
        measured.append(len(model.log))  # tokens made by then

    asker = threading.Thread(target=measure)
    asker.start()
    _wait_until(lambda: service._engine._inbox.qsize() == 1)  # the measure waits for the engine
    model.allow(1)  # one token; the next waits until released
    asker.join(10)
    assert measured == [PromptSize(3, 2048), 1], "the measure waited for more than the token under way"
    _wait_until(lambda: model.held == 1)  # the second token is held
    counted: list[int | None] = []
    counter = threading.Thread(target=lambda: counted.append(service.count_tokens("four words in here")))
    counter.start()
    _wait_until(lambda: service._engine._inbox.qsize() == 1)
    model.allow(1)
    counter.join(10)
    assert counted == [4] and len(model.log) == 2
    model.release()
    runner.join(10)
    assert len(model.log) == 40


# --- the one rule ----------------------------------------------------------------------------------------


@pytest.fixture
def trial_state() -> Iterator[None]:
    saved = dict(trial._state)
    yield
    trial._state.update(saved)


def test_one_rule_decides_where_a_model_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trial_state: None
) -> None:
    ours, theirs = tmp_path / "bundled" / "m", tmp_path / "user" / "m"
    trial.configure(trusted=[tmp_path / "bundled"])
    assert runs_in_child(theirs, responsive=False) and runs_in_child(theirs, responsive=True)  # not ours: bounded
    assert not runs_in_child(ours, responsive=False)  # ours, in the CLI: here, at full speed
    assert runs_in_child(ours, responsive=True)  # ours, in the app: off this process's GIL
    monkeypatch.setenv("NPU_STUDIO_CHAT_IN_PROCESS", "1")
    assert not runs_in_child(theirs, responsive=True)  # debugging: everything here


# --- both implementations on the tiny model -------------------------------------------------------------


@pytest.fixture(scope="module")
def local(tiny_llm: Path) -> Iterator[LocalChat]:
    service = LocalChat.load(tiny_llm, CPU)
    yield service
    service.close()


def _ask(service: ChatService, request: ChatRequest) -> tuple[Finished, list[ChatEvent]]:
    events: list[ChatEvent] = []
    done = service.generate(request, events.append)
    return done, events


def test_events_come_in_order_and_the_text_is_the_answer(local: LocalChat) -> None:
    done, events = _ask(local, ChatRequest.send([], "Hello there", options=FEW))
    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "Started" and kinds[-1] == "Finished" and set(kinds[1:-1]) <= {"Text"}
    assert events[-1] is done and "".join(e.text for e in events if isinstance(e, Text)) == done.text
    assert done.usage.prompt_tokens == done.stats.prompt_tokens > 0 and done.usage.completion_tokens == 6
    assert done.placement == local.info.placement and done.model == local.info.name


def test_a_conversation_prefills_only_its_new_turn_stateful_or_not(local: LocalChat) -> None:
    first, _ = _ask(local, ChatRequest.send([], "Hello there", options=FEW, conversation=41))
    history = (ChatMessage("user", "Hello there"), ChatMessage("assistant", first.text))
    second, _ = _ask(local, ChatRequest.send(history, "And then?", options=FEW, conversation=41))
    own = local.model.encode("<|im_end|>\n<|im_start|>user\nAnd then?<|im_end|>\n<|im_start|>assistant\n")
    assert second.stats.prefill_tokens < second.stats.prompt_tokens
    assert abs(second.stats.prefill_tokens - len(own)) <= 1
    # Stateless requests (a whole message list each time) that go on from the last keep the prefix too.
    one, _ = _ask(local, ChatRequest.send([], "Hello there", options=FEW))
    two, _ = _ask(local, ChatRequest.send((history[0], ChatMessage("assistant", one.text)), "And then?", options=FEW))
    assert two.stats.prefill_tokens < two.stats.prompt_tokens


def test_a_stop_string_ends_the_answer_before_it(local: LocalChat) -> None:
    options = ChatOptions(max_new_tokens=40, repetition_penalty=1.0)
    free, _ = _ask(local, ChatRequest.send([], "Tell me a story", options=options))
    assert len(free.text) > 6
    stop = free.text[len(free.text) // 2 : len(free.text) // 2 + 3]
    done, events = _ask(local, ChatRequest.send([], "Tell me a story", options=options, stop=(stop, "never-seen")))
    assert done.stop_reason == StopReason.STOP and done.text == free.text[: free.text.index(stop)]
    assert "".join(e.text for e in events if isinstance(e, Text)) == done.text  # nothing of it was streamed


def test_guidance_constrains_the_answer(local: LocalChat) -> None:
    options = ChatOptions(max_new_tokens=40)
    yes_no, _ = _ask(local, ChatRequest.send([], "Is it?", options=options, guidance=Guidance("regex", "(yes|no)")))
    assert yes_no.text in ("yes", "no") and yes_no.stop_reason == StopReason.EOS
    schema = {"type": "object", "properties": {"pick": {"enum": ["red", "blue"]}}, "required": ["pick"],
              "additionalProperties": False}  # fmt: skip
    picked, _ = _ask(local, ChatRequest.send([], "Pick", options=options, guidance=Guidance.json_schema(schema)))
    assert json.loads(picked.text)["pick"] in ("red", "blue")
    after, _ = _ask(local, ChatRequest.send([], "Is it?", options=FEW))  # the next answer is free again
    assert after.text not in ("yes", "no") and after.stats.generated_tokens == 6
    with pytest.raises(GenerationError, match="regex guidance could not be used: .*unclosed group"):
        local.generate(ChatRequest.send([], "Is it?", options=options, guidance=Guidance("regex", "(")))


def test_answers_made_at_once_are_the_answers_made_alone(local: LocalChat) -> None:
    """Several generators stepped in turn on one model: each answer is exactly what it is alone (greedy),
    with its own stop strings and grammar; a stopped one ends without holding up the others."""
    options = ChatOptions(max_new_tokens=24, repetition_penalty=1.0)
    schema = {"type": "object", "properties": {"pick": {"enum": ["red", "blue"]}}, "required": ["pick"],
              "additionalProperties": False}  # fmt: skip
    story = ChatRequest.send([], "Tell me a story", options=options)
    alone = local.generate(story).text
    stop = alone[len(alone) // 2 : len(alone) // 2 + 3]
    requests = {
        "story": story,
        "question": ChatRequest.send([], "Where is the sea?", options=options),
        "stopped": ChatRequest.send([], "Tell me a story", options=options, stop=(stop,)),
        "json": ChatRequest.send([], "Pick", options=ChatOptions(max_new_tokens=40),
                                 guidance=Guidance.json_schema(schema)),
    }
    expected = {name: local.generate(request) for name, request in requests.items()}
    started = threading.Barrier(len(requests) + 1)
    together: dict[str, Finished] = {}
    never = CancelToken()
    never.cancel()

    def ask(name: str) -> None:
        started.wait()
        together[name] = local.generate(requests[name])

    threads = [threading.Thread(target=ask, args=(name,)) for name in requests]
    for thread in threads:
        thread.start()
    started.wait()
    cancelled = local.generate(ChatRequest.send([], "Talk", options=options, cancel=never))
    for thread in threads:
        thread.join(60)
    assert local.info.slots >= 4
    for name, done in expected.items():
        assert together[name].text == done.text and together[name].usage == done.usage, name
    assert together["stopped"].stop_reason == StopReason.STOP and together["stopped"].text == alone[: alone.index(stop)]
    assert json.loads(together["json"].text)["pick"] in ("red", "blue")
    assert cancelled.stop_reason == StopReason.CANCELLED and cancelled.stats.generated_tokens == 0


def test_the_engine_child_answers_the_same_and_its_events_and_errors_cross_the_pipe(
    tiny_llm: Path, local: LocalChat
) -> None:
    service = open_service(tiny_llm, CPU, responsive=True)
    assert isinstance(service, BoundedChat) and service.engine.alive
    try:
        here, _ = _ask(local, ChatRequest.send([], "Hello there", options=FEW))
        there, events = _ask(service, ChatRequest.send([], "Hello there", options=FEW, conversation=3))
        assert there.text == here.text and there.usage == here.usage and there.conversation == 3
        assert isinstance(events[0], Started) and events[-1] == there
        heard: list[ChatEvent] = []
        with pytest.raises(ContextOverflowError) as raised:
            service.generate(ChatRequest.send([], "word " * 400, options=FEW), heard.append)
        assert raised.value.code == "context-overflow" and "window holds 256" in raised.value.message
        assert isinstance(heard[-1], Failed) and heard[-1].error.as_dict() == raised.value.as_dict()
        assert service.count_tokens("Hello there") == local.count_tokens("Hello there")
        long = ChatRequest.send([ChatMessage("user", "word " * 150), ChatMessage("assistant", "ok")], "word " * 150,
                                options=FEW, drop_oldest=False)  # fmt: skip
        size = service.measure(long)
        assert size == local.measure(long) and size.context_length == 256 and size.room < 0
        with pytest.raises(ContextOverflowError) as whole:  # the whole conversation or nothing: never cut silently
            service.generate(long)
        assert (whole.value.prompt_tokens, whole.value.context_length) == (size.prompt_tokens, 256)
        assert "conversation is too long" in whole.value.message
    finally:
        service.close()
    assert not service.engine.alive


def test_the_engine_child_makes_several_answers_at_once_and_stops_one_alone(tiny_llm: Path) -> None:
    service = open_service(tiny_llm, CPU, responsive=True)
    assert isinstance(service, BoundedChat) and service.info.slots >= 2
    options = ChatOptions(max_new_tokens=20, repetition_penalty=1.0)
    try:
        alone = {text: service.generate(ChatRequest.send([], text, options=options)).text for text in ("One", "Two")}
        stop = CancelToken()
        heard: dict[str, list[ChatEvent]] = {"One": [], "Two": [], "Long": []}
        results: dict[str, Finished] = {}

        def ask(text: str, cancel: CancelToken | None = None, tokens: int = 20) -> None:
            request = ChatRequest.send([], text, options=replace(options, max_new_tokens=tokens), cancel=cancel)
            results[text] = service.generate(request, heard[text].append)

        long = threading.Thread(target=ask, args=("Long", stop, 200))
        long.start()
        _wait_until(lambda: any(isinstance(e, Text) for e in heard["Long"]))
        others = [threading.Thread(target=ask, args=(text,)) for text in ("One", "Two")]
        for thread in others:
            thread.start()
        _wait_until(lambda: all(any(isinstance(e, Started) for e in heard[t]) for t in ("One", "Two")))
        assert long.is_alive(), "the long answer should still be going"
        stop.cancel()
        for thread in (long, *others):
            thread.join(60)
        assert results["Long"].stop_reason == StopReason.CANCELLED and results["Long"].text
        assert {text: results[text].text for text in ("One", "Two")} == alone
        assert not any(isinstance(e, Waiting) for e in heard["One"] + heard["Two"])  # nobody waited in line
    finally:
        service.close()


def test_a_restarted_child_loads_the_model_again_and_says_so(tiny_llm: Path) -> None:
    service = open_service(tiny_llm, CPU, responsive=True)
    try:
        assert isinstance(service, BoundedChat)
        service.engine.kill()  # as a crash would
        done, events = _ask(service, ChatRequest.send([], "Hello there", options=FEW))
        assert any(isinstance(e, Reloaded) and e.info.name == tiny_llm.name for e in events)
        assert done.stats.generated_tokens == 6
        service.engine.kill()  # a server measures a request before it answers: that too loads the model again
        assert service.measure(ChatRequest.send([], "Hello there")).prompt_tokens > 2
    finally:
        service.close()


def test_the_process_that_drives_the_child_never_loads_onnxruntime_genai(tiny_llm: Path) -> None:
    probe = (
        "import sys\n"
        "from engines.chat.opening import open_service\n"
        "from engines.chat.requests import ChatRequest\n"
        "from engines.chat.types import ChatOptions\n"
        "from engines.types import DeviceChoice\n"
        f"service = open_service({str(tiny_llm)!r}, DeviceChoice.parse('cpu'), responsive=True)\n"
        "done = service.generate(ChatRequest.send([], 'Hi', options=ChatOptions(max_new_tokens=2)))\n"
        "service.close()\n"
        "print(type(service).__name__, done.stats.generated_tokens, 'onnxruntime_genai' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["BoundedChat", "2", "False"]


def test_an_error_outside_studio_errors_still_ends_the_stream(
    local: LocalChat, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(request: ChatRequest, sink: Any) -> Finished:
        raise RuntimeError("boom")

    monkeypatch.setattr(local, "_run", broken)
    heard: list[ChatEvent] = []
    with pytest.raises(RuntimeError, match="boom"):
        local.generate(ChatRequest.send([], "Hi", options=FEW), heard.append)
    assert isinstance(heard[-1], Failed) and isinstance(heard[-1].error, StudioError)
    assert "RuntimeError: boom" in heard[-1].error.message

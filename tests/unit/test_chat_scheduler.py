"""The chat engine's loop over several callers' turns (engines/chat/scheduler.py), stepped by hand on a
scripted model (tests/fixtures/scripted_chat.py): which answers are made at once, in what order their
tokens come, who waits and what each hears, a stop while waiting or while answering, a failure, and a new
request read at the very next step. No threads and no clocks: every step is the test's own."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from engines.chat.requests import ChatEvent, ChatRequest, Failed, Finished, Started, Text, Waiting
from engines.chat.scheduler import Scheduler
from engines.chat.session import ChatSession, model_info
from engines.chat.types import ChatOptions, StopReason
from engines.types import CancelToken
from tests.fixtures.scripted_chat import ScriptedChatModel


class Heard:
    """What each turn heard, by name."""

    def __init__(self) -> None:
        self.events: dict[str, list[ChatEvent]] = {}

    def sink(self, name: str) -> Callable[[ChatEvent], None]:
        self.events[name] = []
        return self.events[name].append

    def kinds(self, name: str) -> list[str]:
        return [type(e).__name__ for e in self.events[name]]

    def text(self, name: str) -> str:
        return "".join(e.text for e in self.events[name] if isinstance(e, Text))

    def end(self, name: str) -> ChatEvent | None:
        events = self.events[name]
        return events[-1] if events and isinstance(events[-1], Finished | Failed) else None

    def waits(self, name: str) -> list[int]:
        return [e.ahead for e in self.events[name] if isinstance(e, Waiting)]


def engine(slots: int) -> tuple[Scheduler, ScriptedChatModel, Heard]:
    model = ScriptedChatModel()
    session = ChatSession(model, model_info(model, "scripted", slots=slots))
    return Scheduler(session, slots), model, Heard()


def ask(scheduler: Scheduler, heard: Heard, text: str, cancel: CancelToken | None = None, **fields: object) -> None:
    name = text.partition(":")[0]
    scheduler.add(ChatRequest.send([], text, options=ChatOptions(max_new_tokens=50), cancel=cancel, **fields),
                  heard.sink(name))  # type: ignore[arg-type]


def run_out(scheduler: Scheduler, most: int = 100) -> int:
    rounds = 0
    while not scheduler.idle:
        scheduler.round()
        rounds += 1
        assert rounds < most, "the engine never went idle"
    return rounds


def test_answers_made_at_once_take_a_token_each_in_turn() -> None:
    scheduler, model, heard = engine(slots=2)
    ask(scheduler, heard, "a:3")
    ask(scheduler, heard, "b:2")
    run_out(scheduler)
    assert model.log == ["a:0", "b:0", "a:1", "b:1", "a:2"]
    assert heard.text("a") == "a0 a1 a2 " and heard.text("b") == "b0 b1 "
    for name in "ab":
        kinds = heard.kinds(name)
        assert kinds[0] == "Started" and kinds[-1] == "Finished" and set(kinds[1:-1]) == {"Text"}
        end = heard.end(name)
        assert isinstance(end, Finished) and end.stop_reason == StopReason.EOS and end.text == heard.text(name)


def test_past_the_slots_turns_wait_first_come_first_served_and_hear_their_place() -> None:
    scheduler, model, heard = engine(slots=1)
    for text in ("a:2", "b:1", "c:1"):
        ask(scheduler, heard, text)
    scheduler.round()
    assert heard.waits("b") == [1] and heard.waits("c") == [2] and not heard.waits("a")
    assert scheduler.answering == 1 and scheduler.waiting == 2
    run_out(scheduler)
    assert model.log == ["a:0", "a:1", "b:0", "c:0"]  # one at a time, in the order asked
    assert heard.waits("c") == [2, 1] and heard.waits("b") == [1]  # told again only when it changed
    assert heard.kinds("b")[:2] == ["Waiting", "Started"]


def test_a_new_request_gets_its_first_token_at_the_next_step() -> None:
    scheduler, model, heard = engine(slots=4)
    ask(scheduler, heard, "long:6")
    scheduler.round()
    scheduler.round()
    ask(scheduler, heard, "new:2")
    scheduler.round()
    # the newcomer reads its prompt and makes its first token before the running answer's next one
    assert model.log == ["long:0", "long:1", "new:0", "long:2"]
    run_out(scheduler)
    assert heard.text("new") == "new0 new1 " and heard.text("long") == "".join(f"long{i} " for i in range(6))


def test_a_turn_stopped_while_it_waits_leaves_the_line_and_the_one_behind_moves_up() -> None:
    scheduler, model, heard = engine(slots=1)
    stop_b = CancelToken()
    ask(scheduler, heard, "a:3")
    ask(scheduler, heard, "b:3", cancel=stop_b)
    ask(scheduler, heard, "c:1")
    scheduler.round()
    assert heard.waits("c") == [2]
    stop_b.cancel()
    scheduler.round()
    end = heard.end("b")
    assert isinstance(end, Finished) and end.stop_reason == StopReason.CANCELLED
    assert end.stats.generated_tokens == 0 and heard.kinds("b") == ["Waiting", "Finished"]
    assert heard.waits("c") == [2, 1]
    run_out(scheduler)
    assert "b:0" not in model.log and model.log[-1] == "c:0"


def test_a_stopped_answer_ends_at_its_next_step_and_keeps_what_it_said() -> None:
    scheduler, model, heard = engine(slots=2)
    stop_a = CancelToken()
    ask(scheduler, heard, "a:10", cancel=stop_a)
    ask(scheduler, heard, "b:4")
    scheduler.round()
    scheduler.round()
    stop_a.cancel()
    scheduler.round()
    end = heard.end("a")
    assert isinstance(end, Finished) and end.stop_reason == StopReason.CANCELLED
    assert end.text == "a0 a1 " and end.stats.generated_tokens == 2  # no token after the stop
    run_out(scheduler)
    assert [s for s in model.log if s.startswith("a")] == ["a:0", "a:1"] and heard.text("b") == "b0 b1 b2 b3 "


def test_a_failing_answer_ends_alone_and_the_others_go_on() -> None:
    scheduler, _, heard = engine(slots=2)
    ask(scheduler, heard, "bad:5:fail@2")
    ask(scheduler, heard, "good:4")
    run_out(scheduler)
    failed = heard.end("bad")
    assert isinstance(failed, Failed) and "bad failed at token 2" in failed.error.message
    assert isinstance(heard.end("good"), Finished) and heard.text("good") == "good0 good1 good2 good3 "


def test_a_slot_freed_by_an_answer_is_taken_by_the_first_waiting_turn_in_the_same_step() -> None:
    scheduler, model, heard = engine(slots=2)
    for text in ("a:1", "b:3", "c:2"):
        ask(scheduler, heard, text)
    run_out(scheduler)
    assert model.log == ["a:0", "b:0", "b:1", "c:0", "b:2", "c:1"]


def test_one_conversation_answers_one_turn_at_a_time() -> None:
    scheduler, _, heard = engine(slots=4)
    ask(scheduler, heard, "first:3", conversation=7)
    ask(scheduler, heard, "second:3", conversation=7)
    run_out(scheduler)
    assert isinstance(heard.end("first"), Finished)
    failed = heard.end("second")
    assert isinstance(failed, Failed) and "busy with another answer" in failed.error.message


def test_closing_ends_every_turn_with_the_reason() -> None:
    from engines.errors import CancelledError

    scheduler, _, heard = engine(slots=1)
    ask(scheduler, heard, "a:5")
    ask(scheduler, heard, "b:5")
    scheduler.round()
    scheduler.close(CancelledError("The chat model was closed."))
    assert scheduler.idle
    for name in "ab":
        end = heard.end(name)
        assert isinstance(end, Failed) and end.error.message == "The chat model was closed."


@pytest.mark.parametrize("slots", [1, 4])
def test_every_turn_ends_exactly_once(slots: int) -> None:
    scheduler, _, heard = engine(slots=slots)
    stops = {name: CancelToken() for name in "bdf"}
    for name, length in zip("abcdefgh", (3, 5, 1, 4, 2, 6, 2, 3), strict=True):
        ask(scheduler, heard, f"{name}:{length}", cancel=stops.get(name))
    scheduler.round()
    for token in stops.values():
        token.cancel()
    run_out(scheduler)
    for name, events in heard.events.items():
        ends = [e for e in events if isinstance(e, Finished | Failed)]
        assert len(ends) == 1 and events[-1] is ends[0], name
        starts = [e for e in events if isinstance(e, Started)]
        assert len(starts) <= 1, name


def test_each_client_resending_its_conversation_goes_on_with_the_generator_that_holds_it() -> None:
    """Stateless clients (the whole conversation in every request): as many generators are kept as answers are
    made at once, and a follow-up takes the one holding its conversation, not a new one nor another's."""
    from engines.chat.types import ChatMessage

    scheduler, model, heard = engine(slots=2)
    ask(scheduler, heard, "x:2")
    ask(scheduler, heard, "y:2")
    run_out(scheduler)
    assert model.conversations == 2
    made = {name: next(c for _, c in scheduler.session._kept if c.messages[0].content == f"{name}:2") for name in "xy"}
    for name in ("y", "x"):  # in the other order
        history = [ChatMessage("user", f"{name}:2"), ChatMessage("assistant", heard.text(name))]
        scheduler.add(ChatRequest.send(history, f"{name}again:1", options=ChatOptions(max_new_tokens=5)),
                      heard.sink(f"{name}again"))
        run_out(scheduler)
        kept = [c for _, c in scheduler.session._kept if c.messages[-2].content == f"{name}again:1"]
        assert kept == [made[name]], name
    assert model.conversations == 2  # nothing new was made
    ask(scheduler, heard, "z:1")
    ask(scheduler, heard, "w:1")
    ask(scheduler, heard, "v:1")
    run_out(scheduler)
    assert len(scheduler.session._kept) == 2  # never more kept than the slots (their memory was budgeted)
    assert all(not c.closed for _, c in scheduler.session._kept)


def test_only_one_named_conversation_keeps_its_generator() -> None:
    """A window shows one conversation at a time: switching keeps the newest one's generator, not all of them."""
    scheduler, _, heard = engine(slots=4)
    for number, name in enumerate("abc"):
        ask(scheduler, heard, f"{name}:1", conversation=number + 1)
        run_out(scheduler)
    assert [key for key, _ in scheduler.session._kept] == [3]

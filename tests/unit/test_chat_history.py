"""The chat's persistence controller: an answer the disk refuses is kept and stored in its place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.storage.chat_history import ChatHistory
from app.storage.conversations import ConversationStore
from engines.errors import StorageError


def test_a_refused_answer_is_kept_shown_and_stored_before_the_next_question(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = ChatHistory(ConversationStore(tmp_path / "c.db"))
    conversation = history.create("Cats", model="m", system_prompt="")
    history.add_question(conversation.id, "Why do cats purr?")
    real_add = history.store.add_message

    def full_disk(*args: Any, **kwargs: Any) -> Any:
        raise StorageError("The disk is full.")

    monkeypatch.setattr(history.store, "add_message", full_disk)
    with pytest.raises(StorageError):
        history.begin_answer(conversation.id, "", model="m", device="CPU", ep="CPUExecutionProvider")
    history.keep_unsaved(conversation.id, "To say they are content.", model="m", stop_reason="eos")
    history.keep_unsaved(conversation.id, "")  # nothing to keep
    shown = history.messages(conversation.id)  # the disk still refuses: shown from memory
    assert [(m.role, m.text, m.id) for m in shown][-1] == ("assistant", "To say they are content.", -1)
    monkeypatch.setattr(history.store, "add_message", real_add)
    history.add_question(conversation.id, "And dogs?")  # the disk works again: the kept answer goes first
    stored = history.store.messages(conversation.id)
    assert [m.text for m in stored] == ["Why do cats purr?", "To say they are content.", "And dogs?"]
    assert stored[1].stop_reason == "eos" and history.unsaved == []


def test_rename_prompt_export_and_delete(tmp_path: Path) -> None:
    history = ChatHistory(ConversationStore(tmp_path / "c.db"))
    conversation = history.create("New chat", model="m", system_prompt="Be brief.")
    question = history.add_question(conversation.id, "Hello")
    answer = history.begin_answer(conversation.id, "", model="m", device="CPU", ep="CPUExecutionProvider")
    history.save_answer(answer.id, "Hi!", "eos", {"generated_tokens": 2}, device="CPU", ep="CPUExecutionProvider")
    assert history.rename(conversation.id, "Greetings").title == "Greetings"
    assert history.set_system_prompt(conversation.id, "Be kind.").system_prompt == "Be kind."
    assert "Hi!" in history.export(conversation.id, "markdown") and '"Hi!"' in history.export(conversation.id, "json")
    history.delete_after(conversation.id, question.id)
    assert [m.text for m in history.messages(conversation.id)] == ["Hello"]
    history.keep_unsaved(conversation.id, "kept")
    history.delete(conversation.id)
    assert history.conversations() == [] and history.unsaved == []


def test_a_refused_final_text_of_a_started_answer_is_kept_and_written_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = ChatHistory(ConversationStore(tmp_path / "c.db"))
    conversation, _ = history.ask(0, "Why is the sky blue?", model="m", system_prompt="")
    answer = history.begin_answer(conversation.id, "", model="m", device="CPU", ep="CPUExecutionProvider")
    real_update = history.store.update_message

    def read_only(*args: Any, **kwargs: Any) -> None:
        raise StorageError("The disk is read-only.")

    monkeypatch.setattr(history.store, "update_message", read_only)
    with pytest.raises(StorageError):
        history.save_answer(answer.id, "Rayleigh scattering.", "eos", {"generated_tokens": 3}, "CPU", None)
    shown = history.messages(conversation.id)  # the stored row is empty; what was written is shown
    assert [(m.id, m.text, m.stop_reason) for m in shown][-1] == (answer.id, "Rayleigh scattering.", "eos")
    monkeypatch.setattr(history.store, "update_message", real_update)
    history.add_question(conversation.id, "And sunsets?")  # the disk works again: the text is written first
    stored = history.store.messages(conversation.id)
    assert [m.text for m in stored] == ["Why is the sky blue?", "Rayleigh scattering.", "And sunsets?"]
    assert history.unsaved_edits == {}


def test_a_question_opens_a_conversation_titled_by_it_and_an_edit_replaces_what_followed(tmp_path: Path) -> None:
    history = ChatHistory(ConversationStore(tmp_path / "c.db"))
    conversation, messages = history.ask(0, "  What   is an NPU, in a few words please?  ", model="m", system_prompt="")
    assert conversation.title == "What is an NPU, in a few words please?" and [m.role for m in messages] == ["user"]
    answer = history.begin_answer(conversation.id, "A chip.", model="m", device="CPU", ep="CPUExecutionProvider")
    conversation, messages = history.ask(conversation.id, "Shorter?", model="m", system_prompt="", after=0)
    assert [m.text for m in messages] == ["Shorter?"] and answer.id not in [m.id for m in messages]
    assert conversation.title == "What is an NPU, in a few words please?"  # the first question's title stays
    empty = history.create("New chat", model="m", system_prompt="")
    renamed, _ = history.ask(empty.id, "A long question " * 10, model="m", system_prompt="")
    assert renamed.title.startswith("A long question") and renamed.title.endswith("…") and len(renamed.title) == 48


def test_a_refused_question_is_taken_back_with_its_text(tmp_path: Path) -> None:
    history = ChatHistory(ConversationStore(tmp_path / "c.db"))
    conversation, _ = history.ask(0, "First", model="m", system_prompt="")
    history.begin_answer(conversation.id, "Answer", model="m", device="CPU", ep="CPUExecutionProvider")
    history.ask(conversation.id, "Far too long", model="m", system_prompt="")
    history.begin_answer(conversation.id, "", model="m", device="CPU", ep="CPUExecutionProvider")
    assert history.take_back(conversation.id) == "Far too long"
    assert [m.text for m in history.messages(conversation.id)] == ["First", "Answer"]

"""The chat's persistence controller: an answer the disk refuses is kept and stored in its place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.chat_history import ChatHistory
from app.storage import ConversationStore
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

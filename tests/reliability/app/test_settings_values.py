"""Settings with bad values, as the app meets them: each one named in the start-up banner, ignored (the
chat still answers), and the user's file not overwritten (app/storage/settings.py, app/storage/settings_schema.py)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app import paths
from engines.chat.loaded import ChatModel
from engines.types import DeviceChoice
from tests.reliability.conftest import Recorder

TIMEOUT = 120_000
BAD = {
    "theme": "purple",
    "top_k": "five",
    "chat_options": {"temperature": -1, "top_p": "high", "max_length": 100, "do_sample": "yes",
                     "max_new_tokens": 8},
}  # fmt: skip


def _tiny_loader(folder: Path, choice: DeviceChoice) -> Any:
    return ChatModel.load(folder, choice)


@pytest.mark.allow_warnings("settings")
def test_bad_chat_options_are_named_ignored_and_not_written_back(
    make_studio: Callable[..., Any], qtbot: Any, tiny_llm: Path, reliability: Recorder
) -> None:
    path = paths.config_dir() / "settings.json"
    path.write_text(json.dumps(BAD), encoding="utf-8")
    shutil.copytree(tiny_llm, paths.user_models_dir() / "tiny")
    studio = make_studio(chat_loader=_tiny_loader)
    studio.show()
    notices = studio.window.banners.messages()
    studio.settings.chat_model = "tiny"
    studio.load_chat_model()
    view = studio.chat_view
    qtbot.waitUntil(lambda: view.status.info.get("name") == "tiny", timeout=TIMEOUT)
    assert view.session.send_text("Hello")
    qtbot.waitUntil(lambda: not view.session.generating, timeout=TIMEOUT)
    answer = studio.store.messages(view.session.conversation.id)[-1]
    studio.window.close()
    qtbot.waitUntil(lambda: not studio.window.isVisible(), timeout=TIMEOUT)
    assert studio.shutdown()
    kept = json.loads(path.read_text(encoding="utf-8"))
    expected = ("theme", "top_k", "chat_options.temperature", "chat_options.top_p", "chat_options.max_length",
                "chat_options.do_sample")
    named = [n for n in expected if notices and n in notices[0]]
    reliability.record(
        "Storage",
        "settings.json with chat_options of the wrong types and ranges, an unknown option, a bad theme and top_k",
        "each bad value named in the banner and ignored; chat answers; the file keeps the user's values",
        f"{len(named)} of 6 named; the answer ended '{answer.stop_reason}'; values kept in the file: "
        f"{all(kept.get(k) == v for k, v in BAD.items())}",
    )
    assert len(notices) == 1 and len(named) == 6, notices
    reasons = notices[0].split("(the defaults are used):", 1)[1]
    assert "-1" not in reasons and "high" not in reasons and "five" not in reasons  # named, not echoed
    assert answer.role == "assistant" and answer.stop_reason in ("eos", "length") and answer.text
    assert all(kept[key] == value for key, value in BAD.items())  # not written back over the user's file
    assert kept["chat_model"] == "tiny"  # what the app changed is saved

"""`GET /v1/models`' context lengths (app/server/library.py): the window the loaded model really holds, and
for a model not loaded the window the chat service would give it, by the same rule
(`engines.chat.folder.context_window`), never the model's own maximum."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from app.server.library import LibraryCards
from engines.chat.local import LocalChat
from engines.models.importer import import_model
from engines.types import DeviceChoice

CPU = DeviceChoice.parse("cpu")


def _copy(tiny_llm: Path, folder: Path, max_length: int) -> Path:
    """The tiny model with generators built for `max_length` tokens, imported into the library at folder's parent."""
    source = shutil.copytree(tiny_llm, folder.parent.parent / "sources" / folder.name)
    config_path = source / "genai_config.json"
    config = json.loads(config_path.read_text())
    config["search"]["max_length"] = max_length
    config_path.write_text(json.dumps(config))
    return import_model(source, folder.parent).folder


def test_a_model_is_listed_with_the_window_its_service_holds_loaded_or_not(tiny_llm: Path, tmp_path: Path) -> None:
    root = tmp_path / "models"
    short = _copy(tiny_llm, root / "short-llm", 128)
    assert json.loads((short / "genai_config.json").read_text())["model"]["context_length"] == 256
    library = LibraryCards([root], CPU)
    unloaded = {card.id: card for card in library.cards("", None, None)}
    assert unloaded["short-llm"].context_length == 128 and not unloaded["short-llm"].loaded
    service = LocalChat.load(short, CPU)
    try:
        assert service.info.context_length == 128  # the same rule, loaded
        loaded = {card.id: card for card in library.cards("short-llm", service.info.placement, None, None, 100)}
        assert loaded["short-llm"].loaded and loaded["short-llm"].context_length == 100  # what the service says
    finally:
        service.close()


def test_a_folder_that_does_not_pass_its_checks_has_no_window(tiny_llm: Path, tmp_path: Path) -> None:
    root = tmp_path / "models"
    broken = _copy(tiny_llm, root / "broken-llm", 128)
    (broken / "tokenizer.json").unlink()
    library = LibraryCards([root], CPU)
    cards = {card.id: card for card in library.cards("", None, None, broken)}
    assert cards["broken-llm"].context_length == 0 and "tokenizer.json" in cards["broken-llm"].problem

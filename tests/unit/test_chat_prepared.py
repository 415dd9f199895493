"""A chat load prepared by the parent (engines/chat/prepared.py): the child engine skips the folder check
and device discovery it was handed, and holds neither `onnx` nor ONNX Runtime's Python module."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from engines.chat import loaded, prepared
from engines.chat.folder import DML_EP
from engines.chat.loaded import ChatModel
from engines.models import trial
from engines.runtime.planning import DeviceSet
from engines.types import CPU_EP, DeviceChoice
from tests.unit.test_chat_model import FakeGenai, fake_genai  # noqa: F401  (the fixture)


@pytest.fixture
def trusting() -> Iterator[Callable[[Path], None]]:
    """`trusting(folder)`: treat `folder` as a bundled model for one test."""
    saved = dict(trial._state)

    def trust(folder: Path) -> None:
        trial.configure(trusted=[folder.parent], verdicts=None, enabled=False)

    yield trust
    trial._state.update(saved)


def test_a_trusted_folder_is_checked_here_and_an_untrusted_one_is_left_to_the_child(
    tiny_llm: Path, trusting: Callable[[Path], None]
) -> None:
    untrusted = prepared.prepare(tiny_llm)
    assert untrusted is not None and untrusted.folder is None
    assert CPU_EP in {ep for ep, _ in untrusted.devices.usable}
    trusting(tiny_llm)
    checked = prepared.prepare(tiny_llm)
    assert checked is not None and checked.folder is not None
    assert checked.folder_for(str(tiny_llm)) == checked.folder
    assert checked.folder_for(tiny_llm.parent) is None  # another folder is validated where it loads
    assert prepared.prepare(tiny_llm.parent / "no-such-model") is None  # the child reports that error


def test_a_prepared_load_uses_the_given_folder_and_devices(
    fake_genai: Callable[..., FakeGenai], tiny_llm: Path, trusting: Callable[[Path], None],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trusting(tiny_llm)
    ready = prepared.prepare(tiny_llm)
    assert ready is not None and ready.folder is not None
    fake = fake_genai()

    def not_again(*_: object) -> None:
        raise AssertionError("done by the parent already")

    monkeypatch.setattr(loaded, "validate_model_folder", not_again)
    monkeypatch.setattr(loaded, "chat_devices", not_again)
    monkeypatch.setattr(loaded, "discover", not_again)
    model = ChatModel.load(tiny_llm, DeviceChoice.parse("cpu"), prepared=ready)
    assert model.ep == CPU_EP and model.folder == ready.folder and "Model" in fake.names()
    # A device EP from the parent's devices: planned from them, and discovery registers it here.
    found: list[bool] = []
    monkeypatch.setattr(loaded, "discover", lambda: found.append(True))
    with_gpu = prepared.Prepared(ready.folder, DeviceSet.of([DML_EP]))
    model = ChatModel.load(tiny_llm, DeviceChoice.parse("dml"), prepared=with_gpu)
    assert model.ep == DML_EP and found == [True]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the child's /proc maps")
@pytest.mark.parametrize("trusted", [True, False], ids=["trusted", "untrusted"])
def test_the_chat_engine_child_holds_only_what_chatting_needs(
    tiny_llm: Path, trusting: Callable[[Path], None], trusted: bool
) -> None:
    from engines.chat.bounded import EngineProcess
    from engines.chat.requests import ChatRequest, Finished
    from engines.chat.types import ChatOptions

    if trusted:
        trusting(tiny_llm)
    engine = EngineProcess()
    try:
        loaded = engine.load(str(tiny_llm), DeviceChoice.parse("cpu"), lambda e: None, None)
        assert isinstance(loaded, tuple) and loaded[0] == "loaded", loaded
        maps = Path(f"/proc/{engine.pid}/maps").read_text()
        request = ChatRequest.send([], "hi", options=ChatOptions(max_new_tokens=2))
        done = engine.request(("answer", request), lambda e: None, None)
        assert isinstance(done, Finished) and done.stats.generated_tokens >= 1
    finally:
        engine.close()
    assert "libonnxruntime.so" in maps and "onnxruntime-genai" in maps
    assert "onnxruntime_pybind11_state" not in maps  # genai alone on the CPU
    # The folder check reads the ONNX files itself (engines/models/onnx_wire.py): no `onnx` package, trusted
    # folder or not.
    assert "onnx_cpp2py_export" not in maps

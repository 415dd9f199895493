"""A device change that would run the loaded chat model where it runs now (the CPU) keeps it: no new engine
process, no model read again, only what was asked changes (it took seconds before the first token)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.hosts.chat import ChatHost
from engines.types import CPU_EP, DeviceChoice

TIMEOUT = 120_000


def test_a_device_change_that_lands_on_the_cpu_again_keeps_the_model(tiny_llm: Path, qtbot: Any) -> None:
    host = ChatHost()
    try:
        with qtbot.waitSignal(host.model_loaded, timeout=TIMEOUT) as first:
            host.load(tiny_llm, DeviceChoice.parse("cpu"))
        service = host.service
        assert service is not None and first.args[0]["ep"] == CPU_EP
        with qtbot.waitSignal(host.model_loaded, timeout=TIMEOUT) as kept:
            host.load(tiny_llm, DeviceChoice.parse("npu"))  # no NPU here: the CPU again
        assert host.service is service, "the model was loaded again"
        placement = kept.args[0]["placement"]
        assert placement.requested == "NPU" and placement.fell_back and placement.reason
        with qtbot.waitSignal(host.generation_finished, timeout=TIMEOUT) as answered:
            host.generate("send", 1, "Hi", [], "", {"max_new_tokens": 2})
        assert answered.args[0]["ep"] == CPU_EP

        with qtbot.waitSignal(host.failed, timeout=TIMEOUT):  # strict: the NPU or nothing, loaded anew
            host.load(tiny_llm, DeviceChoice.parse("npu", strict=True))
        assert host.service is None
    finally:
        assert host.shutdown()

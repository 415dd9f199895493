"""NPU Studio engines: everything that touches ONNX Runtime, free of Qt. This is the public API.

    import engines
    clf = engines.open_classifier("efficientnet-lite0", "npu", strict=True, library=["models"])
    print(clf.placement.badge(), clf.classify("cat.jpg").top[0].label)

Importing `engines` loads no runtime: the names that need onnxruntime (open_classifier, open_chat,
discover, ...) are imported on first use, so a UI can use the plain types without paying for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engines.errors import (
    CancelledError,
    DeviceUnavailableError,
    GenerationError,
    ImageError,
    InputContractError,
    ModelError,
    PlacementError,
    SessionCreationError,
    StudioError,
)
from engines.runtime.planning import MEANING
from engines.types import CancelToken, Classification, ClassScore, Device, DeviceChoice, DeviceType, Placement, Policy

if TYPE_CHECKING:
    from engines.api import Classifier, classify_folder, open_chat, open_classifier
    from engines.chat.conversation import Conversation
    from engines.chat.loaded import ChatModel
    from engines.runtime.compiled_cache import CompiledModelCache
    from engines.runtime.devices import DiscoveryReport, discover
    from engines.runtime.fallback import DeviceFailedError, FallbackOffer, accept_first

__all__ = [
    "MEANING",
    "CancelToken",
    "CancelledError",
    "ChatModel",
    "ClassScore",
    "Classification",
    "Classifier",
    "CompiledModelCache",
    "Conversation",
    "Device",
    "DeviceChoice",
    "DeviceFailedError",
    "DeviceType",
    "DeviceUnavailableError",
    "DiscoveryReport",
    "FallbackOffer",
    "GenerationError",
    "ImageError",
    "InputContractError",
    "ModelError",
    "Placement",
    "PlacementError",
    "Policy",
    "SessionCreationError",
    "StudioError",
    "accept_first",
    "classify_folder",
    "discover",
    "open_chat",
    "open_classifier",
]

# Name -> module, imported on first access (PEP 562): these pull in onnxruntime, numpy or genai.
_LAZY = {
    "Classifier": "engines.api",
    "open_classifier": "engines.api",
    "classify_folder": "engines.api",
    "open_chat": "engines.api",
    "ChatModel": "engines.chat.loaded",
    "Conversation": "engines.chat.conversation",
    "CompiledModelCache": "engines.runtime.compiled_cache",
    "DiscoveryReport": "engines.runtime.devices",
    "discover": "engines.runtime.devices",
    "DeviceFailedError": "engines.runtime.fallback",
    "FallbackOffer": "engines.runtime.fallback",
    "accept_first": "engines.runtime.fallback",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'engines' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)

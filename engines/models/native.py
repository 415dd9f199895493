"""The one rule set for native libraries in model folders: a model folder never decides which code runs.

Two places could smuggle a library in: a config or manifest key that names one (custom operators, EP
plugins, a device backend at some path), and a library file shipped inside the folder. Both are refused
here, for genai configs, manifests and imports alike. Pure Python.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePath
from typing import Any

from engines.errors import ModelError

# Files that are native code, whatever a folder calls them.
NATIVE_SUFFIXES = (".dll", ".so", ".dylib", ".pyd", ".exe")
# Keys (case-insensitive) that ask a runtime to load a library: any key with "library" or "custom_op" in it,
# and "libray": onnxruntime-genai's VitisAI provider loads the file named by `external_ep_libray`, spelled so
# (src/vitisai/session_options.cpp).
_LIBRARY_KEY_WORDS = ("library", "libray", "custom_op")
_LIBRARY_KEYS = frozenset({"plugin_path", "ep_library"})
# QNN backends are libraries too; only the well-known ones, by bare name, are accepted from a config.
QNN_BACKENDS = frozenset({"qnnhtp.dll", "qnncpu.dll", "qnngpu.dll", "libqnnhtp.so", "libqnncpu.so", "libqnngpu.so"})


def is_native_library(name: str | PurePath) -> bool:
    file = PurePath(name).name.lower()
    return file.endswith(NATIVE_SUFFIXES) or ".so." in file


def is_library_key(key: str) -> bool:
    lowered = key.lower()
    return any(word in lowered for word in _LIBRARY_KEY_WORDS) or lowered in _LIBRARY_KEYS


def walk(node: Any, key_path: str = "") -> Iterator[tuple[str, str, Any]]:
    """Every (dotted path, key, value) in a JSON tree."""
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{key_path}.{key}" if key_path else str(key)
            yield here, str(key), value
            yield from walk(value, here)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from walk(value, f"{key_path}[{index}]")


def referenced_files(config: Any) -> Iterator[tuple[str, Any]]:
    """(key path, value) of every file a genai config names (`filename`, `*_filename`, `filenames`)."""
    for key_path, key, value in walk(config):
        if key == "filename" or key.endswith("_filename"):
            yield key_path, value
        elif key == "filenames" and isinstance(value, list):
            for index, item in enumerate(value):
                yield f"{key_path}[{index}]", item


def refuse_library_keys(data: Any, what: str) -> None:
    """A ModelError when the JSON tree `data` (from the file `what`) asks to load a native library."""
    for key_path, key, value in walk(data):
        if is_library_key(key):
            raise ModelError(
                f"{what} asks to load a native library ({key_path}); NPU Studio never loads libraries named by "
                "a model folder.",
                f"Remove {key} from {what}; custom operators and EP plugins are not supported.",
            )
        if key.lower() == "backend_path" and (
            not isinstance(value, str) or "/" in value or "\\" in value or value.lower() not in QNN_BACKENDS
        ):
            raise ModelError(
                f"{what} names a device backend library NPU Studio does not load ({key_path} = {value!r}).",
                f"Remove backend_path from {what}; NPU Studio picks the QNN backend itself.",
            )

"""The settings schema: the one place that knows, for each setting, which values are valid and whether its
value may leave the machine (in a diagnostics zip).

Each `Rule` says what is wrong with a value in words that never repeat the value (a notice or a zip must
not echo a secret back). `chat_options` is checked entry by entry against ChatOptions itself (the one
place that knows each generation option's type and range), so a bad entry costs only that entry.

`shareable` is False unless a value is one of a closed set or a number: free text (the system prompt, a
folder, a window layout, a model of the user's) and any setting added later without a word about it stay
out of diagnostics.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from engines import EP_ALIASES, EP_DEVICE_TYPE, DeviceChoice, Policy, StudioError, printable

THEMES = ("system", "light", "dark")
MAX_TOP_K = 1000
MAX_TEXT = 100_000  # a system prompt is a paragraph; a layout blob a few KB
MAX_NAME = 500
MAX_MODEL_FOLDERS = 50  # folders the model scan also looks in
MAX_PATH = 4096
BUNDLED_MODELS = ("efficientnet-lite0", "efficientnet-lite0-qdq", "smollm2-135m-instruct")


def _never(_value: object) -> bool:
    return False


def _always(_value: object) -> bool:
    return True


@dataclass(frozen=True)
class Rule:
    problem: Callable[[object], str]  # "" for a valid value, else what a valid value is
    shareable: Callable[[object], bool] = _never  # may a valid value go into a diagnostics zip as it is?


def _bool(value: object) -> str:
    return "" if isinstance(value, bool) else "must be true or false"


def _text(value: object) -> str:
    if not isinstance(value, str):
        return "must be text"
    return "" if len(value) <= MAX_TEXT else f"must be at most {MAX_TEXT:,} characters"


def _name(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        return "must be a non-empty name"
    return "" if len(value) <= MAX_NAME else f"must be at most {MAX_NAME} characters"


def _whole(least: int, most: int) -> Callable[[object], str]:
    def check(value: object) -> str:
        ok = isinstance(value, int) and not isinstance(value, bool) and least <= value <= most
        return "" if ok else f"must be a whole number from {least:,} to {most:,}"

    return check


def _folders(value: object) -> str:
    if not isinstance(value, list) or len(value) > MAX_MODEL_FOLDERS:
        return f"must be a list of at most {MAX_MODEL_FOLDERS} folders"
    for item in value:
        if not isinstance(item, str) or not item.strip() or len(item) > MAX_PATH or "\x00" in item:
            return f"must hold folder paths (non-empty text of at most {MAX_PATH:,} characters, no NUL)"
    return ""


def _theme(value: object) -> str:
    return "" if value in THEMES else f"must be one of {', '.join(THEMES)}"


def _device(value: object) -> str:
    problem = _name(value)
    if problem:
        return problem
    assert isinstance(value, str)
    try:
        DeviceChoice.parse(value)
    except StudioError:
        return f"must be one of {', '.join(p.value for p in Policy)}, a short EP name (qnn, dml) or a full EP name"
    return ""


def _known_device(value: object) -> bool:
    key = str(value).strip()
    return key.lower() in {p.value for p in Policy} or key.lower() in EP_ALIASES or key in EP_DEVICE_TYPE


def _bundled(value: object) -> bool:
    return value in BUNDLED_MODELS


def chat_option_problems(value: object) -> tuple[dict[str, Any], list[str]]:
    """(the valid entries of a `chat_options` object, one problem per invalid entry: "temperature: ...")."""
    from engines import ChatOptions

    if not isinstance(value, Mapping):
        return {}, ["must be an object of generation options"]
    hints = typing.get_type_hints(ChatOptions)
    fields = {f.name for f in dataclasses.fields(ChatOptions)}
    clean: dict[str, Any] = {}
    problems: list[str] = []
    for key, item in value.items():
        if not isinstance(key, str) or key not in fields:
            problems.append(f"{printable(str(key)[:40], newlines=False)}: not a generation option "
                            f"({', '.join(sorted(fields))})")
            continue
        if hints[key] is bool and not isinstance(item, bool):
            problems.append(f"{key}: must be true or false")
            continue
        if isinstance(item, float) and not math.isfinite(item):
            problems.append(f"{key}: must be a finite number")
            continue
        try:
            ChatOptions(**{key: item})
        except StudioError as exc:
            why = exc.message.removeprefix("Invalid chat options: ").removeprefix(f"{key} ").rstrip(".")
            problems.append(f"{key}: {why}")
            continue
        except TypeError:
            problems.append(f"{key}: has the wrong type")
            continue
        clean[key] = item
    return clean, problems


def _chat_options(value: object) -> str:
    return "; ".join(chat_option_problems(value)[1])


SCHEMA: dict[str, Rule] = {
    "device": Rule(_device, _known_device),
    "strict": Rule(_bool, _always),
    "theme": Rule(_theme, _always),
    "window_geometry": Rule(_text),
    "window_state": Rule(_text),
    "last_view": Rule(_name),
    "classifier": Rule(_name, _bundled),
    "chat_model": Rule(_name, _bundled),
    "system_prompt": Rule(_text),
    "chat_options": Rule(_chat_options, _always),  # numbers and booleans only, once cleaned
    "top_k": Rule(_whole(1, MAX_TOP_K), _always),
    "allow_downloads": Rule(_bool, _always),
    "last_open_dir": Rule(_text),
    "chat_enter_sends": Rule(_bool, _always),
    "last_conversation": Rule(_whole(0, 2**63 - 1), _always),
    "serve_on_start": Rule(_bool, _always),
    "serve_port": Rule(_whole(0, 65535), _always),
    "serve_api_key": Rule(_text),  # a secret: never shared (and scrubbed wherever it appears)
    "model_folders": Rule(_folders),  # the user's folders: never shared
}


def clean_values(data: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The valid values of `data` by setting (chat_options: its valid entries), and one problem per
    invalid value ("theme: must be one of ..."); keys the schema does not know are left out, silently."""
    values: dict[str, Any] = {}
    problems: list[str] = []
    for name, rule in SCHEMA.items():
        if name not in data:
            continue
        value = data[name]
        if name == "chat_options":
            clean, bad = chat_option_problems(value)
            values[name] = clean
            problems += [f"chat_options.{p}" if isinstance(value, Mapping) else f"chat_options: {p}" for p in bad]
            continue
        problem = rule.problem(value)
        if problem:
            problems.append(f"{name}: {problem}")
        else:
            values[name] = value
    return values, problems


def shareable_copy(data: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """What a diagnostics zip may hold of a settings file: each valid, shareable value as it is; the rest
    as a placeholder that says what it was ("default", "redacted, 42 characters", "invalid, redacted")."""
    shown: dict[str, Any] = {}
    for name, rule in SCHEMA.items():
        if name not in data:
            continue
        value = data[name]
        if name == "chat_options":
            clean, bad = chat_option_problems(value)
            shown[name] = {**clean, **({"<invalid entries, redacted>": len(bad)} if bad else {})}
        elif rule.problem(value):
            shown[name] = "<invalid, redacted>"
        elif rule.shareable(value) or value == defaults.get(name):
            shown[name] = value
        else:
            shown[name] = f"<redacted, {len(value)} characters>" if isinstance(value, str) else "<redacted>"
    others = [key for key in data if key not in SCHEMA and key != "schema"]
    if others:
        shown["<other keys, redacted>"] = len(others)
    if isinstance(data.get("schema"), int):
        shown["schema"] = data["schema"]
    return shown

"""An OpenAI chat completion body, checked field by field into a `CompletionRequest`.

Every refusal is an `ApiError` 400 that names the field (`param`, e.g. `messages[2].content`): malformed
JSON, text that is not UTF-8, NUL characters, NaN / infinite / out-of-range numbers, wrong types, unknown
fields, and what this server cannot do (tools, logprobs, n > 1, images for a text model). Nothing here
raises anything else, whatever the body holds.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from app.server.errors import ApiError, bad_request
from app.server.protocol import CompletionRequest, Message

_INT64 = 2**63


@dataclass(frozen=True)
class Limits:
    """What one request may ask of the server. The defaults suit small local models; a request past one
    is refused (400) rather than cut, except `max_tokens`, which is clamped to what the context leaves."""

    max_body_bytes: int = 1 << 20
    max_messages: int = 512
    max_stop: int = 4
    max_stop_chars: int = 256
    max_schema_bytes: int = 64 << 10
    max_model_chars: int = 256


# Accepted and ignored: they change nothing a local model does.
_IGNORED = {"user", "store", "metadata", "service_tier", "parallel_tool_calls", "stream_options"}
_KNOWN = {
    "model", "messages", "stream", "max_tokens", "max_completion_tokens", "temperature", "top_p", "seed",
    "stop", "n", "response_format", "tools", "tool_choice", "functions", "function_call", "logprobs",
    "top_logprobs", "logit_bias", "presence_penalty", "frequency_penalty", "modalities", "audio",
    "prediction", "reasoning_effort", "web_search_options",
} | _IGNORED
_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


def parse_body(body: bytes, limits: Limits, client: str = "") -> CompletionRequest:
    return read_request(load_json(body), limits, client)


def load_json(body: bytes) -> Any:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad_request(
            f"The request body is not UTF-8 text (byte 0x{body[exc.start]:02x} at offset {exc.start}).",
            code="invalid_encoding",
        ) from None
    if not text.strip():
        raise bad_request("The request body is empty; send a JSON object.", code="invalid_json")
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except ApiError:
        raise
    except RecursionError:
        raise bad_request("The request body is nested too deeply.", code="invalid_json") from None
    except ValueError as exc:  # JSONDecodeError, or an integer too long to convert
        raise bad_request(f"The request body is not valid JSON: {exc}.", code="invalid_json") from None


def _refuse_constant(name: str) -> Any:
    raise bad_request(f"The request body holds {name}, which is not a JSON number.", code="invalid_json")


def read_request(data: Any, limits: Limits, client: str = "") -> CompletionRequest:
    if not isinstance(data, dict):
        raise bad_request(f"The request body must be a JSON object, not {_kind(data)}.", code="invalid_type")
    for key in data:
        if key not in _KNOWN:
            raise bad_request(f"Unrecognized request argument supplied: {_shown(key)}.", param=key,
                              code="unknown_parameter")
    _refuse_unsupported(data)
    model = _string(data, "model", required=True)
    if len(model) > limits.max_model_chars:
        raise bad_request(f"model is longer than {limits.max_model_chars} characters.", param="model")
    stream = _bool(data, "stream")
    options = data.get("stream_options")
    include_usage = False
    if options is not None:
        if not stream:
            raise bad_request("stream_options is only allowed when stream is true.", param="stream_options")
        if not isinstance(options, dict):
            raise bad_request(f"stream_options must be an object, not {_kind(options)}.", param="stream_options",
                              code="invalid_type")
        unknown = sorted(set(options) - {"include_usage", "include_obfuscation"})
        if unknown:
            raise bad_request(f"Unrecognized stream option: {_shown(unknown[0])}.",
                              param=f"stream_options.{unknown[0]}", code="unknown_parameter")
        include_usage = _bool(options, "include_usage", prefix="stream_options.")
    max_tokens = _int(data, "max_completion_tokens", least=1)
    if max_tokens is None:
        max_tokens = _int(data, "max_tokens", least=1)
    n = _int(data, "n", least=1)
    if n is not None and n != 1:
        raise bad_request("n must be 1: this server writes one answer per request.", param="n",
                          code="unsupported_value")
    temperature = _number(data, "temperature", 0.0, 2.0)
    top_p = _number(data, "top_p", 0.0, 1.0)
    seed = _int(data, "seed", least=-_INT64)
    return CompletionRequest(
        model=model,
        messages=_messages(data, limits),
        max_tokens=max_tokens,
        temperature=temperature,
        top_p=top_p,
        seed=None if seed is None else seed % (2**31 - 1),  # the sampler takes a 31-bit seed
        stop=_stop(data, limits),
        json_schema=_json_schema(data, limits),
        stream=stream,
        include_usage=include_usage,
        client=client,
    )


def _refuse_unsupported(data: dict[str, Any]) -> None:
    def refuse(param: str, what: str) -> None:
        raise bad_request(what, param=param, code="unsupported_parameter")

    if data.get("tools"):
        refuse("tools", "tools are not supported: this server's models are text-only chat models without tool calls.")
    if data.get("functions"):
        refuse("functions", "functions are not supported: this server's models do not call tools.")
    if data.get("tool_choice") not in (None, "none"):
        refuse("tool_choice", "tool_choice is not supported: this server's models do not call tools.")
    if data.get("function_call") not in (None, "none"):
        refuse("function_call", "function_call is not supported: this server's models do not call tools.")
    if data.get("logprobs") not in (None, False):
        refuse("logprobs", "logprobs are not supported by this server.")
    if data.get("top_logprobs") is not None:
        refuse("top_logprobs", "top_logprobs are not supported by this server.")
    if data.get("logit_bias"):
        refuse("logit_bias", "logit_bias is not supported by this server.")
    for name in ("presence_penalty", "frequency_penalty"):
        if data.get(name) not in (None, 0, 0.0):
            refuse(name, f"{name} is not supported by this server (only 0).")
    if data.get("modalities") not in (None, ["text"]):
        refuse("modalities", "Only text output is supported.")
    for name in ("audio", "prediction", "reasoning_effort", "web_search_options"):
        if data.get(name) is not None:
            refuse(name, f"{name} is not supported by this server.")


def _messages(data: dict[str, Any], limits: Limits) -> tuple[Message, ...]:
    raw = data.get("messages")
    if raw is None:
        raise bad_request("messages is required.", param="messages", code="missing_required_parameter")
    if not isinstance(raw, list):
        raise bad_request(f"messages must be an array, not {_kind(raw)}.", param="messages", code="invalid_type")
    if not raw:
        raise bad_request("messages must hold at least one message.", param="messages")
    if len(raw) > limits.max_messages:
        raise bad_request(f"messages holds {len(raw)} messages; at most {limits.max_messages} are accepted.",
                          param="messages")
    messages = [_message(item, f"messages[{i}]") for i, item in enumerate(raw)]
    if not any(m.role == "user" for m in messages):
        raise bad_request("messages must hold at least one user message.", param="messages")
    return tuple(messages)


def _message(item: Any, where: str) -> Message:
    if not isinstance(item, dict):
        raise bad_request(f"{where} must be an object, not {_kind(item)}.", param=where, code="invalid_type")
    role = item.get("role")
    if role in ("tool", "function") or item.get("tool_calls") or item.get("function_call"):
        raise bad_request(f"{where}: tool messages and tool calls are not supported by this server.",
                          param=f"{where}.role", code="unsupported_value")
    if role not in _ROLES:
        shown = _shown(role) if isinstance(role, str) else _kind(role)
        raise bad_request(f"{where}.role must be system, developer, user or assistant, not {shown}.",
                          param=f"{where}.role")
    for key in item:
        if key not in ("role", "content", "name", "refusal"):
            raise bad_request(f"Unrecognized message field {_shown(key)}.", param=f"{where}.{key}",
                              code="unknown_parameter")
    if "name" in item and not isinstance(item["name"], str):
        raise bad_request(f"{where}.name must be a string.", param=f"{where}.name", code="invalid_type")
    return Message(_ROLES[role], _content(item.get("content"), f"{where}.content"))


def _content(content: Any, where: str) -> str:
    if isinstance(content, str):
        return _text(content, where)
    if isinstance(content, list):
        parts = []
        for j, part in enumerate(content):
            at = f"{where}[{j}]"
            if not isinstance(part, dict):
                raise bad_request(f"{at} must be an object, not {_kind(part)}.", param=at, code="invalid_type")
            kind = part.get("type")
            if kind in ("image_url", "input_image", "input_audio", "file", "image"):
                raise bad_request(f"{at}: this is a text model; it cannot read {kind} content.", param=at,
                                  code="unsupported_value")
            if kind != "text":
                shown = _shown(kind) if isinstance(kind, str) else _kind(kind)
                raise bad_request(f"{at}.type must be text, not {shown}.", param=f"{at}.type")
            text = part.get("text")
            if not isinstance(text, str):
                raise bad_request(f"{at}.text must be a string, not {_kind(text)}.", param=f"{at}.text",
                                  code="invalid_type")
            parts.append(_text(text, f"{at}.text"))
        return "".join(parts)
    raise bad_request(f"{where} must be a string or an array of text parts, not {_kind(content)}.", param=where,
                      code="invalid_type")


def _text(text: str, where: str) -> str:
    """Text the tokenizer would misread is refused: a NUL ends a C string early, and a lone surrogate
    (a JSON escape such as \\ud800) is not a character at all."""
    nul = text.find("\x00")
    if nul >= 0:
        raise bad_request(f"{where} contains a NUL character (at character {nul + 1}).", param=where,
                          code="invalid_text")
    for index, char in enumerate(text):
        if "\ud800" <= char <= "\udfff":
            raise bad_request(f"{where} is not valid Unicode text (a lone surrogate U+{ord(char):04X} at character "
                              f"{index + 1}).", param=where, code="invalid_text")
    return text


def _stop(data: dict[str, Any], limits: Limits) -> tuple[str, ...]:
    raw = data.get("stop")
    if raw is None:
        return ()
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list):
        raise bad_request(f"stop must be a string or an array of strings, not {_kind(raw)}.", param="stop",
                          code="invalid_type")
    if len(items) > limits.max_stop:
        raise bad_request(f"stop holds {len(items)} strings; at most {limits.max_stop} are accepted.", param="stop")
    stops = []
    for i, item in enumerate(items):
        at = "stop" if isinstance(raw, str) else f"stop[{i}]"
        if not isinstance(item, str):
            raise bad_request(f"{at} must be a string, not {_kind(item)}.", param=at, code="invalid_type")
        if not item:
            raise bad_request(f"{at} is empty.", param=at)
        if len(item) > limits.max_stop_chars:
            raise bad_request(f"{at} is longer than {limits.max_stop_chars} characters.", param=at)
        stops.append(_text(item, at))
    return tuple(stops)


def _json_schema(data: dict[str, Any], limits: Limits) -> str | None:
    raw = data.get("response_format")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise bad_request(f"response_format must be an object, not {_kind(raw)}.", param="response_format",
                          code="invalid_type")
    kind = raw.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return json.dumps({"type": "object"})
    if kind != "json_schema":
        shown = _shown(kind) if isinstance(kind, str) else _kind(kind)
        raise bad_request(f"response_format.type must be text, json_object or json_schema, not {shown}.",
                          param="response_format.type")
    spec = raw.get("json_schema")
    if not isinstance(spec, dict):
        raise bad_request("response_format.json_schema must be an object with name and schema.",
                          param="response_format.json_schema", code="invalid_type")
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise bad_request("response_format.json_schema.name must be a non-empty string.",
                          param="response_format.json_schema.name")
    schema = spec.get("schema", {})
    if not isinstance(schema, dict):
        raise bad_request(f"response_format.json_schema.schema must be an object, not {_kind(schema)}.",
                          param="response_format.json_schema.schema", code="invalid_type")
    text = json.dumps(schema, ensure_ascii=False)
    if len(text.encode("utf-8", "surrogatepass")) > limits.max_schema_bytes:
        raise bad_request(f"response_format.json_schema.schema is larger than {limits.max_schema_bytes} bytes.",
                          param="response_format.json_schema.schema")
    _text(text, "response_format.json_schema.schema")
    return text


# -- scalar fields ----------------------------------------------------------------------------


def _string(data: dict[str, Any], name: str, *, required: bool = False) -> str:
    value = data.get(name)
    if value is None:
        if required:
            raise bad_request(f"{name} is required.", param=name, code="missing_required_parameter")
        return ""
    if not isinstance(value, str):
        raise bad_request(f"{name} must be a string, not {_kind(value)}.", param=name, code="invalid_type")
    if required and not value:
        raise bad_request(f"{name} is empty.", param=name)
    return _text(value, name)


def _bool(data: dict[str, Any], name: str, prefix: str = "") -> bool:
    value = data.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise bad_request(f"{prefix}{name} must be true or false, not {_kind(value)}.", param=prefix + name,
                          code="invalid_type")
    return value


def _int(data: dict[str, Any], name: str, *, least: int) -> int | None:
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer() and math.isfinite(value) and abs(value) < _INT64:
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise bad_request(f"{name} must be a whole number, not {_kind(value)}.", param=name, code="invalid_type")
    if not least <= value < _INT64:
        low = "at least 1" if least == 1 else f"at least {least}"
        raise bad_request(f"{name} must be {low} and below 2**63; got {_number_text(value)}.", param=name)
    return value


def _number(data: dict[str, Any], name: str, low: float, high: float) -> float | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise bad_request(f"{name} must be a number, not {_kind(value)}.", param=name, code="invalid_type")
    if isinstance(value, int) and abs(value) > 2**53:
        raise bad_request(f"{name} must be from {low:g} to {high:g}; got {_number_text(value)}.", param=name)
    number = float(value)
    if not math.isfinite(number) or not low <= number <= high:
        raise bad_request(f"{name} must be from {low:g} to {high:g}; got {_number_text(value)}.", param=name)
    return number


def _number_text(value: float) -> str:
    text = repr(value)
    return text if len(text) <= 24 else text[:20] + "…"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array",
            dict: "an object"}.get(type(value), type(value).__name__)


def _shown(text: Any) -> str:
    """A client's own word, quoted and cut short (it goes back into an error message)."""
    value = str(text)
    value = value if len(value) <= 40 else value[:40] + "…"
    return repr(value)

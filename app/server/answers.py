"""OpenAI's response shapes, with where the answer ran on each: the `X-NPU-Studio-Device` and
`X-NPU-Studio-Placement` headers, the same words in `system_fingerprint`, and an `npu_studio` object
(device, EP, source, nodes, fell back, reason) that OpenAI clients ignore."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from app import __version__
from engines import EP_DEVICE_TYPE, Placement, short_ep_name

DEVICE_HEADER = "X-NPU-Studio-Device"
PLACEMENT_HEADER = "X-NPU-Studio-Placement"


def device_of(placement: Placement) -> str:
    kind = EP_DEVICE_TYPE.get(placement.primary_ep)
    return kind.value if kind is not None else short_ep_name(placement.primary_ep)


def placement_text(placement: Placement) -> str:
    """"QNN 90 / CPU 4 nodes", "CPU 94/94", "CPU" (a chat model reports no node counts), and after a
    fallback what was asked and why: "CPU (asked NPU: there is no usable NPU ...)"."""
    nodes = placement.nodes_per_ep
    if len(nodes) > 1:
        where = " / ".join(f"{short_ep_name(ep)} {n}" for ep, n in nodes) + " nodes"
    elif nodes:
        where = f"{short_ep_name(nodes[0][0])} {nodes[0][1]}/{placement.total_nodes}"
    else:
        where = short_ep_name(placement.primary_ep) or "unknown"
    if placement.fell_back:
        asked = placement.requested.removesuffix(" (strict)") or "a device"
        where += f" (asked {asked}: {placement.reason})" if placement.reason else f" (asked {asked})"
    return where


def header_safe(text: str, limit: int = 400) -> str:
    """HTTP header values are Latin-1 without line breaks: the placement's words in plain ASCII."""
    plain = text.replace("—", "-").replace("–", "-").replace("…", "...").replace("’", "'")
    plain = "".join(c if 32 <= ord(c) < 127 else "?" for c in plain)
    return plain if len(plain) <= limit else plain[: limit - 3] + "..."


def placement_headers(placement: Placement) -> dict[str, str]:
    return {DEVICE_HEADER: device_of(placement), PLACEMENT_HEADER: header_safe(placement_text(placement))}


def fingerprint(placement: Placement) -> str:
    return f"npu-studio-{__version__} {device_of(placement)}: {placement_text(placement)}"


def npu_studio(placement: Placement, source: str = "") -> dict[str, Any]:
    return {
        "device": device_of(placement),
        "ep": placement.primary_ep,
        "source": source,
        "nodes": dict(placement.nodes_per_ep),
        "fell_back": placement.fell_back,
        "reason": placement.reason,
        "placement": placement_text(placement),
        "requested": placement.requested,
    }


def completion_id() -> str:
    return "chatcmpl-" + uuid.uuid4().hex[:24]


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def completion(
    cid: str,
    model: str,
    text: str,
    finish_reason: str,
    prompt_tokens: int,
    completion_tokens: int,
    placement: Placement,
    source: str = "",
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": fingerprint(placement),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": usage(prompt_tokens, completion_tokens),
        "npu_studio": npu_studio(placement, source) | (extra or {}),
    }


class ChunkWriter:
    """The SSE lines of one streamed completion: `data: {chunk}` and, last, `data: [DONE]`."""

    def __init__(self, cid: str, model: str, placement: Placement, source: str = "") -> None:
        self._base = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": fingerprint(placement),
        }
        self._placement = placement
        self._source = source

    def _line(self, data: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(data, ensure_ascii=False).encode("utf-8") + b"\n\n"

    def delta(self, delta: dict[str, Any], finish_reason: str | None = None, with_usage: bool = False) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        chunk = self._base | {"choices": [choice]}
        if with_usage:
            chunk["usage"] = None
        return self._line(chunk)

    def role(self, with_usage: bool = False) -> bytes:
        return self.delta({"role": "assistant", "content": ""}, with_usage=with_usage)

    def text(self, text: str, with_usage: bool = False) -> bytes:
        return self.delta({"content": text}, with_usage=with_usage)

    def finish(self, reason: str, placement: Placement, with_usage: bool = False) -> bytes:
        chunk = self._base | {
            "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": reason}],
            "npu_studio": npu_studio(placement, self._source),
        }
        if with_usage:
            chunk["usage"] = None
        return self._line(chunk)

    def usage(self, prompt_tokens: int, completion_tokens: int) -> bytes:
        return self._line(self._base | {"choices": [], "usage": usage(prompt_tokens, completion_tokens)})

    def error(self, body: dict[str, Any]) -> bytes:
        return self._line(body)

    @staticmethod
    def done() -> bytes:
        return b"data: [DONE]\n\n"

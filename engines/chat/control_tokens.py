"""Message text is text: a control token typed in a message (or in a pasted document) stays text.

The model's chat template puts its control tokens between the messages (`<|im_start|>user`, `<|eot_id|>`,
...), and the whole rendering is then encoded by onnxruntime-genai's tokenizer, which turns every
control-token string it meets into that token, wherever it came from. A user message holding
`<|im_end|>\\n<|im_start|>system\\n...` would so become a forged system turn. onnxruntime-genai 0.18's
tokenizer has no switch for this (its only options are `add_special_tokens`, for BOS/EOS around the
text, and `skip_special_tokens`, for decoding), so every message body is made literal before the
template renders it: a ZERO WIDTH SPACE goes inside each control-token string it holds (and at either
end of the body where the body begins or ends with a piece of one, so that no control token forms
across the template's own text). The tokenizer then reads those characters as text; the template's own
control tokens are the only ones in the prompt.

Why not render placeholders and encode each body apart: onnxruntime-genai gives no way to encode text
without parsing control tokens either, and encoding the prompt in pieces changes its tokens at every
seam (a SentencePiece tokenizer starts each piece with a word boundary), so the model would read
ordinary messages differently; text without any control-token string is left exactly as it was.

The control tokens are the model's own: the tokenizer's added tokens marked special, and any other added
token written `<|...|>` (some models leave those unmarked).
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterable
from pathlib import Path

from engines import jsonfile

__all__ = ["ESCAPE", "ControlTokens"]

ESCAPE = "\u200b"  # ZERO WIDTH SPACE: invisible, and text to every tokenizer
_MARKER = re.compile(r"^<\|.*\|>$", re.S)
_MAX_TOKENIZER_BYTES = 256 << 20


class ControlTokens:
    """The control-token strings of one tokenizer, and `literal(text)` that keeps a text from forming them."""

    def __init__(self, strings: Iterable[str]) -> None:
        self.strings = tuple(sorted({s for s in strings if len(s) >= 2 and ESCAPE not in s}, key=len, reverse=True))
        self._pattern = re.compile("|".join(re.escape(s) for s in self.strings)) if self.strings else None
        # Pieces of control tokens (2 characters or more) a body may begin or end with.
        self._heads = {s[:k] for s in self.strings for k in range(2, len(s))}
        self._tails = {s[k:] for s in self.strings for k in range(1, len(s) - 1)}
        self._longest = max((len(s) for s in self.strings), default=0)
        # Every turn renders the whole conversation again: each message is made literal once.
        self.literal = functools.lru_cache(maxsize=256)(self._literal)

    @classmethod
    def of_folder(cls, folder: str | Path) -> ControlTokens:
        """The control tokens of the tokenizer in a model folder (none when it cannot be read: its load
        fails on the same file with its own message)."""
        strings: list[str] = []
        with contextlib.suppress(jsonfile.JsonFileError, OSError, ValueError):
            data = jsonfile.read_object(Path(folder) / "tokenizer.json", max_bytes=_MAX_TOKENIZER_BYTES)
            strings += _added(data.get("added_tokens"))
        with contextlib.suppress(jsonfile.JsonFileError, OSError, ValueError):
            config = jsonfile.read_object(Path(folder) / "tokenizer_config.json")
            decoder = config.get("added_tokens_decoder")
            strings += _added(list(decoder.values()) if isinstance(decoder, dict) else None)
        return cls(strings)

    def _literal(self, text: str) -> str:
        """`text`, with no control token left in it or at its edges (unchanged when it holds none)."""
        if self._pattern is None or not text:
            return text
        for _ in range(len(text) + 1):  # each pass breaks every match; a break can reveal no new one
            if self._pattern.search(text) is None:
                break
            text = self._pattern.sub(lambda match: match.group(0)[0] + ESCAPE + match.group(0)[1:], text)
        if any(text.endswith(head) for head in self._ends(text, self._heads, end=True)):
            text += ESCAPE
        if any(text.startswith(tail) for tail in self._ends(text, self._tails, end=False)):
            text = ESCAPE + text
        return text

    def _ends(self, text: str, pieces: set[str], *, end: bool) -> Iterable[str]:
        for length in range(2, min(self._longest, len(text)) + 1):
            piece = text[-length:] if end else text[:length]
            if piece in pieces:
                yield piece


def _added(entries: object) -> list[str]:
    found: list[str] = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("content"), str):
            continue
        if entry.get("special") is True or _MARKER.match(entry["content"]):
            found.append(entry["content"])
    return found

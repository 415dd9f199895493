"""Text that leaves the machine (a diagnostics zip attached to a public bug report) with what is personal
replaced by placeholders:

- given texts (the system prompt, the last folder, conversation titles: whatever the caller knows is the
  user's; as whole words) and given folders (the app's data and config folders) -> `<redacted>` /
  `<data>`, ...;
- the home directory -> `~`, and the user name -> `<user>` (as a path component, and as a word when it is
  long enough not to be part of every other word);
- the values of environment variables whose names say they are secrets (TOKEN, KEY, SECRET, PASSWORD, ...),
  wherever they appear;
- anything shaped like an access token (Hugging Face `hf_...`, OpenAI `sk-...`, GitHub `ghp_...`, AWS
  `AKIA...`, Slack `xox?-...`, JWTs, `Authorization: Bearer ...`, `api_key=...`).

Paths are matched with either slash and, on Windows, in any case. Longer texts are replaced first, so a
folder inside the home directory keeps its own placeholder. Pure Python.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH|COOKIE|SESSION", re.I)
TOKEN_PATTERNS = re.compile(
    r"\bhf_[A-Za-z0-9]{16,}|\bsk-[A-Za-z0-9_-]{16,}|\bgh[pousr]_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"
    r"|\bAKIA[0-9A-Z]{16}\b|\bxox[abposr]-[A-Za-z0-9-]{10,}|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+"
    r"|(?i:\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}"
    r"|(?i:\b(?:api[_-]?key|token|secret|password|passwd)\b\s*[:=]\s*)[^\s,;\"']{4,}"
)
MIN_TEXT = 4  # shorter texts would be found inside every other word
MIN_WORD_USER = 4


@dataclass(frozen=True)
class Redactor:
    replacements: tuple[tuple[str, str], ...] = ()  # (text, placeholder), longest first
    user: str = ""
    ignore_case: bool = field(default=os.name == "nt")

    @cached_property
    def _literal(self) -> tuple[re.Pattern[str] | None, dict[str, str]]:
        """One pattern for every replacement (a single pass however many titles there are): the user's
        texts anywhere, paths only where they are not the start of a longer name ("/data" in "/database")."""
        if not self.replacements:
            return None, {}
        parts = [_whole(text) if placeholder == "<redacted>" else re.escape(text) + r"(?![\w.-])"
                 for text, placeholder in self.replacements]
        flags = re.IGNORECASE if self.ignore_case else 0
        lookup = {self._key(text): placeholder for text, placeholder in reversed(self.replacements)}
        return re.compile("|".join(parts), flags), lookup

    def _key(self, text: str) -> str:
        return text.casefold() if self.ignore_case else text

    def text(self, value: str) -> str:
        """`value` with every personal text, path, user name and secret replaced."""
        pattern, lookup = self._literal
        out = TOKEN_PATTERNS.sub(_token_placeholder, value)  # first: a known text may be part of one ("api_key")
        if pattern is not None:
            out = pattern.sub(lambda m: lookup.get(self._key(m.group()), "<redacted>"), out)
        if self.user:
            name = re.escape(self.user)
            out = re.sub(rf"(?<=[/\\]){name}(?=[/\\]|$|[\s'\")])", "<user>", out, flags=re.IGNORECASE)
            if len(self.user) >= MIN_WORD_USER:
                out = re.sub(rf"(?<![A-Za-z0-9]){name}(?![A-Za-z0-9])", "<user>", out, flags=re.IGNORECASE)
        return out

    def data(self, value: Any) -> Any:
        """`value` (JSON-like: dicts, lists, strings, numbers) with every string, keys too, redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self.text(str(k)): self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        return value


def _whole(text: str) -> str:
    """`text` as a pattern that does not match inside a longer word ("api_key" in "serve_api_key")."""
    head = r"(?<!\w)" if re.match(r"\w", text) else ""
    tail = r"(?!\w)" if re.search(r"\w$", text) else ""
    return head + re.escape(text) + tail


def _token_placeholder(match: re.Match[str]) -> str:
    text = match.group()
    head = re.match(r"(?i)(bearer\s+|(?:api[_-]?key|token|secret|password|passwd)\s*[:=]\s*)", text)
    return (head.group() if head else "") + "<secret>"


def environment_secrets(environ: Mapping[str, str]) -> list[str]:
    """The values of environment variables whose names say they hold a secret."""
    return [value for name, value in environ.items() if SECRET_NAME.search(name) and len(value) >= MIN_TEXT]


def _path_forms(path: str) -> set[str]:
    forms = {path, path.replace("\\", "/"), path.replace("/", "\\")}
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        real = path
    forms |= {real, real.replace("\\", "/"), real.replace("/", "\\")}
    return {f.rstrip("/\\") for f in forms if len(f.rstrip("/\\")) >= 2}


def make_redactor(
    *,
    home: str = "",
    user: str = "",
    folders: Mapping[str, str] | None = None,
    texts: Iterable[str] = (),
    secrets: Iterable[str] = (),
) -> Redactor:
    """A Redactor for this machine: `folders` maps a placeholder ("<data>") to a path; `texts` are the
    user's own words and `secrets` known secret values (both become `<redacted>`)."""
    pairs: dict[str, str] = {}
    for text in (*texts, *secrets):
        if isinstance(text, str) and len(text.strip()) >= MIN_TEXT:
            pairs.setdefault(text, "<redacted>")
            for line in text.splitlines():  # a log line may hold one line of a longer text
                if len(line.strip()) >= max(MIN_TEXT, 8):
                    pairs.setdefault(line, "<redacted>")
    for placeholder, folder in (folders or {}).items():
        for form in _path_forms(folder):
            pairs.setdefault(form, placeholder)
    if home:
        for form in _path_forms(home):
            pairs.setdefault(form, "~")
    ordered = tuple(sorted(pairs.items(), key=lambda item: -len(item[0])))
    return Redactor(ordered, user.strip())

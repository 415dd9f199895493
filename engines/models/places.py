"""Where other local-AI tools keep their model folders, as their own sources say.

Each place is a folder to scan (`engines.models.scan`), with the tool it belongs to and how deep its
models sit. Only layouts read in each tool's public sources are listed here; a tool whose layout could
not be confirmed is not guessed at: its folders are the user's to add (the `model_folders` setting).

==================  ==================================================================================
Foundry Local       `foundry cache location` when the `foundry` CLI is on PATH (run with a short
                    timeout; its output is parsed defensively). Otherwise `~/.foundry/cache/models`
                    (`%USERPROFILE%\\.foundry\\cache\\models` on Windows): the Foundry Local SDK's default
                    is `{app data}/cache/models` with `{app data}` = `~/.{app name}`
                    (microsoft/Foundry-Local sdk_v2/cpp/src/utils.cc), and `foundry cache cd` moves it.
                    Models sit in `<Publisher>/<model-id>-<version>/[<variant>/]` with
                    `genai_config.json` and `inference_model.json`; a `download.tmp` marks a download
                    in progress (sdk_v2/cpp/src/catalog/local_model_scanner.cc,
                    sdk_v2/cpp/src/download/download_manager.cc). Older releases put
                    `<Publisher>/...` straight under `~/.foundry` (onnxruntime-genai docs/DownloadModels.md),
                    so `~/.foundry` is scanned as a whole.
Hugging Face hub    `HF_HUB_CACHE`, else the legacy `HUGGINGFACE_HUB_CACHE`, else `HF_HOME/hub`, else
                    `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`
                    (huggingface_hub constants.py). A repository is `models--<org>--<name>/`, its files
                    `snapshots/<revision>/...`, each a link into the repository's `blobs/` (or a copy
                    where links cannot be made: Windows without developer mode). Lemonade keeps its
                    models there too (lemonade-sdk/lemonade src/cpp/server/utils/path_utils.cpp:
                    `resolve_hf_cache_dir`), unless its own `models_dir` setting moves them.
AI Dev Gallery      `~/.cache/aigallery` (microsoft/ai-dev-gallery AIDevGallery/Utils/AppData.cs), models
                    in `<org>--<repo>/<ref>/<path>` (AIDevGallery.Utils/ModelUrl.cs). The app can move
                    its cache in its settings; that choice lives in the app's packaged state and is not
                    read here.
AI Toolkit          `~/.aitk/models` (`%USERPROFILE%\\.aitk\\models`), with its `my-models.yml`, models in
                    `<publisher>/<model>/<runtime>/<display name>/` (microsoft/vscode-docs
                    docs/intelligentapps/reference/ManualModelConversion.md; the maintainers' answers in
                    microsoft/foundry-dev-tools#84 and #185). Its "Playground Agent Model Storage" setting
                    moves the folder (#185, #78): read from VS Code's user settings.json (JSON with
                    comments, never executed), the key in the extension's `windowsaistudio.` namespace
                    (vscode-docs docs/intelligentapps/faq.md) that VS Code's settings editor titles so.
==================  ==================================================================================

Not confirmed, so not scanned by default: Lemonade's `models_dir` override. Pure Python.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engines import jsonfile

log = logging.getLogger(__name__)

FOUNDRY = "Foundry Local"
HUGGING_FACE = "Hugging Face cache"
AI_DEV_GALLERY = "AI Dev Gallery"
AI_TOOLKIT = "AI Toolkit"
YOURS = "Your folder"
FOUNDRY_TIMEOUT_S = 5.0
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
_LABELLED_PATH = re.compile(r"(?:path|location|directory|folder)\s*[:=]\s*(.+)$", re.IGNORECASE)
# AI Toolkit's setting: VS Code titles a key by its last part, camel case split ("playgroundAgentModelStorage"
# is "Playground Agent Model Storage"); a dotted spelling of the same words is taken too.
AI_TOOLKIT_SETTING = "windowsaistudio.playgroundAgentModelStorage"
VSCODE_SETTINGS_BYTES = 1 << 20
_JSONC_COMMENT = re.compile(r'("(?:[^"\\]|\\.)*")|//[^\n]*|/\*.*?\*/', re.DOTALL)
_JSONC_TRAILING_COMMA = re.compile(r'("(?:[^"\\]|\\.)*")|,(\s*[}\]])', re.DOTALL)


@dataclass(frozen=True)
class Place:
    """A folder to scan: which tool keeps models there, how it was found, how deep its models sit."""

    tool: str
    path: Path
    max_depth: int
    how: str  # "default", "HF_HUB_CACHE", "`foundry cache location`", "your settings"
    hub_cache: bool = False  # a Hugging Face hub cache: only models--*/snapshots/* is walked

    def as_dict(self) -> dict[str, object]:
        return {"tool": self.tool, "path": str(self.path), "max_depth": self.max_depth, "how": self.how}


def home() -> Path:
    return Path(os.path.expanduser("~"))


def hugging_face_cache(env: Mapping[str, str] | None = None) -> tuple[Path, str]:
    """The hub cache folder and which setting chose it, in huggingface_hub's order."""
    env = os.environ if env is None else env
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(name):
            return _expand(env[name]), name
    if env.get("HF_HOME"):
        return _expand(env["HF_HOME"]) / "hub", "HF_HOME"
    if env.get("XDG_CACHE_HOME"):
        return _expand(env["XDG_CACHE_HOME"]) / "huggingface" / "hub", "XDG_CACHE_HOME"
    return home() / ".cache" / "huggingface" / "hub", "default"


def _expand(text: str) -> Path:
    return Path(os.path.expandvars(os.path.expanduser(text)))


def foundry_cache_location(timeout: float | None = None) -> tuple[Path | None, str]:
    """What `foundry cache location` says (None when the CLI is missing, slow, failing or unclear),
    and a note on why not. Never waits longer than `timeout` (FOUNDRY_TIMEOUT_S): its output goes to a
    file, not a pipe, so a service it starts and leaves running cannot keep the scan waiting."""
    exe = shutil.which("foundry")
    if exe is None:
        return None, ""
    seconds = FOUNDRY_TIMEOUT_S if timeout is None else timeout
    with tempfile.TemporaryFile() as output:
        try:
            process = subprocess.Popen(
                [exe, "cache", "location"], stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.DEVNULL,
                env={**os.environ, "NO_COLOR": "1"}, start_new_session=os.name == "posix",
            )  # fmt: skip
        except OSError as exc:
            return None, f"`foundry cache location` could not run ({exc.strerror or exc})"
        try:
            code = process.wait(seconds)
        except subprocess.TimeoutExpired:
            _stop(process)
            return None, f"`foundry cache location` gave no answer within {seconds:g} s"
        output.seek(0)
        text = output.read(16384).decode("utf-8", "replace")
    found = parse_cache_location(text)
    if code != 0 or found is None:
        return None, "`foundry cache location` did not name a folder that exists"
    return found, ""


def _stop(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        if os.name == "posix":
            os.killpg(process.pid, signal.SIGKILL)  # the CLI and whatever it started in its session
        else:
            process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
        process.wait(2.0)


def parse_cache_location(text: str) -> Path | None:
    """The cache folder in `foundry cache location`'s output ("Cache directory path: C:\\...", a JSON
    object, or a bare path), only when it is an absolute path to a folder that exists."""
    clean = _ANSI.sub("", text).strip()
    candidates: list[str] = []
    if clean.startswith("{"):
        try:
            data = json.loads(clean)
        except ValueError:
            data = None
        if isinstance(data, dict):
            candidates += [str(v) for v in data.values() if isinstance(v, str)]
    for line in clean.splitlines()[:50]:
        line = line.strip()
        match = _LABELLED_PATH.search(line)
        candidates.append(match.group(1) if match else line)
    for raw in candidates:
        value = raw.strip().strip("'\"`").strip()
        if not value or len(value) > 1024 or "\x00" in value:
            continue
        path = Path(value)
        if path.is_absolute() and path.is_dir():
            return path
    return None


def vscode_settings_file(env: Mapping[str, str] | None = None) -> Path:
    """VS Code's user settings.json (docs/configure/settings.md in microsoft/vscode-docs); on Linux under
    XDG_CONFIG_HOME when it is set, as Electron's app data folder is."""
    env = os.environ if env is None else env
    if os.name == "nt":
        base = _expand(env["APPDATA"]) if env.get("APPDATA") else home() / "AppData" / "Roaming"
    elif sys.platform == "darwin":
        base = home() / "Library" / "Application Support"
    else:
        base = _expand(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home() / ".config"
    return base / "Code" / "User" / "settings.json"


def parse_jsonc(text: str) -> Any:
    """JSON with comments and trailing commas, as VS Code writes settings.json (strings kept as they are)."""
    text = _JSONC_COMMENT.sub(lambda m: m.group(1) or "", text.removeprefix("\ufeff"))
    text = _JSONC_TRAILING_COMMA.sub(lambda m: m.group(1) or m.group(2), text)
    return jsonfile.loads(text)


def _is_ai_toolkit_setting(key: str) -> bool:
    namespace, _, rest = key.partition(".")
    return namespace == "windowsaistudio" and rest.replace(".", "").lower() == "playgroundagentmodelstorage"


def ai_toolkit_storage(env: Mapping[str, str] | None = None) -> tuple[Path | None, str]:
    """The folder AI Toolkit's "Playground Agent Model Storage" setting names in VS Code's user settings
    (None when it names none), and a note when the settings or the value cannot be used. The file is
    read, at most VSCODE_SETTINGS_BYTES of it, and parsed: nothing in it is run or expanded but `~`."""
    path = vscode_settings_file(env)
    try:
        raw = jsonfile.read_bytes(path, max_bytes=VSCODE_SETTINGS_BYTES)
    except jsonfile.JsonFileError as exc:
        return None, "" if exc.missing else f"VS Code's settings ({path}) could not be read: {exc.problem}"
    try:
        settings = parse_jsonc(raw.decode("utf-8"))
    except (UnicodeDecodeError, jsonfile.JsonFileError) as exc:
        problem = exc.problem if isinstance(exc, jsonfile.JsonFileError) else "it is not UTF-8 text"
        return None, f"VS Code's settings ({path}) could not be read: {problem}"
    if not isinstance(settings, dict):
        return None, ""
    value = next((v for k, v in settings.items() if isinstance(k, str) and _is_ai_toolkit_setting(k)), None)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None, ""
    if not isinstance(value, str) or len(value) > 1024 or "\x00" in value:
        return None, f"AI Toolkit's model storage setting in {path} is not a folder path"
    folder = Path(os.path.expanduser(value.strip()))
    if not folder.is_absolute():
        return None, f"AI Toolkit's model storage setting names {value.strip()!r}, which is not an absolute path"
    return folder, ""


def ai_toolkit_places(env: Mapping[str, str] | None = None) -> tuple[list[Place], list[str]]:
    """AI Toolkit's default model folder and, when its setting moves it, the folder it names (models
    downloaded before the move stay in the default one). Where the setting's folder holds the
    `<publisher>/<model>/<runtime>/<name>` layout (straight in it, or in a `models` folder in it) is not
    documented, so it is walked one level deeper."""
    default = home() / ".aitk" / "models"
    places = [Place(AI_TOOLKIT, default, 5, "default")]
    moved, note = ai_toolkit_storage(env)
    if moved is not None and os.path.normcase(os.path.realpath(moved)) != os.path.normcase(os.path.realpath(default)):
        places.append(Place(AI_TOOLKIT, moved, 6, f"VS Code setting {AI_TOOLKIT_SETTING}"))
    return places, [note] if note else []


def default_places(
    extra: Iterable[str | os.PathLike[str]] = (), *, ask_foundry: bool = True, env: Mapping[str, str] | None = None
) -> tuple[list[Place], list[str]]:
    """The folders to scan (the user's first), and notes on what could not be asked."""
    notes: list[str] = []
    places = [Place(YOURS, _expand(os.fspath(p)), 4, "your settings") for p in extra if os.fspath(p).strip()]
    if ask_foundry:
        location, note = foundry_cache_location()
        if location is not None:
            places.append(Place(FOUNDRY, location, 5, "`foundry cache location`"))
        elif note:
            notes.append(note + "; its default folders were scanned instead")
    places.append(Place(FOUNDRY, home() / ".foundry", 6, "default"))
    hub, how = hugging_face_cache(env)
    places.append(Place(HUGGING_FACE, hub, 6, how, hub_cache=True))
    places.append(Place(AI_DEV_GALLERY, home() / ".cache" / "aigallery", 7, "default"))
    toolkit, toolkit_notes = ai_toolkit_places(env)
    return places + toolkit, notes + toolkit_notes

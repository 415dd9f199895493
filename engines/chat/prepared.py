"""What a process that hands a chat model to a child engine process already knows (no runtime here).

The chat engine often runs in a child process (engines/chat/bounded.py). Loading there from nothing costs
the child memory it then holds for the whole session: the `onnx` package for the folder's safety
check (~20 MB) and ONNX Runtime's Python module, numpy and the plugin EPs that device discovery
registers (~15-35 MB). The app's own process has imported those already (its classifier is checked and
runs with them). So it checks the folder and plans the devices, and the child loads with that
`Prepared` record; the child imports onnxruntime-genai alone where it can (the CPU, outside Windows).

Only a folder under a trusted root (the bundled models) is checked in the parent: any other folder is a
model that is not ours, and its checks run in the child, within the child's memory bound, as before.
When preparing fails in any way, the child does all of it itself and reports the error as before.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from engines.chat.folder import ModelFolder
from engines.runtime.planning import DeviceSet

__all__ = ["Prepared", "prepare"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Prepared:
    """A validated folder (None: the child validates it) and the devices chat can use in this run."""

    folder: ModelFolder | None
    devices: DeviceSet

    def folder_for(self, folder: str | Path) -> ModelFolder | None:
        """The validated folder when it is the one asked for, else None."""
        if self.folder is None:
            return None
        try:
            same = Path(folder).expanduser().resolve() == Path(self.folder.path).resolve()
        except OSError:
            return None
        return self.folder if same else None


def prepare(folder: str | Path) -> Prepared | None:
    """In the parent: the folder checked (only when trusted) and chat's devices; None when either fails."""
    from engines.chat.folder import validate_model_folder
    from engines.chat.model import chat_devices
    from engines.models import trial

    try:
        checked = validate_model_folder(folder) if trial.is_trusted(folder) else None
        return Prepared(checked, chat_devices())
    except Exception as exc:  # the child meets the same problem and reports it in its own words
        log.debug("chat load not prepared in this process: %s", exc)
        return None

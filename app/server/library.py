"""The chat models of the library as `GET /v1/models` lists them: each with its context length and the
device it runs on (the loaded one) or would run on (the planner's answer for the server's device choice,
without loading anything). The context length is the window the loaded model really holds, or for one not
loaded the window the chat service would give it (`engines.chat.folder.context_window`, the one rule)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

from app.server.answers import device_of
from app.server.protocol import ModelCard
from engines import DeviceChoice, Placement, StudioError

log = logging.getLogger(__name__)


class LibraryCards:
    def __init__(self, roots: Sequence[Path], choice: DeviceChoice) -> None:
        """`roots`: the user's models first, then the bundled ones (a name found in both is the user's)."""
        self.roots = list(roots)
        self.choice = choice
        self._plans: dict[Path, tuple[Placement | None, str]] = {}
        self._windows: dict[Path, int] = {}
        self._sources: dict[str, str] | None = None
        self._lock = threading.Lock()

    def _entries(self) -> list[tuple[str, Path]]:
        from engines import KIND_LLM, read_library_entry

        seen: dict[str, tuple[str, Path]] = {}
        for root in self.roots:
            if not root.is_dir():
                continue
            for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
                if folder.name in seen:
                    continue
                try:
                    entry = read_library_entry(folder, bundled=False)
                except Exception:
                    continue
                if entry.kind == KIND_LLM and entry.usable:
                    seen[folder.name] = (folder.name, folder)
        return list(seen.values())

    def _plan(self, folder: Path) -> tuple[Placement | None, str]:
        with self._lock:
            if folder in self._plans:
                return self._plans[folder]
        try:
            from engines import chat_devices, locate_model, plan_providers, validate_model_folder

            model = locate_model(folder).folder  # an entry added by reference: the folder it refers to, checked
            plan = plan_providers(validate_model_folder(model), self.choice, chat_devices())
            found: tuple[Placement | None, str] = (plan.placement(), "")
        except StudioError as exc:
            found = (None, exc.user_text())
        except Exception as exc:
            log.warning("cannot plan %s: %r", folder, exc)
            found = (None, f"{type(exc).__name__}: {exc}")
        with self._lock:
            self._plans[folder] = found
        return found

    def _window_of(self, folder: Path) -> int:
        """The window the chat service would give the model in `folder` (0: it cannot say: the folder does not
        pass its checks, which its card's problem says)."""
        with self._lock:
            if folder in self._windows:
                return self._windows[folder]
        try:
            from engines import context_window, locate_model, validate_model_folder

            window = context_window(validate_model_folder(locate_model(folder).folder))
        except Exception as exc:
            log.info("no context window for %s: %r", folder, exc)
            window = 0
        with self._lock:
            self._windows[folder] = window
        return window

    def source_of(self, ep: str) -> str:
        """Where an EP comes from (built in / bundled plugin / Windows ML catalog)."""
        if self._sources is None:
            try:
                from engines import discover

                self._sources = {d.ep: d.source for d in discover().devices if d.source}
            except Exception:
                self._sources = {}
        return self._sources.get(ep, "built in" if ep == "CPUExecutionProvider" else "")

    def cards(
        self,
        loaded_id: str,
        loaded: Placement | None,
        load_error: StudioError | None,
        served: Path | None = None,
        loaded_window: int = 0,
    ) -> list[ModelCard]:
        """`served`: the folder the server serves, listed even when it is outside the library (a path).
        `loaded_window`: the context window of the loaded model (`loaded_id`), as its service holds it."""
        cards = []
        entries = self._entries()
        if served is not None and served.name not in {name for name, _ in entries}:
            entries.append((served.name, served))
        for name, folder in entries:
            placement: Placement | None
            if name == loaded_id and loaded is not None:
                placement, problem, is_loaded = loaded, "", True
                context = loaded_window or self._window_of(folder)
            else:
                placement, problem = self._plan(folder)
                is_loaded = False
                context = self._window_of(folder)
                if name == loaded_id and load_error is not None:
                    problem = load_error.user_text()
            device = device_of(placement) if placement is not None else ""
            source = self.source_of(placement.primary_ep) if placement is not None else ""
            cards.append(ModelCard(name, context, device, placement, is_loaded, problem, source))
        return cards

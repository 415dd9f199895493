"""The chat's banners, kept in step with its state: state banners (shown while the state that raised
them holds, see ui.chat_state) and notices of a moment ("an answer is still coming", a refused draft)
that go when the moment passes. A banner the user closes stays closed until its state changes."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ui.device_state import StateBanner
from ui.widgets import Banner, BannerArea

Key = tuple[str, str]  # (message, hint)


class ChatBanners:
    def __init__(self, area: BannerArea, on_user_closed: Callable[[Key], bool]) -> None:
        self.area = area
        # Called when the user closes a state banner; True when that cleared the state behind it
        # (a failed answer's error, once read); otherwise the banner stays closed until reset().
        self._on_user_closed = on_user_closed
        self._shown: dict[Key, Banner] = {}
        self._dismissed: set[Key] = set()
        self._notices: list[tuple[str, Banner]] = []

    # --- state banners ------------------------------------------------------------------------
    def sync(self, specs: Sequence[StateBanner]) -> None:
        """Show exactly these state banners (keeping the ones already up, and their actions)."""
        wanted = {(s.message, s.hint): s for s in specs}
        for key, banner in list(self._shown.items()):
            if key not in wanted:
                del self._shown[key]
                banner.dismiss()
        for key, spec in wanted.items():
            if key not in self._shown and key not in self._dismissed:
                banner = self.area.show_message(spec.message, spec.hint, spec.severity)
                self._shown[key] = banner
                banner.closed.connect(lambda k=key: self._closed(k))

    def reset(self) -> None:
        """A new load or placement: banners the user closed may be shown again if they recur."""
        self._dismissed.clear()

    def _closed(self, key: Key) -> None:
        if self._shown.pop(key, None) is None:
            return  # closed by sync(): its state went
        if not self._on_user_closed(key):
            self._dismissed.add(key)

    # --- notices of a moment ------------------------------------------------------------------
    def notice(self, kind: str, message: str, hint: str = "", severity: str = "info") -> Banner:
        banner = self.area.show_message(message, hint, severity)
        entry = (kind, banner)
        if entry not in self._notices:
            self._notices.append(entry)
            banner.closed.connect(lambda: self._notices.remove(entry) if entry in self._notices else None)
        return banner

    def drop(self, kind: str) -> None:
        for entry in [n for n in self._notices if n[0] == kind]:
            self._notices.remove(entry)
            entry[1].dismiss()

"""The chat's banners, by the rule every view follows (ui.common.widgets.BannerArea): one banner per cause,
the newest replacing the older, gone when its cause is gone.

State banners (model, memory, answer, waiting) are shown while the state that raised them holds (see
ui.chat.state); notices of a moment (input, busy, storage, export) until the moment passes. A state banner
the user closes stays closed until its words change, or a new load starts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ui.chat.state import ChatBanner
from ui.common.widgets import Banner, BannerArea

Key = tuple[str, str]  # (message, hint)


class ChatBanners:
    def __init__(
        self,
        area: BannerArea,
        on_user_closed: Callable[[str], bool],
        actions: Mapping[str, Callable[[], None]],
    ) -> None:
        self.area = area
        # Called with the cause when the user closes a state banner; True when that cleared the state
        # behind it (a failed answer's error, once read); otherwise the banner stays closed until reset().
        self._on_user_closed = on_user_closed
        self._actions = actions  # cause -> what the banner's action button does
        self._shown: dict[str, Key] = {}  # state banners up now: cause -> words
        self._dismissed: dict[str, Key] = {}  # closed by the user: cause -> the words closed

    # --- state banners ------------------------------------------------------------------------
    def sync(self, specs: Sequence[ChatBanner]) -> None:
        """Show exactly these state banners, one per cause (keeping the ones already up, and their actions)."""
        wanted = {spec.cause: spec for spec in specs}
        for cause in [c for c in self._shown if c not in wanted]:
            del self._shown[cause]
            self.area.clear(cause)
        for cause, spec in wanted.items():
            key = (spec.message, spec.hint)
            if self._dismissed.get(cause) == key:
                continue
            if self._shown.get(cause) == key and self.area.banner(cause) is not None:
                continue
            self._shown[cause] = key  # first: the banner this replaces reports its close as not the user's
            banner = self.area.show_message(spec.message, spec.hint, spec.severity, cause=cause)
            action = self._actions.get(cause)
            if spec.action and action is not None:
                banner.add_action(spec.action, action)
            banner.closed.connect(lambda c=cause, k=key: self._closed(c, k))

    def reset(self) -> None:
        """A new load or placement: banners the user closed may be shown again if they recur."""
        self._dismissed.clear()

    def _closed(self, cause: str, key: Key) -> None:
        if self._shown.get(cause) != key:
            return  # replaced or taken away by sync(): not the user's close
        del self._shown[cause]
        if not self._on_user_closed(cause):
            self._dismissed[cause] = key

    # --- notices of a moment ------------------------------------------------------------------
    def notice(self, cause: str, message: str, hint: str = "", severity: str = "info") -> Banner:
        return self.area.show_message(message, hint, severity, cause=cause)

    def notice_error(self, cause: str, error: object) -> Banner:
        return self.area.show_error(error, cause=cause)

    def drop(self, cause: str) -> None:
        self.area.clear(cause)

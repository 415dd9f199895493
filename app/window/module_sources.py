"""Keep PySide6 from holding the source of every module the window process imports.

On its first import PySide6 replaces `__import__`. After each import it asks whether the module's
source mentions PySide6 (to let it opt in with `from __feature__ import ...`) through
`inspect.getsource`, which leaves the whole file in `linecache` for the life of the process: the
window's ~270 modules, 11-13 MB of lines held by an idle app (measured with
tests/bench/bench_memory.py), and clearing the cache later frees nothing (the lines sit between the
modules' own objects). `install()` answers the same question from the module's loader, reading the
file once and keeping nothing: the same answer for every module, no cache.

Imported for its effect, first, by app/gui.py (the window's composition root), before the modules it
checks are imported. Elsewhere (no PySide6, or a PySide6 without that check) it does nothing.
"""

from __future__ import annotations

import logging
import sys
from types import ModuleType

log = logging.getLogger(__name__)

_FEATURE_MODULE = "shibokensupport.feature"  # where PySide6 6.x keeps its __feature__ support


def mentions_pyside(module: ModuleType) -> bool:
    """PySide6's own test (does the module's source contain "PySide6"?), without `linecache`."""
    spec = getattr(module, "__spec__", None)
    get_source = getattr(getattr(spec, "loader", None), "get_source", None)
    if spec is None or get_source is None:
        return False  # built-in or extension module: no source, as inspect.getsource says
    try:
        source = get_source(spec.name)
    except (ImportError, OSError, SyntaxError, UnicodeDecodeError):
        return False
    return isinstance(source, str) and "PySide6" in source


def install() -> bool:
    """Answer PySide6's per-import question with `mentions_pyside`. True when PySide6 asks it."""
    import PySide6  # noqa: F401  (its first import sets up the check replaced here)

    feature = sys.modules.get(_FEATURE_MODULE)
    if feature is None or not callable(getattr(feature, "_mod_uses_pyside", None)):
        log.debug("PySide6 has no per-import source check here; nothing to replace")
        return False
    feature._mod_uses_pyside = mentions_pyside  # type: ignore[attr-defined]
    return True


install()

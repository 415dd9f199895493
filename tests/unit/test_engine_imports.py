"""tools/engine_imports.py points code at the engines' facade: every import form it meets becomes an import of
`engines` that names the very same objects, a second run changes nothing, and what the facade lacks is listed."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "engine_imports.py"

SAMPLE = """
from __future__ import annotations

import engines.runtime.devices
from engines.bench.data import (
    CHAT,
    BenchConfig,
)
from engines.models import trial as trials
from engines.types import DeviceChoice


def listing() -> object:
    from engines.models.library import scan_library as entries
    from engines.models.catalog import find_entry

    return entries, find_entry


def events() -> object:
    from engines.chat import requests as ev

    return ev.Text, ev.Finished


class Text:  # a name of this file's own: the module's `Text` must not take its place
    pass


def server_events() -> object:
    from engines.chat import requests as chat_events

    return chat_events.Text, Text


NAMES = {
    "chat": CHAT,
    "config": BenchConfig,
    "discover": engines.runtime.devices.discover,
    "choice": DeviceChoice,
    "configure": trials.configure,
}
"""


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("engine_imports", TOOL)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"sample_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_import_form_becomes_the_facade_with_the_same_objects(tool: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "sample.py"
    path.write_text(SAMPLE, encoding="utf-8")
    before = _load(path)
    expected = (before.NAMES, before.listing(), before.events(), before.server_events()[0])

    assert tool.main([str(path)]) == 0
    text = path.read_text(encoding="utf-8")
    after = _load(path)

    imports = [
        line.strip() for line in text.splitlines() if line.lstrip().startswith(("from engines", "import engines"))
    ]
    assert all(line.startswith(("from engines import", "import engines")) for line in imports), imports
    assert "import engines.runtime" not in text
    assert "return entries, find_catalog_entry" in text  # renamed where the facade's name is clearer; aliases kept
    assert "configure_trials" in text and "trials." not in text  # a module's names, imported one by one
    assert "engines.Text" in text  # the file's own `Text` keeps its name; the module's is named through engines
    assert (after.NAMES, after.listing(), after.events(), after.server_events()[0]) == expected
    assert after.server_events()[1] is after.Text


def test_a_second_run_changes_nothing(tool: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "sample.py"
    path.write_text(SAMPLE, encoding="utf-8")
    tool.main([str(path)])
    once = path.read_text(encoding="utf-8")
    assert tool.main([str(path), "--check"]) == 0
    tool.main([str(path)])
    assert path.read_text(encoding="utf-8") == once


def test_a_name_the_facade_lacks_is_kept_and_listed(
    tool: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "lacking.py"
    source = textwrap.dedent("""
        def probe() -> object:
            from engines.models.library import check_name, format_bytes

            return check_name, format_bytes
    """)
    path.write_text(source, encoding="utf-8")
    assert tool.main([str(path)]) == 1
    text = path.read_text(encoding="utf-8")
    assert "from engines import format_bytes" in text
    assert "from engines.models.library import check_name" in text
    assert "engines.models.library.check_name" in capsys.readouterr().out


def test_app_and_ui_need_no_rewrite() -> None:
    out = subprocess.run([sys.executable, str(TOOL), "--check"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr

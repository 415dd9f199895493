"""The diagnostics zip tells nothing personal: a bait secret in every user-writable settings field, in the
home folder's and the user's names, in secret-looking environment variables, a conversation title and
log lines, and none of it in anything `npu-studio doctor` writes (app/diagnostics.py,
engines/redaction.py). What the zip holds is said before it is written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from app import diagnostics
from app.storage.settings_schema import SCHEMA
from tests.fixtures.bait import leaks, plant
from tests.reliability.conftest import REPO, Recorder

CATEGORY = "Diagnostics"


def test_the_doctors_zip_holds_no_bait_from_settings_paths_environment_titles_or_logs(
    tmp_path: Path, reliability: Recorder
) -> None:
    baits = plant(tmp_path)
    empty = tmp_path / "no-bundled-models"
    empty.mkdir()
    out = baits.home / "Desktop" / "report"
    env = dict(os.environ, PYTHONPATH=str(REPO), NPU_STUDIO_BUNDLED_MODELS=str(empty), **baits.env)
    result = subprocess.run([sys.executable, "-m", "app", "doctor", "--no-chat", "--out", str(out)], env=env,
                            cwd=REPO, text=True, capture_output=True, timeout=300, check=False)  # fmt: skip
    files = [out / "diagnostics.zip", out / "report.txt", out / "report.json"]
    assert all(f.is_file() for f in files), result.stderr
    found = leaks(baits, files)
    with zipfile.ZipFile(out / "diagnostics.zip") as bundle:
        names = bundle.namelist()
        settings = json.loads(bundle.read("settings.json"))
        log = bundle.read("logs/npu-studio.log").decode("utf-8")
    reliability.record(
        CATEGORY,
        f"doctor with a bait in all {len(SCHEMA)} settings fields, an unknown key, a chat option, the home folder, "
        "the user name, 4 secret environment variables, a conversation title and 7 log lines",
        "no bait in the zip or the reports; what the zip holds printed before it is written",
        f"{len(found)} baits found in {len(names)} zip entries and 2 reports"
        + (f" ({'; '.join(found[:3])})" if found else ""),
    )
    assert found == []
    assert set(SCHEMA) <= set(settings)  # the settings are in, each field redacted or shown
    assert "<secret>" in log and "~" in log and "<redacted>" in log and "<user>" in log
    listing = result.stderr.index("will hold:")
    assert all(line in result.stderr[listing:] for line in diagnostics.contents())
    assert listing < result.stderr.index("Looking for devices")  # said before the checks and the writing


def test_a_settings_value_known_to_be_safe_is_kept_readable(tmp_path: Path, reliability: Recorder) -> None:
    """Redaction keeps what a bug report needs: the theme, the device, switches, numbers, chat options."""
    from app.storage.settings import settings_path

    raw = {"theme": "dark", "device": "npu", "strict": True, "top_k": 3, "chat_options": {"temperature": 0.5},
           "system_prompt": "Tell no one about project Hyacinth.", "classifier": "efficientnet-lite0"}  # fmt: skip
    settings_path().parent.mkdir(parents=True, exist_ok=True)
    settings_path().write_text(json.dumps(raw), encoding="utf-8")
    shown = json.loads(str(diagnostics.attachments()["settings.json"]))
    reliability.record(CATEGORY, "the settings copy in the zip", "closed-set values and numbers shown; text replaced",
                       json.dumps(shown, sort_keys=True))
    assert {k: shown[k] for k in ("theme", "device", "strict", "top_k", "chat_options", "classifier")} == {
        k: raw[k] for k in ("theme", "device", "strict", "top_k", "chat_options", "classifier")}
    assert shown["system_prompt"] == "<redacted, 35 characters>"

"""The payload's own files: the app's packages, the assets and demo models, the icon (rendered from the
SVG in a child process), the launcher stub and payload.json that says what was staged."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from engines.models.manifest import has_manifest
from installer import wix
from installer.buildenv import REPO, BuildError, log

SOURCE_PACKAGES = ("app", "ui", "engines")
ENTRY_FROZEN = "npu-studio.exe"
ENTRY_STUB = "npu-studio.cmd"
# assets/ entries that are build-time only or handled separately
ASSET_EXCLUDES = {"models", "recipes"}


def _ignore_build_junk(directory: str, names: list[str]) -> set[str]:
    return {n for n in names if n in ("__pycache__", ".mypy_cache", ".pytest_cache") or n.endswith(".pyc")}


def copy_sources(dest: Path) -> None:
    for package in SOURCE_PACKAGES:
        shutil.copytree(REPO / package, dest / package, ignore=_ignore_build_junk)


def model_folders(models_dir: Path) -> Iterator[Path]:
    """Finished model folders only: with a manifest, not a recipe's hidden work folder."""
    if not models_dir.is_dir():
        return
    for child in sorted(models_dir.iterdir()):
        if child.is_dir() and not child.name.startswith(".") and has_manifest(child):
            yield child


def copy_assets(dest: Path, models_dir: Path) -> list[str]:
    """Copy assets/ (no recipes) and the finished demo models; returns the model names bundled."""
    source = REPO / "assets"
    dest.mkdir(parents=True, exist_ok=True)
    for child in sorted(source.iterdir()):
        if child.name in ASSET_EXCLUDES or child.name.startswith("."):
            continue
        if child.is_dir():
            shutil.copytree(child, dest / child.name, ignore=_ignore_build_junk)
        else:
            shutil.copy2(child, dest / child.name)
    bundled: list[str] = []
    for folder in model_folders(models_dir):
        shutil.copytree(
            folder,
            dest / "models" / folder.name,
            ignore=lambda _d, names: {n for n in names if n.startswith(".")},
        )
        bundled.append(folder.name)
    return bundled


_RENDER_SVG = """
import sys
from PySide6.QtCore import QByteArray
from PySide6.QtGui import QColor, QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

app = QGuiApplication([])
data = open(sys.argv[1], encoding="utf-8").read().replace("currentColor", "#2563eb")
renderer = QSvgRenderer(QByteArray(data.encode()))
if not renderer.isValid():
    sys.exit(f"{sys.argv[1]} is not a valid SVG")
image = QImage(256, 256, QImage.Format.Format_ARGB32)
image.fill(QColor(0, 0, 0, 0))
painter = QPainter(image)
renderer.render(painter)
painter.end()
sys.exit(0 if image.save(sys.argv[2]) else f"Qt could not write {sys.argv[2]}")
"""


def make_icon(out: Path) -> Path:
    """The product icon (.ico, 16-256 px) rendered from assets/icons/app.svg."""
    svg = REPO / "assets" / "icons" / "app.svg"
    out.parent.mkdir(parents=True, exist_ok=True)
    sizes = [16, 24, 32, 48, 64, 128, 256]
    try:
        from PIL import Image, ImageDraw
    except ImportError as exc:
        raise BuildError("Pillow is needed to write the icon: install the app's dependencies first") from exc

    images: list[Image.Image] = []
    png = out.with_suffix(".png")
    try:
        # Qt renders the SVG in a child process: a QGuiApplication must not outlive this call in the caller
        # (a test run or a build script that uses Qt itself).
        env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
        proc = subprocess.run(
            [sys.executable, "-c", _RENDER_SVG, str(svg), str(png)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        if proc.returncode != 0 or not png.exists():
            raise OSError(proc.stderr.strip()[-500:] or "no image written")
        with Image.open(png) as rendered:
            images = [rendered.convert("RGBA")]
        png.unlink()
    except (ImportError, OSError, ValueError) as exc:
        log(f"icon: rendering {svg.name} with Qt failed ({exc}); drawing a plain icon")
        img = Image.new("RGBA", (256, 256), (0, 0, 0, 0))
        draw = ImageDraw.Draw(img)
        draw.rounded_rectangle((16, 16, 240, 240), radius=48, fill=(37, 99, 235, 255))
        draw.rounded_rectangle((80, 80, 176, 176), radius=16, outline=(255, 255, 255, 255), width=14)
        images = [img]
    images[0].save(out, format="ICO", sizes=[(s, s) for s in sizes])
    return out


def write_launcher_stub(payload: Path, arch: str, python: str) -> None:
    selector = f"-V:{python}-arm64" if arch == "arm64" else f"-{python}"
    stub = (
        "@echo off\r\n"
        f"rem NPU Studio launcher (wheels payload): needs CPython {python} for {arch} on this machine.\r\n"
        "setlocal\r\n"
        'set "NPU_STUDIO_DIR=%~dp0"\r\n'
        "where py >nul 2>nul\r\n"
        "if %errorlevel%==0 (\r\n"
        f'  py {selector} -I "%NPU_STUDIO_DIR%_internal\\launcher.py" %*\r\n'
        ") else (\r\n"
        '  python -I "%NPU_STUDIO_DIR%_internal\\launcher.py" %*\r\n'
        ")\r\n"
        "exit /b %errorlevel%\r\n"
    )
    (payload / ENTRY_STUB).write_bytes(stub.encode("ascii"))


def write_payload_info(payload: Path, info: dict[str, object]) -> None:
    path = payload / wix.PAYLOAD_INFO
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")

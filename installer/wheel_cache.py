"""The Windows wheels of the payload: resolved by installer/resolve.py, downloaded once with
`pip download --platform ... --only-binary=:all:` into the build cache (resolution cached too, so an
offline rebuild needs no network), checked against their hashes, unpacked safely into site-packages,
and checked so that no two wheels write the same file."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

from installer import resolve
from installer import wheels as wheel_records
from installer.buildenv import BuildError, log, sha256_of
from installer.product import ARCH_TO_TARGET

DOWNLOAD_TIMEOUT_S = 1200


def _resolution_cache_path(cache: Path, target: str, python: str, requirements: Sequence[str]) -> Path:
    key = hashlib.sha256("\n".join(requirements).encode()).hexdigest()[:16]
    return cache / "resolutions" / f"{target}-py{python}-{key}.json"


def _load_cached_resolution(path: Path) -> resolve.Resolution | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        packages = [
            resolve.ResolvedPackage(**{**p, "requires_dist": tuple(p.get("requires_dist", ()))})
            for p in data["packages"]
        ]
        return resolve.Resolution(
            target=data["target"],
            python_version=data["python_version"],
            requirements=list(data["requirements"]),
            packages=packages,
            problems=list(data["problems"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _wheel_ok(path: Path, pkg: resolve.ResolvedPackage) -> bool:
    return path.is_file() and (pkg.sha256 is None or sha256_of(path) == pkg.sha256)


def resolve_and_download(
    arch: str, python: str, cache: Path, offline: bool = False
) -> tuple[resolve.Resolution, list[Path]]:
    """Resolve the Windows runtime set for `arch` and return the wheels, downloading only what is missing."""
    target = ARCH_TO_TARGET[arch]
    requirements = resolve.requirements_for(resolve.TARGETS[target], python)
    no_deps = resolve.requirements_for(resolve.TARGETS[target], python, no_deps=True)
    requirements += [f"{r} (--no-deps)" for r in no_deps]
    cached_path = _resolution_cache_path(cache, target, python, requirements)
    wheel_dir = cache / "wheels"
    wheel_dir.mkdir(parents=True, exist_ok=True)
    resolution = _load_cached_resolution(cached_path)
    if resolution is not None and all(_wheel_ok(wheel_dir / p.filename, p) for p in resolution.packages):
        log(f"using the cached resolution and wheels for {target} (python {python})")
        return resolution, [wheel_dir / p.filename for p in resolution.packages]
    if offline:
        raise BuildError(
            f"--offline: no complete cached resolution for {target} (python {python}) in {cache}; "
            "run one build with network access first"
        )
    try:
        resolution = resolve.resolve(target, python)
    except resolve.ResolutionError as exc:
        raise BuildError(str(exc)) from exc
    if not resolution.ok:
        raise BuildError(f"{target} resolves to a broken runtime set: {'; '.join(resolution.problems)}")
    missing = [p for p in resolution.packages if not _wheel_ok(wheel_dir / p.filename, p)]
    if missing:
        log(f"downloading {len(missing)} wheel(s) for {target} into {wheel_dir}")
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            *(a for plat in resolve.TARGETS[target].pip_platforms for a in ("--platform", plat)),
            "--python-version",
            python,
            "--implementation",
            "cp",
            "--dest",
            str(wheel_dir),
            "--quiet",
            "--disable-pip-version-check",
            *(f"{p.name}=={p.version}" for p in missing),
        ]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=DOWNLOAD_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise BuildError(f"pip download for {target} did not finish in {DOWNLOAD_TIMEOUT_S} s") from exc
        if proc.returncode != 0:
            raise BuildError(f"pip download failed for {target}: {proc.stderr.strip()[-1500:]}")
    bad = [p.filename for p in resolution.packages if not _wheel_ok(wheel_dir / p.filename, p)]
    if bad:
        raise BuildError(f"downloaded wheels missing or with a wrong sha256: {', '.join(bad)}")
    cached_path.parent.mkdir(parents=True, exist_ok=True)
    cached_path.write_text(json.dumps(resolution.to_json(), indent=2), encoding="utf-8")
    return resolution, [wheel_dir / p.filename for p in resolution.packages]


def unpack_wheel(wheel: Path, site_packages: Path, prefix: Path) -> int:
    """Install a wheel's files the way an installer would (purelib/platlib/data), without running code.

    Scripts and headers are left out: the app starts through its own launcher. Returns the file count.
    """
    count = 0
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            parts = info.filename.split("/")
            if any(part in ("", "..") for part in parts) or info.filename.startswith("/") or ":" in parts[0]:
                raise BuildError(f"{wheel.name} holds an unsafe path: {info.filename}")
            dest_root = site_packages
            if parts[0].endswith(".data") and len(parts) > 2:
                scheme, parts = parts[1], parts[2:]
                if scheme in ("purelib", "platlib"):
                    dest_root = site_packages
                elif scheme == "data":
                    dest_root = prefix
                else:  # scripts, headers
                    continue
            dest = dest_root.joinpath(*parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, dest.open("wb") as out:
                shutil.copyfileobj(src, out)
            count += 1
    return count


def check_one_writer_per_file(wheel_files: Sequence[Path]) -> None:
    """Refuse a payload in which two wheels write the same file (above all, two ONNX Runtimes writing
    `onnxruntime/`): unpacked in order, the last one would silently win."""
    records = [wheel_records.read_record(w) for w in wheel_files]
    ort_writers = wheel_records.writers_of(records, "onnxruntime")
    if len(ort_writers) != 1:
        raise BuildError(f"exactly one wheel must write onnxruntime/, got {len(ort_writers)}: {', '.join(ort_writers)}")
    shared = wheel_records.collisions(records)
    if shared:
        sample = "; ".join(f"{path} ({', '.join(dists)})" for path, dists in list(shared.items())[:5])
        raise BuildError(f"{len(shared)} file(s) would be written by more than one wheel: {sample}")

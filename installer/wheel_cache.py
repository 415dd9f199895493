"""The Windows wheels of the payload: exactly the lock's (lock/win_*.txt), downloaded once with
`pip download --require-hashes --platform ... --only-binary=:all:` into the build cache (so a rebuild, or
one with --offline, needs no network), each checked against the lock's sha256, unpacked safely into
site-packages, and checked so that no two wheels write the same file."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from packaging import tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

from installer import lockfile, resolve, targets
from installer import wheels as wheel_records
from installer.buildenv import BuildError, log, sha256_of
from installer.product import ARCH_TO_TARGET

DOWNLOAD_TIMEOUT_S = 1200


def _supported_tags(target: targets.Target, python: str) -> set[tags.Tag]:
    version = tuple(int(part) for part in python.split(".")[:2])
    abi = f"cp{version[0]}{version[1]}"
    return {
        *tags.cpython_tags(version, platforms=target.pip_platforms),
        *tags.compatible_tags(version, abi, platforms=target.pip_platforms),
    }


def _cached_wheel(
    wheel_dir: Path, pkg: lockfile.LockedPackage, supported: set[tags.Tag]
) -> tuple[Path, str] | None:
    """The wheel of `pkg` in the cache that installs on the target and whose sha256 the lock lists (with it)."""
    for path in sorted(wheel_dir.glob("*.whl")):
        try:
            name, version, _build, wheel_tags = parse_wheel_filename(path.name)
        except InvalidWheelFilename:
            continue
        if name == pkg.name and version == Version(pkg.version) and wheel_tags & supported:
            digest = sha256_of(path)
            if digest in pkg.hashes:
                return path, digest
    return None


def download_locked(
    arch: str, python: str, cache: Path, offline: bool = False
) -> tuple[resolve.Resolution, list[Path]]:
    """The Windows runtime set for `arch`, exactly as lock/ has it: one wheel per locked package, each
    checked against the lock's sha256, downloaded into the cache only when it is not there yet."""
    target = ARCH_TO_TARGET[arch]
    tgt = targets.TARGETS[target]
    try:
        lock = lockfile.lock_for(target, python)
        main, no_deps = lockfile.read_lock(lock)
    except lockfile.LockError as exc:
        raise BuildError(str(exc)) from exc
    stale = lockfile.problems(lock)
    if stale:
        raise BuildError(f"lock/{lock.main_file.name} no longer fits pyproject.toml ({'; '.join(stale)}): "
                         "run `python installer/lock.py`")
    wheel_dir = cache / "wheels"
    wheel_dir.mkdir(parents=True, exist_ok=True)
    supported = _supported_tags(tgt, python)
    plan = [(pkg, False) for pkg in main] + [(pkg, True) for pkg in no_deps]
    found = {pkg.name: _cached_wheel(wheel_dir, pkg, supported) for pkg, _ in plan}
    missing = [pkg for pkg, _ in plan if found[pkg.name] is None]
    if missing and offline:
        raise BuildError(
            f"--offline: {len(missing)} locked wheel(s) for {target} are not in {wheel_dir} "
            f"({', '.join(p.name for p in missing[:5])}); run one build with network access first"
        )
    if missing:
        log(f"downloading {len(missing)} locked wheel(s) for {target} into {wheel_dir}")
        _download(tgt, python, missing, wheel_dir)
        found.update({pkg.name: _cached_wheel(wheel_dir, pkg, supported) for pkg in missing})
    bad = sorted(pkg.name for pkg, _ in plan if found[pkg.name] is None)
    if bad:
        raise BuildError(f"no wheel with a locked sha256 for {target}: {', '.join(bad)}")
    packages = []
    for pkg, is_no_deps in plan:
        hit = found[pkg.name]
        assert hit is not None
        packages.append(resolve.ResolvedPackage(pkg.name, pkg.version, hit[0].name, "", hit[1], no_deps=is_no_deps))
    packages.sort(key=lambda p: p.name)
    resolution = resolve.Resolution(
        target=target,
        python_version=python,
        requirements=[f"{p.name}=={p.version}" + (" (--no-deps)" if p.no_deps else "") for p in packages],
        packages=packages,
        problems=resolve.check_packages(tgt, packages, python),
    )
    if not resolution.ok:
        raise BuildError(f"lock/{lock.main_file.name} is a broken runtime set: {'; '.join(resolution.problems)}")
    return resolution, [wheel_dir / p.filename for p in packages]


def _download(tgt: targets.Target, python: str, packages: Sequence[lockfile.LockedPackage], wheel_dir: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="npu-studio-download-") as tmp:
        requirements = Path(tmp) / "requirements.txt"
        requirements.write_text("".join(p.line() + "\n" for p in packages), encoding="utf-8")
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--require-hashes",
            "--only-binary=:all:",
            *(a for plat in tgt.pip_platforms for a in ("--platform", plat)),
            "--python-version",
            python,
            "--implementation",
            "cp",
            "--dest",
            str(wheel_dir),
            "--quiet",
            "--disable-pip-version-check",
            "-r",
            str(requirements),
        ]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=DOWNLOAD_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise BuildError(f"pip download for {tgt.name} did not finish in {DOWNLOAD_TIMEOUT_S} s") from exc
    if proc.returncode != 0:
        raise BuildError(f"pip download failed for {tgt.name}: {proc.stderr.strip()[-1500:]}")


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

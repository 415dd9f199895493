"""The locked environments: one per platform, exact versions and sha256 hashes of every package (lock/).

Plain reading and checking, no network: which lock files exist and what each must contain
(`LOCKS`), a strict reader of their requirements format (`read`), whether a lock still satisfies
pyproject.toml (`problems`), and how an installed environment differs from its lock (`differences`).
installer/lock.py writes the files (with uv); setup.sh, the MSI build and the benchmarks read them.
"""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from installer.targets import TARGETS

REPO = Path(__file__).resolve().parent.parent
LOCK_DIR = REPO / "lock"
PYPROJECT = REPO / "pyproject.toml"
PROJECT = "npu-studio"


class LockError(ValueError):
    """A lock file that cannot be read, or that is missing."""


@dataclass(frozen=True)
class LockTarget:
    """One locked environment: what it is for and which of pyproject.toml's requirements it holds."""

    name: str  # file stem, e.g. "linux_x86_64-py3.11"
    target: str  # key of installer.targets.TARGETS (the marker environment)
    python: str
    uv_platform: str  # uv's --python-platform
    extras: tuple[str, ...]
    # [tool.npu-studio] lists installed with --no-deps (their own file: their declared dependencies are not)
    no_deps_keys: tuple[str, ...]
    # lock/*.in files of tools the set-up itself installs (pip, the build backend of the editable install)
    tool_inputs: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()  # where a locked build that is not on the index lies (torch's CPU build)
    folder: Path = LOCK_DIR

    @property
    def main_file(self) -> Path:
        return self.folder / f"{self.name}.txt"

    @property
    def no_deps_file(self) -> Path:
        return self.folder / f"{self.name}.no-deps.txt"

    @property
    def constraints_file(self) -> Path:
        return self.folder / "constraints.txt"


LOCKS: dict[str, LockTarget] = {
    # Development and CI: the app, its tests and the demo-model recipes.
    "linux_x86_64-py3.11": LockTarget(
        name="linux_x86_64-py3.11",
        target="linux_x86_64",
        python="3.11",
        uv_platform="x86_64-manylinux_2_34",  # PySide6 6.11+ needs glibc >= 2.34
        extras=("dev", "recipes", "downloads"),
        no_deps_keys=("no-deps-dependencies", "recipes-no-deps"),
        tool_inputs=("setup-tools.in",),
        find_links=("/opt/wheels",),
    ),
    # What the MSIs ship (installer/build.py): the runtime set and catalog downloads.
    "win_arm64-py3.12": LockTarget(
        name="win_arm64-py3.12",
        target="win_arm64",
        python="3.12",
        uv_platform="aarch64-pc-windows-msvc",
        extras=("downloads",),
        no_deps_keys=("no-deps-dependencies",),
    ),
    "win_amd64-py3.12": LockTarget(
        name="win_amd64-py3.12",
        target="win_amd64",
        python="3.12",
        uv_platform="x86_64-pc-windows-msvc",
        extras=("downloads",),
        no_deps_keys=("no-deps-dependencies",),
    ),
}


def lock_for(target: str, python: str) -> LockTarget:
    """The lock of `target` (installer.targets name) for Python `python` (major.minor)."""
    for lock in LOCKS.values():
        if lock.target == target and lock.python == python:
            return lock
    have = ", ".join(sorted(LOCKS))
    raise LockError(f"no lock for {target} with Python {python} (locks: {have}); add one to installer/lockfile.py")


def running_lock() -> LockTarget | None:
    """The lock of the running interpreter's platform, if there is one."""
    import platform

    machine = platform.machine().lower()
    target = {
        ("linux", "x86_64"): "linux_x86_64",
        ("win32", "arm64"): "win_arm64",
        ("win32", "amd64"): "win_amd64",
    }.get((sys.platform, machine))
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    return next((lk for lk in LOCKS.values() if lk.target == target and lk.python == python), None)


# ---- reading ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LockedPackage:
    name: str  # canonical
    version: str
    hashes: tuple[str, ...]  # sha256 hex digests of the files that may be installed

    def line(self) -> str:
        """The package as a requirements line pip installs with --require-hashes."""
        return " ".join([f"{self.name}=={self.version}", *(f"--hash=sha256:{h}" for h in self.hashes)])


_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[A-Za-z0-9.+!_-]+)$")
_HASH = re.compile(r"^--hash=sha256:(?P<digest>[0-9a-f]{64})$")


def read(path: Path) -> list[LockedPackage]:
    """The packages of one lock file. Only `name==version` pins followed by their hashes are accepted:
    an unpinned line, a URL, an editable, a marker or an option is an error (pip would install it
    unlocked or differently on another machine)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        reason = exc.strerror or exc
        raise LockError(f"{path.name}: cannot be read ({reason}); write it with installer/lock.py") from exc
    logical: list[tuple[int, str]] = []
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        pending += line
        if pending.strip():
            logical.append((start, pending.strip()))
        pending = ""
    if pending.strip():
        raise LockError(f"{path.name}:{start}: the file ends inside a continued line")
    packages: list[LockedPackage] = []
    seen: set[str] = set()
    for number, line in logical:
        pin, *options = line.split()
        match = _PIN.match(pin)
        if match is None:
            raise LockError(f"{path.name}:{number}: not an exact pin (name==version): {pin}")
        hashes = []
        for option in options:
            digest = _HASH.match(option)
            if digest is None:
                raise LockError(f"{path.name}:{number}: only --hash=sha256:<64 hex digits> may follow a pin: {option}")
            hashes.append(digest["digest"])
        name = canonicalize_name(match["name"])
        if name in seen:
            raise LockError(f"{path.name}:{number}: {name} is locked twice")
        seen.add(name)
        packages.append(LockedPackage(name, match["version"], tuple(hashes)))
    return packages


def read_lock(lock: LockTarget) -> tuple[list[LockedPackage], list[LockedPackage]]:
    """(main packages, no-deps packages) of a lock; a lock with no no-deps requirements has no such file."""
    main = read(lock.main_file)
    no_deps = read(lock.no_deps_file) if lock.no_deps_file.exists() else []
    return main, no_deps


# ---- what a lock must hold ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Needed:
    requirement: Requirement  # marker removed
    source: str  # where it is declared, for messages
    no_deps: bool


def _marker_holds(req: Requirement, target: str, python: str) -> bool:
    env = TARGETS[target].marker_environment(python)
    env["extra"] = ""
    return req.marker is None or req.marker.evaluate(env)


def _requirements(lines: Iterable[str], source: str) -> list[tuple[Requirement, str]]:
    out = []
    for line in lines:
        try:
            out.append((Requirement(line), source))
        except InvalidRequirement as exc:
            raise LockError(f"{source}: {line!r} is not a requirement: {exc}") from exc
    return out


def _input_file_lines(path: Path) -> list[str]:
    lines = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            lines.append(line)
    return lines


def needed(lock: LockTarget, pyproject: Path = PYPROJECT) -> list[Needed]:
    """Every requirement the lock must satisfy on its platform: the project's dependencies, its extras, the
    no-deps lists, the set-up tools and the constraints (lock/constraints.txt), markers evaluated there."""
    with pyproject.open("rb") as fh:
        data = tomllib.load(fh)
    project = data["project"]
    optional = project.get("optional-dependencies", {})
    tool = data.get("tool", {}).get("npu-studio", {})
    main: list[tuple[Requirement, str]] = _requirements(project.get("dependencies", []), "[project] dependencies")
    for extra in lock.extras:
        if extra not in optional:
            raise LockError(f"pyproject.toml has no extra {extra!r} (installer/lockfile.py locks it)")
        main += _requirements(optional[extra], f"extra {extra!r}")
    if lock.tool_inputs:
        main += _requirements(data.get("build-system", {}).get("requires", []), "[build-system] requires")
        for name in lock.tool_inputs:
            main += _requirements(_input_file_lines(lock.folder / name), f"lock/{name}")
    no_deps = [
        item for key in lock.no_deps_keys for item in _requirements(tool.get(key, []), f"[tool.npu-studio] {key}")
    ]
    out: list[Needed] = []
    for items, is_no_deps in ((main, False), (no_deps, True)):
        for req, source in items:
            if _marker_holds(req, lock.target, lock.python):
                plain = Requirement(str(req))
                plain.marker = None
                out.append(Needed(plain, source, is_no_deps))
    return out


def constraints(lock: LockTarget) -> list[Requirement]:
    """The version choices of lock/constraints.txt that apply on the lock's platform."""
    out = []
    for req, _source in _requirements(_input_file_lines(lock.constraints_file), "lock/constraints.txt"):
        if _marker_holds(req, lock.target, lock.python):
            req.marker = None
            out.append(req)
    return out


def problems(lock: LockTarget, pyproject: Path = PYPROJECT) -> list[str]:
    """What is wrong with a lock (empty list = it satisfies pyproject.toml on its platform)."""
    try:
        main, no_deps = read_lock(lock)
    except LockError as exc:
        return [str(exc)]
    found: list[str] = []
    for pkg in [*main, *no_deps]:
        if not pkg.hashes:
            found.append(f"{lock.name}: {pkg.name} {pkg.version} has no sha256 hash")
    in_main = {p.name: p for p in main}
    in_no_deps = {p.name: p for p in no_deps}
    for name in sorted(in_main.keys() & in_no_deps.keys()):
        found.append(f"{lock.name}: {name} is locked both with and without its dependencies")
    for item in needed(lock, pyproject):
        name = canonicalize_name(item.requirement.name)
        table, where = (in_no_deps, "no-deps lock") if item.no_deps else (in_main, "lock")
        have = table.get(name)
        if have is None:
            found.append(f"{lock.name}: {item.requirement} ({item.source}) is not in the {where}")
        elif item.requirement.specifier and not item.requirement.specifier.contains(have.version, prereleases=True):
            found.append(f"{lock.name}: {item.requirement} ({item.source}) but the {where} has {have.version}")
    for req in constraints(lock):
        chosen = in_main.get(canonicalize_name(req.name)) or in_no_deps.get(canonicalize_name(req.name))
        if chosen is not None and not req.specifier.contains(chosen.version, prereleases=True):
            found.append(f"{lock.name}: lock/constraints.txt asks {req} but the lock has {chosen.version}")
    if lock.target.startswith("win"):
        from installer import resolve  # one ONNX Runtime build, the expected plugins, nothing forbidden

        packages = [
            resolve.ResolvedPackage(p.name, p.version, "", "", p.hashes[0] if p.hashes else None)
            for p in [*main, *no_deps]
        ]
        found += [f"{lock.name}: {p}" for p in resolve.check_packages(TARGETS[lock.target], packages, lock.python)]
    return found


# ---- an installed environment against its lock --------------------------------------------------------------------


def installed_versions() -> dict[str, str]:
    """Canonical name -> version of every distribution the running interpreter sees."""
    from importlib import metadata

    out: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            out.setdefault(canonicalize_name(name), dist.version)
    return out


def differences(lock: LockTarget, installed: Mapping[str, str], *, extras: bool = True) -> list[str]:
    """How `installed` differs from the lock: a package missing, at another version, or (with `extras`) not
    in the lock at all."""
    main, no_deps = read_lock(lock)
    locked = {p.name: p.version for p in [*main, *no_deps]}
    out = []
    for name, version in sorted(locked.items()):
        have = installed.get(name)
        if have is None:
            out.append(f"{name} {version} is locked but not installed")
        elif have != version:
            out.append(f"{name} is {have}, the lock has {version}")
    for name in sorted(installed.keys() - locked.keys() - {PROJECT}) if extras else ():
        out.append(f"{name} {installed[name]} is installed but not in the lock")
    return out

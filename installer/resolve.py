"""Per-platform dependency resolution check: every target gets exactly one ONNX Runtime build.

pip's `--platform` changes which wheels it accepts, *not* how environment markers are evaluated (they
are evaluated against the running interpreter). So this module evaluates the markers of the project's
dependencies itself, for each target's marker environment, and hands the resulting plain requirement
list to `pip install --dry-run --ignore-installed --only-binary=:all: --platform P --python-version V
--target T --report R.json`. The JSON report is then checked against what each target must contain.

    python installer/resolve.py            # a table per platform
    python installer/resolve.py --json     # the same as JSON
    python installer/resolve.py --python-version 3.11 --target win_arm64

`installer/build.py` reuses `resolve()` to download and stage the Windows wheels.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import ssl
import subprocess
import sys
import tempfile
import tomllib
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from installer.targets import (
    GENAI_BUILDS,
    INFO_PYTHONS,
    ORT_IMPORT_NAME,
    QNN_PLUGIN,
    QNN_PLUGIN_SPEC,
    REQUIRED_PYTHONS,
    TARGETS,
    WHOLE_ORT_BUILDS,
    Target,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = REPO_ROOT / "pyproject.toml"
DEFAULT_INDEX_URL = "https://pypi.org/simple/"
DEFAULT_PYTHON_VERSION = "3.12"


class ResolutionError(Exception):
    """pip could not resolve a target. `registry_unreachable` says whether the index was down."""

    def __init__(self, message: str, *, registry_unreachable: bool = False) -> None:
        super().__init__(message)
        self.registry_unreachable = registry_unreachable


@dataclass(frozen=True)
class ResolvedPackage:
    name: str  # canonical name
    version: str
    filename: str
    url: str
    sha256: str | None
    no_deps: bool = False  # installed with --no-deps (its declared dependencies are checked, not installed)
    requires_dist: tuple[str, ...] = ()  # only kept for no-deps packages


@dataclass
class Resolution:
    target: str
    python_version: str
    requirements: list[str]
    packages: list[ResolvedPackage]
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def versions(self) -> dict[str, str]:
        return {p.name: p.version for p in self.packages}

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["ok"] = self.ok
        return data


# Extras the installed app ships with: catalog downloads work from the MSI when the user allows them.
SHIPPED_EXTRAS = ("downloads",)


def load_dependencies(pyproject: Path = PYPROJECT, extras: tuple[str, ...] = SHIPPED_EXTRAS) -> list[Requirement]:
    with pyproject.open("rb") as fh:
        data = tomllib.load(fh)
    project = data["project"]
    optional = project.get("optional-dependencies", {})
    lines = list(project["dependencies"]) + [line for extra in extras for line in optional.get(extra, [])]
    return [Requirement(line) for line in lines]


def load_no_deps(pyproject: Path = PYPROJECT) -> list[Requirement]:
    """`[tool.npu-studio] no-deps-dependencies`: installed with --no-deps after the dependencies."""
    with pyproject.open("rb") as fh:
        data = tomllib.load(fh)
    lines = data.get("tool", {}).get("npu-studio", {}).get("no-deps-dependencies", [])
    return [Requirement(line) for line in lines]


def load_unused(pyproject: Path = PYPROJECT) -> dict[str, frozenset[str]]:
    """`[tool.npu-studio] no-deps-unused`: requirements a no-deps package declares but never imports."""
    with pyproject.open("rb") as fh:
        data = tomllib.load(fh)
    table = data.get("tool", {}).get("npu-studio", {}).get("no-deps-unused", {})
    return {canonicalize_name(k): frozenset(canonicalize_name(n) for n in v) for k, v in table.items()}


def project_version(pyproject: Path = PYPROJECT) -> str:
    with pyproject.open("rb") as fh:
        return str(tomllib.load(fh)["project"]["version"])


def requirements_for(
    target: Target, python_version: str, pyproject: Path = PYPROJECT, *, no_deps: bool = False
) -> list[str]:
    """The project's dependencies (or, with `no_deps`, its no-deps dependencies) whose markers hold on
    `target`, with the markers removed."""
    env = target.marker_environment(python_version)
    env["extra"] = ""
    out: list[str] = []
    for req in load_no_deps(pyproject) if no_deps else load_dependencies(pyproject):
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        plain = Requirement(str(req))
        plain.marker = None
        out.append(str(plain))
    return out


def index_url() -> str:
    """The index pip uses here (PIP_INDEX_URL, pip config, or PyPI)."""
    env = os.environ.get("PIP_INDEX_URL")
    if env:
        return env
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "config", "get", "global.index-url"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return DEFAULT_INDEX_URL
    value = proc.stdout.strip()
    return value if proc.returncode == 0 and value else DEFAULT_INDEX_URL


def registry_reachable(url: str | None = None, timeout: float = 15.0) -> tuple[bool, str]:
    """Whether the package index answers at all (any HTTP status counts as reachable)."""
    base = (url or index_url()).rstrip("/") + "/"
    probe = base + "pip/"
    cafile = os.environ.get("PIP_CERT") or None
    context = ssl.create_default_context(cafile=cafile) if cafile and Path(cafile).exists() else None
    try:
        with urllib.request.urlopen(probe, timeout=timeout, context=context) as response:
            return True, f"{probe} answered HTTP {response.status}"
    except urllib.error.HTTPError as exc:  # an answer, even if an error page
        return True, f"{probe} answered HTTP {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return False, f"package index {base} cannot be reached: {reason}"


_NETWORK_ERROR = re.compile(
    r"NewConnectionError|Max retries exceeded|Temporary failure in name resolution|Name or service not known"
    r"|Network is unreachable|Connection refused|ConnectTimeoutError|ReadTimeoutError|Failed to establish",
    re.IGNORECASE,
)


def pip_command(
    target: Target,
    python_version: str,
    requirements: Sequence[str],
    report: Path,
    target_dir: Path,
    no_deps: bool = False,
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--dry-run",
        "--ignore-installed",
        "--only-binary=:all:",
        *(arg for plat in target.pip_platforms for arg in ("--platform", plat)),
        "--python-version",
        python_version,
        "--implementation",
        "cp",
        "--target",
        str(target_dir),
        "--report",
        str(report),
        "--quiet",
        "--disable-pip-version-check",
        *(["--no-deps"] if no_deps else []),
        *requirements,
    ]


def parse_report(report: Mapping[str, object], no_deps: bool = False) -> list[ResolvedPackage]:
    packages: list[ResolvedPackage] = []
    installs = report.get("install", [])
    assert isinstance(installs, list)
    for item in installs:
        meta = item["metadata"]
        info = item.get("download_info", {})
        url = str(info.get("url", ""))
        hashes = info.get("archive_info", {}).get("hashes", {})
        packages.append(
            ResolvedPackage(
                name=canonicalize_name(meta["name"]),
                version=str(meta["version"]),
                filename=url.rsplit("/", 1)[-1].split("#", 1)[0],
                url=url,
                sha256=hashes.get("sha256"),
                no_deps=no_deps,
                requires_dist=tuple(str(r) for r in meta.get("requires_dist", []) or ()) if no_deps else (),
            )
        )
    return sorted(packages, key=lambda p: p.name)


def unmet_requirements(
    target: Target,
    python_version: str,
    packages: Sequence[ResolvedPackage],
    unused: Mapping[str, frozenset[str]] | None = None,
) -> list[str]:
    """What the no-deps packages declare and the resolved set does not give them.

    A requirement on `onnxruntime` is met by the one whole ORT build, whatever its distribution name
    (onnxruntime-windowsml installs the same `onnxruntime` package)."""
    env = target.marker_environment(python_version)
    env["extra"] = ""
    versions = {p.name: p.version for p in packages}
    ort = [p for p in packages if p.name in WHOLE_ORT_BUILDS]
    skip = load_unused() if unused is None else unused
    problems: list[str] = []
    for pkg in packages:
        for line in pkg.requires_dist:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            name = canonicalize_name(req.name)
            if name in skip.get(pkg.name, frozenset()):
                continue
            if name == ORT_IMPORT_NAME and len(ort) == 1:
                have: str | None = ort[0].version
                given_by = ort[0].name
            else:
                have, given_by = versions.get(name), name
            if have is None:
                problems.append(f"{pkg.name} {pkg.version} needs {req} and nothing in the set provides it")
            elif req.specifier and not req.specifier.contains(have, prereleases=True):
                problems.append(f"{pkg.name} {pkg.version} needs {req}; {given_by} {have} does not satisfy it")
    return problems


def check_packages(
    target: Target,
    packages: Sequence[ResolvedPackage],
    python_version: str = DEFAULT_PYTHON_VERSION,
    unused: Mapping[str, frozenset[str]] | None = None,
) -> list[str]:
    """What is wrong with a resolved set for `target` (empty list = fine)."""
    versions = {p.name: p.version for p in packages}
    problems: list[str] = []
    ort = sorted(name for name in versions if name in WHOLE_ORT_BUILDS)
    if QNN_PLUGIN in versions and versions[QNN_PLUGIN] not in QNN_PLUGIN_SPEC:
        ort.append(f"{QNN_PLUGIN} {versions[QNN_PLUGIN]} (1.x is a whole ORT build)")
    if len(ort) != 1:
        problems.append(f"expected exactly one ONNX Runtime build, got {len(ort)}: {', '.join(ort) or 'none'}")
    genai = sorted(name for name in versions if name in GENAI_BUILDS)
    if len(genai) != 1:
        problems.append(f"expected exactly one onnxruntime-genai build, got {', '.join(genai) or 'none'}")
    for name in sorted(target.forbidden & versions.keys()):
        problems.append(f"{name} must not be installed on {target.name}")
    for name, spec in target.expected.items():
        if name not in versions:
            problems.append(f"{name} is missing")
        elif spec and not SpecifierSet(spec).contains(versions[name], prereleases=True):
            problems.append(f"{name} {versions[name]} does not satisfy {spec}")
    problems.extend(unmet_requirements(target, python_version, packages, unused))
    return problems


def _dry_run(tgt: Target, python_version: str, requirements: list[str], timeout: float, no_deps: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="npu-studio-resolve-") as tmp:
        report_path = Path(tmp) / "report.json"
        cmd = pip_command(tgt, python_version, requirements, report_path, Path(tmp) / "target", no_deps)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            reachable, why = registry_reachable()
            raise ResolutionError(
                f"pip did not finish resolving {tgt.name} in {timeout:.0f} s" + ("" if reachable else f" ({why})"),
                registry_unreachable=not reachable,
            ) from exc
        if proc.returncode != 0 or not report_path.exists():
            stderr = "\n".join(line for line in proc.stderr.splitlines() if "is ignored" not in line)
            reachable, why = registry_reachable()
            unreachable = not reachable or (
                bool(_NETWORK_ERROR.search(stderr)) and "No matching distribution" not in stderr
            )
            detail = why if not reachable else stderr.strip()[-2000:]
            raise ResolutionError(
                f"pip could not resolve {tgt.name} (python {python_version}): {detail}",
                registry_unreachable=unreachable,
            )
        data: dict = json.loads(report_path.read_text(encoding="utf-8"))
        return data


def resolve(
    target: Target | str,
    python_version: str = DEFAULT_PYTHON_VERSION,
    pyproject: Path = PYPROJECT,
    timeout: float = 600.0,
) -> Resolution:
    """Resolve `target` with pip's dry-run and check the result. Raises ResolutionError when pip fails.

    The no-deps dependencies are resolved on their own with --no-deps (as they are installed) and their
    declared dependencies checked against the main set."""
    tgt = TARGETS[target] if isinstance(target, str) else target
    requirements = requirements_for(tgt, python_version, pyproject)
    packages = parse_report(_dry_run(tgt, python_version, requirements, timeout, no_deps=False))
    extra = requirements_for(tgt, python_version, pyproject, no_deps=True)
    if extra:
        main_names = {p.name for p in packages}
        for pkg in parse_report(_dry_run(tgt, python_version, extra, timeout, no_deps=True), no_deps=True):
            if pkg.name not in main_names:
                packages.append(pkg)
        packages.sort(key=lambda p: p.name)
    return Resolution(
        target=tgt.name,
        python_version=python_version,
        requirements=requirements + [f"{r} (--no-deps)" for r in extra],
        packages=packages,
        problems=check_packages(tgt, packages, python_version, load_unused(pyproject)),
    )


def _format_table(res: Resolution) -> str:
    lines = [f"{res.target} (python {res.python_version}): {'OK' if res.ok else 'FAILED'}"]
    width = max((len(p.name) for p in res.packages), default=10)
    for pkg in res.packages:
        mark = "*" if pkg.name in WHOLE_ORT_BUILDS | GENAI_BUILDS | {QNN_PLUGIN} else " "
        how = "  (--no-deps)" if pkg.no_deps else ""
        lines.append(f"  {mark} {pkg.name:<{width}}  {pkg.version:<22} {pkg.filename}{how}")
    lines.extend(f"  problem: {problem}" for problem in res.problems)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print the resolutions as JSON")
    parser.add_argument("--target", action="append", choices=sorted(TARGETS), help="limit to these targets")
    parser.add_argument(
        "--python-version", action="append", help="python versions to check (default: required + informational)"
    )
    args = parser.parse_args(argv)
    plan: list[tuple[str, str, bool]] = []  # (target, python, required)
    for name in args.target or list(TARGETS):
        if args.python_version:
            plan.extend((name, version, True) for version in args.python_version)
        else:
            plan.extend((name, version, True) for version in REQUIRED_PYTHONS[name])
            plan.extend((name, version, False) for version in INFO_PYTHONS.get(name, ()))
    results: list[tuple[Resolution, bool]] = []
    errors: list[str] = []
    notes: list[str] = []
    for name, version, required in plan:
        try:
            res = resolve(name, version)
        except ResolutionError as exc:
            if exc.registry_unreachable:
                print(f"resolve: {exc}", file=sys.stderr)
                return 3
            (errors if required else notes).append(str(exc))
            continue
        results.append((res, required))
        if not required and not res.ok:
            notes.append(f"{name} (python {version}): {'; '.join(res.problems)}")
    failed = bool(errors) or any(required and not res.ok for res, required in results)
    if args.json:
        json.dump(
            {
                "host": platform.platform(),
                "ok": not failed,
                "resolutions": [{**res.to_json(), "required": required} for res, required in results],
                "errors": errors,
                "notes": notes,
            },
            sys.stdout,
            indent=2,
        )
        sys.stdout.write("\n")
    else:
        for res, required in results:
            print(_format_table(res).replace(":", " (informational):", 1) if not required else _format_table(res))
            print()
        for error in errors:
            print(f"error: {error}")
        for note in notes:
            print(f"note (informational, does not fail the check): {note}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

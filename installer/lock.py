"""Write the lock files (lock/) from pyproject.toml with uv, or check them.

    .venv/bin/python installer/lock.py                        # re-lock every platform, keeping pins that still fit
    .venv/bin/python installer/lock.py --upgrade              # the newest releases the ranges and constraints allow
    .venv/bin/python installer/lock.py --upgrade-package numpy
    .venv/bin/python installer/lock.py --check                # offline: every lock satisfies pyproject.toml
    .venv/bin/python installer/lock.py --env                  # this environment against its lock (1 if it differs)

One lock per platform (installer/lockfile.py LOCKS): Linux x86_64 / Python 3.11 for development and CI (the
runtime, `dev`, `recipes` and `downloads`), and win_arm64 / win_amd64 / Python 3.12 for what the MSIs ship
(the runtime and `downloads`). Each is `uv pip compile --generate-hashes --only-binary :all:` for that
platform, with the version choices of lock/constraints.txt; the requirements installed with `--no-deps`
(`[tool.npu-studio]` no-deps lists) get a file of their own, resolved without their dependencies.
uv resolves for another platform than the one it runs on (markers and wheel tags of win_arm64 from Linux),
which pip-tools cannot: it resolves for the interpreter that runs it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from installer.lockfile import (
    LOCKS,
    PROJECT,
    PYPROJECT,
    REPO,
    LockTarget,
    differences,
    installed_versions,
    problems,
    running_lock,
)

COMMAND = "python installer/lock.py"


def uv_binary() -> str:
    try:
        from uv import find_uv_bin  # the uv wheel of the dev extra

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
    raise SystemExit("installer/lock.py needs uv: it is in the dev extra (pip install -e '.[dev]')")


def _relative(path: Path) -> str:
    return os.path.relpath(path, REPO)


def compile_main(uv: str, lock: LockTarget, upgrade: Sequence[str]) -> list[str]:
    cmd = [uv, "pip", "compile", _relative(PYPROJECT), *(a for e in lock.extras for a in ("--extra", e))]
    cmd += [_relative(lock.folder / name) for name in lock.tool_inputs]
    cmd += ["-c", _relative(lock.constraints_file), *(a for link in lock.find_links for a in ("--find-links", link))]
    cmd += ["--no-emit-package", PROJECT, "-o", _relative(lock.main_file)]
    return cmd + _common(lock, upgrade)


def _common(lock: LockTarget, upgrade: Sequence[str]) -> list[str]:
    return [
        "--generate-hashes",
        "--only-binary",
        ":all:",
        "--python-platform",
        lock.uv_platform,
        "--python-version",
        lock.python,
        "--custom-compile-command",
        COMMAND,
        "--quiet",
        *upgrade,
    ]


def no_deps_lines(lock: LockTarget) -> list[str]:
    with PYPROJECT.open("rb") as fh:
        tool = tomllib.load(fh).get("tool", {}).get("npu-studio", {})
    return [line for key in lock.no_deps_keys for line in tool.get(key, [])]


def write_lock(uv: str, lock: LockTarget, upgrade: Sequence[str]) -> None:
    print(f"locking {lock.name} ...", flush=True)
    subprocess.run(compile_main(uv, lock, upgrade), cwd=REPO, check=True)
    lines = no_deps_lines(lock)
    out = lock.no_deps_file
    if lines:
        cmd = [uv, "pip", "compile", "-", "--no-deps", "--no-annotate", "-c", _relative(lock.constraints_file)]
        cmd += ["-o", _relative(out), *_common(lock, upgrade)]
        subprocess.run(cmd, cwd=REPO, check=True, input="\n".join(lines) + "\n", text=True)
        if not any(line.strip() and not line.lstrip().startswith("#") for line in out.read_text().splitlines()):
            out.unlink()  # every no-deps requirement's marker is false on this platform
    elif out.exists():
        out.unlink()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="installer/lock.py", description=__doc__.split("\n\n")[0])
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--check", action="store_true", help="check every lock against pyproject.toml (offline)")
    what.add_argument("--env", action="store_true", help="compare this environment with its platform's lock")
    parser.add_argument("--upgrade", action="store_true", help="take the newest allowed releases")
    parser.add_argument("--upgrade-package", action="append", default=[], metavar="NAME")
    parser.add_argument("--only", action="append", choices=sorted(LOCKS), help="lock only these platforms")
    args = parser.parse_args(argv)
    if args.env:
        lock = running_lock()
        if lock is None:
            print("installer/lock.py: no lock for this platform and Python", file=sys.stderr)
            return 2
        found = differences(lock, installed_versions())
        for line in found:
            print(f"  {line}")
        print(f"this environment {'differs from' if found else 'matches'} lock/{lock.main_file.name}")
        return 1 if found else 0
    selected = [LOCKS[name] for name in args.only or LOCKS]
    if not args.check:
        uv = uv_binary()
        upgrade = ["--upgrade"] if args.upgrade else []
        upgrade += [a for name in args.upgrade_package for a in ("--upgrade-package", name)]
        for lock in selected:
            write_lock(uv, lock, upgrade)
    found = [p for lock in selected for p in problems(lock)]
    for line in found:
        print(f"problem: {line}")
    print(f"{len(selected)} lock(s): {'FAILED' if found else 'OK'}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

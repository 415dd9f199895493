"""Each platform resolves to exactly one ONNX Runtime build (issue: dependencies with environment markers).

The marker evaluation is checked offline; the pip dry-run per platform needs the package index and is
skipped only when the index cannot be reached (probed specifically, not inferred from any failure).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from installer import resolve  # noqa: E402
from installer.resolve import TARGETS, ResolutionError, ResolvedPackage  # noqa: E402


def _pkgs(**versions: str) -> list[ResolvedPackage]:
    return [
        ResolvedPackage(name=n.replace("_", "-"), version=v, filename="", url="", sha256=None)
        for n, v in versions.items()
    ]


def _names(reqs: list[str]) -> set[str]:
    from packaging.requirements import Requirement

    return {Requirement(r).name.lower() for r in reqs}


# ---- marker evaluation (offline) -------------------------------------------------------------------


def test_markers_select_the_arm64_runtime_set() -> None:
    reqs = resolve.requirements_for(TARGETS["win_arm64"], "3.12")
    names = _names(reqs)
    assert {"onnxruntime", "onnxruntime-qnn", "onnxruntime-genai"} <= names
    assert not names & {"onnxruntime-directml", "onnxruntime-genai-directml"}
    assert all(";" not in r for r in reqs), "markers must be stripped before they reach pip"


def test_markers_select_the_x64_directml_set() -> None:
    reqs = resolve.requirements_for(TARGETS["win_amd64"], "3.12")
    assert "onnxruntime-directml==1.24.4" in reqs
    assert "onnxruntime-genai-directml==0.13.1" in reqs
    assert not _names(reqs) & {"onnxruntime", "onnxruntime-qnn", "onnxruntime-genai"}


def test_markers_select_the_plain_cpu_set_on_linux() -> None:
    names = _names(resolve.requirements_for(TARGETS["linux_x86_64"], "3.11"))
    assert {"onnxruntime", "onnxruntime-genai", "numpy", "pyside6-essentials"} <= names
    assert not names & {"onnxruntime-directml", "onnxruntime-qnn", "onnxruntime-genai-directml"}


def test_marker_environment_is_the_target_not_the_host() -> None:
    env = TARGETS["win_arm64"].marker_environment("3.12")
    assert (env["sys_platform"], env["platform_machine"], env["platform_system"], env["os_name"]) == (
        "win32",
        "ARM64",
        "Windows",
        "nt",
    )
    assert env["python_version"] == "3.12" and env["python_full_version"] == "3.12.0"


def test_markers_of_a_custom_pyproject(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "x"\nversion = "1"\ndependencies = [\n'
        '  "a==1; platform_machine == \'ARM64\'",\n  "b; python_version < \'3.12\'",\n  "c",\n]\n',
        encoding="utf-8",
    )
    assert resolve.requirements_for(TARGETS["win_arm64"], "3.12", pyproject) == ["a==1", "c"]
    assert resolve.requirements_for(TARGETS["win_amd64"], "3.11", pyproject) == ["b", "c"]


# ---- the checks on a resolved set (offline) --------------------------------------------------------


def test_check_accepts_the_expected_sets() -> None:
    arm = _pkgs(onnxruntime="1.32.0", onnxruntime_qnn="2.7.0", onnxruntime_genai="0.18.0", numpy="2.5.5")
    x64 = _pkgs(onnxruntime_directml="1.24.4", onnxruntime_genai_directml="0.13.1")
    assert resolve.check_packages(TARGETS["win_arm64"], arm) == []
    assert resolve.check_packages(TARGETS["win_amd64"], x64) == []


def test_check_rejects_two_ort_builds() -> None:
    both = _pkgs(onnxruntime="1.32.0", onnxruntime_directml="1.24.4", onnxruntime_genai_directml="0.13.1")
    problems = resolve.check_packages(TARGETS["win_amd64"], both)
    assert any("exactly one ONNX Runtime build, got 2" in p for p in problems)


def test_check_rejects_the_old_whole_build_qnn_and_windowsml() -> None:
    old_qnn = _pkgs(onnxruntime="1.32.0", onnxruntime_qnn="1.22.0", onnxruntime_genai="0.18.0")
    problems = resolve.check_packages(TARGETS["win_arm64"], old_qnn)
    assert any("1.x is a whole ORT build" in p for p in problems)
    assert any("does not satisfy >=2" in p for p in problems)
    winml = _pkgs(onnxruntime_windowsml="1.30", onnxruntime_genai_winml="0.18.0")
    problems = resolve.check_packages(TARGETS["win_arm64"], winml)
    assert any("onnxruntime-windowsml must not be installed" in p for p in problems)
    assert any("onnxruntime-qnn is missing" in p for p in problems)


def test_check_rejects_a_wrong_directml_pin() -> None:
    wrong = _pkgs(onnxruntime_directml="1.23.0", onnxruntime_genai_directml="0.13.1")
    assert resolve.check_packages(TARGETS["win_amd64"], wrong) == [
        "onnxruntime-directml 1.23.0 does not satisfy ==1.24.4"
    ]


def test_parse_report_reads_names_versions_and_hashes() -> None:
    report = {
        "install": [
            {
                "metadata": {"name": "PySide6_Essentials", "version": "6.12.0"},
                "download_info": {
                    "url": "https://x/pyside6_essentials-6.12.0-cp310-abi3-win_arm64.whl",
                    "archive_info": {"hashes": {"sha256": "ab" * 32}},
                },
            }
        ]
    }
    (pkg,) = resolve.parse_report(report)
    assert pkg.name == "pyside6-essentials"
    assert pkg.version == "6.12.0"
    assert pkg.filename == "pyside6_essentials-6.12.0-cp310-abi3-win_arm64.whl"
    assert pkg.sha256 == "ab" * 32


def test_unreachable_registry_is_detected_specifically() -> None:
    reachable, why = resolve.registry_reachable("http://127.0.0.1:9/simple", timeout=5)
    assert not reachable
    assert "cannot be reached" in why


# ---- the real resolution with pip (needs the package index) -----------------------------------------


@pytest.fixture(scope="module")
def registry() -> None:
    reachable, why = resolve.registry_reachable()
    if not reachable:
        pytest.skip(f"package index unreachable, cannot run pip's dry-run resolution: {why}")


def _resolve_or_skip(target: str, python: str) -> resolve.Resolution:
    try:
        return resolve.resolve(target, python)
    except ResolutionError as exc:
        if exc.registry_unreachable:
            pytest.skip(f"package index unreachable: {exc}")
        raise


def test_win_arm64_resolves_to_onnxruntime_with_the_qnn_plugin(registry: None) -> None:
    res = _resolve_or_skip("win_arm64", "3.12")
    assert res.ok, res.problems
    v = res.versions()
    assert v["onnxruntime"] == "1.32.0"
    assert v["onnxruntime-genai"] == "0.18.0"
    assert v["onnxruntime-qnn"].split(".")[0] == "2"
    assert not v.keys() & {"onnxruntime-directml", "onnxruntime-windowsml", "onnxruntime-genai-directml"}
    assert all(p.filename.endswith(("win_arm64.whl", "none-any.whl")) for p in res.packages)


@pytest.mark.parametrize("python", ["3.12", "3.11"])
def test_win_amd64_resolves_to_the_directml_pair(registry: None, python: str) -> None:
    res = _resolve_or_skip("win_amd64", python)
    assert res.ok, res.problems
    v = res.versions()
    assert v["onnxruntime-directml"] == "1.24.4"
    assert v["onnxruntime-genai-directml"] == "0.13.1"
    assert not v.keys() & {"onnxruntime", "onnxruntime-qnn", "onnxruntime-genai", "onnxruntime-windowsml"}


def test_linux_resolves_to_the_cpu_build(registry: None) -> None:
    res = _resolve_or_skip("linux_x86_64", "3.11")
    assert res.ok, res.problems
    v = res.versions()
    assert v["onnxruntime"] == "1.32.0" and v["onnxruntime-genai"] == "0.18.0"
    assert not v.keys() & {"onnxruntime-directml", "onnxruntime-qnn", "onnxruntime-gpu"}


def test_the_script_prints_a_json_report(registry: None) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "installer" / "resolve.py"),
            "--json",
            "--target",
            "win_amd64",
            "--python-version",
            "3.12",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode == 3:
        pytest.skip(f"package index unreachable: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    (res,) = data["resolutions"]
    assert data["ok"] and res["ok"] and res["target"] == "win_amd64" and res["required"]
    names = {p["name"] for p in res["packages"]}
    assert {"onnxruntime-directml", "onnxruntime-genai-directml", "pyside6-essentials"} <= names

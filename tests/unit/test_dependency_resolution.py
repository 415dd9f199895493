"""Each platform resolves to exactly one ONNX Runtime build (dependencies with environment markers).

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
from installer.resolve import ResolutionError, ResolvedPackage  # noqa: E402
from installer.targets import TARGETS  # noqa: E402


def _pkgs(**versions: str) -> list[ResolvedPackage]:
    return [
        ResolvedPackage(name=n.replace("_", "-"), version=v, filename="", url="", sha256=None)
        for n, v in versions.items()
    ]


def _names(reqs: list[str]) -> set[str]:
    from packaging.requirements import Requirement

    return {Requirement(r).name.lower() for r in reqs}


# ---- marker evaluation (offline) -------------------------------------------------------------------


def test_markers_select_the_windows_ml_set_on_arm64() -> None:
    reqs = resolve.requirements_for(TARGETS["win_arm64"], "3.12")
    names = _names(reqs)
    assert {"onnxruntime-windowsml", "onnxruntime-genai-winml", "windowsml"} <= names
    assert not names & {"onnxruntime", "onnxruntime-genai", "onnxruntime-directml", "onnxruntime-genai-directml"}
    assert "onnxruntime-qnn" not in names, "onnxruntime-qnn declares plain onnxruntime: it is a no-deps install"
    assert resolve.requirements_for(TARGETS["win_arm64"], "3.12", no_deps=True) == ["onnxruntime-qnn==2.7.0"]
    assert all(";" not in r for r in reqs), "markers must be stripped before they reach pip"


def test_markers_select_the_windows_ml_set_with_openvino_on_x64() -> None:
    reqs = resolve.requirements_for(TARGETS["win_amd64"], "3.12")
    assert "onnxruntime-windowsml==1.30.0.202609102321" in reqs and "onnxruntime-genai-winml==0.18.0" in reqs
    assert "onnxruntime-ep-openvino==1.8.1" in reqs
    assert not _names(reqs) & {"onnxruntime", "onnxruntime-qnn", "onnxruntime-genai", "onnxruntime-directml"}
    assert resolve.requirements_for(TARGETS["win_amd64"], "3.12", no_deps=True) == []


def test_markers_select_the_plain_cpu_set_on_linux() -> None:
    names = _names(resolve.requirements_for(TARGETS["linux_x86_64"], "3.11"))
    assert {"onnxruntime", "onnxruntime-genai", "onnxruntime-ep-openvino", "numpy", "pyside6-essentials"} <= names
    assert not names & {"onnxruntime-directml", "onnxruntime-qnn", "onnxruntime-windowsml", "windowsml"}
    assert resolve.requirements_for(TARGETS["linux_x86_64"], "3.11", no_deps=True) == []


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


WINML = "1.30.0.202609102321"


def _qnn_no_deps(version: str = "2.7.0", ort: str = ">=1.24.2") -> ResolvedPackage:
    return ResolvedPackage(
        "onnxruntime-qnn", version, "", "", None, no_deps=True,
        requires_dist=("coloredlogs", "numpy>=1.21.6", f"onnxruntime{ort}", "sympy"),
    )


def _arm_set(**extra: str) -> list[ResolvedPackage]:
    return [
        *_pkgs(onnxruntime_windowsml=WINML, onnxruntime_genai_winml="0.18.0", windowsml="2.5.96", numpy="2.5.5"),
        _qnn_no_deps(),
        *_pkgs(**extra),
    ]


def test_check_accepts_the_expected_sets() -> None:
    x64 = _pkgs(
        onnxruntime_windowsml=WINML,
        onnxruntime_genai_winml="0.18.0",
        windowsml="2.5.96",
        onnxruntime_ep_openvino="1.8.1",
    )
    linux = _pkgs(onnxruntime="1.32.0", onnxruntime_genai="0.18.0", onnxruntime_ep_openvino="1.8.1")
    assert resolve.check_packages(TARGETS["win_arm64"], _arm_set()) == []
    assert resolve.check_packages(TARGETS["win_amd64"], x64) == []
    assert resolve.check_packages(TARGETS["linux_x86_64"], linux, "3.11") == []


def test_check_rejects_two_ort_builds() -> None:
    problems = resolve.check_packages(TARGETS["win_arm64"], _arm_set(onnxruntime="1.32.0"))
    assert any("exactly one ONNX Runtime build, got 2" in p for p in problems)
    assert "onnxruntime must not be installed on win_arm64" in problems


def test_a_no_deps_plugin_is_checked_against_the_one_ort_build() -> None:
    # onnxruntime-qnn's "onnxruntime>=1.24.2" is met by the Windows ML build...
    assert resolve.check_packages(TARGETS["win_arm64"], _arm_set()) == []
    # ...but not when the build is older than the plugin needs,
    old = [p for p in _arm_set() if p.name != "onnxruntime-windowsml"] + _pkgs(onnxruntime_windowsml="1.23.2.2025")
    problems = resolve.check_packages(TARGETS["win_arm64"], old)
    unmet = "needs onnxruntime>=1.24.2; onnxruntime-windowsml 1.23.2.2025 does not satisfy it"
    assert any(unmet in p for p in problems)
    # and a declared dependency that is neither in the set nor listed as unused is reported.
    problems = resolve.check_packages(TARGETS["win_arm64"], _arm_set(), unused={})
    assert any("needs coloredlogs and nothing in the set provides it" in p for p in problems)


def test_check_rejects_the_old_whole_build_qnn_and_the_replaced_directml_packages() -> None:
    old_qnn = [p for p in _arm_set() if p.name != "onnxruntime-qnn"] + _pkgs(onnxruntime_qnn="1.22.0")
    problems = resolve.check_packages(TARGETS["win_arm64"], old_qnn)
    assert any("1.x is a whole ORT build" in p for p in problems)
    assert any("does not satisfy >=2" in p for p in problems)
    dml = _pkgs(onnxruntime_directml="1.24.4", onnxruntime_genai_directml="0.13.1", onnxruntime_ep_openvino="1.8.1")
    problems = resolve.check_packages(TARGETS["win_amd64"], dml)
    assert "onnxruntime-directml must not be installed on win_amd64" in problems
    assert "onnxruntime-windowsml is missing" in problems and "windowsml is missing" in problems


def test_check_rejects_windows_ml_on_linux() -> None:
    linux = _pkgs(onnxruntime_windowsml=WINML, onnxruntime_genai="0.18.0", onnxruntime_ep_openvino="1.8.1")
    problems = resolve.check_packages(TARGETS["linux_x86_64"], linux, "3.11")
    assert "onnxruntime-windowsml must not be installed on linux_x86_64" in problems
    assert "onnxruntime is missing" in problems


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


@pytest.mark.parametrize("target", ["win_arm64", "win_amd64"])
def test_windows_resolves_to_the_windows_ml_set(registry: None, target: str) -> None:
    res = _resolve_or_skip(target, "3.12")
    assert res.ok, res.problems
    v = res.versions()
    assert v["onnxruntime-windowsml"] == "1.30.0.202609102321" and v["onnxruntime-genai-winml"] == "0.18.0"
    assert v["windowsml"] == "2.5.96"
    assert not v.keys() & {"onnxruntime", "onnxruntime-directml", "onnxruntime-genai", "onnxruntime-genai-directml"}
    plugin = {"win_arm64": "onnxruntime-qnn", "win_amd64": "onnxruntime-ep-openvino"}[target]
    assert plugin in v
    suffix = {"win_arm64": "win_arm64.whl", "win_amd64": "win_amd64.whl"}[target]
    assert all(p.filename.endswith((suffix, "none-any.whl")) for p in res.packages)
    no_deps = {p.name for p in res.packages if p.no_deps}
    assert no_deps == ({"onnxruntime-qnn"} if target == "win_arm64" else set())


def test_win_amd64_resolves_on_python_311_too(registry: None) -> None:
    res = _resolve_or_skip("win_amd64", "3.11")
    assert res.ok, res.problems


def test_linux_resolves_to_the_cpu_build_with_the_openvino_plugin(registry: None) -> None:
    res = _resolve_or_skip("linux_x86_64", "3.11")
    assert res.ok, res.problems
    v = res.versions()
    assert v["onnxruntime"] == "1.32.0" and v["onnxruntime-genai"] == "0.18.0"
    assert v["onnxruntime-ep-openvino"] == "1.8.1"
    assert not v.keys() & {"onnxruntime-directml", "onnxruntime-qnn", "onnxruntime-gpu", "onnxruntime-windowsml"}


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
    assert {"onnxruntime-windowsml", "onnxruntime-genai-winml", "windowsml", "pyside6-essentials"} <= names

"""The RECORD files of the resolved, downloaded Windows wheels: exactly one distribution writes
`onnxruntime/` on win_arm64 and on win_amd64, no two wheels write the same file, DirectML.dll is in the
ONNX Runtime build on both architectures, and the plugin EPs are where the app looks for them.

The wheels are downloaded once into the build cache (~/.cache/npu-studio-build, or NPU_STUDIO_BUILD_CACHE)
and reused by later runs and by installer/build.py. With the package index unreachable and nothing cached,
the tests say so and skip; any wrong content fails.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from installer import build, buildenv, resolve, wheel_cache, wheels  # noqa: E402

ARCHES = ("arm64", "x64")


@pytest.fixture(scope="module")
def downloaded() -> dict[str, tuple[resolve.Resolution, list[Path]]]:
    out = {}
    for arch in ARCHES:
        try:
            out[arch] = wheel_cache.download_locked(arch, "3.12", buildenv.default_cache_dir())
        except buildenv.BuildError:
            reachable, why = resolve.registry_reachable()
            if not reachable:
                pytest.skip(f"package index unreachable and the {arch} wheels are not cached yet: {why}")
            raise
    return out


def _records(files: list[Path]) -> list[wheels.WheelRecord]:
    return [wheels.read_record(f) for f in files]


@pytest.mark.parametrize("arch", ARCHES)
def test_exactly_one_distribution_writes_onnxruntime(downloaded: dict, arch: str) -> None:
    resolution, files = downloaded[arch]
    assert resolution.ok, resolution.problems
    records = _records(files)
    assert len(records) == len(resolution.packages)
    assert wheels.writers_of(records, "onnxruntime") == ["onnxruntime-windowsml"]
    assert wheels.collisions(records) == {}
    ort = next(r for r in records if r.distribution == "onnxruntime-windowsml")
    assert "onnxruntime/capi/DirectML.dll" in ort.paths, f"{arch}: the Windows ML build must carry DirectML"
    assert "onnxruntime/capi/onnxruntime.dll" in ort.paths


def test_the_plugin_eps_and_the_catalog_are_in_the_right_payload(downloaded: dict) -> None:
    arm = {r.distribution: r for r in _records(downloaded["arm64"][1])}
    x64 = {r.distribution: r for r in _records(downloaded["x64"][1])}
    assert "onnxruntime_qnn/onnxruntime_providers_qnn.dll" in arm["onnxruntime-qnn"].paths
    assert "onnxruntime_qnn/QnnHtp.dll" in arm["onnxruntime-qnn"].paths
    assert "onnxruntime-ep-openvino" not in arm
    openvino = x64["onnxruntime-ep-openvino"]
    assert any(p.startswith("onnxruntime_ep_openvino/") and p.endswith(".dll") for p in openvino.paths)
    assert "onnxruntime-qnn" not in x64
    for table in (arm, x64):
        assert "windowsml/lib/Microsoft.Windows.AI.MachineLearning.dll" in table["windowsml"].paths
        assert table["onnxruntime-genai-winml"].top_level() == {"onnxruntime_genai"}


def test_installing_onnxruntime_qnn_with_its_dependencies_would_clash(downloaded: dict, tmp_path: Path) -> None:
    """Why it is a no-deps install: its declared `onnxruntime` writes the same files as the Windows ML build."""
    cache = buildenv.default_cache_dir() / "wheels"
    plain = sorted(cache.glob("onnxruntime-1.*-cp312-cp312-win_arm64.whl"))
    if not plain:
        build_dir = tmp_path / "dl"
        res = build.subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--platform", "win_arm64",
             "--python-version", "3.12", "--dest", str(build_dir), "--quiet", "onnxruntime>=1.24.2"],
            capture_output=True, text=True, timeout=600, check=False,
        )
        if res.returncode != 0:
            reachable, why = resolve.registry_reachable()
            if not reachable:
                pytest.skip(f"package index unreachable: {why}")
            pytest.fail(res.stderr[-1000:])
        plain = sorted(build_dir.glob("onnxruntime-*.whl"))
    records = [*_records(downloaded["arm64"][1]), wheels.read_record(plain[-1])]
    assert wheels.writers_of(records, "onnxruntime") == ["onnxruntime", "onnxruntime-windowsml"]
    shared = wheels.collisions(records)
    assert "onnxruntime/capi/onnxruntime.dll" in shared and "onnxruntime/__init__.py" in shared
    with pytest.raises(buildenv.BuildError, match="exactly one wheel must write onnxruntime/, got 2"):
        wheel_cache.check_one_writer_per_file([*downloaded["arm64"][1], plain[-1]])


def test_onnxruntime_qnn_imports_none_of_the_dependencies_it_is_installed_without(downloaded: dict) -> None:
    qnn = next(f for f in downloaded["arm64"][1] if f.name.startswith("onnxruntime_qnn-"))
    unused = resolve.load_unused()["onnxruntime-qnn"]
    imported = wheels.python_imports(qnn, "onnxruntime_qnn")
    assert imported, "the plugin's Python files were read"
    assert not imported & {n.replace("-", "_") for n in unused} and "onnxruntime" not in imported

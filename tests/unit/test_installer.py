"""The MSI: built for real with wixl from a staged payload and inspected with msiinfo / msiextract.

Two payloads:
- a small one (the app's sources, a tiny fake models folder, the launcher) for the identity rules
  (UpgradeCode stable, ProductCode per version, component GUIDs per path) and the extracted layout;
- the real Windows x64 payload: the win_amd64 wheels resolved from pyproject.toml (downloaded once into
  the build cache), checked file by file against the MSI's tables and its extracted cabinet.
wixl and msitools must be installed (`apt-get install -y wixl msitools`); without them these tests fail.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from installer import build, buildenv, resolve, wheel_cache, wix  # noqa: E402
from installer import payload as staging  # noqa: E402
from installer.product import UPGRADE_CODE, component_guid, load_product, msi_version, project_version  # noqa: E402

V4 = "{" + wix.V4_NS + "}"
INSTALL_ROOT = "LocalAppDataFolder/Programs/NPU Studio"


# ---- helpers ------------------------------------------------------------------------------------------------


def _require_tools() -> None:
    missing = [t for t in ("wixl", "msiinfo", "msiextract", "msibuild") if shutil.which(t) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed: {buildenv.APT_LINE}")


def msi_table(msi: Path, table: str) -> list[dict[str, str]]:
    out = subprocess.run(
        ["msiinfo", "export", str(msi), table], capture_output=True, text=True, check=True, cwd=msi.parent
    ).stdout
    lines = out.split("\r\n") if "\r\n" in out else out.split("\n")
    columns = lines[0].split("\t")
    return [dict(zip(columns, line.split("\t"), strict=False)) for line in lines[3:] if line]


def properties(msi: Path) -> dict[str, str]:
    return {row["Property"]: row["Value"] for row in msi_table(msi, "Property")}


def summary(msi: Path) -> dict[str, str]:
    out = subprocess.run(["msiinfo", "suminfo", str(msi)], capture_output=True, text=True, check=True).stdout
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in out.splitlines())}


def _long_name(default_dir: str) -> str:
    target = default_dir.split(":")[0]
    return target.split("|")[-1]


def directory_paths(msi: Path) -> dict[str, str]:
    """Directory key -> path from the root, e.g. 'LocalAppDataFolder/Programs/NPU Studio/_internal'."""
    rows = {r["Directory"]: r for r in msi_table(msi, "Directory")}
    cache: dict[str, str] = {}

    def path(key: str) -> str:
        if key in cache:
            return cache[key]
        row = rows[key]
        parent = row["Directory_Parent"]
        if not parent or parent == key:
            result = ""
        elif parent == "TARGETDIR":
            result = key  # a standard folder such as LocalAppDataFolder
        else:
            name = _long_name(row["DefaultDir"])
            result = path(parent) if name == "." else f"{path(parent)}/{name}"
        cache[key] = result
        return result

    return {key: path(key) for key in rows}


def installed_files(msi: Path) -> dict[str, tuple[str, int]]:
    """Install path (relative to the install folder) -> (File key, size) from the File/Component tables."""
    dirs = directory_paths(msi)
    comp_dir = {r["Component"]: r["Directory_"] for r in msi_table(msi, "Component")}
    out: dict[str, tuple[str, int]] = {}
    for row in msi_table(msi, "File"):
        full = f"{dirs[comp_dir[row['Component_']]]}/{_long_name(row['FileName'])}"
        assert full.startswith(INSTALL_ROOT + "/"), full
        out[full[len(INSTALL_ROOT) + 1 :]] = (row["File"], int(row["FileSize"]))
    return out


def payload_files(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_fake_models(root: Path) -> Path:
    models = root / "models"
    tiny = models / "tiny-classifier"
    tiny.mkdir(parents=True)
    (tiny / "model.onnx").write_bytes(b"\x08\x07not-really-onnx" * 64)
    (tiny / "labels.txt").write_text("cat\ndog\n", encoding="utf-8")
    (tiny / "manifest.json").write_text(json.dumps({"name": "tiny-classifier", "files": []}), encoding="utf-8")
    (models / ".work-tiny-abc").mkdir()  # a recipe's unfinished work folder: never shipped
    (models / ".work-tiny-abc" / "partial.bin").write_bytes(b"x")
    (models / "no-manifest").mkdir()  # an interrupted build: never shipped
    (models / "no-manifest" / "model.onnx").write_bytes(b"x")
    return models


def stage_small(payload: Path, models: Path) -> None:
    """A small payload built with the same functions as the real one (no wheels)."""
    internal = payload / "_internal"
    (internal / "site-packages" / "demo_pkg").mkdir(parents=True)
    (internal / "site-packages" / "demo_pkg" / "__init__.py").write_text("VALUE = 1\n", encoding="utf-8")
    staging.copy_sources(internal)
    staging.copy_assets(internal / "assets", models)
    shutil.copy2(buildenv.INSTALLER_DIR / "launcher.py", internal / "launcher.py")
    staging.write_launcher_stub(payload, "x64", "3.12")
    staging.write_payload_info(
        payload, {"kind": "pystub", "entry": staging.ENTRY_STUB, "arch": "x64", "python_version": "3.12"}
    )


@dataclass
class Built:
    payload: Path
    msi: Path
    icon: Path


# ---- fixtures --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Built]:
    """The small payload built as 0.1.0 twice (reproducibility) and as 0.2.0."""
    _require_tools()
    root = tmp_path_factory.mktemp("small")
    payload = root / "stage" / "x64" / "payload"
    stage_small(payload, make_fake_models(root))
    icon = staging.make_icon(root / "npu-studio.ico")
    out: dict[str, Built] = {}
    for label, version in (("a", "0.1.0"), ("b", "0.1.0"), ("next", "0.2.0")):
        msi = build.build_msi("x64", payload, root / f"dist-{label}", "wixl", version, icon)
        out[label] = Built(payload, msi, icon)
    return out


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The real win_amd64 payload (resolved wheels, unpacked) and its wixl MSI."""
    _require_tools()
    root = tmp_path_factory.mktemp("real")
    payload = root / "x64" / "payload"
    models = make_fake_models(root)
    try:
        build.stage_wheels("x64", payload, models, "3.12", buildenv.default_cache_dir())
    except buildenv.BuildError:
        reachable, why = resolve.registry_reachable()
        if not reachable:
            pytest.skip(f"package index unreachable and the wheels are not cached yet: {why}")
        raise
    msi = build.build_msi("x64", payload, root / "dist", "wixl", None, staging.make_icon(root / "npu-studio.ico"))
    return Built(payload, msi, root / "npu-studio.ico")


# ---- the real Windows payload ----------------------------------------------------------------------------------------


def test_real_payload_has_exactly_the_x64_runtime_set(real: Built) -> None:
    site = real.payload / "_internal" / "site-packages"
    dist_infos = {p.name.split("-")[0].lower() for p in site.glob("*.dist-info")}
    expected = {"onnxruntime_windowsml", "onnxruntime_genai_winml", "windowsml", "onnxruntime_ep_openvino"}
    assert expected | {"pyside6_essentials", "numpy"} <= dist_infos
    assert not dist_infos & {"onnxruntime", "onnxruntime_qnn", "onnxruntime_genai", "onnxruntime_directml"}
    assert (site / "onnxruntime" / "capi" / "DirectML.dll").is_file()
    assert (site / "onnxruntime" / "capi" / "onnxruntime_pybind11_state.pyd").is_file()
    assert (site / "windowsml" / "lib" / "Microsoft.Windows.AI.MachineLearning.dll").is_file()
    assert list((site / "onnxruntime_ep_openvino").glob("*.dll"))
    assert not (site / "onnxruntime_qnn").exists()
    info = json.loads((real.payload / wix.PAYLOAD_INFO).read_text(encoding="utf-8"))
    assert info["packages"]["onnxruntime-windowsml"] == "1.30.0.202609102321"
    assert info["packages"]["onnxruntime-genai-winml"] == "0.18.0"
    assert info["packages"]["onnxruntime-ep-openvino"] == "1.8.1"
    assert info["models"] == ["tiny-classifier"]
    assert (real.payload / "_internal" / "app" / "__main__.py").is_file()
    assert (real.payload / "_internal" / "assets" / "models" / "tiny-classifier" / "model.onnx").is_file()
    assert not (real.payload / "_internal" / "assets" / "models" / ".work-tiny-abc").exists()
    assert not (real.payload / "_internal" / "assets" / "models" / "no-manifest").exists()
    assert not (real.payload / "_internal" / "assets" / "recipes").exists()
    for package in ("app", "ui", "engines"):  # sources only, no bytecode of this machine's Python
        assert not list((real.payload / "_internal" / package).rglob("__pycache__"))


def test_every_real_payload_file_is_in_the_msi_tables(real: Built) -> None:
    staged = payload_files(real.payload)
    in_msi = installed_files(real.msi)
    assert len(staged) > 5000  # PySide6, numpy, ONNX Runtime ... really there
    assert set(in_msi) == set(staged)
    wrong_size = [rel for rel, (_key, size) in in_msi.items() if size != staged[rel].stat().st_size]
    assert wrong_size == []


def test_every_real_payload_file_is_in_the_cabinet_byte_for_byte(real: Built, tmp_path: Path) -> None:
    staged = payload_files(real.payload)
    in_msi = installed_files(real.msi)
    out = tmp_path / "x"
    out.mkdir()
    if shutil.which("cabextract"):  # ~15x faster than msiextract on this 250 MB cabinet
        cab = tmp_path / "cab1.cab"
        with cab.open("wb") as fh:
            subprocess.run(["msiinfo", "extract", str(real.msi), "cab1.cab"], stdout=fh, check=True)
        subprocess.run(["cabextract", "-q", "-d", str(out), str(cab)], check=True)
        extracted = {rel: out / key for rel, (key, _size) in in_msi.items()}
    else:
        subprocess.run(["msiextract", "-C", str(out), str(real.msi)], capture_output=True, check=True)
        extracted = {rel: out / "Programs" / "NPU Studio" / rel for rel in in_msi}
    mismatched = [rel for rel, src in staged.items() if sha256(src) != sha256(extracted[rel])]
    assert mismatched == []


def test_real_msi_identity_and_per_user_install(real: Built) -> None:
    props = properties(real.msi)
    product = load_product()
    assert props["ProductVersion"] == msi_version(project_version()) == product.msi_version
    assert props["UpgradeCode"] == "{" + UPGRADE_CODE + "}"
    assert props["ProductCode"] == "{" + product.product_code("x64", "pystub") + "}"
    assert props["ProductName"] == "NPU Studio"
    assert "ALLUSERS" not in props  # per-user: no ALLUSERS=1 / 2
    assert int(summary(real.msi)["Source"].split()[0]) & 8  # word count bit 3: no elevation needed
    assert summary(real.msi)["Template"] == "x64;1033"
    dirs = {r["Directory"]: r for r in msi_table(real.msi, "Directory")}
    assert dirs["INSTALLFOLDER"]["Directory_Parent"] == "LocalProgramsFolder"
    assert _long_name(dirs["INSTALLFOLDER"]["DefaultDir"]) == "NPU Studio"
    assert dirs["LocalProgramsFolder"]["Directory_Parent"] == "LocalAppDataFolder"
    assert _long_name(dirs["LocalProgramsFolder"]["DefaultDir"]) == "Programs"
    assert dirs["LocalAppDataFolder"]["Directory_Parent"] == "TARGETDIR"


def test_real_msi_start_menu_shortcut(real: Built) -> None:
    (shortcut,) = msi_table(real.msi, "Shortcut")
    assert shortcut["Directory_"] == "ProgramMenuFolder"
    assert _long_name(shortcut["Name"]) == "NPU Studio"
    assert shortcut["Target"] == "[INSTALLFOLDER]npu-studio.cmd"
    assert shortcut["WkDir"] == "INSTALLFOLDER"
    assert shortcut["Icon_"] == wix.ICON_ID
    assert {r["Name"] for r in msi_table(real.msi, "Icon")} == {wix.ICON_ID}
    assert properties(real.msi)["ARPPRODUCTICON"] == wix.ICON_ID
    registry = {r["Component_"]: r for r in msi_table(real.msi, "Registry")}
    assert registry[shortcut["Component_"]]["Root"] == "1"  # HKCU key path for the per-user shortcut


# ---- upgrades, identity, layout (small payload) ------------------------------------------------------------------


def test_upgrade_code_stable_and_product_code_new_per_version(small: dict[str, Built]) -> None:
    a, b, nxt = (properties(small[k].msi) for k in ("a", "b", "next"))
    assert a["UpgradeCode"] == b["UpgradeCode"] == nxt["UpgradeCode"] == "{" + UPGRADE_CODE + "}"
    assert a["ProductCode"] != nxt["ProductCode"]
    assert a["ProductCode"] == b["ProductCode"]  # reproducible: same inputs, same identity
    assert (a["ProductVersion"], nxt["ProductVersion"]) == ("0.1.0", "0.2.0")
    assert small["next"].msi.name == "NPU-Studio-0.2.0-x64-pystub.msi"


def test_components_keep_their_guids_across_versions(small: dict[str, Built]) -> None:
    first = {r["Component"]: r["ComponentId"] for r in msi_table(small["a"].msi, "Component")}
    second = {r["Component"]: r["ComponentId"] for r in msi_table(small["next"].msi, "Component")}
    assert first == second
    files = installed_files(small["a"].msi)
    key = files["_internal/app/__main__.py"][0]
    component = next(r for r in msi_table(small["a"].msi, "File") if r["File"] == key)["Component_"]
    assert first[component] == "{" + component_guid("_internal/app/__main__.py", "x64") + "}"


def test_major_upgrade_removes_older_versions_first(small: dict[str, Built]) -> None:
    upgrade = msi_table(small["next"].msi, "Upgrade")
    detect = next(r for r in upgrade if r["ActionProperty"] == "WIX_UPGRADE_DETECTED")
    assert detect["UpgradeCode"] == "{" + UPGRADE_CODE + "}"
    assert detect["VersionMax"] == "0.2.0" and not detect["VersionMin"]
    assert any(r["ActionProperty"] == "WIX_DOWNGRADE_DETECTED" for r in upgrade)
    seq = {r["Action"]: int(r["Sequence"]) for r in msi_table(small["next"].msi, "InstallExecuteSequence")}
    assert seq["InstallValidate"] < seq["RemoveExistingProducts"] < seq["InstallInitialize"]


def test_uninstall_keeps_user_data_unless_asked(small: dict[str, Built]) -> None:
    actions = {r["Action"]: r for r in msi_table(small["a"].msi, "CustomAction")}
    remove = actions["RemoveUserData"]
    assert remove["Source"] == "NPUSTUDIO_CMD"
    assert remove["Target"] == '/c rmdir /s /q "[LocalAppDataFolder]NPU Studio"'
    assert int(remove["Type"]) & 0x40  # return code ignored: a failure never blocks the uninstall
    assert actions["SetRemoveUserDataCmd"]["Target"] == "[System64Folder]cmd.exe"
    seq = {r["Action"]: r for r in msi_table(small["a"].msi, "InstallExecuteSequence")}
    condition = seq["RemoveUserData"]["Condition"]
    assert 'REMOVEUSERDATA="1"' in condition and 'REMOVE~="ALL"' in condition
    assert "NOT UPGRADINGPRODUCTCODE" in condition
    assert int(seq["RemoveUserData"]["Sequence"]) > int(seq["InstallFinalize"]["Sequence"])
    # nothing the MSI installs lives in the user data folder (%LOCALAPPDATA%\NPU Studio)
    paths = set(directory_paths(small["a"].msi).values())
    assert "LocalAppDataFolder/Programs" in paths
    assert not any(
        p == "LocalAppDataFolder/NPU Studio" or p.startswith("LocalAppDataFolder/NPU Studio/") for p in paths
    )


def test_msiextract_gives_the_installed_layout(small: dict[str, Built], tmp_path: Path) -> None:
    subprocess.run(["msiextract", "-C", str(tmp_path), str(small["a"].msi)], capture_output=True, check=True)
    root = tmp_path / "Programs" / "NPU Studio"
    staged = payload_files(small["a"].payload)
    assert set(payload_files(root)) == set(staged)
    assert all(sha256(root / rel) == sha256(src) for rel, src in staged.items())
    stub = (root / "npu-studio.cmd").read_bytes()
    assert b'_internal\\launcher.py"' in stub and b"\r\n" in stub
    assert (root / "_internal" / "assets" / "models" / "tiny-classifier" / "manifest.json").is_file()


def test_wixl_refuses_arm64_with_a_clear_message(small: dict[str, Built], tmp_path: Path) -> None:
    with pytest.raises(buildenv.BuildError, match="arm64 MSI on Windows with WiX v4"):
        build.build_msi("arm64", small["a"].payload, tmp_path, "wixl", None, small["a"].icon)


def test_build_script_reports_bad_input_in_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "installer" / "build.py"), "msi", "--arch", "x64", "--build-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "stage the payload first" in proc.stderr


# ---- WiX v4 source -------------------------------------------------------------------------------------------------


def test_wix_v4_source_is_well_formed_with_the_expected_elements(small: dict[str, Built], tmp_path: Path) -> None:
    product = load_product()
    payload = small["a"].payload
    text = wix.generate_v4(product, payload, small["a"].icon, "arm64")
    root = ET.fromstring(text)
    assert root.tag == V4 + "Wix"
    pkg = root.find(V4 + "Package")
    assert pkg is not None
    assert pkg.get("Scope") == "perUser"
    assert pkg.get("UpgradeCode") == UPGRADE_CODE
    assert pkg.get("Version") == product.msi_version
    assert pkg.get("ProductCode") == product.product_code("arm64", "pystub")
    assert pkg.get("ProductCode") != product.product_code("x64", "pystub")
    major = pkg.find(V4 + "MajorUpgrade")
    assert major is not None and major.get("Schedule") == "afterInstallValidate"
    local = pkg.find(f"{V4}StandardDirectory[@Id='LocalAppDataFolder']")
    assert local is not None
    install = local.find(f"{V4}Directory[@Name='Programs']/{V4}Directory[@Id='INSTALLFOLDER']")
    assert install is not None and install.get("Name") == "NPU Studio"
    shortcut = root.find(f".//{V4}Shortcut")
    assert shortcut is not None
    assert shortcut.get("Directory") == "ProgramMenuFolder"
    assert shortcut.get("Target") == "[INSTALLFOLDER]npu-studio.cmd"
    sources = {Path(f.get("Source", "")) for f in root.iter(V4 + "File")}
    assert sources == {p.resolve() for p in payload_files(payload).values()}
    guids = {c.get("Guid") for c in root.iter(V4 + "Component")}
    assert component_guid("_internal/app/__main__.py", "arm64") in guids
    assert component_guid("_internal/app/__main__.py", "x64") not in guids
    assert all(c.get("Bitness") == "always64" for c in root.iter(V4 + "Component"))
    customs = {c.get("Action"): c.get("Condition", "") for c in root.iter(V4 + "Custom")}
    assert 'REMOVEUSERDATA="1"' in customs["RemoveUserData"]
    refs = {r.get("Id") for r in root.iter(V4 + "ComponentRef")}
    assert refs == {c.get("Id") for c in root.iter(V4 + "Component")}
    # the build script writes the same source
    out = build.write_wxs(product, payload, small["a"].icon, "arm64", "v4", tmp_path / "x.wxs")
    assert out.read_text(encoding="utf-8") == text


def test_v3_and_v4_share_ids_and_guids(small: dict[str, Built]) -> None:
    product = load_product()
    payload, icon = small["a"].payload, small["a"].icon
    v3 = ET.fromstring(wix.generate_v3(product, payload, icon, "x64"))
    v4 = ET.fromstring(wix.generate_v4(product, payload, icon, "x64"))
    ns3 = "{" + wix.V3_NS + "}"
    comps3 = {c.get("Id"): c.get("Guid") for c in v3.iter(ns3 + "Component")}
    comps4 = {c.get("Id"): c.get("Guid") for c in v4.iter(V4 + "Component")}
    assert comps3 == comps4


# ---- payload checks and helpers -------------------------------------------------------------------------------


def _minimal_payload(root: Path, entry: str = "npu-studio.cmd") -> Path:
    (root / "_internal").mkdir(parents=True)
    (root / "npu-studio.cmd").write_text("@echo off\r\n", encoding="ascii")
    staging.write_payload_info(root, {"kind": "pystub", "entry": entry, "arch": "x64"})
    return root


def test_payload_problems_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(wix.PayloadError, match="does not exist"):
        wix.scan_payload(tmp_path / "nope")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(wix.PayloadError, match="payload.json is missing"):
        wix.read_payload_info(empty)
    case = _minimal_payload(tmp_path / "case")
    (case / "Readme.txt").write_text("a", encoding="utf-8")
    (case / "README.txt").write_text("b", encoding="utf-8")
    with pytest.raises(wix.PayloadError, match="differ only in case"):
        wix.scan_payload(case)
    deep = _minimal_payload(tmp_path / "deep")
    long_dir = deep.joinpath(*(["d" * 40] * 5))
    long_dir.mkdir(parents=True)
    (long_dir / "f.txt").write_text("x", encoding="utf-8")
    with pytest.raises(wix.PayloadError, match="MAX_PATH"):
        wix.scan_payload(deep)
    no_entry = _minimal_payload(tmp_path / "noentry", entry="npu-studio.exe")
    icon = staging.make_icon(tmp_path / "i.ico")
    with pytest.raises(wix.PayloadError, match="entry point npu-studio.exe is not in the payload"):
        wix.generate_v3(load_product(), no_entry, icon)


def test_msi_version_rules() -> None:
    assert msi_version("0.1.0") == "0.1.0"
    assert msi_version("1.2") == "1.2.0"
    assert msi_version("2.0.1.dev3") == "2.0.1"
    for bad in ("1.2.3.4", "256.0.0", "1!2.0", "not-a-version"):
        with pytest.raises(ValueError):
            msi_version(bad)
    with pytest.raises(ValueError):
        load_product(version="1.2.3.4")


def test_unpack_wheel_follows_the_wheel_layout(tmp_path: Path) -> None:
    whl = tmp_path / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        zf.writestr("demo/__init__.py", "X = 1\n")
        zf.writestr("demo-1.0.dist-info/METADATA", "Name: demo\n")
        zf.writestr("demo-1.0.data/platlib/demo_native.pyd", b"MZ")
        zf.writestr("demo-1.0.data/data/share/demo.txt", "data")
        zf.writestr("demo-1.0.data/scripts/demo-cli", "#!python\n")
    site, prefix = tmp_path / "site", tmp_path / "prefix"
    assert wheel_cache.unpack_wheel(whl, site, prefix) == 4
    assert (site / "demo" / "__init__.py").read_text() == "X = 1\n"
    assert (site / "demo_native.pyd").read_bytes() == b"MZ"
    assert (prefix / "share" / "demo.txt").read_text() == "data"
    assert not list(tmp_path.rglob("demo-cli"))
    evil = tmp_path / "evil-1.0-py3-none-any.whl"
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr("../outside.py", "boom")
    with pytest.raises(buildenv.BuildError, match="unsafe path"):
        wheel_cache.unpack_wheel(evil, site, prefix)
    assert not (tmp_path / "outside.py").exists()


def test_launcher_runs_the_app_from_the_payload(tmp_path: Path) -> None:
    payload = tmp_path / "payload"
    stage_small(payload, make_fake_models(tmp_path))
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    launcher = payload / "_internal" / "launcher.py"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    # built for another Python: a clear one-line refusal
    staging.write_payload_info(
        payload,
        {"kind": "pystub", "entry": "npu-studio.cmd", "arch": "x64", "python_version": "3.99", "target": "win_amd64"},
    )
    proc = subprocess.run(
        [sys.executable, str(launcher), "--version"], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 2
    assert "built for Python 3.99" in proc.stderr and "Traceback" not in proc.stderr
    # built for this Python: the payload's own packages come first
    staging.write_payload_info(
        payload,
        {"kind": "pystub", "entry": "npu-studio.cmd", "arch": "x64", "python_version": running, "target": "win_amd64"},
    )
    code = (
        "import runpy, sys; sys.argv = [sys.argv[0], '--version'];"
        f"sys.path.insert(0, {str(launcher.parent)!r}); import launcher;"
        "assert launcher._prepare_wheels_payload() is None;"
        "import app, demo_pkg; print(app.__file__); print(demo_pkg.VALUE)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    app_file, value = proc.stdout.split()
    assert Path(app_file).resolve().is_relative_to(payload.resolve())
    assert value == "1"
    proc = subprocess.run(
        [sys.executable, str(launcher), "--version"], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith("npu-studio ")


def test_offline_restage_uses_only_the_cache(real: Built, tmp_path: Path) -> None:
    again = tmp_path / "payload"
    info = build.stage_wheels("x64", again, tmp_path / "no-models", "3.12", buildenv.default_cache_dir(), offline=True)
    assert info["models"] == []
    site = "_internal/site-packages/"
    assert {p for p in payload_files(again) if p.startswith(site)} == {
        p for p in payload_files(real.payload) if p.startswith(site)
    }
    with pytest.raises(buildenv.BuildError, match="--offline"):
        build.stage_wheels("x64", tmp_path / "p2", tmp_path, "3.12", tmp_path / "empty-cache", offline=True)


# ---- the real ARM64 payload (staged here; its MSI is built on Windows with WiX v4+) --------------------------------


@pytest.fixture(scope="module")
def real_arm64(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("real-arm64")
    payload = root / "arm64" / "payload"
    try:
        build.stage_wheels("arm64", payload, make_fake_models(root), "3.12", buildenv.default_cache_dir())
    except buildenv.BuildError:
        reachable, why = resolve.registry_reachable()
        if not reachable:
            pytest.skip(f"package index unreachable and the wheels are not cached yet: {why}")
        raise
    return payload


def test_real_arm64_payload_has_the_qnn_runtime_set(real_arm64: Path) -> None:
    site = real_arm64 / "_internal" / "site-packages"
    dist_infos = {p.name.split("-")[0].lower() for p in site.glob("*.dist-info")}
    expected = {"onnxruntime_windowsml", "onnxruntime_genai_winml", "windowsml", "onnxruntime_qnn"}
    assert expected | {"pyside6_essentials"} <= dist_infos
    # onnxruntime-qnn came in without its dependencies: no plain onnxruntime over the Windows ML build
    assert not dist_infos & {"onnxruntime", "onnxruntime_genai", "onnxruntime_directml", "onnxruntime_ep_openvino"}
    assert (site / "onnxruntime_qnn" / "onnxruntime_providers_qnn.dll").is_file()
    assert (site / "onnxruntime_qnn" / "QnnHtp.dll").is_file()
    assert (site / "onnxruntime" / "capi" / "DirectML.dll").is_file()  # DirectML on ARM64 too
    info = json.loads((real_arm64 / wix.PAYLOAD_INFO).read_text(encoding="utf-8"))
    assert info["target"] == "win_arm64" and info["packages"]["onnxruntime-qnn"].startswith("2.")
    stub = (real_arm64 / "npu-studio.cmd").read_text(encoding="ascii")
    assert "-V:3.12-arm64" in stub


def test_real_arm64_wix_v4_source_lists_every_file(real_arm64: Path, tmp_path: Path) -> None:
    product = load_product()
    icon = staging.make_icon(tmp_path / "i.ico")
    out = build.write_wxs(product, real_arm64, icon, "arm64", "v4", tmp_path / "npu-studio.v4.wxs")
    root = ET.parse(out).getroot()
    sources = {Path(f.get("Source", "")) for f in root.iter(V4 + "File")}
    assert sources == {p.resolve() for p in payload_files(real_arm64).values()}
    ids = [c.get("Id") for c in root.iter(V4 + "Component")]
    assert len(ids) == len(set(ids))  # no identifier collisions across ~7,000 files
    pkg = root.find(V4 + "Package")
    assert pkg is not None and pkg.get("ProductCode") == product.product_code("arm64", "pystub")

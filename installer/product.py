"""The one description of the NPU Studio MSI that both WiX schemas are generated from.

Identity rules (they make upgrades work):
- UpgradeCode: one fixed GUID for the product's whole life, on every architecture. Never change it.
- ProductCode: derived from (UpgradeCode, version, architecture, payload kind), so it is new for every
  version and reproducible for the same build inputs. MajorUpgrade removes any older version.
- Component GUIDs: derived from the file's install-relative path and the architecture (see wix.py), so a
  file keeps its component across versions.
"""

from __future__ import annotations

import tomllib
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.version import InvalidVersion, Version

REPO_ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = REPO_ROOT / "pyproject.toml"

UPGRADE_CODE = "F1F8FE52-3D08-4310-A713-E4F0E9C91D2F"
# Namespace for every derived GUID (ProductCode, component GUIDs). Fixed forever, like the UpgradeCode.
GUID_NAMESPACE = uuid.UUID("221b898e-6da3-4a97-bed9-5ce2b95aad3b")

ARCHES = ("x64", "arm64")
ARCH_TO_TARGET = {"x64": "win_amd64", "arm64": "win_arm64"}


@dataclass(frozen=True)
class Product:
    name: str
    manufacturer: str
    description: str
    version: str  # the project's version (PEP 440)
    upgrade_code: str
    # Installed per user, no admin: %LOCALAPPDATA%\Programs\<install_dir_name>
    install_dir_name: str
    shortcut_name: str
    # Where the app keeps settings, logs, caches and user models (platformdirs, appauthor folder):
    # %LOCALAPPDATA%\<user_data_dir_name>. Outside the install folder, so uninstall keeps it.
    user_data_dir_name: str
    # Public property that makes uninstall remove the user data folder too.
    remove_user_data_property: str = "REMOVEUSERDATA"
    language: int = 1033

    @property
    def msi_version(self) -> str:
        return msi_version(self.version)

    def product_code(self, arch: str, payload_kind: str) -> str:
        seed = f"product:{self.upgrade_code}:{self.msi_version}:{arch}:{payload_kind}"
        return str(uuid.uuid5(GUID_NAMESPACE, seed)).upper()

    def msi_filename(self, arch: str, payload_kind: str) -> str:
        suffix = "" if payload_kind == "frozen" else f"-{payload_kind}"
        return f"{self.name.replace(' ', '-')}-{self.version}-{arch}{suffix}.msi"

    def with_version(self, version: str) -> Product:
        msi_version(version)  # validates
        return replace(self, version=version)


def msi_version(version: str) -> str:
    """MSI ProductVersion from a PEP 440 version: major.minor.patch, each in MSI's ranges.

    Windows Installer compares only these three fields, so pre-/dev-/post-releases map to their release
    (bump the patch number to ship a new build as an upgrade).
    """
    try:
        parsed = Version(version)
    except InvalidVersion as exc:
        raise ValueError(f"not a valid version: {version!r}") from exc
    if parsed.epoch or len(parsed.release) > 3:
        raise ValueError(f"version {version!r} cannot be an MSI version (at most major.minor.patch, no epoch)")
    major, minor, patch = (*parsed.release, 0, 0)[:3]
    if major > 255 or minor > 255 or patch > 65535:
        raise ValueError(f"version {version!r} is out of MSI's range (255.255.65535)")
    return f"{major}.{minor}.{patch}"


def project_version(pyproject: Path = PYPROJECT) -> str:
    with pyproject.open("rb") as fh:
        return str(tomllib.load(fh)["project"]["version"])


def load_product(pyproject: Path = PYPROJECT, version: str | None = None) -> Product:
    product = Product(
        name="NPU Studio",
        manufacturer="NPU Studio",
        description="See which NPU, GPU and CPU devices ONNX Runtime really uses; classify images and chat "
        "with a local model, offline.",
        version=project_version(pyproject),
        upgrade_code=UPGRADE_CODE,
        install_dir_name="NPU Studio",
        shortcut_name="NPU Studio",
        user_data_dir_name="NPU Studio",
    )
    if version is not None:
        product = product.with_version(version)
    msi_version(product.version)
    return product


def component_guid(relative_path: str, arch: str) -> str:
    """Stable component GUID for an install-relative path (case-insensitive, as Windows paths are)."""
    key = relative_path.replace("/", "\\").lower()
    return str(uuid.uuid5(GUID_NAMESPACE, f"component:{arch}:{key}")).upper()

"""WiX source for the NPU Studio MSI, generated from `product.Product` and a staged payload folder.

Two schemas from one model:
- WiX v4+ (`Package` element) for `wix build -arch arm64|x64` on Windows, the shipping MSIs;
- WiX v3 (`Product` element) for `wixl -a x64` on Linux, the check MSI CI builds and inspects.

Layout: per-user install into %LOCALAPPDATA%\\Programs\\NPU Studio (no admin), one component per file
(GUID derived from the install-relative path, so upgrades keep components), a Start-menu shortcut,
MajorUpgrade, the product icon. Uninstall keeps the user's data (%LOCALAPPDATA%\\NPU Studio, outside the
install folder); `msiexec /x ... REMOVEUSERDATA=1` removes it too, with a command custom action that
runs after the uninstall has finished and is ignored if it fails.
"""

from __future__ import annotations

import hashlib
import json
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from installer.product import Product, component_guid

V3_NS = "http://schemas.microsoft.com/wix/2006/wi"
V4_NS = "http://wixtoolset.org/schemas/v4/wxs"
PAYLOAD_INFO = "_internal/payload.json"
ICON_ID = "NpuStudioIcon.ico"
INSTALL_DIR_ID = "INSTALLFOLDER"
PROGRAMS_DIR_ID = "LocalProgramsFolder"
# Windows MAX_PATH is 260; the install root %LOCALAPPDATA%\Programs\NPU Studio\ on a typical profile
# takes ~55 characters, and long user names add more. Paths past this are refused at build time.
MAX_RELATIVE_PATH = 180


class PayloadError(Exception):
    """The staged payload cannot be turned into an MSI (missing, empty, or with unusable paths)."""


@dataclass
class PayloadFile:
    rel: str  # posix path relative to the payload root
    source: Path
    size: int

    @property
    def file_id(self) -> str:
        return _ident("F", self.rel)

    @property
    def component_id(self) -> str:
        return _ident("C", self.rel)


@dataclass
class PayloadDir:
    rel: str  # "" for the payload root
    name: str
    dirs: list[PayloadDir] = field(default_factory=list)
    files: list[PayloadFile] = field(default_factory=list)

    @property
    def dir_id(self) -> str:
        return INSTALL_DIR_ID if not self.rel else _ident("D", self.rel)

    def walk(self) -> list[PayloadDir]:
        out = [self]
        for child in self.dirs:
            out.extend(child.walk())
        return out

    def all_files(self) -> list[PayloadFile]:
        return [f for d in self.walk() for f in d.files]


@dataclass(frozen=True)
class PayloadInfo:
    entry: str  # install-relative path of what the shortcut starts
    kind: str  # "frozen" (PyInstaller) or "pystub" (wheels + a launcher that needs Python)
    arch: str


def _ident(prefix: str, rel: str) -> str:
    digest = hashlib.sha1(rel.lower().encode("utf-8")).hexdigest()[:24].upper()
    return f"{prefix}_{digest}"


def read_payload_info(root: Path) -> PayloadInfo:
    path = root / PAYLOAD_INFO
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return PayloadInfo(entry=str(data["entry"]), kind=str(data["kind"]), arch=str(data["arch"]))
    except FileNotFoundError as exc:
        raise PayloadError(f"{path} is missing: stage the payload first (installer/build.py stage)") from exc
    except (ValueError, KeyError) as exc:
        raise PayloadError(f"{path} is not a valid payload description: {exc}") from exc


def scan_payload(root: Path) -> PayloadDir:
    """Walk the staged folder into a deterministic tree (sorted, case-collision and path-length checked)."""
    if not root.is_dir():
        raise PayloadError(f"payload folder {root} does not exist")

    def visit(path: Path, rel: str) -> PayloadDir:
        node = PayloadDir(rel=rel, name=path.name)
        seen: dict[str, str] = {}
        for child in sorted(path.iterdir(), key=lambda p: p.name):
            child_rel = f"{rel}/{child.name}" if rel else child.name
            lowered = child.name.lower()
            if lowered in seen:
                raise PayloadError(f"{child_rel} and {seen[lowered]} differ only in case: Windows cannot hold both")
            seen[lowered] = child_rel
            if len(child_rel) > MAX_RELATIVE_PATH:
                raise PayloadError(
                    f"{child_rel} is {len(child_rel)} characters long; installed paths must stay under "
                    f"{MAX_RELATIVE_PATH} to fit Windows' MAX_PATH"
                )
            if child.is_symlink():
                raise PayloadError(f"{child_rel} is a symbolic link; stage real files only")
            if child.is_dir():
                sub = visit(child, child_rel)
                if sub.files or sub.dirs:
                    node.dirs.append(sub)
            elif child.is_file():
                node.files.append(PayloadFile(rel=child_rel, source=child.resolve(), size=child.stat().st_size))
        return node

    tree = visit(root, "")
    if not tree.all_files():
        raise PayloadError(f"payload folder {root} holds no files")
    return tree


# ---- shared pieces -----------------------------------------------------------------------------------


def _sub(parent: ET.Element, tag: str, **attrs: str) -> ET.Element:
    return ET.SubElement(parent, tag, {k: v for k, v in attrs.items() if v is not None})


def _remove_user_data_command(product: Product) -> str:
    return f'/c rmdir /s /q "[LocalAppDataFolder]{product.user_data_dir_name}"'


def _remove_user_data_condition(product: Product) -> str:
    return f'REMOVE~="ALL" AND {product.remove_user_data_property}="1" AND NOT UPGRADINGPRODUCTCODE'


def _source(path: Path, base: Path | None) -> str:
    """wixl wants Source paths relative to its working directory; WiX v4 takes either."""
    return os.path.relpath(path, base) if base is not None else str(path)


def _dir_components(
    parent: ET.Element,
    node: PayloadDir,
    arch: str,
    v4: bool,
    refs: list[str],
    product: Product,
    base: Path | None,
) -> None:
    """Components for `node`'s files (one per file) and its folder's removal, then its subfolders."""
    first = True
    for f in node.files:
        comp = _sub(parent, "Component", Id=f.component_id, Guid=component_guid(f.rel, arch))
        if v4:
            comp.set("Bitness", "always64")
        else:
            comp.set("Win64", "yes")
        _sub(comp, "File", Id=f.file_id, Name=f.source.name, Source=_source(f.source, base), KeyPath="yes")
        if first:
            _sub(comp, "RemoveFolder", Id=_ident("R", node.rel or "."), On="uninstall")
            first = False
        refs.append(f.component_id)
    if first:  # a folder that only holds folders: its removal needs a component of its own
        comp_id = _ident("K", node.rel or ".")
        comp = _sub(parent, "Component", Id=comp_id, Guid=component_guid(f"{node.rel}/", arch))
        if v4:
            comp.set("Bitness", "always64")
        else:
            comp.set("Win64", "yes")
        _sub(comp, "RemoveFolder", Id=_ident("R", node.rel or "."), On="uninstall")
        _sub(
            comp,
            "RegistryValue",
            Root="HKCU",
            Key=f"Software\\{product.manufacturer}\\{product.name}\\Folders",
            Name=node.rel or ".",
            Type="integer",
            Value="1",
            KeyPath="yes",
        )
        refs.append(comp_id)
    for child in node.dirs:
        child_el = _sub(parent, "Directory", Id=child.dir_id, Name=child.name)
        _dir_components(child_el, child, arch, v4, refs, product, base)


def _shell_component(parent: ET.Element, product: Product, arch: str, entry: str, v4: bool) -> str:
    """Start-menu shortcut, the Programs folder's removal and an HKCU key path (per-user rules)."""
    comp_id = "C_Shell"
    comp = _sub(parent, "Component", Id=comp_id, Guid=component_guid("<shell>", arch))
    if v4:
        comp.set("Bitness", "always64")
    else:
        comp.set("Win64", "yes")
    _sub(
        comp,
        "Shortcut",
        Id="StartMenuShortcut",
        Directory="ProgramMenuFolder",
        Name=product.shortcut_name,
        Description=product.description,
        Target=f"[{INSTALL_DIR_ID}]{entry.replace('/', chr(92))}",
        WorkingDirectory=INSTALL_DIR_ID,
        Icon=ICON_ID,
    )
    _sub(comp, "RemoveFolder", Id="R_Programs", On="uninstall")
    _sub(
        comp,
        "RegistryValue",
        Root="HKCU",
        Key=f"Software\\{product.manufacturer}\\{product.name}",
        Name="InstallFolder",
        Type="string",
        Value=f"[{INSTALL_DIR_ID}]",
        KeyPath="yes",
    )
    return comp_id


def _finish(root: ET.Element) -> str:
    ET.indent(root, space="  ")
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _check_entry(tree: PayloadDir, info: PayloadInfo) -> None:
    if info.entry not in {f.rel for f in tree.all_files()}:
        raise PayloadError(f"the payload's entry point {info.entry} is not in the payload")


# ---- WiX v3 (wixl) ------------------------------------------------------------------------------------


def generate_v3(product: Product, payload: Path, icon: Path, arch: str = "x64", base: Path | None = None) -> str:
    """WiX v3 source for wixl (x64 only: wixl has no arm64). Sources are relative to `base` if given."""
    info = read_payload_info(payload)
    tree = scan_payload(payload)
    _check_entry(tree, info)
    wix = ET.Element("Wix", xmlns=V3_NS)
    prod = _sub(
        wix,
        "Product",
        Id=product.product_code(arch, info.kind),
        Name=product.name,
        Language=str(product.language),
        Codepage="1252",
        Version=product.msi_version,
        Manufacturer=product.manufacturer,
        UpgradeCode=product.upgrade_code,
    )
    _sub(
        prod,
        "Package",
        InstallerVersion="500",
        Compressed="yes",
        InstallScope="perUser",
        InstallPrivileges="limited",
        Description=f"{product.name} {product.version} ({arch})",
        Comments=product.description,
        Manufacturer=product.manufacturer,
    )
    _sub(
        prod,
        "MajorUpgrade",
        DowngradeErrorMessage=f"A newer version of {product.name} is already installed.",
    )
    _sub(prod, "MediaTemplate", EmbedCab="yes")
    _sub(prod, "Icon", Id=ICON_ID, SourceFile=_source(icon.resolve(), base))
    _sub(prod, "Property", Id="ARPPRODUCTICON", Value=ICON_ID)
    _sub(prod, "Property", Id="ARPNOMODIFY", Value="1")
    target = _sub(prod, "Directory", Id="TARGETDIR", Name="SourceDir")
    local = _sub(target, "Directory", Id="LocalAppDataFolder")
    programs = _sub(local, "Directory", Id=PROGRAMS_DIR_ID, Name="Programs")
    install = _sub(programs, "Directory", Id=INSTALL_DIR_ID, Name=product.install_dir_name)
    _sub(target, "Directory", Id="ProgramMenuFolder")
    refs: list[str] = []
    _dir_components(install, tree, arch, False, refs, product, base)
    refs.append(_shell_component(programs, product, arch, info.entry, False))
    _remove_user_data(prod, product, v3=True)
    feature = _sub(prod, "Feature", Id="Main", Title=product.name, Level="1", Absent="disallow")
    for ref in refs:
        _sub(feature, "ComponentRef", Id=ref)
    return _finish(wix)


def _remove_user_data(parent: ET.Element, product: Product, v3: bool) -> None:
    """REMOVEUSERDATA=1 on uninstall: run `cmd /c rmdir` on the user data folder after InstallFinalize.
    WiX v3 puts a custom action's condition in the element's text, v4 in a `Condition` attribute."""
    _sub(parent, "CustomAction", Id="SetRemoveUserDataCmd", Property="NPUSTUDIO_CMD", Value="[System64Folder]cmd.exe")
    _sub(
        parent,
        "CustomAction",
        Id="RemoveUserData",
        Property="NPUSTUDIO_CMD",
        ExeCommand=_remove_user_data_command(product),
        Execute="immediate",
        Impersonate="yes",
        Return="ignore",
    )
    seq = _sub(parent, "InstallExecuteSequence")
    steps = (
        ({"Action": "SetRemoveUserDataCmd", "Before": "RemoveUserData"}, 'REMOVE~="ALL"'),
        ({"Action": "RemoveUserData", "After": "InstallFinalize"}, _remove_user_data_condition(product)),
    )
    for attributes, condition in steps:
        if v3:
            _sub(seq, "Custom", **attributes).text = condition
        else:
            _sub(seq, "Custom", **attributes, Condition=condition)


# ---- WiX v4+ (wix build) ------------------------------------------------------------------------------


def generate_v4(product: Product, payload: Path, icon: Path, arch: str) -> str:
    """WiX v4+ source for `wix build -arch arm64|x64`."""
    info = read_payload_info(payload)
    tree = scan_payload(payload)
    _check_entry(tree, info)
    wix = ET.Element("Wix", xmlns=V4_NS)
    pkg = _sub(
        wix,
        "Package",
        Name=product.name,
        Manufacturer=product.manufacturer,
        Version=product.msi_version,
        UpgradeCode=product.upgrade_code,
        ProductCode=product.product_code(arch, info.kind),
        Language=str(product.language),
        Codepage="1252",
        Scope="perUser",
        Compressed="yes",
        InstallerVersion="500",
    )
    _sub(
        pkg,
        "SummaryInformation",
        Description=f"{product.name} {product.version} ({arch})",
        Manufacturer=product.manufacturer,
    )
    _sub(
        pkg,
        "MajorUpgrade",
        Schedule="afterInstallValidate",
        DowngradeErrorMessage=f"A newer version of {product.name} is already installed.",
    )
    _sub(pkg, "MediaTemplate", EmbedCab="yes")
    _sub(pkg, "Icon", Id=ICON_ID, SourceFile=str(icon.resolve()))
    _sub(pkg, "Property", Id="ARPPRODUCTICON", Value=ICON_ID)
    _sub(pkg, "Property", Id="ARPNOMODIFY", Value="1")
    _sub(pkg, "Property", Id=product.remove_user_data_property, Secure="yes")
    local = _sub(pkg, "StandardDirectory", Id="LocalAppDataFolder")
    programs = _sub(local, "Directory", Id=PROGRAMS_DIR_ID, Name="Programs")
    install = _sub(programs, "Directory", Id=INSTALL_DIR_ID, Name=product.install_dir_name)
    _sub(pkg, "StandardDirectory", Id="ProgramMenuFolder")
    refs: list[str] = []
    _dir_components(install, tree, arch, True, refs, product, None)
    refs.append(_shell_component(programs, product, arch, info.entry, True))
    _remove_user_data(pkg, product, v3=False)
    feature = _sub(pkg, "Feature", Id="Main", Title=product.name, Level="1", AllowAbsent="no")
    for ref in refs:
        _sub(feature, "ComponentRef", Id=ref)
    return _finish(wix)


def generate(product: Product, payload: Path, icon: Path, arch: str, schema: str, base: Path | None = None) -> str:
    if schema == "v3":
        return generate_v3(product, payload, icon, arch, base)
    if schema == "v4":
        return generate_v4(product, payload, icon, arch)
    raise ValueError(f"unknown WiX schema {schema!r} (v3 for wixl, v4 for wix build)")

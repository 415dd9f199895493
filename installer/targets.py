"""The platforms the app ships on and what each must install: the marker environment pip sees there, the
ONNX Runtime and onnxruntime-genai builds expected (and forbidden) per target, and the Python versions
each target must resolve for. Plain data; installer/resolve.py resolves against it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from packaging.markers import default_environment
from packaging.specifiers import SpecifierSet

# Distributions that each contain a whole ONNX Runtime (the `onnxruntime` import package). Two of them
# in one environment overwrite each other's files, and pip does not warn.
WHOLE_ORT_BUILDS = frozenset(
    {
        "onnxruntime",
        "onnxruntime-directml",
        "onnxruntime-gpu",
        "onnxruntime-openvino",
        "onnxruntime-windowsml",
        "onnxruntime-training",
    }
)
# onnxruntime-qnn 1.x was a whole ORT build too; 2.x is a plugin EP on top of `onnxruntime`.
QNN_PLUGIN = "onnxruntime-qnn"
QNN_PLUGIN_SPEC = SpecifierSet(">=2")
GENAI_BUILDS = frozenset(
    {"onnxruntime-genai", "onnxruntime-genai-directml", "onnxruntime-genai-cuda", "onnxruntime-genai-winml"}
)
# The import package every whole ORT build writes: a requirement on this name is met by whichever build it is.
ORT_IMPORT_NAME = "onnxruntime"
WINDOWS_FORBIDDEN = frozenset(
    {"onnxruntime", "onnxruntime-directml", "onnxruntime-genai", "onnxruntime-genai-directml", "onnxruntime-openvino"}
)
NON_WINDOWS_FORBIDDEN = frozenset({"onnxruntime-windowsml", "onnxruntime-genai-winml", "windowsml"})
# Windows ML build: a whole ORT whose version carries a build stamp (1.30.0.202609102321).
WINDOWSML_ORT = "==1.30.0.202609102321"


@dataclass(frozen=True)
class Target:
    """A platform the app ships on, with the marker environment pip would see there."""

    name: str
    pip_platforms: tuple[str, ...]
    sys_platform: str
    platform_machine: str
    platform_system: str
    os_name: str
    # name -> version specifier the resolution must satisfy ("" = any version)
    expected: Mapping[str, str]
    forbidden: frozenset[str] = frozenset()

    def marker_environment(self, python_version: str) -> dict[str, str]:
        env: dict[str, str] = {key: str(value) for key, value in default_environment().items()}
        major_minor = ".".join(python_version.split(".")[:2])
        full = python_version if python_version.count(".") >= 2 else f"{major_minor}.0"
        env.update(
            {
                "implementation_name": "cpython",
                "implementation_version": full,
                "platform_python_implementation": "CPython",
                "python_version": major_minor,
                "python_full_version": full,
                "sys_platform": self.sys_platform,
                "platform_machine": self.platform_machine,
                "platform_system": self.platform_system,
                "os_name": self.os_name,
                "platform_release": "",
                "platform_version": "",
            }
        )
        return env


TARGETS: dict[str, Target] = {
    "win_arm64": Target(
        name="win_arm64",
        pip_platforms=("win_arm64",),
        sys_platform="win32",
        platform_machine="ARM64",
        platform_system="Windows",
        os_name="nt",
        expected={
            "onnxruntime-windowsml": WINDOWSML_ORT,
            "onnxruntime-genai-winml": "==0.18.0",
            "windowsml": "",
            "onnxruntime-qnn": ">=2",
        },
        forbidden=WINDOWS_FORBIDDEN | {"onnxruntime-ep-openvino"},
    ),
    "win_amd64": Target(
        name="win_amd64",
        pip_platforms=("win_amd64",),
        sys_platform="win32",
        platform_machine="AMD64",
        platform_system="Windows",
        os_name="nt",
        expected={
            "onnxruntime-windowsml": WINDOWSML_ORT,
            "onnxruntime-genai-winml": "==0.18.0",
            "windowsml": "",
            "onnxruntime-ep-openvino": "",
        },
        forbidden=WINDOWS_FORBIDDEN | {"onnxruntime-qnn"},
    ),
    "linux_x86_64": Target(
        name="linux_x86_64",
        # PySide6 6.12 needs glibc >= 2.34. pip does not widen `--platform` to older manylinux tags,
        # so every tag a glibc 2.34 machine accepts is listed.
        pip_platforms=(
            *(f"manylinux_2_{minor}_x86_64" for minor in range(34, 16, -1)),
            "manylinux2014_x86_64",
        ),
        sys_platform="linux",
        platform_machine="x86_64",
        platform_system="Linux",
        os_name="posix",
        expected={"onnxruntime": "==1.32.0", "onnxruntime-genai": "==0.18.0", "onnxruntime-ep-openvino": ""},
        forbidden=NON_WINDOWS_FORBIDDEN | {"onnxruntime-qnn", "onnxruntime-directml", "onnxruntime-gpu"},
    ),
}


# Python versions each target must resolve for: 3.12 is what the Windows MSIs ship, 3.11 the oldest the
# project supports on Linux.
REQUIRED_PYTHONS: dict[str, tuple[str, ...]] = {
    "win_arm64": ("3.12",),
    "win_amd64": ("3.12",),
    "linux_x86_64": ("3.11",),
}
# Also reported, without failing the check: whether Windows could use 3.11 as well.
INFO_PYTHONS: dict[str, tuple[str, ...]] = {"win_arm64": ("3.11",), "win_amd64": ("3.11",)}

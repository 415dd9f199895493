"""Shared test set-up: isolated user folders, headless Qt, and the real demo models built on demand."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

REPO = Path(__file__).resolve().parent.parent

# Test tiers by folder: `pytest -m "not e2e"` is the fast tier (no demo models built, no real MSI payload).
TIER_BY_FOLDER = {"unit": "unit", "ui": "ui", "reliability": "reliability", "e2e": "e2e"}
# Outside tests/e2e, a test is end-to-end when it needs the real demo models or the real installer payload.
E2E_FIXTURES = frozenset({"demo_classifier", "demo_chat_model", "real", "real_arm64"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.path)).relative_to(REPO / "tests").parts
        tier = TIER_BY_FOLDER.get(parts[0]) if len(parts) > 1 else None
        if tier is not None:
            item.add_marker(tier)
        if tier != "e2e" and E2E_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker("e2e")
RECIPE = REPO / "assets" / "recipes" / "build_demo_models.py"
MODELS = REPO / "assets" / "models"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test gets its own user folders (no test reads or writes the real config, data or cache) and
    a clean record of failed devices."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("NPU_STUDIO_HOME", str(home))
    yield home
    from engines.runtime.fallback import HEALTH
    from engines.runtime.registration import set_plugin_probe

    HEALTH.reset()  # a device one test marked failed must not stay failed for the next
    set_plugin_probe(None)  # nor the plugin probe a test's app or server start turned on


def _build_demo(only: str) -> None:
    subprocess.run([sys.executable, str(RECIPE), "--only", only], check=True, cwd=REPO)


@pytest.fixture(scope="session")
def demo_classifier() -> Path:
    """The real EfficientNet-Lite0 demo model (the recipe is idempotent: a no-op when it is built)."""
    _build_demo("classifier")
    return MODELS / "efficientnet-lite0"


@pytest.fixture(scope="session")
def demo_chat_model() -> Path:
    """The real SmolLM2-135M-Instruct demo model in onnxruntime-genai format."""
    _build_demo("chat")
    return MODELS / "smollm2-135m-instruct"


@pytest.fixture
def fake_runtime() -> Iterator[Callable[[Any], Any]]:
    """`fake_runtime(FakeOrt(...))` puts a fake onnxruntime at the engines' runtime boundary for one test;
    the real one (and a clean plugin registry) is back afterwards."""
    from engines import runtime
    from engines.runtime import registration

    def install(fake: Any) -> Any:
        registration.reset_registrations()
        runtime.use_fake(fake)
        return fake

    yield install
    runtime.use_fake(None)
    registration.reset_registrations()


@pytest.fixture(scope="session")
def samples() -> Path:
    return REPO / "assets" / "samples"


from tests.fixtures.machine_home import MachineHome, build_home  # noqa: E402
from tests.fixtures.tiny_llm import tiny_llm  # noqa: E402, F401  (the tiny genai chat model, built once)


@pytest.fixture
def machine(tiny_llm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> MachineHome:  # noqa: F811 (a fixture)
    """A home holding the model folders other local-AI apps keep (tests/fixtures/machine_home.py), in use, with
    no `foundry` CLI on PATH (the scan looks in Foundry Local's default folders)."""
    built = build_home(tmp_path / "home", tiny_llm)
    built.use(monkeypatch)
    monkeypatch.setenv("PATH", str(tmp_path / "no-foundry"))
    return built

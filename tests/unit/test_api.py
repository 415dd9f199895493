"""The public API: a classifier opened through `engines` keeps working when its device fails mid-batch
(the rest of the photos move, nothing is reported twice), and says where it runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import engines
from engines.api import classifier_over
from engines.models.lookup import locate_model
from engines.runtime.fallback import HEALTH
from engines.types import CPU_EP, Classification, ClassScore, DeviceChoice, Placement
from tests.unit.tiny_models import colour_classifier

DML = "DmlExecutionProvider"


class Engine:
    """An engine on one EP that fails (device removed) after `fail_after` photos."""

    def __init__(self, ep: str, fail_after: int | None = None) -> None:
        self.placement = Placement("x", (ep,), (ep,), ((ep, 3),))
        self.fail_after = fail_after
        self.seen: list[str] = []

    def classify_many(self, paths: list[str], k: int = 5, cancel: Any = None, on_index: Any = None) -> Any:
        for i, path in enumerate(paths):
            if self.fail_after is not None and len(self.seen) >= self.fail_after:
                raise RuntimeError("DirectML: DXGI_ERROR_DEVICE_REMOVED (0x887A0005)")
            self.seen.append(str(path))
            on_index(i, Classification(str(path), (ClassScore(0, self.placement.primary_ep, 1.0),), 1.0, 1.0))
        return []


def test_a_device_lost_mid_batch_moves_only_the_rest_and_reports_each_photo_once(tmp_path: Path) -> None:
    gpu, cpu = Engine(DML, fail_after=2), Engine(CPU_EP)
    made: list[DeviceChoice] = []

    def make(choice: DeviceChoice) -> Engine:
        made.append(choice)
        return gpu if choice.ep == DML else cpu

    clf = classifier_over(make, DeviceChoice(ep=DML), locate_model(tmp_path), ask=engines.accept_first)
    streamed: list[Classification] = []
    photos = [f"p{i}.png" for i in range(5)]
    results = clf.classify_many(photos, on_result=streamed.append)
    assert [r.path for r in results] == photos
    assert sorted(r.path for r in streamed) == photos, "each photo reported exactly once"
    assert gpu.seen == photos[:2] and cpu.seen == photos[2:]
    assert [r.top[0].label for r in results] == [DML, DML, CPU_EP, CPU_EP, CPU_EP]
    assert HEALTH.is_failed(DML) and clf.placement.primary_ep == CPU_EP
    assert "0x887A0005" in " ".join(clf.notices)


def test_without_ask_the_error_carries_the_offer_and_the_next_call_plans_again(tmp_path: Path) -> None:
    engines_made: list[Engine] = []

    def make(choice: DeviceChoice) -> Engine:
        engine = Engine(DML, fail_after=0) if choice.ep == DML else Engine(CPU_EP)
        engines_made.append(engine)
        return engine

    clf = classifier_over(make, DeviceChoice(ep=DML), locate_model(tmp_path))
    with pytest.raises(engines.DeviceFailedError) as caught:
        clf.classify_many(["a.png"])
    assert caught.value.device_lost and caught.value.failure_code == "0x887A0005"
    assert [c.describe() for c in caught.value.offer.alternatives] == ["CPU only"]
    with pytest.raises(engines.DeviceUnavailableError, match="failed earlier in this run"):
        clf.classify_many(["a.png"])  # the failed device is not used again; the choice named it explicitly


def test_open_classifier_runs_a_real_model_by_name_from_the_library(tmp_path: Path) -> None:
    colour_classifier(tmp_path / "lib" / "colours", size=8)
    clf = engines.open_classifier("colours", "cpu", library=[tmp_path / "lib"], warmup=False)
    assert clf.placement.primary_ep == CPU_EP and not clf.placement.fell_back
    assert clf.model_folder == (tmp_path / "lib" / "colours").resolve()
    # its threads wait without spinning: the folder pipeline's decoders share the cores (engines/vision/pipeline.py)
    options = clf.engine.session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    with pytest.raises(engines.ModelError, match="installed: colours"):
        engines.open_classifier("nope", "cpu", library=[tmp_path / "lib"])

"""The Windows ML EP download in the app: offered only when the catalog has EPs not on this PC, only
with downloads allowed, after consent; progress, cancel, and the devices found again afterwards."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from app.hosts.devices import DevicesHost
from engines.runtime import catalog
from tests.unit.fake_ort import QNN, snapdragon
from tests.unit.fake_windowsml import EpReadyState, FakeCatalogEp, FakeWindowsMl
from ui.devices.ep_download import EpDownloadCard

OFFER = [(QNN, "2.2420.43")]


@pytest.fixture
def card(qtbot: Any) -> EpDownloadCard:
    widget = EpDownloadCard()
    qtbot.addWidget(widget)
    return widget


def test_nothing_to_download_hides_the_card(card: EpDownloadCard) -> None:
    card.set_offer([], downloads_allowed=True)
    assert card.isHidden()


def test_offline_the_download_cannot_be_started(card: EpDownloadCard) -> None:
    card.set_offer(OFFER, downloads_allowed=False)
    assert not card.isHidden() and "QNN 2.2420.43" in card.title.text()
    assert not card.download_button.isEnabled() and "Allow downloads in Settings" in card.detail.text()


def test_the_download_starts_only_after_consent(
    qtbot: Any, card: EpDownloadCard, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []
    monkeypatch.setattr(card, "_confirm", lambda text: asked.append(text) or False)
    card.set_offer(OFFER, downloads_allowed=True)
    with qtbot.assertNotEmitted(card.download_requested):
        card.download_button.click()
    assert "Windows Update" in asked[0] and card.cancel_button.isHidden()
    monkeypatch.setattr(card, "_confirm", lambda text: True)
    with qtbot.waitSignal(card.download_requested) as blocker:
        card.download_button.click()
    assert blocker.args == [[QNN]]
    assert not card.cancel_button.isHidden() and not card.progress.isHidden()
    card.show_progress(QNN, 0.5)
    assert card.progress.value() == 50
    with qtbot.waitSignal(card.cancel_requested):
        card.cancel_button.click()
    card.show_results(["The QNN download was cancelled."])
    assert card.cancel_button.isHidden() and "cancelled" in card.detail.text()


@pytest.fixture
def catalog_pc(fake_runtime: Callable[[Any], Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCatalogEp]:
    ep = FakeCatalogEp(QNN, "2.2420.43", r"C:\WinML\QNN\onnxruntime_providers_qnn.dll", EpReadyState.NotPresent)
    fake = snapdragon(qnn_plugin=None)
    fake.windowsml, fake.windows_build = FakeWindowsMl([ep]), 26100
    fake_runtime(fake)
    monkeypatch.setattr(catalog, "windows_update_reachable", lambda timeout=3.0: True)
    yield ep


def test_the_host_downloads_then_finds_the_npu(qtbot: Any, catalog_pc: FakeCatalogEp) -> None:
    host = DevicesHost()
    try:
        signals = [(host.downloaded, "downloaded"), (host.devices_found, "devices_found")]
        with qtbot.waitSignals(signals, order="strict", timeout=20_000) as blocker:
            host.download_eps([QNN])
        (result,) = blocker.all_signals_and_args[0].args[0]
        assert result.ok
        report = blocker.all_signals_and_args[1].args[0]
        npu = report.find_ep(QNN)[0]
        assert npu.usable and npu.source == "Windows ML catalog"
    finally:
        assert host.shutdown()


def test_the_host_cancels_a_download(qtbot: Any, catalog_pc: FakeCatalogEp) -> None:
    catalog_pc.hold = threading.Event()
    host = DevicesHost()
    try:
        with qtbot.waitSignal(host.downloaded, timeout=20_000) as blocker:
            host.download_eps([QNN])
            qtbot.wait(200)
            host.cancel_download()
        (result,) = blocker.args[0]
        assert result.status == catalog.PrepareStatus.CANCELLED
        assert catalog_pc.state == EpReadyState.NotPresent
    finally:
        assert host.shutdown()


def test_the_app_offers_the_download_only_with_downloads_allowed(
    make_studio: Any, qtbot: Any, catalog_pc: FakeCatalogEp, monkeypatch: pytest.MonkeyPatch
) -> None:
    studio = make_studio()
    studio.show()
    card = studio.devices_view.downloads
    qtbot.waitUntil(lambda: not card.isHidden(), timeout=60_000)
    assert "QNN 2.2420.43" in card.title.text()
    assert not card.download_button.isEnabled()  # downloads are off by default (offline demos)
    studio._on_allow_downloads(True)
    assert card.download_button.isEnabled()
    monkeypatch.setattr(card, "_confirm", lambda text: True)
    with qtbot.waitSignal(studio.devices.downloaded, timeout=20_000) as blocker:
        card.download_button.click()
    assert blocker.args[0][0].ok
    qtbot.waitUntil(lambda: card.isHidden(), timeout=20_000)  # rediscovered: nothing left to download
    assert any(d.usable and d.ep == QNN for d in studio.devices_view.devices)

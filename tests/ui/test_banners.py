"""A view's banners: one per cause, the newest on top, and a banner goes when its cause is cleared."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from ui.common.widgets import BannerArea


def test_one_banner_per_cause_the_newest_on_top(qtbot: QtBot) -> None:
    area = BannerArea(limit=3)
    qtbot.addWidget(area)
    area.show_message("README.md is not a photo.", "Drop a JPEG or PNG.", "error", cause="input")
    area.show_message("Classified on the CPU.", "", "info", cause="device")
    # the user's next input replaces the banner its last input raised, and comes first
    area.show_message("The clipboard holds text, not a photo.", "", "warning", cause="input")
    assert area.messages() == ["The clipboard holds text, not a photo.", "Classified on the CPU."]
    assert area.banner("input") is not None and area.banner("input").severity == "warning"  # type: ignore[union-attr]


def test_the_same_banner_again_is_kept_and_a_cleared_cause_takes_its_banner_away(qtbot: QtBot) -> None:
    area = BannerArea()
    qtbot.addWidget(area)
    first = area.show_message("No usable NPU.", "Turn strict mode off.", "error", cause="device")
    assert area.show_message("No usable NPU.", "Turn strict mode off.", "error", cause="device") is first
    area.show_message("Saved.", "", "info", cause="export")
    area.clear("device")
    assert area.messages() == ["Saved."] and area.banner("device") is None
    area.clear()
    assert area.messages() == [] and area.isHidden()


def test_banners_without_a_cause_replace_each_other_and_the_oldest_cause_goes_past_the_limit(qtbot: QtBot) -> None:
    area = BannerArea(limit=2)
    qtbot.addWidget(area)
    area.show_message("one")
    area.show_message("two")
    assert area.messages() == ["two"]
    area.show_message("a", cause="a")
    area.show_message("b", cause="b")
    assert area.messages() == ["b", "a"]


def test_dismissing_a_banner_forgets_its_cause(qtbot: QtBot) -> None:
    area = BannerArea()
    qtbot.addWidget(area)
    banner = area.show_message("Could not save.", "", "error", cause="export")
    banner.dismiss()
    assert area.banner("export") is None and area.messages() == []

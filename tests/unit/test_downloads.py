"""Catalog downloads against a Hugging Face Hub look-alike on 127.0.0.1 (tests/unit/fake_hub.py, started
here, never the internet): full download, a dropped connection resumed, a later-run resume, cancel,
checksums, a full disk, forbidden downloads, the CLI's setting and flag, and the shipped catalog."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from engines.errors import CancelledError, ModelError, StorageError
from engines.models.catalog import find_entry, load_catalog
from engines.models.downloads import DownloadError, DownloadProgress, download_model, partial_bytes, staging_dir
from engines.models.library import scan_library, verify_model
from engines.models.manifest import read_manifest, sha256_file
from engines.types import CancelToken
from tests.unit.fake_hub import COMMIT, REPO_ID, SUBFOLDER, FakeHub, serve, write_catalog
from tests.unit.netguard import loopback_only

REPO = Path(__file__).resolve().parents[2]
BIG = "model.onnx.data"  # the largest file: where interruptions happen


@pytest.fixture
def hub(tiny_llm: Path) -> Iterator[tuple[FakeHub, str]]:
    with serve(tiny_llm) as served:
        yield served


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Loopback only; small download chunks (so progress and cancel happen mid-file); no retry sleeps."""
    import huggingface_hub.constants as hf_constants
    import huggingface_hub.file_download as hf_download

    monkeypatch.setattr(hf_constants, "DOWNLOAD_CHUNK_SIZE", 64 * 1024)
    monkeypatch.setattr(hf_download, "time", SimpleNamespace(sleep=lambda _s: None))
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    with loopback_only() as blocked:
        yield
    assert not blocked, f"network access attempted: {blocked}"


def _catalog(tmp_path: Path, **overrides: Any) -> Path:
    return write_catalog(tmp_path, **overrides)


@pytest.fixture
def user(tmp_path: Path) -> Path:
    path = tmp_path / "models"
    path.mkdir()
    return path


def _entry(tmp_path: Path, **overrides: Any) -> Any:
    return find_entry(load_catalog(_catalog(tmp_path, **overrides)), "tiny-chat-cpu")


def _variant_files(hub: FakeHub) -> dict[str, bytes]:
    return {p[len(SUBFOLDER) + 1:]: d for p, d in hub.files.items() if p.startswith(SUBFOLDER + "/")}


def _assert_installed(user: Path, hub: FakeHub) -> None:
    folder = user / "tiny-chat-cpu"
    expected = _variant_files(hub)
    assert {p.name for p in folder.iterdir()} == set(expected) | {"manifest.json"}
    for rel, data in expected.items():
        assert sha256_file(folder / rel) == hashlib.sha256(data).hexdigest(), rel
    assert verify_model(folder).ok
    assert not staging_dir(user, "tiny-chat-cpu").exists()


# --------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------


def test_full_download_lands_verified_in_the_library(hub: tuple[FakeHub, str], user: Path, tmp_path: Path) -> None:
    state, endpoint = hub
    seen: list[DownloadProgress] = []
    model = download_model(_entry(tmp_path), user, allowed=True, endpoint=endpoint, progress=seen.append)
    _assert_installed(user, state)
    assert model.kind == "genai-llm" and model.licence == "MIT" and model.devices == ("cpu",)
    assert model.precision == "fp32" and model.context_length == 256
    source = read_manifest(model.folder).source
    assert source["repo_id"] == REPO_ID and source["commit"] == COMMIT and source["subfolder"] == SUBFOLDER
    assert [e.name for e in scan_library(None, user)] == ["tiny-chat-cpu"]
    # Only the variant's files were fetched (allow-patterns), each once, whole.
    fetched = {p for m, p, _ in state.log if m == "GET" and "/resolve/" in p}
    assert fetched == {f"/{REPO_ID}/resolve/main/{SUBFOLDER}/{rel}" for rel in _variant_files(state)}
    assert state.gets(f"{SUBFOLDER}/{BIG}") == [""]
    # Progress: monotonic, complete, with many updates inside the big file.
    done = [p.done for p in seen]
    assert done == sorted(done) and seen[-1].done == seen[-1].total == model.size_bytes
    assert sum(1 for p in seen if p.file == BIG) > 10


def test_a_dropped_connection_is_resumed_with_a_range_request(
    hub: tuple[FakeHub, str], user: Path, tmp_path: Path
) -> None:
    state, endpoint = hub
    cut = 3 * 1024 * 1024 + 123
    state.drop_after[f"{SUBFOLDER}/{BIG}"] = cut
    download_model(_entry(tmp_path), user, allowed=True, endpoint=endpoint)
    _assert_installed(user, state)
    ranges = state.gets(f"{SUBFOLDER}/{BIG}")
    assert ranges[0] == "" and len(ranges) == 2
    resumed_at = int(ranges[1].removeprefix("bytes=").split("-")[0])
    assert 0 < resumed_at <= cut and cut - resumed_at < 64 * 1024  # at most the chunk in flight is fetched again


def test_an_interrupted_download_resumes_in_a_later_run(hub: tuple[FakeHub, str], user: Path, tmp_path: Path) -> None:
    state, endpoint = hub
    state.drop_after[f"{SUBFOLDER}/{BIG}"] = 5 * 1024 * 1024
    state.go_offline_after_drop = True  # the network goes away mid-file and does not come back in this run
    with pytest.raises(DownloadError, match="interrupted.*run the same download again: it resumes"):
        download_model(_entry(tmp_path), user, allowed=True, endpoint=endpoint)
    assert not (user / "tiny-chat-cpu").exists()
    kept = partial_bytes(user, "tiny-chat-cpu")
    assert kept > 5_000_000
    state.offline = False
    state.log.clear()
    download_model(_entry(tmp_path), user, allowed=True, endpoint=endpoint)
    _assert_installed(user, state)
    ranges = state.gets(f"{SUBFOLDER}/{BIG}")
    assert len(ranges) == 1 and ranges[0].startswith("bytes=")
    assert int(ranges[0].removeprefix("bytes=").split("-")[0]) >= 5 * 1024 * 1024 - 64 * 1024


def test_cancel_stops_mid_file_keeps_the_partial_and_the_next_run_resumes(
    hub: tuple[FakeHub, str], user: Path, tmp_path: Path
) -> None:
    state, endpoint = hub
    token = CancelToken()

    def progress(p: DownloadProgress) -> None:
        if p.file == BIG and p.file_done > 2 * 1024 * 1024:
            token.cancel()

    with pytest.raises(CancelledError, match="cancelled.*kept so the same download resumes"):
        download_model(_entry(tmp_path), user, allowed=True, endpoint=endpoint, progress=progress, cancel=token)
    assert not (user / "tiny-chat-cpu").exists()
    big = len(state.files[f"{SUBFOLDER}/{BIG}"])
    part = staging_dir(user, "tiny-chat-cpu") / "parts" / f"{BIG}.part"
    kept = part.stat().st_size
    assert 2 * 1024 * 1024 < kept < big  # stopped inside the file
    assert part.read_bytes() == state.files[f"{SUBFOLDER}/{BIG}"][:kept]  # a clean prefix
    state.log.clear()
    download_model(_entry(tmp_path), user, allowed=True, endpoint=endpoint)
    _assert_installed(user, state)
    assert state.gets(f"{SUBFOLDER}/{BIG}") == [f"bytes={kept}-"]  # only the rest was fetched


def test_a_catalog_checksum_mismatch_is_rejected_and_cleaned_up(
    hub: tuple[FakeHub, str], user: Path, tmp_path: Path
) -> None:
    _state, endpoint = hub
    entry = _entry(tmp_path, files=[{"path": "genai_config.json", "sha256": "ab" * 32}])
    with pytest.raises(ModelError, match=r"genai_config.json .* failed its checksum.*from the catalog.*deleted"):
        download_model(entry, user, allowed=True, endpoint=endpoint)
    assert list(user.iterdir()) in ([], [user / ".downloads"])
    assert not staging_dir(user, "tiny-chat-cpu").exists()


def test_corrupted_bytes_fail_the_hubs_lfs_checksum(hub: tuple[FakeHub, str], user: Path, tmp_path: Path) -> None:
    state, endpoint = hub
    state.corrupt.add(f"{SUBFOLDER}/{BIG}")
    with pytest.raises(ModelError, match=r"model.onnx.data .* failed its checksum.*from the hub"):
        download_model(_entry(tmp_path), user, allowed=True, endpoint=endpoint)
    assert not staging_dir(user, "tiny-chat-cpu").exists() and not (user / "tiny-chat-cpu").exists()


def test_a_full_disk_is_refused_before_any_file_is_fetched(
    hub: tuple[FakeHub, str], user: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state, endpoint = hub
    free = 1_000_000
    monkeypatch.setattr(shutil, "disk_usage", lambda _p: shutil._ntuple_diskusage(10**12, 10**12 - free, free))  # type: ignore[attr-defined]
    with pytest.raises(StorageError, match=r"Not enough disk space for this download: it needs 16\.\d MB"):
        download_model(_entry(tmp_path), user, allowed=True, endpoint=endpoint)
    assert state.resolve_requests() == 0  # only the file listing, to learn the sizes
    assert not (user / "tiny-chat-cpu").exists()


def test_forbidden_downloads_touch_nothing(hub: tuple[FakeHub, str], user: Path, tmp_path: Path) -> None:
    state, endpoint = hub
    with pytest.raises(DownloadError, match="Downloads are turned off"):
        download_model(_entry(tmp_path), user, allowed=False, endpoint=endpoint)
    assert state.log == [] and list(user.iterdir()) == []


def test_without_huggingface_hub_downloads_say_what_to_install(
    user: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # as if the package were not installed
    monkeypatch.setitem(sys.modules, "huggingface_hub.constants", None)
    with pytest.raises(DownloadError, match=r"need the huggingface-hub package.*npu-studio\[downloads\]"):
        download_model(_entry(tmp_path), user, allowed=True, endpoint="http://127.0.0.1:9")
    assert list(user.iterdir()) == []


def test_an_unknown_repository_is_a_clear_error(hub: tuple[FakeHub, str], user: Path, tmp_path: Path) -> None:
    _state, endpoint = hub
    with pytest.raises(DownloadError, match="not found on the Hub"):
        download_model(_entry(tmp_path, repo_id="test-org/gone"), user, allowed=True, endpoint=endpoint)


def test_the_endpoint_comes_from_hf_endpoint_at_call_time(
    hub: tuple[FakeHub, str], user: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state, endpoint = hub
    monkeypatch.setenv("HF_ENDPOINT", endpoint)  # after huggingface_hub was imported: still honoured
    download_model(_entry(tmp_path), user, allowed=True)
    _assert_installed(user, state)


# --------------------------------------------------------------------------------------------
# Through the CLI: the setting, the one-off flag
# --------------------------------------------------------------------------------------------


def _cli(args: list[str]) -> int:
    from app.cli import run

    return run(args)


def test_cli_download_obeys_the_setting_and_the_flag(
    hub: tuple[FakeHub, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from app import paths
    from app.storage.settings import Settings, save_settings

    state, endpoint = hub
    assets = tmp_path / "assets"
    assets.mkdir()
    _catalog(assets)
    monkeypatch.setenv("NPU_STUDIO_ASSETS", str(assets))
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    assert _cli(["models", "download", "tiny-chat-cpu"]) == 2
    assert "Downloads are turned off" in capsys.readouterr().err
    assert state.log == []
    assert _cli(["models", "download", "tiny-chat-cpu", "--allow-download", "--name", "once"]) == 0
    assert "Downloaded once" in capsys.readouterr().out
    save_settings(Settings(allow_downloads=True))
    assert _cli(["models", "download", "tiny-chat-cpu"]) == 0
    assert "Downloaded tiny-chat-cpu" in capsys.readouterr().out
    assert {e.name for e in scan_library(None, paths.user_models_dir())} == {"once", "tiny-chat-cpu"}
    assert _cli(["models", "catalog", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["downloads_allowed"] is True and listed["models"][0]["installed"] is True


# --------------------------------------------------------------------------------------------
# The shipped catalog
# --------------------------------------------------------------------------------------------


def test_the_shipped_catalog_names_real_variants_for_every_device() -> None:
    catalog = load_catalog(REPO / "assets" / "catalog.json")
    by_id = {e.id: e for e in catalog}
    assert {d for e in catalog for d in e.devices} == {"cpu", "gpu", "npu"}
    phi = by_id["phi-3.5-mini-instruct-cpu-int4"]
    assert phi.repo_id == "microsoft/Phi-3.5-mini-instruct-onnx"
    assert phi.allow_patterns == ["cpu_and_mobile/cpu-int4-awq-block-128-acc-level-4/*"]
    assert by_id["phi-4-mini-instruct-gpu-int4"].subfolder == "gpu/gpu-int4-rtn-block-32"
    assert any(e.repo_id.startswith("amd/Qwen2.5") for e in catalog)
    for e in catalog:
        assert e.licence and e.context_length and e.execution_provider in {"cpu", "dml", "qnn"}
        assert e.size_bytes is None or e.size_bytes > 100_000_000


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("{", "not valid"),
        ({"schema": 2, "models": []}, "expected"),
        ({"schema": 1, "models": [{"id": "x"}]}, "repo_id"),
        ({"schema": 1, "models": [{"id": "x", "repo_id": "a/b", "subfolder": "../up"}]}, "bad subfolder"),
        ({"schema": 1, "models": [{"id": "x", "repo_id": "a/b"}, {"id": "x", "repo_id": "a/c"}]}, "duplicate"),
    ],
)
def test_a_broken_catalog_is_a_clear_error(tmp_path: Path, data: Any, message: str) -> None:
    path = tmp_path / "catalog.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    with pytest.raises(ModelError, match=message):
        load_catalog(path)


# --------------------------------------------------------------------------------------------
# A server that is never reached
# --------------------------------------------------------------------------------------------


@pytest.fixture
def closed_port() -> int:
    """A loopback port where nothing listens: every connection is refused."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def no_retry_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.utils._http as hf_http

    monkeypatch.setattr(hf_http, "time", SimpleNamespace(sleep=lambda _s: None, time=__import__("time").time))


def test_a_server_never_reached_says_so_and_that_nothing_was_downloaded(
    closed_port: int, no_retry_waits: None, user: Path, tmp_path: Path
) -> None:
    with pytest.raises(DownloadError) as raised:
        download_model(_entry(tmp_path), user, allowed=True, endpoint=f"http://127.0.0.1:{closed_port}")
    assert raised.value.user_text() == (
        f"Could not reach the server (127.0.0.1:{closed_port}): connection refused; nothing was downloaded. "
        "Check the network connection (and HF_ENDPOINT, if you set it), then run the same download again."
    )
    assert "resumes" not in raised.value.user_text()
    assert not staging_dir(user, "tiny-chat-cpu").exists() and sorted(user.iterdir()) == []


def test_a_server_not_reached_again_keeps_what_an_earlier_try_fetched(
    hub: tuple[FakeHub, str], closed_port: int, no_retry_waits: None, user: Path, tmp_path: Path
) -> None:
    state, endpoint = hub
    state.drop_after[f"{SUBFOLDER}/{BIG}"] = 2 * 1024 * 1024
    state.go_offline_after_drop = True
    with pytest.raises(DownloadError, match="interrupted"):
        download_model(_entry(tmp_path), user, allowed=True, endpoint=endpoint)
    kept = partial_bytes(user, "tiny-chat-cpu")
    with pytest.raises(DownloadError) as raised:
        download_model(_entry(tmp_path), user, allowed=True, endpoint=f"http://127.0.0.1:{closed_port}")
    text = raised.value.user_text()
    assert text.startswith(f"Could not reach the server (127.0.0.1:{closed_port}): connection refused; "
                           "nothing was downloaded.")  # fmt: skip
    assert text.endswith("from an earlier try are kept: it resumes from there.")
    assert partial_bytes(user, "tiny-chat-cpu") == kept


def test_a_server_lost_after_some_bytes_is_an_interruption_that_resumes() -> None:
    from engines.models.downloads import NotReached

    entry = SimpleNamespace(id="tiny-chat-cpu")
    error = NotReached(entry, "connection refused").said("http://127.0.0.1:9", fetched=3_000_000, kept=5_000_000)  # type: ignore[arg-type]
    assert error.user_text() == (
        "The download of tiny-chat-cpu was interrupted: the server (127.0.0.1:9) could not be reached again "
        "(connection refused) after 3.0 MB. Check the network connection and run the same download again: it "
        "resumes where it stopped."
    )


def test_each_retry_warning_is_said_once(
    closed_port: int, no_retry_waits: None, user: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import logging

    root = logging.getLogger()
    ours = logging.StreamHandler()
    root.addHandler(ours)
    try:
        with pytest.raises(DownloadError):
            download_model(_entry(tmp_path), user, allowed=True, endpoint=f"http://127.0.0.1:{closed_port}")
    finally:
        root.removeHandler(ours)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    retries = [line for line in lines if line.startswith("Retrying in")]
    assert retries and len(retries) == len(set(retries)), lines  # once each, through the application's handler

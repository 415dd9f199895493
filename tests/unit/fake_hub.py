"""A Hugging Face Hub look-alike on 127.0.0.1 for download tests (never the internet).

It implements exactly what huggingface_hub 2.x calls for a download: the tree listing
``GET /api/models/{repo}/tree/{revision}/{path}`` and ``HEAD``/``GET /{repo}/resolve/{revision}/{path}``
(ETag, X-Repo-Commit, Content-Length, byte ranges). It can drop a connection mid-file, go offline,
serve corrupted bytes, slow down, and it logs every request.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

REPO_ID = "test-org/tiny-chat-onnx"
SUBFOLDER = "cpu_and_mobile/cpu-fp32"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class FakeHub:
    files: dict[str, bytes] = field(default_factory=dict)  # repo path -> content
    log: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, Range header)
    drop_after: dict[str, int] = field(default_factory=dict)  # repo path -> drop the next GET after N bytes
    go_offline_after_drop: bool = False
    offline: bool = False
    corrupt: set[str] = field(default_factory=set)  # repo paths served with one byte flipped
    pause: float = 0.0  # seconds between 64 KiB pieces of a body (a slow link)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def gets(self, path: str) -> list[str]:
        """The Range headers of the GETs of one file ('' for a whole-file GET)."""
        return [r for m, p, r in self.log if m == "GET" and p.endswith(f"/resolve/main/{path}")]

    def resolve_requests(self) -> int:
        return sum(1 for _, p, _ in self.log if "/resolve/" in p)


def _is_lfs(path: str, data: bytes) -> bool:
    return path.endswith((".onnx", ".data")) or len(data) > 100_000


def _etag(path: str, data: bytes) -> str:
    # The Hub's ETag: the LFS sha256 for large files, the git blob sha1 for small ones.
    if _is_lfs(path, data):
        return hashlib.sha256(data).hexdigest()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def setup(self) -> None:
            super().setup()
            self.request.settimeout(10)

        def log_message(self, *_args: Any) -> None:
            pass

        def _drop(self) -> None:
            self.close_connection = True
            with contextlib.suppress(OSError):  # the client may have gone already
                self.connection.shutdown(socket.SHUT_RDWR)

        def do_HEAD(self) -> None:
            self._serve(body=False)

        def do_GET(self) -> None:
            self._serve(body=True)

        def _serve(self, body: bool) -> None:
            path = unquote(urlsplit(self.path).path)
            with hub.lock:
                hub.log.append((self.command, path, self.headers.get("Range", "")))
                offline = hub.offline
            if offline:
                self._drop()  # no response at all: the network is gone
                return
            prefix = f"/api/models/{REPO_ID}/tree/main"
            if path.startswith(prefix):
                self._tree(path[len(prefix):].strip("/"))
            elif path.startswith(f"/{REPO_ID}/resolve/main/"):
                self._file(path[len(f"/{REPO_ID}/resolve/main/"):], body)
            else:
                self._json(404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})

        def _json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
            payload = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        def _tree(self, folder: str) -> None:
            entries: list[dict[str, Any]] = []
            folders: set[str] = set()
            for repo_path, data in sorted(hub.files.items()):
                if folder and not repo_path.startswith(folder + "/"):
                    continue
                parts = repo_path.split("/")
                for i in range(1, len(parts)):
                    folders.add("/".join(parts[:i]))
                item: dict[str, Any] = {"type": "file", "path": repo_path, "size": len(data),
                                        "oid": hashlib.sha1(data).hexdigest()}
                if _is_lfs(repo_path, data):
                    item["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
                entries.append(item)
            entries += [{"type": "directory", "path": f, "oid": "0" * 40, "size": 0} for f in sorted(folders)
                        if not folder or f.startswith(folder + "/")]
            self._json(200, entries)

        def _file(self, repo_path: str, body: bool) -> None:
            data = hub.files.get(repo_path)
            if data is None:
                self._json(404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound",
                                                               "X-Repo-Commit": COMMIT})
                return
            served = bytearray(data)
            if repo_path in hub.corrupt:
                served[len(served) // 2] ^= 0xFF
            start = 0
            ranged = self.headers.get("Range", "")
            if body and ranged.startswith("bytes="):
                start = int(ranged[len("bytes="):].split("-")[0])
            self.send_response(206 if start else 200)
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("ETag", f'"{_etag(repo_path, data)}"')
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(len(served) - start))
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(served) - 1}/{len(served)}")
            self.end_headers()
            if not body:
                return
            with hub.lock:
                cut = hub.drop_after.pop(repo_path, None)
            chunk = bytes(served[start:])
            if cut is not None:
                self.wfile.write(chunk[:cut])
                self.wfile.flush()
                if hub.go_offline_after_drop:
                    hub.offline = True
                self._drop()
                return
            for start_at in range(0, len(chunk), 64 * 1024):
                self.wfile.write(chunk[start_at : start_at + 64 * 1024])
                if hub.pause:
                    time.sleep(hub.pause)

    return Handler


@contextlib.contextmanager
def serve(model_folder: Path) -> Iterator[tuple[FakeHub, str]]:
    """The server with one repository: `model_folder`'s files in a variant subfolder, plus files outside
    it that a download of the variant must never fetch. Yields (state, endpoint URL)."""
    state = FakeHub()
    for path in sorted(model_folder.iterdir()):
        state.files[f"{SUBFOLDER}/{path.name}"] = path.read_bytes()
    state.files["README.md"] = b"---\nlicense: mit\n---\n"
    state.files["gpu/gpu-int4/model.onnx"] = b"not for this variant" * 100
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        assert not thread.is_alive()


def catalog_entry(**overrides: Any) -> dict[str, Any]:
    """A catalog entry for the served repository."""
    entry = {
        "id": "tiny-chat-cpu", "display_name": "Tiny chat (CPU)", "kind": "genai-llm", "publisher": "Test",
        "repo_id": REPO_ID, "revision": "main", "subfolder": SUBFOLDER, "licence": "MIT", "parameters": "0.3M",
        "size_bytes": 16_000_000, "context_length": 256, "precision": "fp32", "devices": ["cpu"],
        "execution_provider": "cpu",
    }
    entry.update(overrides)
    return entry


def write_catalog(folder: Path, **overrides: Any) -> Path:
    path = folder / "catalog.json"
    path.write_text(json.dumps({"schema": 1, "models": [catalog_entry(**overrides)]}), encoding="utf-8")
    return path

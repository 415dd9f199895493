"""`npu-studio serve`: the OpenAI-compatible API on this machine, until Ctrl+C or SIGTERM.

Loopback only unless --host says otherwise, and then only with an API key. Every answer says where it
ran (headers `X-NPU-Studio-Device` / `X-NPU-Studio-Placement`, `system_fingerprint`, `npu_studio`).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from app.server import API_KEY_ENV, DEFAULT_PORT

if TYPE_CHECKING:
    from app.commands import Subcommands

EXIT_OK = 0


def register(sub: Subcommands) -> None:
    parser = sub.add_parser(
        "serve",
        help="serve the OpenAI-compatible API (chat completions) on this machine",
        description=f"Serve the OpenAI REST API (/v1/models, /v1/chat/completions, /health) at "
        f"http://127.0.0.1:{DEFAULT_PORT}/v1 until Ctrl+C. Every answer says which device it ran on.",
    )
    parser.add_argument("--model", metavar="NAME", help="chat model: a library name or a folder (default: the "
                        "bundled smollm2-135m-instruct)")
    parser.add_argument("--device", default="auto", help="auto, npu, gpu, cpu, efficiency, performance or an EP name")
    parser.add_argument("--strict", action="store_true",
                        help="answer 503 (device_unavailable) instead of running anywhere but the asked device")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; any other "
                        "needs an API key)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, metavar="N",
                        help=f"port (default {DEFAULT_PORT}; 0 picks a free one)")
    parser.add_argument("--api-key", metavar="KEY", help=f"require 'Authorization: Bearer KEY' (or set {API_KEY_ENV})")
    parser.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                        help="a web origin allowed to call the API from a browser (repeatable)")
    parser.add_argument("--queue", type=int, default=16, metavar="N", help="requests that may wait (default 16); "
                        "past it: 429 with Retry-After")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from app import paths
    from app.commands.chat import chat_model_folder
    from app.server.api import ServerContext
    from app.server.backend import open_backend
    from app.server.library import LibraryCards
    from app.server.runner import RunningServer, ServeOptions, bind, check_exposure
    from engines import DeviceChoice, StudioError, probe_plugins_first

    probe_plugins_first()  # a long-lived process: a plugin EP that offers no device here is not loaded
    if not 0 <= args.port <= 65535:
        raise StudioError(f"--port {args.port} is not a port number.", "Use 1-65535, or 0 for a free one.")
    if not 1 <= args.queue <= 1024:
        raise StudioError(f"--queue {args.queue} is out of range.", "Use 1-1024.")
    api_key = args.api_key if args.api_key is not None else os.environ.get(API_KEY_ENV, "")
    check_exposure(args.host, api_key)  # before loading anything
    choice = DeviceChoice.parse(args.device, strict=args.strict)
    folder = chat_model_folder(args.model)
    library = LibraryCards(paths.model_roots(), choice)
    options = ServeOptions(args.host, args.port, api_key, tuple(args.cors_origin))
    sock = bind(args.host, args.port)  # a port in use is said now, not after the model loaded
    try:
        print(f"Loading {folder.name} ({choice.describe()})…", file=sys.stderr, flush=True)
        backend = open_backend(folder, choice, library, max_waiting=args.queue)
    except BaseException:
        sock.close()
        raise
    server = RunningServer(ServerContext(backend), options, sock)
    _announce(server.url, backend)
    stopped_by = server.run()
    print(f"npu-studio serve: stopped{f' ({stopped_by})' if stopped_by else ''}.", file=sys.stderr, flush=True)
    return EXIT_OK


def _announce(url: str, backend: Any) -> None:
    from app.server.answers import placement_text

    if backend.load_error is not None:
        print(f"note: {backend.model_id} is not loaded (strict): {backend.load_error.user_text()}", file=sys.stderr)
        print("note: chat requests get 503 device_unavailable until the device is there.", file=sys.stderr)
    else:
        print(f"Model: {backend.model_id} on {placement_text(backend.service.info.placement)}", file=sys.stderr)
    print(f"Serving at {url}/v1 (Ctrl+C stops)", flush=True)

"""Command line: `npu-studio [gui|devices|classify|chat|...]`.

Errors end as one readable line and a non-zero exit; `--debug` shows the traceback too.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from app import __version__, model_trials
from app.commands import COMMAND_MODULES, load

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USER_ERROR = 2
EXIT_CANCELLED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM, as shells report a process ended by it


class _Commands(argparse._SubParsersAction):
    """The subcommands, each parser filled by its module's `register` only when that command is the one
    given (or help lists them all): a run imports one command module, not every one (~15 ms of start)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pending: list[str] = []

    def add_later(self, name: str) -> None:
        self.add_parser(name, help="")  # its own help text comes with its module
        self.pending.append(name)

    def fill(self, name: str) -> None:
        if name not in self.pending:
            return
        self.pending.remove(name)
        module = load(name)
        if module is not None:
            module.register(_Into(self))  # type: ignore[attr-defined]

    def fill_all(self) -> None:
        for name in list(self.pending):
            self.fill(name)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:  # fmt: skip
        self.fill(str(values[0]))
        super().__call__(parser, namespace, values, option_string)


class _Into:
    """What a command module's `register(sub)` is given: `add_parser` fills the parser made for it."""

    def __init__(self, commands: _Commands) -> None:
        self.commands = commands

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = self.commands._name_parser_map[name]
        help_text = kwargs.pop("help", None)
        for key, value in kwargs.items():
            setattr(parser, key, value)
        for choice in self.commands._choices_actions:
            if choice.dest == name:
                choice.help = help_text
        return parser


class _Parser(argparse.ArgumentParser):
    def format_help(self) -> str:
        for action in self._actions:
            if isinstance(action, _Commands):
                action.fill_all()  # the command list shows what each does
        return super().format_help()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="npu-studio",
        description="See which NPU, GPU and CPU devices ONNX Runtime really uses; classify images and "
        "chat with a local model, offline.",
    )
    parser.add_argument("--version", action="version", version=f"npu-studio {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    parser.add_argument("--self-test", action="store_true", help="run the app's self-test and exit")
    parser.add_argument("--screenshots", metavar="DIR", help="with --self-test: save a screenshot per view")
    parser.add_argument("--report", metavar="FILE", help="with --self-test: where to write the JSON report")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", action=_Commands)
    assert isinstance(sub, _Commands)
    gui = sub.add_parser("gui", help="open the desktop app (the default)")
    gui.set_defaults(func=_run_gui)
    for name in COMMAND_MODULES:
        sub.add_later(name)
    return parser


def _run_gui(args: argparse.Namespace) -> int:
    from app.display import window_problem
    from engines import StudioError

    problem = window_problem()  # before Qt, which would abort the process instead of saying why
    if problem is not None:
        raise StudioError(problem)
    from app.launch import run_gui

    return run_gui(self_test=bool(args.self_test), screenshots=args.screenshots, report=args.report)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl+C so that every `finally` on the way out runs (an
    import or quantize removes its work folder) instead of the process vanishing mid-write."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated()


@contextlib.contextmanager
def _sigterm_unwinds(enabled: bool) -> Iterator[None]:
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


_command: list[str | None] = [None]  # the subcommand the last `run` parsed (None: the GUI, or none parsed)


def ran_a_command() -> bool:
    """Whether the last `run` in this process ran a subcommand (not the GUI)."""
    return _command[0] is not None


def run(argv: Sequence[str]) -> int:
    from app import terminal

    with terminal.safe_terminal():
        try:
            code = _run(argv)
            terminal.finish()
            return code
        except terminal.OutputLost as lost:  # `| head` closed the pipe, or the output's disk is full
            logging.getLogger(__name__).debug("output lost: %s", lost)
            return terminal.ended_by(lost)


def _run(argv: Sequence[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(list(argv))
    _command[0] = args.command
    from app.logs import setup_logging

    setup_logging(debug=args.debug, console=args.command is not None)
    model_trials.configure()
    func = getattr(args, "func", None)
    if func is None:
        func = _run_gui
    from engines import CancelledError, StudioError

    try:
        with _sigterm_unwinds(args.command is not None):  # the GUI stages its own shutdown
            return int(func(args))
    except CancelledError as exc:
        print(f"npu-studio: {exc.user_text()}", file=sys.stderr)
        return EXIT_CANCELLED
    except Terminated:
        print("npu-studio: terminated; work in progress was removed.", file=sys.stderr)
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        print("npu-studio: interrupted.", file=sys.stderr)
        return EXIT_CANCELLED
    except StudioError as exc:
        logging.getLogger(__name__).debug("command failed", exc_info=True)
        if args.debug:
            raise
        print(f"npu-studio: error: {exc.user_text()}", file=sys.stderr)
        return EXIT_USER_ERROR
    except Exception as exc:
        logging.getLogger(__name__).exception("unexpected failure", extra={"file_only": True})
        if args.debug:
            raise
        print(
            f"npu-studio: unexpected error: {type(exc).__name__}: {exc} (run with --debug for details)",
            file=sys.stderr,
        )
        return EXIT_FAILED

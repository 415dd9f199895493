"""`npu-studio chat`: talk to a local model; `--prompt` for one question, interactive otherwise.

Interactive: answers stream as they are generated; Ctrl+C stops the answer (not the program);
/reset, /regen, /system TEXT, /help, /quit (or Ctrl+D).

The bundled model runs in this process. Any other model runs in the chat engine's child process
(app/commands/chat_remote.py), where its chat template cannot crash or hang this one (app/chat_bounds.py).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from app import paths

if TYPE_CHECKING:
    from engines.chat.conversation import ChatOptions, Conversation, GenerationStats
    from engines.chat.loaded import ChatModel
    from engines.types import CancelToken

DEFAULT_CHAT_MODEL = "smollm2-135m-instruct"
EXIT_OK = 0
EXIT_CANCELLED = 130

HELP = """Commands:
  /reset         start over (the system prompt stays)
  /regen         answer the last question again
  /system TEXT   set the system prompt (empty: the model's default) and start over
  /help          this help
  /quit          leave (Ctrl+D works too)
Ctrl+C stops the answer being written; the conversation goes on."""


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "chat",
        help="chat with a local language model (onnxruntime-genai)",
        description="Chat with a local model, offline. Interactive unless --prompt is given.",
    )
    parser.add_argument(
        "--model", metavar="DIR", help=f"genai model folder (default: the bundled {DEFAULT_CHAT_MODEL})"
    )
    parser.add_argument(
        "--device", default="auto", help="auto (as the model's config says), cpu, npu, gpu, qnn, dml or an EP name"
    )
    parser.add_argument("--strict", action="store_true", help="fail instead of falling back to the CPU")
    parser.add_argument("--system", default="", metavar="TEXT", help="system prompt (default: the model's own)")
    parser.add_argument("--prompt", metavar="TEXT", help="ask one question, print the answer and exit")
    parser.add_argument("--json", action="store_true", help="with --prompt: print the answer and stats as JSON")
    parser.add_argument("--max-new-tokens", type=int, metavar="N", help="longest answer in tokens (default 256)")
    parser.add_argument("--sample", action="store_true", help="sample instead of greedy decoding")
    parser.add_argument("--temperature", type=float, metavar="T", help="sampling temperature (implies --sample)")
    parser.add_argument("--top-p", type=float, metavar="P", help="nucleus sampling (implies --sample)")
    parser.add_argument("--top-k", type=int, metavar="K", help="sample among the K likeliest (implies --sample)")
    parser.add_argument("--repetition-penalty", type=float, metavar="R", help="1.0 = none (default 1.1)")
    parser.add_argument("--seed", type=int, metavar="N", help="random seed for sampling")
    parser.add_argument("--context-window", type=int, metavar="N", help="tokens a conversation may hold")
    parser.set_defaults(func=run)


def chat_model_folder(name: str | None) -> Path:
    """The model folder: a path, a name in the user's models, or the bundled demo model."""
    from engines.errors import ModelError
    from engines.models.lookup import locate_model

    if name:
        return locate_model(name, paths.model_roots()).folder
    folder = paths.bundled_models_dir() / DEFAULT_CHAT_MODEL
    if not folder.is_dir():
        raise ModelError(
            f"The demo chat model is not built yet ({folder} is missing).",
            "Build it with `python assets/recipes/build_demo_models.py --only chat` (offline, about a "
            "minute), or pass --model DIR.",
        )
    return folder


def options_from_args(args: argparse.Namespace) -> ChatOptions:
    from engines.chat.conversation import ChatOptions

    values: dict[str, Any] = {}
    for field in ("max_new_tokens", "temperature", "top_p", "top_k", "repetition_penalty", "seed", "context_window"):
        value = getattr(args, field, None)
        if value is not None:
            values[field] = value
    sampled = args.sample or any(getattr(args, f, None) is not None for f in ("temperature", "top_p", "top_k"))
    return ChatOptions(do_sample=sampled, **values)


@contextmanager
def ctrl_c_cancels(cancel: CancelToken) -> Iterator[None]:
    """While generating, Ctrl+C cancels the answer instead of ending the program."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum: int, frame: object) -> None:
        cancel.cancel()

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _writer(stream: TextIO) -> Callable[[str], None]:
    def write(piece: str) -> None:
        stream.write(piece)
        stream.flush()

    return write


def answer(
    conversation: Conversation, ask: Callable[..., GenerationStats], *args: Any, out: TextIO | None = None
) -> GenerationStats:
    """Run one answer (send / regen) with streaming to `out` and Ctrl+C as cancel."""
    from engines.types import CancelToken

    cancel = CancelToken()
    with ctrl_c_cancels(cancel):
        return ask(*args, on_text=_writer(out) if out is not None else None, cancel=cancel)


def run(args: argparse.Namespace) -> int:
    import engines
    from engines.errors import StudioError
    from engines.types import DeviceChoice

    if args.json and args.prompt is None:
        raise StudioError("--json needs --prompt.", "Give the question with --prompt TEXT.")
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:  # a console that cannot show a character gets '?' instead of a crash
            reconfigure(errors="replace")
    options = options_from_args(args)
    choice = DeviceChoice.parse(args.device, strict=args.strict)
    folder = chat_model_folder(args.model)
    model: Any
    if _bounded(folder):
        from app.commands.chat_remote import RemoteChat
        from engines.chat.model import validate_model_folder
        from engines.models import trial

        validate_model_folder(folder)  # a folder refused by the rules is refused here, before any native code
        trial.ensure_tried(folder, trial.CHAT)  # its first load and run, once (cached verdict)
        model = RemoteChat(folder, choice)
    else:
        model = engines.open_chat(folder, choice)  # ours: in this process, at full speed
    try:
        code = _chat(args, model, options)
    except BaseException:
        if hasattr(model, "engine"):
            model.engine.kill()  # interrupted or failed: the child may be stuck in a render, do not wait for it
        raise
    if hasattr(model, "close"):
        model.close()
    return code


def _bounded(folder: Path) -> bool:
    """A model that is not ours runs in the chat child process, where its template cannot crash or hang
    this one (app/commands/chat_remote.py); NPU_STUDIO_CHAT_IN_PROCESS=1 keeps it here (debugging)."""
    from app.chat_process import in_process_requested
    from engines.models import trial

    return trial.bounded(folder) and not in_process_requested()


def _chat(args: argparse.Namespace, model: Any, options: ChatOptions) -> int:
    from app.terminal import print_json
    from engines.chat.conversation import StopReason

    conversation = model.new_conversation(args.system, options)
    if model.plan.fell_back:
        print(f"note: running on the CPU: {model.plan.reason}", file=sys.stderr)
    if model.memory_notice:
        print(f"note: {model.memory_notice}", file=sys.stderr)
    if args.prompt is not None:
        if args.json:
            stats = answer(conversation, conversation.send, args.prompt)
            print_json(
                {
                    "model": model.folder.name,
                    "model_path": str(model.folder.path),
                    "placement": model.placement.as_dict(),
                    "prompt": args.prompt,
                    "answer": conversation.messages[-1].content,
                    "stats": stats.as_dict(),
                }
            )
        else:
            stats = answer(conversation, conversation.send, args.prompt, out=sys.stdout)
            print(flush=True)
            print(stats.summary(), file=sys.stderr)
        return EXIT_CANCELLED if stats.stop_reason == StopReason.CANCELLED else EXIT_OK
    return interactive(model, conversation)


def interactive(model: ChatModel | Any, conversation: Conversation | Any) -> int:
    from engines.chat.conversation import StopReason
    from engines.errors import ModelError, StudioError

    print(f"Chatting with {model.describe()}. /help for commands, Ctrl+C stops an answer, /quit leaves.")
    while True:
        try:
            line = input("you> ")
        except EOFError:
            print()
            return EXIT_OK
        except KeyboardInterrupt:
            print("\n(Ctrl+C stops an answer while it is written; /quit or Ctrl+D leaves.)")
            continue
        text = line.strip()
        if not text:
            continue
        command, _, rest = text.partition(" ")
        try:
            if command in ("/quit", "/exit"):
                return EXIT_OK
            if command == "/help":
                print(HELP)
                continue
            if command == "/reset":
                conversation.reset()
                print("(conversation cleared)")
                continue
            if command == "/system":
                conversation.set_system_prompt(rest.strip())
                conversation.reset()
                print("(system prompt set; conversation cleared)")
                continue
            if text.startswith("/") and command != "/regen":
                print(f"Unknown command {command}. /help lists the commands.")
                continue
            print("bot> ", end="", flush=True)
            if command == "/regen":
                stats = answer(conversation, conversation.regenerate, out=sys.stdout)
            else:
                stats = answer(conversation, conversation.send, line, out=sys.stdout)
        except ModelError:
            print(flush=True)
            raise  # the model itself is unsafe or unusable: one `npu-studio: error:` line, exit 2
        except StudioError as exc:
            print(f"\nerror: {exc.user_text()}", file=sys.stderr)
            continue
        print(flush=True)
        if stats.stop_reason == StopReason.CANCELLED:
            print("(stopped)", flush=True)
        print(f"  [{stats.summary()}]", file=sys.stderr)

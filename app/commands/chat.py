"""`npu-studio chat`: talk to a local model; `--prompt` for one question, interactive otherwise.

Interactive: answers stream as they are generated; Ctrl+C stops the answer (not the program);
/reset, /regen, /edit TEXT, /continue, /system TEXT, /help, /quit (or Ctrl+D).

The model is opened as a chat service (`engines.open_chat`), which runs it where its one rule says
(engines/chat/service.py `runs_in_child`): the bundled model in this process, any other model in the
bounded engine child, where its chat template cannot crash or hang this one (engines/chat/bounds.py).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from app import paths

if TYPE_CHECKING:
    from app.commands import Subcommands
    from engines import CancelToken, ChatOptions, ChatService, Finished, ServiceConversation

DEFAULT_CHAT_MODEL = "smollm2-135m-instruct"
EXIT_OK = 0
EXIT_CANCELLED = 130

HELP = """Commands:
  /reset         start over (the system prompt stays)
  /regen         answer the last question again
  /edit TEXT     replace the last question with TEXT and answer it
  /continue      write more of the last answer (one cut by the length limit or Ctrl+C)
  /system TEXT   set the system prompt (empty: the model's default) and start over
  /help          this help
  /quit          leave (Ctrl+D works too)
Ctrl+C stops the answer being written; the conversation goes on."""


def register(sub: Subcommands) -> None:
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
    parser.add_argument(
        "--prompt-lookup", action=argparse.BooleanOptionalAction, default=None,
        help="prompt-lookup decoding: copy likely continuations from the conversation and verify them in one "
             "step (greedy answers without a repetition penalty; sooner when the answer repeats its input: "
             "edits, summaries, code)",
    )  # fmt: skip
    parser.set_defaults(func=run)


def chat_model_folder(name: str | None) -> Path:
    """The model folder: a path, a name in the user's models, or the bundled demo model."""
    from engines import ModelError, locate_model

    roots = paths.model_roots()  # (the first look at the library sweeps what killed commands left there)
    if name:
        return locate_model(name, roots).folder
    folder = paths.bundled_models_dir() / DEFAULT_CHAT_MODEL
    if not folder.is_dir():
        raise ModelError(
            f"The demo chat model is not built yet ({folder} is missing).",
            "Build it with `python assets/recipes/build_demo_models.py --only chat` (offline, about a "
            "minute), or pass --model DIR.",
        )
    return folder


def options_from_args(args: argparse.Namespace) -> ChatOptions:
    from engines import ChatOptions

    values: dict[str, Any] = {}
    for field in ("max_new_tokens", "temperature", "top_p", "top_k", "repetition_penalty", "seed", "context_window",
                  "prompt_lookup"):
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


def answer(ask: Callable[..., Finished], *args: Any, out: TextIO | None = None) -> Finished:
    """Run one answer (send, regen, edit, continue) with streaming to `out` and Ctrl+C as cancel."""
    from engines import CancelToken

    cancel = CancelToken()
    with ctrl_c_cancels(cancel):
        return ask(*args, on_text=_writer(out) if out is not None else None, cancel=cancel)


def run(args: argparse.Namespace) -> int:
    import engines
    from engines import DeviceChoice, StudioError

    if args.json and args.prompt is None:
        raise StudioError("--json needs --prompt.", "Give the question with --prompt TEXT.")
    options = options_from_args(args)
    choice = DeviceChoice.parse(args.device, strict=args.strict)
    folder = chat_model_folder(args.model)
    # In this process for the bundled model; in the bounded engine child for any other (one rule, in
    # engines/chat/service.py). A refused folder is refused before any native code runs.
    service = engines.open_chat(folder, choice)
    try:
        code = _chat(args, service, options)
    except BaseException:
        from engines import BoundedChat

        if isinstance(service, BoundedChat):
            service.engine.kill()  # interrupted or failed: the child may be stuck in a render, do not wait for it
        raise
    service.close()
    return code


def _chat(args: argparse.Namespace, service: ChatService, options: ChatOptions) -> int:
    from app.terminal import print_json
    from engines import ServiceConversation, StopReason

    info = service.info
    conversation = ServiceConversation(service, args.system, options)
    if info.placement.fell_back:
        print(f"note: running on the CPU: {info.placement.reason}", file=sys.stderr)
    if info.memory_notice:
        print(f"note: {info.memory_notice}", file=sys.stderr)
    if args.prompt is not None:
        if args.json:
            done = answer(conversation.send, args.prompt)
            print_json(
                {
                    "model": info.name,
                    "model_path": info.folder,
                    "placement": info.placement.as_dict(),
                    "prompt": args.prompt,
                    "answer": done.text,
                    "stats": done.stats.as_dict(),
                    "usage": {**asdict(done.usage), "total_tokens": done.usage.total_tokens},
                }
            )
        else:
            done = answer(conversation.send, args.prompt, out=sys.stdout)
            print(flush=True)
            print(done.stats.summary(), file=sys.stderr)
        return EXIT_CANCELLED if done.stop_reason == StopReason.CANCELLED else EXIT_OK
    return interactive(service, conversation)


def interactive(service: ChatService, conversation: ServiceConversation) -> int:
    from engines import ModelError, StopReason, StudioError

    print(f"Chatting with {service.info.description}. /help for commands, Ctrl+C stops an answer, /quit leaves.")
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
            if command == "/edit" and not rest.strip():
                print("/edit needs the new question: /edit TEXT.")
                continue
            if text.startswith("/") and command not in ("/regen", "/edit", "/continue"):
                print(f"Unknown command {command}. /help lists the commands.")
                continue
            print("bot> ", end="", flush=True)
            if command == "/regen":
                done = answer(conversation.regenerate, out=sys.stdout)
            elif command == "/edit":
                done = answer(conversation.edit_last, rest.strip(), out=sys.stdout)
            elif command == "/continue":
                done = answer(conversation.continue_last, out=sys.stdout)
            else:
                done = answer(conversation.send, line, out=sys.stdout)
        except ModelError:
            print(flush=True)
            raise  # the model itself is unsafe or unusable: one `npu-studio: error:` line, exit 2
        except StudioError as exc:
            print(f"\nerror: {exc.user_text()}", file=sys.stderr)
            continue
        print(flush=True)
        if done.stop_reason == StopReason.CANCELLED:
            print("(stopped)", flush=True)
        print(f"  [{done.stats.summary()}]", file=sys.stderr)

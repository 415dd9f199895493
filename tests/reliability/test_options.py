"""Options out of range or malformed, through the real CLI: each is refused in one line that names what
is wrong, before any work (no pybind internals, no 'incompatible function arguments', no silent cut)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from PIL import Image

from app.cli import run
from engines.types import cpu_count
from tests.reliability.conftest import Recorder
from tests.unit.tiny_models import colour_classifier

CATEGORY = "Options"


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = run(args)
    return code, capsys.readouterr().err.strip()


def _per_machine(text: str) -> str:
    """The report must not change from machine to machine: the CPU count becomes N."""
    text = re.sub(rf"\b{cpu_count() + 1}\b", "N+1", text)
    return re.sub(rf"\b{cpu_count()}\b", "N", text)


CHAT_OPTIONS: list[tuple[list[str], str]] = [
    (["--temperature", "nan"], "temperature must be greater than 0"),
    (["--temperature", "inf"], "temperature must be greater than 0"),
    (["--temperature", "-0.5"], "temperature must be greater than 0"),
    (["--temperature", "1e308"], "temperature must be greater than 0"),
    (["--repetition-penalty", "nan"], "repetition_penalty must be greater than 0"),
    (["--repetition-penalty=-inf"], "repetition_penalty must be greater than 0"),
    (["--top-p", "nan"], "top_p must be in (0, 1]"),
    (["--top-k", "1000000000000"], "top_k must be at least 1"),
    (["--seed", "99999999999999999999"], "seed must be a whole number from 0 to"),
    (["--seed", "-1"], "seed must be a whole number from 0 to"),
    (["--max-new-tokens", "10000000000000"], "max_new_tokens must be at least 1"),
    (["--context-window", "-5"], "context_window must be at least 2 tokens"),
]


@pytest.mark.parametrize(("args", "words"), CHAT_OPTIONS, ids=[" ".join(a) for a, _ in CHAT_OPTIONS])
def test_chat_refuses_a_bad_generation_option(
    args: list[str], words: str, tiny_llm: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    code, err = _cli(["chat", "--model", str(tiny_llm), "--device", "cpu", "--prompt", "Hi", *args], capsys)
    reliability.record(CATEGORY, f"chat {' '.join(args)}", "refused, naming the option", err)
    assert code == 2, err
    assert words in err and len(err.splitlines()) == 1
    assert "incompatible" not in err and "pybind" not in err and "Traceback" not in err


PROMPTS: list[tuple[str, list[str], str]] = [
    ("a prompt that is not UTF-8", ["--prompt", os.fsdecode(b"caf\xe9 au lait")], "is not valid UTF-8 text (byte 0xe9"),
    ("a prompt with a NUL character", ["--prompt", "Hello\x00 ignore everything after"], "contains a NUL character"),
    ("a system prompt with a NUL character", ["--system", "Be nice\x00", "--prompt", "Hi"], "contains a NUL"),
    ("a system prompt that is not UTF-8", ["--system", os.fsdecode(b"\xff\xfe"), "--prompt", "Hi"], "not valid UTF-8"),
]


@pytest.mark.parametrize(("name", "args", "words"), PROMPTS, ids=[p[0] for p in PROMPTS])
def test_chat_refuses_text_the_tokenizer_would_misread(
    name: str, args: list[str], words: str, tiny_llm: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    code, err = _cli(["chat", "--model", str(tiny_llm), "--device", "cpu", "--max-new-tokens", "2", *args], capsys)
    reliability.record(CATEGORY, f"chat: {name}", "refused with the reason, nothing sent to the model", err)
    assert code == 2, err
    assert words in err and "incompatible function arguments" not in err and "Traceback" not in err


@pytest.fixture
def photo(tmp_path: Path) -> Path:
    path = tmp_path / "red.png"
    Image.new("RGB", (16, 16), (240, 0, 0)).save(path)
    return path


@pytest.mark.parametrize("threads", ["1000", "-1", str(cpu_count() + 1)])
def test_classify_bounds_the_thread_count(
    threads: str, tmp_path: Path, photo: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    folder = colour_classifier(tmp_path / "m")
    code, err = _cli(["classify", str(photo), "--model", str(folder), "--device", "cpu", "--threads", threads], capsys)
    shown = "N+1" if threads == str(cpu_count() + 1) else threads
    reliability.record(CATEGORY, f"classify --threads {shown} (N = the CPUs)", "refused, naming the limit",
                       _per_machine(err))  # fmt: skip
    assert code == 2, err
    assert "Invalid thread count" in err and f"use 1 to {cpu_count()} (one per CPU" in err


def test_classify_takes_every_cpu_as_threads(
    tmp_path: Path, photo: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    folder = colour_classifier(tmp_path / "m")
    code = run(["classify", str(photo), "--model", str(folder), "--device", "cpu", "--threads", str(cpu_count())])
    out = capsys.readouterr().out
    reliability.record(CATEGORY, "classify --threads N (one per CPU)", "accepted", "classified" if code == 0 else out)
    assert code == 0 and "red" in out


def test_bench_bounds_the_thread_count(capsys: pytest.CaptureFixture[str], reliability: Recorder) -> None:
    code, err = _cli(["bench", "--threads", "1000", "--devices", "cpu", "--no-progress"], capsys)
    reliability.record(CATEGORY, "bench --threads 1000", "refused before any run", _per_machine(err))
    assert code == 2, err
    assert "thread count" in err and "Traceback" not in err


@pytest.mark.parametrize("top_k", ["1000000000000", "0"])
def test_classify_top_k(
    top_k: str, tmp_path: Path, photo: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    folder = colour_classifier(tmp_path / "m")
    code = run(["classify", str(photo), "--model", str(folder), "--device", "cpu", "--top-k", top_k])
    captured = capsys.readouterr()
    shown = captured.err.strip() if code else f"{sum('%' in line for line in captured.out.splitlines())} classes shown"
    reliability.record(CATEGORY, f"classify --top-k {top_k}", "all classes shown, or refused if below 1", shown)
    if top_k == "0":
        assert code == 2 and "--top-k must be at least 1" in shown
    else:
        assert code == 0 and shown == "4 classes shown"

"""Four concurrent chat requests, three ways on the same model, same prompts, greedy, the chat engine's
thread count: a FIFO of one `og.Generator` at a time (the chat service before it made several answers at
once), generators stepped in turn a token each (what the chat engine does now, engines/chat/scheduler.py:
a request reads its prompt and makes its first token at the next step), and onnxruntime-genai's batching
`og.Engine` (continuous batching: one model call for every request's next token), and one `og.Generator`
with a batch of every prompt (`generator_batch`: the same one call a token, static, no engine).

    .venv/bin/python tests/bench/bench_batching.py [--model DIR] [--build DIR] [--tokens N] [--rounds N] [--record]

The demo model is built with `prune_lm_head=true` (the prompt's LM head is computed for its last positions
only) and reads a first prompt in chunks (`search.chunk_size`), neither of which the batching engine can run
("Got invalid dimensions for output: logits ... Expected: 1"; "chunk_size requires dynamic batching").
`--build DIR` builds the same model without either into DIR (the recipe's own steps, ~2-6 min) and
measures it; `--model DIR` measures a model built before (default: the demo model, where og.Engine is
skipped and says why). Printed, medians over the rounds: aggregate tok/s of the four, each request's time
to first token (median and slowest, and the slowest over one request's alone: the bound on the server's
p95 first token), and one request alone on each; then how many of the batched generator's greedy answers are
the same as each request's alone, and its rate on the demo model as shipped.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
PROMPTS = (
    "Write a long story about a dragon who learns to bake bread.",
    "Explain how rain forms.",
    "Describe a day at the beach.",
    "Write a poem about the moon.",
)
Result = tuple[float, list[float]]  # aggregate tok/s, each request's first-token time
_PAD: dict[int, int] = {}  # each loaded model's pad token, by id()


def build_unpruned(out: Path) -> Path:
    sys.path.insert(0, str(REPO / "assets" / "recipes"))
    import build_demo_models as recipe

    recipe.CHAT_BUILDER_OPTIONS = tuple(o for o in recipe.CHAT_BUILDER_OPTIONS if not o.startswith("prune_lm_head"))
    recipe.CHAT_PREFILL_CHUNK = 0  # og.Engine's static batch scheduler cannot chunk a prefill (it refuses chunk_size)
    work = out.with_name(out.name + "-work")
    for folder in (out, work):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    recipe.build_chat(out, work)
    shutil.rmtree(work, ignore_errors=True)
    return out


# A short request and a long one: their prompts are more than the demo model's logits window (17 rows,
# assets/recipes/chat_logits_window.py) apart, so a right-padded batch pads the short one past it.
FAR_APART = (
    "Hi.",
    "Write a long and detailed story about a dragon who learns to bake bread in a small village near the "
    "mountains, with many characters and a surprising ending that nobody expects at all, please.",
)


def prompts_of(og: Any, model: Any, count: int, texts: tuple[str, ...] = PROMPTS) -> list[Any]:
    import numpy as np

    tokenizer = og.Tokenizer(model)
    return [np.array(tokenizer.encode(tokenizer.apply_chat_template(json.dumps([{"role": "user", "content": p}]),
                                                                    add_generation_prompt=True)), dtype=np.int32)
            for p in texts[:count]]  # fmt: skip


def against_alone(og: Any, model: Any, prompts: list[Any], tokens: int) -> list[tuple[int, bool]]:
    """For each request, a batched generator's greedy answer against the one it makes alone: how many of its
    first tokens are the same, and whether the whole answer is."""
    answers = batch_answers(og, model, prompts, tokens)
    compared = []
    for row, ids in zip(answers.rows, prompts, strict=True):
        alone = alone_answer(og, model, ids, tokens)
        agreed = next((i for i, (a, b) in enumerate(zip(row, alone, strict=False)) if a != b),
                      min(len(row), len(alone)))  # fmt: skip
        compared.append((agreed, row == alone))
    return compared


def load(og: Any, folder: Path) -> Any:
    """The model as the chat engine opens it on the CPU: one decoder thread per physical core."""
    from engines.chat.threads import threads_overlay
    from engines.types import physical_cores

    config = og.Config(str(folder))
    config.overlay(threads_overlay(physical_cores()))
    model = og.Model(config)
    config_json = json.loads((folder / "genai_config.json").read_text(encoding="utf-8"))
    _PAD[id(model)] = int(config_json["model"]["pad_token_id"])
    return model


def stepped(og: Any, model: Any, prompts: list[Any], tokens: int) -> Result:
    """Every request has its own generator; each step, a new one reads its prompt and makes its first token,
    then every running one makes one token, in turn."""
    eos = {int(t) for t in og.Tokenizer(model).eos_token_ids}
    started = time.perf_counter()
    firsts: list[float] = []
    running: list[tuple[Any, list[int]]] = []
    total = 0
    for ids in prompts:
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=len(ids) + tokens, do_sample=False)
        generator = og.Generator(model, params)
        generator.append_tokens(ids)
        generator.generate_next_token()
        firsts.append(time.perf_counter() - started)
        running.append((generator, [1]))
    total += len(running)
    while running:
        for generator, count in list(running):
            if int(generator.get_next_tokens()[0]) in eos or count[0] >= tokens or generator.is_done():
                running.remove((generator, count))
                continue
            generator.generate_next_token()
            count[0] += 1
            total += 1
    return total / (time.perf_counter() - started), firsts


def fifo(og: Any, model: Any, prompts: list[Any], tokens: int) -> Result:
    eos = {int(t) for t in og.Tokenizer(model).eos_token_ids}
    started = time.perf_counter()
    firsts: list[float] = []
    total = 0
    for ids in prompts:
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=len(ids) + tokens, do_sample=False)
        generator = og.Generator(model, params)
        generator.append_tokens(ids)
        count = 0
        while not generator.is_done() and count < tokens:
            generator.generate_next_token()
            count += 1
            if count == 1:
                firsts.append(time.perf_counter() - started)
            if int(generator.get_next_tokens()[0]) in eos:
                break
        total += count
    return total / (time.perf_counter() - started), firsts


def batched(og: Any, model: Any, prompts: list[Any], tokens: int) -> Result:
    engine = og.Engine(model)
    buffer = engine.create_event_buffer(256)
    started = time.perf_counter()
    requests = []
    for ids in prompts:
        request = engine.create_request()
        options = og.TurnOptions(request)
        options.set_max_generated_tokens(tokens)
        options.set_do_sample(False)
        request.begin_turn(ids, options)
        requests.append(request)
    firsts: dict[int, float] = {}
    total = 0
    while engine.has_pending_requests():
        events = engine.run(buffer)
        for index in range(len(events)):
            event = events[index]
            if "FAILED" in str(event.flags):
                raise RuntimeError(f"the engine failed a request: {event.error_code}")
            if "TOKEN" in str(event.flags):
                total += 1
                firsts.setdefault(id(event.request), time.perf_counter() - started)
    if len(firsts) < len(prompts):
        raise RuntimeError(f"the engine answered {len(firsts)} of {len(prompts)} requests with no error")
    return total / (time.perf_counter() - started), sorted(firsts.values())


def generator_batch(og: Any, model: Any, prompts: list[Any], tokens: int) -> Result:
    """One `og.Generator` with a batch of every prompt (right-padded with the pad token, as the tokenizer's
    encode_batch pads; a first prompt read whole: `chunk_size` 0 at run time, since a chunked prefill takes one
    row only): one model call for every request's next token. Every request waits for the batch's prefill,
    and a request cannot join or leave the batch once it runs (rows that ended are still computed)."""
    answers = batch_answers(og, model, prompts, tokens)
    return answers.rate, [answers.first] * len(prompts)


class BatchAnswers:
    def __init__(self, rate: float, first: float, rows: list[list[int]]) -> None:
        self.rate, self.first, self.rows = rate, first, rows


def batch_answers(og: Any, model: Any, prompts: list[Any], tokens: int) -> BatchAnswers:
    import numpy as np

    tokenizer = og.Tokenizer(model)
    eos = {int(t) for t in tokenizer.eos_token_ids}
    pad = _PAD[id(model)]
    started = time.perf_counter()
    width = max(len(ids) for ids in prompts)
    batch = np.full((len(prompts), width), pad, dtype=np.int32)
    for row, ids in enumerate(prompts):
        batch[row, : len(ids)] = ids
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=width + tokens, do_sample=False, batch_size=len(prompts), chunk_size=0)
    generator = og.Generator(model, params)
    generator.append_tokens(batch)
    rows: list[list[int]] = [[] for _ in prompts]
    ended = [False] * len(prompts)
    first = 0.0
    while not all(ended) and not generator.is_done():
        generator.generate_next_token()
        if not first:
            first = time.perf_counter() - started
        for row, token in enumerate(int(t) for t in generator.get_next_tokens()):
            if not ended[row]:
                rows[row].append(token)
                ended[row] = token in eos or len(rows[row]) >= tokens
    return BatchAnswers(sum(len(r) for r in rows) / (time.perf_counter() - started), first, rows)


def alone_answer(og: Any, model: Any, ids: Any, tokens: int) -> list[int]:
    """The greedy answer of one request on its own generator (what the chat engine makes)."""
    eos = {int(t) for t in og.Tokenizer(model).eos_token_ids}
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(ids) + tokens, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(ids)
    out: list[int] = []
    while not generator.is_done() and len(out) < tokens:
        generator.generate_next_token()
        out.append(int(generator.get_next_tokens()[0]))
        if out[-1] in eos:
            break
    return out


def late_arrival(og: Any, model: Any, tokens: int) -> int:
    """og.Engine: tokens the running answer makes before a request asked after its 5th token gets its first."""
    engine = og.Engine(model)
    buffer = engine.create_event_buffer(256)
    first, late = prompts_of(og, model, 2)

    def ask(ids: Any) -> Any:
        request = engine.create_request()
        options = og.TurnOptions(request)
        options.set_max_generated_tokens(tokens)
        options.set_min_generated_tokens(tokens)  # the running answer goes on to the end
        options.set_do_sample(False)
        request.begin_turn(ids, options)
        return request

    running, asked, made = ask(first), None, 0
    while engine.has_pending_requests():
        events = engine.run(buffer)
        for index in range(len(events)):
            event = events[index]
            if "TOKEN" not in str(event.flags):
                continue
            if event.request == running:
                made += 1
            elif asked is not None and event.request == asked:
                return made
        if asked is None and made >= 5:
            asked = ask(late)
    return made


def median_of(runs: list[Result]) -> tuple[float, float, float]:
    """(aggregate tok/s, median first token, slowest first token), medians over the rounds."""
    return (statistics.median(r[0] for r in runs), statistics.median(statistics.median(r[1]) for r in runs),
            statistics.median(max(r[1]) for r in runs))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="og.Engine batching vs a FIFO of generators, 4 requests.")
    parser.add_argument("--model", type=Path, default=REPO / "assets" / "models" / "smollm2-135m-instruct",
                        help="a chat model (og.Engine needs one built without prune_lm_head)")
    parser.add_argument("--build", type=Path, metavar="DIR", help="build the demo model without prune_lm_head here")
    parser.add_argument("--pruned", type=Path, default=REPO / "assets" / "models" / "smollm2-135m-instruct",
                        help="the demo model as shipped, measured alone beside --model (one request)")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--record", action="store_true",
                        help="store the figures in docs/PERFORMANCE.md (needs a model og.Engine runs)")
    args = parser.parse_args(argv)
    from tests.bench import environment

    environment.banner()  # the versions measured, and a warning when they are not the lock's
    import onnxruntime_genai as og

    folder = build_unpruned(args.build) if args.build else args.model
    model = load(og, folder)
    print(f"model: {folder} ({model_megabytes(folder):.1f} MB of model.onnx*)")
    four, one = prompts_of(og, model, 4), prompts_of(og, model, 1)
    ways: dict[str, Callable[[Any, Any, list[Any], int], Result]] = {
        "FIFO of generators": fifo, "generators in turn": stepped, "og.Engine batching": batched,
        "one batched generator": generator_batch}
    for name, way in list(ways.items()):
        try:
            way(og, model, one, 8)  # warm
        except Exception as exc:  # og.Engine on a model built with prune_lm_head
            print(f"{name:20} cannot run on this model: {str(exc).splitlines()[0][:160]}")
            del ways[name]
    together: dict[str, list[Result]] = {name: [] for name in ways}
    alone: dict[str, list[Result]] = {name: [] for name in ways}
    for round_ in range(args.rounds):  # the ways alternate, round by round, so that a busy moment hits them all
        order = list(ways) if round_ % 2 == 0 else list(reversed(ways))
        for name in order:
            together[name].append(ways[name](og, model, four, args.tokens))
            alone[name].append(ways[name](og, model, one, args.tokens))
    figures: dict[str, float] = {}
    for name in ways:
        aggregate, first, slowest = median_of(together[name])
        single, single_first, _ = median_of(alone[name])
        print(f"{name:20} 4 requests: {aggregate:6.1f} tok/s together, first token median {first:.2f} s, slowest "
              f"{slowest:.2f} s | 1 request: {single:6.1f} tok/s, first token {single_first:.2f} s")
        prefix = {"FIFO of generators": "fifo", "generators in turn": "turn", "og.Engine batching": "engine",
                  "one batched generator": "genbatch"}[name]
        figures |= {f"{prefix}_agg_tps": aggregate, f"{prefix}_slowest_s": slowest,
                    f"{prefix}_first_ratio": slowest / single_first}
    if "one batched generator" in ways:
        figures["genbatch_same"] = sum(same for _, same in against_alone(og, model, four, args.tokens))
        print(f"one batched generator: {figures['genbatch_same']:.0f} of 4 greedy answers the same as each request's "
              "alone (a batch's matrix products round differently: near-ties can turn)")
    if "og.Engine batching" in ways:
        figures["engine_late_tokens"] = late_arrival(og, model, args.tokens)
        print(f"og.Engine: a request asked after the running answer's 5th token got its first token after "
              f"{figures['engine_late_tokens']:.0f} of its {args.tokens} tokens (generators in turn: at the next step)")
    if args.pruned is not None and args.pruned.resolve() != folder.resolve():
        figures |= compare_pruned(og, model, folder, args.pruned, args.tokens, args.rounds)
    if args.record:
        from tests.bench import perf_report

        command = " ".join(["python", "tests/bench/bench_batching.py", *(argv if argv is not None else sys.argv[1:])])
        perf_report.record("batching", figures, command)
    return 0


def model_megabytes(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.iterdir() if f.name.startswith("model.onnx")) / 2**20


def compare_pruned(
    og: Any, model: Any, folder: Path, pruned_folder: Path, tokens: int, rounds: int
) -> dict[str, float]:
    """One request on this model and on the demo model as shipped (prune_lm_head), alternating: what building
    without it costs a single stream (its prompt's LM head is computed for every position)."""
    pruned = load(og, pruned_folder)
    ids = prompts_of(og, pruned, 1)
    runs: dict[str, list[Result]] = {"without prune_lm_head": [], "with prune_lm_head": []}
    fifo(og, pruned, ids, 8)
    for round_ in range(rounds * 2):
        pair = [("without prune_lm_head", model), ("with prune_lm_head", pruned)]
        for name, which in pair if round_ % 2 == 0 else reversed(pair):
            runs[name].append(fifo(og, which, ids, tokens))
    print(f"one request, {rounds * 2} alternating runs each (sizes {model_megabytes(folder):.1f} vs "
          f"{model_megabytes(pruned_folder):.1f} MB):")
    firsts = {name: statistics.median(r[1][0] for r in results) * 1000 for name, results in runs.items()}
    for name, results in runs.items():
        print(f"   {name:22} {statistics.median(r[0] for r in results):6.1f} tok/s (first token included), first "
              f"token {firsts[name]:.0f} ms")
    four = prompts_of(og, pruned, 4)
    shipped = statistics.median(generator_batch(og, pruned, four, tokens)[0] for _ in range(rounds))
    print(f"   one batched generator on the demo model as shipped: {shipped:6.1f} tok/s for 4 requests together")
    far = prompts_of(og, pruned, 2, FAR_APART)
    far_same = {"pruned_far_agree": against_alone(og, pruned, far, tokens)[0][0],
                "unpruned_far_agree": against_alone(og, model, prompts_of(og, model, 2, FAR_APART), tokens)[0][0]}
    print(f"   a short prompt batched with one {abs(len(far[1]) - len(far[0]))} tokens longer: its first "
          f"{far_same['pruned_far_agree']:.0f} of {tokens} tokens the same as alone on the demo model as shipped, "
          f"{far_same['unpruned_far_agree']:.0f} without prune_lm_head")
    return {"unpruned_ttft_ms": firsts["without prune_lm_head"], "pruned_ttft_ms": firsts["with prune_lm_head"],
            "unpruned_mb": model_megabytes(folder), "pruned_mb": model_megabytes(pruned_folder),
            "pruned_genbatch_tps": shipped, **far_same}


if __name__ == "__main__":
    raise SystemExit(main())

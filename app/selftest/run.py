"""`npu-studio --self-test [--screenshots DIR] [--report FILE]`: the real app, driven end to end.

It waits for the window, discovers devices, classifies a sample photo with the demo classifier, runs
one chat turn with the demo chat model, saves a screenshot of every view, writes a JSON report and
exits 0 only if every step passed. It drives the same widgets a user clicks, through the same hosts,
so CI, the installer's smoke test and offline-demo checks see what a user would see.

The steps are one generator: each `yield` hands control back to the event loop (polled every 50 ms),
so the app keeps running normally while the test waits for it.
"""

from __future__ import annotations

import json
import logging
import platform
import sys
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QApplication

from app import __version__, paths

if TYPE_CHECKING:
    from app.gui import Studio

log = logging.getLogger(__name__)

SAMPLE_PHOTO = "chelsea.png"
CAT_WORDS = ("cat", "tabby", "lynx")  # EfficientNet-Lite0 says tabby / tiger cat / Egyptian cat
CHAT_PROMPT = "What is the capital of France? Answer in one sentence."
CHAT_MAX_TOKENS = 48
BENCH_RUNS = 30  # timed calls per path: enough for the charts, short enough for a self-test
STEP_TIMEOUT_S = 300.0
POLL_MS = 50

Waiting = Generator[None, None, Any]


class SelfTestFailure(Exception):
    pass


class SelfTest(QObject):
    def __init__(self, studio: Studio, screenshots: str | None = None, report: str | None = None) -> None:
        super().__init__()
        self.studio = studio
        self.screenshots = Path(screenshots) if screenshots else None
        self.report_path = Path(report) if report else None
        self.steps: list[dict[str, Any]] = []
        self.shots: list[str] = []
        self.facts: dict[str, Any] = {}
        self.exit_code = 1
        self._script: Generator[None, None, None] | None = None
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._tick)

    def start(self) -> None:
        self.studio.open_maximized = False
        self.studio.window.resize(1280, 720)
        self._script = self._run()
        self._timer.start()

    # --- driver -----------------------------------------------------------------------------------
    def _tick(self) -> None:
        assert self._script is not None
        try:
            next(self._script)
        except StopIteration:
            self._timer.stop()

    def _run(self) -> Generator[None, None, None]:
        started = time.time()
        yield from self._step("window", self._window)
        yield from self._step("devices", self._devices)
        yield from self._step("classify", self._classify)
        yield from self._step("chat", self._chat)
        yield from self._step("benchmark", self._benchmark)
        yield from self._step("settings", self._settings)
        yield from self._step("on this machine", self._on_this_machine)
        yield from self._step("views", self._other_views)
        yield from self._step("layouts", self._layouts)
        yield from self._step("no uncaught errors", self._no_crashes)
        passed = all(step["passed"] for step in self.steps)
        self.exit_code = 0 if passed else 1
        report = {
            "passed": passed,
            "version": __version__,
            "platform": f"{platform.system()} {platform.machine()} (Python {platform.python_version()})",
            "started": started,
            "seconds": round(time.time() - started, 2),
            "steps": self.steps,
            "screenshots": self.shots,
            **self.facts,
        }
        self._write_report(report)
        for step in self.steps:
            mark = "PASS" if step["passed"] else "FAIL"
            line = f"self-test {mark} {step['name']} ({step['seconds']:.1f} s)"
            if step.get("error"):
                line += f": {step['error']}"
            print(line, flush=True)
        print(f"self-test {'passed' if passed else 'FAILED'}", flush=True)
        self.studio.window.close()
        app = QApplication.instance()
        if app is not None:
            QTimer.singleShot(0, lambda: app.exit(self.exit_code))

    def _step(self, name: str, body: Callable[[], Waiting]) -> Generator[None, None, None]:
        started = time.perf_counter()
        entry: dict[str, Any] = {"name": name}
        try:
            detail = yield from body()
            entry.update(passed=True, detail=detail)
        except SelfTestFailure as exc:
            entry.update(passed=False, error=str(exc))
        except Exception as exc:
            log.exception("self-test step %s crashed", name)
            entry.update(passed=False, error=f"{type(exc).__name__}: {exc}")
        entry["seconds"] = round(time.perf_counter() - started, 3)
        self.steps.append(entry)

    @staticmethod
    def _wait(condition: Callable[[], bool], what: str, timeout: float = STEP_TIMEOUT_S) -> Waiting:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise SelfTestFailure(f"timed out after {timeout:.0f} s waiting for {what}")
            yield

    def _screenshot(self, name: str) -> Waiting:
        yield  # let layouts and repaints settle
        yield
        if self.screenshots is None:
            return None
        self.screenshots.mkdir(parents=True, exist_ok=True)
        path = self.screenshots / f"{len(self.shots) + 1:02d}-{name}.png"
        if not self.studio.window.grab().save(str(path)):
            raise SelfTestFailure(f"could not save the screenshot {path}")
        self.shots.append(str(path))
        return str(path)

    def _write_report(self, report: dict[str, Any]) -> None:
        if self.report_path is None:
            return
        try:
            self.report_path.parent.mkdir(parents=True, exist_ok=True)
            self.report_path.write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
        except OSError as exc:
            print(f"self-test: could not write the report {self.report_path}: {exc}", file=sys.stderr)
            self.exit_code = 1

    # --- steps ------------------------------------------------------------------------------------
    def _window(self) -> Waiting:
        studio = self.studio
        yield from self._wait(lambda: "window_shown_s" in studio.timings, "the main window", 30)
        detail = {
            "shown_ms": round(studio.timings["window_shown_s"] * 1000),
            "runtime_loaded_before_window": studio.runtime_loaded_at_show,
            "views": studio.window.view_keys(),
        }
        if studio.runtime_loaded_at_show:
            raise SelfTestFailure("ONNX Runtime was imported before the main window was shown")
        return detail

    def _devices(self) -> Waiting:
        studio = self.studio
        view = studio.devices_view
        studio.window.show_view("devices")
        yield from self._wait(lambda: bool(view.devices) or bool(view.banners.messages()), "device discovery")
        if not view.devices:
            raise SelfTestFailure(f"device discovery failed: {'; '.join(view.banners.messages())}")
        report = studio.last_discovery
        if report is not None:
            self.facts["devices"] = report.as_dict()
        usable = [d for d in view.devices if d.usable]
        if not usable:
            raise SelfTestFailure("no usable device found (not even the CPU)")
        shot = yield from self._screenshot("devices")
        return {
            "usable": [f"{d.type.value} via {d.ep}" for d in usable],
            "not_available": [f"{d.type.value} via {d.ep}: {d.reason}" for d in view.devices if not d.usable],
            "cards": len(view.cards),
            "npu_notice": view.npu_notice is not None,
            "screenshot": shot,
        }

    def _classify(self) -> Waiting:
        studio = self.studio
        view = studio.classify_view
        studio.window.show_view("classify")
        sample = paths.assets_dir() / "samples" / SAMPLE_PHOTO
        if not sample.is_file():
            raise SelfTestFailure(f"the sample photo {sample} is missing")
        if not studio.classifier_folder().is_dir():
            raise SelfTestFailure(
                f"the demo classifier is not installed ({studio.classifier_folder()}); "
                "build it with `python assets/recipes/build_demo_models.py`"
            )
        yield from self._wait(lambda: not view.busy, "the classify view to be idle")
        view.classify_paths([str(sample)])
        yield from self._wait(lambda: not view.busy, "the classification")
        results = view.batch.results.results
        if not results:
            raise SelfTestFailure(f"no result: {'; '.join(view.banners.messages()) or 'nothing reported'}")
        result = results[0]
        if result.error:
            raise SelfTestFailure(f"classification failed: {result.error}")
        top = result.top[0]
        if not any(word in top.label.lower() for word in CAT_WORDS):
            raise SelfTestFailure(f"expected a cat for {SAMPLE_PHOTO}, got '{top.label}' ({top.probability:.1%})")
        if result.placement is None or not view.result_panel.chip.text():
            raise SelfTestFailure("no placement badge was shown")
        self.facts["classification"] = result.as_dict() | {"placement": result.placement.as_dict()}
        shot = yield from self._screenshot("classify")
        return {
            "top5": [f"{s.label} {s.probability:.1%}" for s in result.top],
            "latency_ms": round(result.latency_ms, 2),
            "badge": view.result_panel.chip.text(),
            "screenshot": shot,
        }

    def _chat(self) -> Waiting:
        studio = self.studio
        view = studio.chat_view
        studio.window.show_view("chat")
        if not studio.chat_folder().is_dir():
            raise SelfTestFailure(
                f"the demo chat model is not installed ({studio.chat_folder()}); "
                "build it with `python assets/recipes/build_demo_models.py`"
            )
        view.new_conversation()
        view.panel.set_options(view.panel.options() | {"max_new_tokens": CHAT_MAX_TOKENS})
        if not view.session.send_text(CHAT_PROMPT):
            raise SelfTestFailure(f"the message was not sent: {'; '.join(view.banners.messages())}")
        yield from self._wait(lambda: not view.session.generating, "the chat answer")
        if view.banners.messages():
            raise SelfTestFailure("; ".join(view.banners.messages()))
        answer = view.session.messages[-1] if view.session.messages else None
        if answer is None or answer.role != "assistant" or not answer.text.strip():
            raise SelfTestFailure("the model gave no answer")
        if answer.stop_reason not in ("eos", "length"):
            raise SelfTestFailure(f"the answer stopped unexpectedly ({answer.stop_reason})")
        stored = studio.store.messages(answer.conversation_id)[-1]
        if stored.text != answer.text or not stored.ep or not stored.model:
            raise SelfTestFailure(
                f"the answer was not stored with its model and execution provider "
                f"(model {stored.model!r}, EP {stored.ep!r}, text stored: {stored.text == answer.text})"
            )
        self.facts["chat"] = {"prompt": CHAT_PROMPT, "answer": answer.text, "stats": stored.stats}
        shot = yield from self._screenshot("chat")
        stats = stored.stats
        return {
            "answer": answer.text[:200],
            "model": stored.model,
            "ep": stored.ep,
            "tokens_per_s": stats.get("decode_tokens_per_s"),
            "time_to_first_token_s": stats.get("time_to_first_token_s"),
            "screenshot": shot,
        }

    def _benchmark(self) -> Waiting:
        """A short benchmark of the demo models on every device, through the Benchmark view."""
        studio = self.studio
        view = studio.bench_view
        studio.window.show_view("benchmark")
        ready = lambda: bool(view.setup.selected_models()) and not view.busy  # noqa: E731
        yield from self._wait(ready, "the models to benchmark", 30)
        view.setup.runs_box.setValue(BENCH_RUNS)
        if not view.request_run():
            raise SelfTestFailure(f"the benchmark did not start: {'; '.join(view.banners.messages())}")
        yield from self._wait(lambda: not view.busy, "the benchmark")
        run = view.current
        if run is None:
            raise SelfTestFailure(f"no benchmark result: {'; '.join(view.banners.messages()) or 'nothing reported'}")
        if not any(r.ok for r in run.results):
            reasons = "; ".join(f"{r.device}: {r.reason}" for r in run.results)
            raise SelfTestFailure(f"no device was measured: {reasons}")
        charts = view.results.charts
        if charts is None or not charts.bar_heights or not charts.curves:
            raise SelfTestFailure("the benchmark charts are empty")
        summary = [
            {
                "model": r.model,
                "device": r.label,
                "status": r.status,
                "ran_on": r.ran_on or r.reason,
                "p50_ms": r.latency.p50_ms if r.latency else None,
                "overhead_ratio": r.overhead_ratio,
                "decode_ratio": r.chat.decode_ratio if r.chat else None,
            }
            for r in run.results
        ]
        self.facts["benchmark"] = {"run_id": run.run_id, "seconds": run.seconds, "results": summary}
        shot = yield from self._screenshot("benchmark")
        return {"seconds": round(run.seconds, 1), "measured": sum(r.ok for r in run.results), "screenshot": shot}

    def _settings(self) -> Waiting:
        """The Settings view: the compiled-model cache listed, and a diagnostics zip exported."""
        import zipfile

        view = self.studio.settings_view
        cache, card = view.cache, view.diagnostics
        self.studio.window.show_view("settings")
        yield from self._wait(lambda: cache.listing is not None and not cache.busy, "the compiled models", 30)
        if not card.log_file_label.path:
            raise SelfTestFailure("the Settings view shows no log file")
        if not card.contents:
            raise SelfTestFailure("the Settings view does not say what the diagnostics zip holds")
        target = paths.data_dir() / "diagnostics" / "self-test-diagnostics.zip"
        card.export_to(str(target))  # what "Export diagnostics…" does once the user agreed and chose where
        yield from self._wait(lambda: not card.busy, "the diagnostics export", 120)
        if card.last_export != str(target) or not target.is_file():
            raise SelfTestFailure(f"no diagnostics zip: {'; '.join(view.banners.messages()) or 'nothing reported'}")
        with zipfile.ZipFile(target) as bundle:
            names = bundle.namelist()
        if "report.txt" not in names:
            raise SelfTestFailure(f"the diagnostics zip has no report ({', '.join(names)})")
        shot = yield from self._screenshot("settings")
        return {
            "compiled_models": len(cache.listing.entries) if cache.listing is not None else 0,
            "diagnostics": {"zip": str(target), "files": names},
            "screenshot": shot,
        }

    def _on_this_machine(self) -> Waiting:
        """The Models view's "On this machine" tab, scanned with a folder of demo model copies (selftest_found.py)."""
        from app.selftest.found import build_found_folder, found_in, scan_with

        studio, view = self.studio, self.studio.models_view
        if not studio.chat_folder().is_dir():
            raise SelfTestFailure(f"the demo chat model is not installed ({studio.chat_folder()})")
        studio.window.show_view("models")
        folder = build_found_folder(paths.data_dir() / "self-test-found", studio.chat_folder())
        report = yield from scan_with(studio, folder)
        mine = found_in(report, folder)
        if len(mine) != 2 or any(not m.runs_here for m in mine):
            raise SelfTestFailure(f"the scan found {len(mine)} of the 2 copies in {folder}, or did not judge them")
        view.tabs.setCurrentWidget(view.found_panel)
        shot = yield from self._screenshot("models-on-this-machine")
        view.tabs.setCurrentIndex(0)
        copies = [f"{m.name} ({m.target.label}): {m.runs_here}" for m in mine]
        return {"found": len(report.models), "seconds": round(report.seconds, 2), "copies": copies, "screenshot": shot}

    def _other_views(self) -> Waiting:
        shots = []
        for key in self.studio.window.view_keys():
            if key in ("devices", "classify", "chat", "benchmark", "settings"):
                continue
            self.studio.window.show_view(key)
            shots.append((yield from self._screenshot(key)))
        return {"screenshots": shots}

    def _layouts(self) -> Waiting:
        """Every view at 1280x720, 1366x768, 1920x1080, 1000x720 and 960x540 (200 %), light and dark, and at
        1.5x in a child process, in the states that stretch it (app.selftest.layout_states): nothing outside
        the window, no text cut or clipped, no chip squeezed, no table cell elided, and at 1280x720 and up
        no chart or table below the fold."""
        from app.selftest.layout_shots import layout_pass, start_scaled_pass
        from app.storage.bench_history import HISTORY_FILE

        out = self.screenshots / "layouts" if self.screenshots is not None else None
        history = paths.data_dir() / HISTORY_FILE
        child = start_scaled_pass(out, history) if out is not None else None
        report = yield from layout_pass(self.studio, out)
        layout_shots = list(report["screenshots"])
        problems = dict(report["problems"])
        scaled: dict[str, Any] = {}
        if child is not None and out is not None:
            deadline = time.monotonic() + STEP_TIMEOUT_S
            while child.poll() is None and time.monotonic() < deadline:
                yield
            if child.poll() is None:
                child.kill()
            output = child.communicate()[0] or ""
            found = out / "layout-scaled.json"
            if not found.is_file():
                raise SelfTestFailure(f"the 1.5x layout pass wrote no report: {output[-400:]}")
            scaled = json.loads(found.read_text(encoding="utf-8"))
            layout_shots.extend(scaled.get("screenshots", []))
            problems.update(scaled.get("problems", {}))
        checked = report["checked"] + scaled.get("checked", 0)
        self.facts["layouts"] = {
            "problems": problems,
            "checked": checked,
            "states": report["states"],
            "scaled_states": scaled.get("states", {}),
            "screenshots": layout_shots,
        }
        if problems:
            count = sum(len(found) for found in problems.values())
            first = next(iter(problems.items()))
            raise SelfTestFailure(
                f"{count} problem(s) in {len(problems)} layout(s), e.g. {first[0]}: {first[1][0]}"
            )
        return {"checked": checked, "scaled": bool(scaled), "states": report["states"]}

    def _no_crashes(self) -> Waiting:
        yield
        if self.studio.crashes:
            raise SelfTestFailure("; ".join(self.studio.crashes))
        return {"uncaught_exceptions": 0}

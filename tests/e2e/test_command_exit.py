"""A command's process ends without the interpreter's teardown (app/__main__.py `leave`), and loses nothing
by it: other threads finish, `atexit` handlers run, buffered output arrives whole, the exit code is the
command's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

DRIVER = """
import atexit, sys, threading, time
from pathlib import Path
out = Path(sys.argv[1])
atexit.register(lambda: (out / "atexit").write_text("ran"))
def late_writer():
    time.sleep(0.3)
    (out / "thread").write_text("finished")
threading.Thread(target=late_writer).start()  # not a daemon: a normal exit waits for it
sys.stdout.write("x" * 200_000)  # more than any pipe buffer holds: still buffered when the command ends
sys.argv = ["npu-studio", *sys.argv[2:]]
from app.__main__ import main
sys.exit(main())
"""


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NPU_STUDIO_HOME": str(tmp_path / "home")}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(DRIVER), str(tmp_path), *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_a_command_ends_with_its_threads_done_its_atexit_run_and_its_output_whole(tmp_path: Path) -> None:
    proc = run(tmp_path, "devices", "--json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("x" * 200_000)
    report = json.loads(proc.stdout[200_000:])
    assert any(device["ep"] == "CPUExecutionProvider" for device in report["devices"])
    assert (tmp_path / "thread").read_text() == "finished"
    assert (tmp_path / "atexit").read_text() == "ran"


def test_a_failing_command_keeps_its_exit_code_and_message(tmp_path: Path) -> None:
    proc = run(tmp_path, "classify", str(tmp_path / "no-such-photo.jpg"))
    assert proc.returncode == 2
    assert "no-such-photo.jpg" in proc.stderr and "Traceback" not in proc.stderr
    assert (tmp_path / "thread").read_text() == "finished"
    assert (tmp_path / "atexit").read_text() == "ran"


def test_a_command_process_skips_the_teardown_and_an_in_process_call_does_not(tmp_path: Path) -> None:
    """`leave` ends the process before module teardown: an object finalised only then is never finalised.
    In-process callers (`main(argv)`, tests) return normally."""
    probe = textwrap.dedent("""
        import os, sys
        marker = os.open(os.path.join(sys.argv[1], "teardown"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        class Marker:
            def __del__(self, write=os.write, fd=marker):  # bound now: modules are half gone by then
                write(fd, b"ran")
        keep = Marker()  # a module global: finalised by the interpreter's teardown only
        from app import __main__ as entry, cli
        if sys.argv[2] == "in-process":
            code = entry.main(["devices"])
            assert code == 0 and cli.ran_a_command()
            sys.exit(0)
        sys.argv = ["npu-studio", "devices"]
        sys.exit(entry.main())
    """)  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO), "NPU_STUDIO_HOME": str(tmp_path / "home")}
    for mode, teardown in (("process", False), ("in-process", True)):
        proc = subprocess.run([sys.executable, "-c", probe, str(tmp_path), mode], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert "CPU" in proc.stdout
        assert ((tmp_path / "teardown").read_text() == "ran") is teardown, mode

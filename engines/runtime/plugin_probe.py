"""Does a bundled plugin EP offer any device on this machine? Asked in a short-lived child process.

Registering a plugin EP library loads it into the process for good: ONNX Runtime cannot unload it, and
the OpenVINO plugin brings OpenVINO's runtime and two threads (~12 MB resident) into a process where, on
a machine without Intel hardware, it offers no device at all. A long-lived process (the desktop app, the
local server) therefore asks first: a child registers the candidates, counts each one's devices with
`get_ep_devices()` and ends; the parent then registers only the plugins that offer a device (and any the
child could not register, which then fail in the parent with their own error, as before). A library that
crashes the child, or hangs it past the timeout, is not loaded into the parent either: its card says so.
The answer is as fresh as an in-process registration: ONNX Runtime lists a plugin's devices when it is
registered.
A one-shot command registers in its own process as before (the child would cost more than it saves).
`probe_plugins_first()` turns this on for the process (engines/runtime/registration.py asks the probe).

The child costs 0.2-0.3 s of start-up on two cores, so it is only asked about a plugin made for another
vendor's hardware than this machine's CPU (OpenVINO on an AMD or Qualcomm machine): the vendor decides
whether to ask, never the answer (an Intel GPU in an AMD machine is found). A plugin for the CPU's own
vendor (OpenVINO on an Intel machine, where it offers at least that CPU) is registered at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 60.0  # a cold start on a slow disk imports ONNX Runtime in a few seconds; a hang ends here


def probe_plugins_first(enabled: bool = True) -> None:
    """For a long-lived process (the app, the server): load a bundled plugin EP only when a child process
    finds it offering a device here. Off by default."""
    from engines.runtime.registration import set_plugin_probe

    set_plugin_probe(ask_when_foreign if enabled else None)


def ask_when_foreign(candidates: Sequence[tuple[str, str]]) -> dict[str, int | str]:
    """`offered_devices` for the candidates made for another vendor's hardware than this machine's CPU;
    the others get no answer (so they are registered in this process at once)."""
    from engines.runtime.reasons import EP_VENDOR

    cpu = cpu_vendor()
    foreign = [(ep, library) for ep, library in candidates if not cpu or EP_VENDOR.get(ep, "") != cpu]
    return offered_devices(foreign)


def cpu_vendor() -> str:
    """This machine's CPU vendor as ONNX Runtime names it ("Intel", "AMD", "Qualcomm"; "" if unknown)."""
    from engines import runtime
    from engines.runtime.reasons import vendor_of
    from engines.types import CPU_EP

    try:
        for device in runtime.ort().get_ep_devices():
            hardware = getattr(device, "device", None)
            if str(getattr(device, "ep_name", "")) == CPU_EP and hardware is not None:
                return vendor_of(str(getattr(hardware, "vendor", "")), int(getattr(hardware, "vendor_id", 0)), "")
    except Exception:  # an old ONNX Runtime without get_ep_devices: ask about every plugin
        log.debug("no CPU vendor from ONNX Runtime", exc_info=True)
    return ""


def serve(conn: Any, candidates: Sequence[tuple[str, str]]) -> None:
    """The child: register each (ep, library) and send {ep: number of devices it offers} (an EP whose
    registration failed is left out: the parent tries it itself and explains the failure)."""
    from engines import runtime

    ort = runtime.ort()
    offered: dict[str, int] = {}
    for ep, library in candidates:
        try:
            ort.register_execution_provider_library(ep, library)
        except Exception as exc:  # the parent registers it again and reports the error in its own words
            log.debug("probe: %s did not register: %s", ep, exc)
            continue
        offered[ep] = 0
    try:
        for device in ort.get_ep_devices():
            name = str(getattr(device, "ep_name", ""))
            if name in offered:
                offered[name] += 1
    except Exception:
        offered.clear()  # no answer is better than a wrong one
    conn.send(offered)
    conn.close()


def offered_devices(
    candidates: Sequence[tuple[str, str]],
    timeout_s: float = PROBE_TIMEOUT_S,
    target: str = "engines.runtime.plugin_probe:serve",
) -> dict[str, int | str]:
    """{ep: devices offered} for the (ep, library) candidates that a child process could register. When the
    child ended without answering (a library that crashes its process) or did not answer within `timeout_s`
    (one that hangs), each candidate maps to why, in plain words: such a library is not loaded here either.
    {} when no child could be started (the caller then registers as before)."""
    if not candidates:
        return {}
    from engines import child

    started = time.monotonic()
    try:
        process, conn = child.start(target, (list(candidates),), name="npu-studio-plugin-probe", duplex=False)
    except Exception as exc:
        log.warning("could not start the plugin probe: %s", exc)
        return {}
    answer: Any = None
    try:
        if conn.poll(timeout_s):
            answer = conn.recv()
    except (EOFError, OSError):
        answer = None
    finally:
        process.join(5.0 if answer is not None else 0.5)
        hung = process.is_alive()
        process.kill()
        process.join(5.0)
        conn.close()
    if isinstance(answer, dict):
        offered: dict[str, int | str] = {str(ep): int(count) for ep, count in answer.items()}
        log.info("plugin probe (%.2f s): %s", time.monotonic() - started, offered)
        return offered
    if hung:
        why = f"did not finish registering within {timeout_s:.0f} s in a separate process, so it is not loaded"
    else:
        why = f"ended the separate process that tried it (exit code {process.exitcode}), so it is not loaded"
    log.warning("the plugin probe gave no answer: the library %s", why)
    return {ep: why for ep, _ in candidates}

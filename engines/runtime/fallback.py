"""A device that fails mid-run: mark it unusable for the rest of the run, offer another device, go on.

The UI host keeps one `FallbackRunner` per model and device choice. Each piece of work (one image, one
batch, one reply) goes through `runner.run(work)`. When the device fails natively (DirectML 0x887A0005,
a QNN device error, out of memory, ...):

* the device is marked failed in `DeviceHealth` (it is not offered again in this run);
* with an `ask` callback, the user is asked right away (`ask(offer)` returns the device to use, or None
  to stop) and the same piece of work is retried once on the chosen device;
* without one, `DeviceFailedError` is raised carrying the `FallbackOffer`; the host shows it (e.g. a
  banner with "Retry on CPU") and calls `runner.switch_to(choice)` before running the work again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from engines.errors import (
    CancelledError,
    DeviceUnavailableError,
    ImageError,
    InputContractError,
    ModelError,
    SessionCreationError,
    StudioError,
)
from engines.runtime.devices import DiscoveryReport
from engines.runtime.failures import Diagnosis, diagnose
from engines.runtime.planning import RANKING, DeviceSet, best_first, plan_device
from engines.types import CPU_EP, EP_DEVICE_TYPE, DeviceChoice, Policy, short_ep_name

log = logging.getLogger(__name__)

S = TypeVar("S")
R = TypeVar("R")

# Failures that belong to the input or the model, not to the device: retrying elsewhere will not help.
_NOT_DEVICE_FAILURES = (CancelledError, ImageError, InputContractError, ModelError)
_MAX_SWITCHES = len(RANKING)  # down the ranking, and a spare: never a loop, whatever `ask` answers


class DeviceHealth:
    """Devices (by EP) that failed during this run. Thread-safe."""

    def __init__(self) -> None:
        self._failed: dict[str, str] = {}
        self._lock = threading.Lock()

    def mark_failed(self, ep: str, error: StudioError | str) -> None:
        text = error.message if isinstance(error, StudioError) else str(error)
        with self._lock:
            self._failed.setdefault(ep, text)
        log.warning("%s marked unusable for this run: %s", ep, text)

    def is_failed(self, ep: str) -> bool:
        with self._lock:
            return ep in self._failed

    def reason(self, ep: str) -> str:
        with self._lock:
            text = self._failed.get(ep, "")
        if not text:
            return ""
        return f"{short_ep_name(ep)} failed earlier in this run ({text}). Restart NPU Studio to use it again."

    def failed(self) -> dict[str, str]:
        with self._lock:
            return dict(self._failed)

    def reset(self, ep: str | None = None) -> None:
        with self._lock:
            if ep is None:
                self._failed.clear()
            else:
                self._failed.pop(ep, None)

    def apply(self, report: DiscoveryReport) -> DiscoveryReport:
        """The report with every failed device marked unusable (so session planning skips it)."""
        devices = tuple(
            replace(d, usable=False, reason=self.reason(d.ep)) if d.usable and self.is_failed(d.ep) else d
            for d in report.devices
        )
        return replace(report, devices=devices)

    def check(self, choice: DeviceChoice) -> None:
        """Refuse an explicit choice of a device that already failed in this run."""
        if choice.ep is not None and self.is_failed(choice.ep):
            raise DeviceUnavailableError(self.reason(choice.ep), "Choose another device.")


HEALTH = DeviceHealth()  # the run's registry (the process lifetime)


def choice_for(device_ep: str, strict: bool = False) -> DeviceChoice:
    if device_ep == CPU_EP:
        return DeviceChoice(policy=Policy.CPU_ONLY)
    return DeviceChoice(ep=device_ep, strict=strict)


def alternatives(
    report: DiscoveryReport, health: DeviceHealth, exclude: set[str], strict: bool = False
) -> tuple[DeviceChoice, ...]:
    """Usable devices other than `exclude` and the failed ones, in the planner's ranking (NPU first, CPU last)."""
    seen: set[str] = set()
    picked = []
    for device in best_first(health.apply(report).usable()):
        if device.ep in exclude or device.ep in seen:
            continue
        seen.add(device.ep)
        picked.append(choice_for(device.ep, strict))
    return tuple(picked)


@dataclass(frozen=True)
class FallbackOffer:
    """What to show the user: what failed, in plain words, and where the work can go instead."""

    failed: DeviceChoice
    failed_ep: str
    error: StudioError
    code: str
    alternatives: tuple[DeviceChoice, ...]

    def question(self) -> str:
        if not self.alternatives:
            return f"{self.error.message} No other device is available."
        return f"{self.error.message} Retry on {describe(self.alternatives[0])}?"


class DeviceFailedError(DeviceUnavailableError):
    """A device failed while in use; `offer` says where the work can be retried."""

    code = "device-failed"

    def __init__(self, offer: FallbackOffer) -> None:
        hint = (
            f"Retry on {describe(offer.alternatives[0])}."
            if offer.alternatives
            else (offer.error.hint or "No other device is available.")
        )
        super().__init__(offer.error.message, hint)
        self.with_diagnosis(offer.error)
        self.device_failure = True
        self.offer = offer


@dataclass(frozen=True)
class Switch:
    """One move to another device, for the run's notices."""

    from_ep: str
    to: DeviceChoice
    reason: str
    code: str

    def notice(self) -> str:
        device = _device(self.from_ep)
        return (
            f"{device[:1].upper()}{device[1:]} failed: {self.reason} It is not used again in this run; "
            f"continuing on {describe(self.to)}."
        )


def describe(choice: DeviceChoice) -> str:
    if choice.policy == Policy.CPU_ONLY and choice.ep is None:
        return "the CPU"
    if choice.ep is not None:
        return _device(choice.ep)
    return choice.describe()


def _device(ep: str) -> str:
    """The device behind an EP in words: "the NPU (QNN)", "the GPU (DirectML)", "the CPU"."""
    if ep == CPU_EP:
        return "the CPU"
    kind = EP_DEVICE_TYPE.get(ep)
    return f"the {kind.value} ({short_ep_name(ep)})" if kind is not None else short_ep_name(ep)


def _primary_ep(session: object) -> str:
    placement = getattr(session, "placement", None)
    return str(getattr(placement, "primary_ep", "")) if placement is not None else ""


@dataclass
class FallbackRunner(Generic[S]):
    """One session (classifier, chat engine, ...) made by `factory(choice)`, replaced on device failure."""

    factory: Callable[[DeviceChoice], S]
    choice: DeviceChoice
    report: DiscoveryReport | None = None  # discovered on first need when None
    health: DeviceHealth = field(default_factory=lambda: HEALTH)
    ask: Callable[[FallbackOffer], DeviceChoice | None] | None = None
    ep_of: Callable[[S], str] = _primary_ep
    switches: list[Switch] = field(default_factory=list)
    _session: S | None = None
    _tried: set[str] = field(default_factory=set)

    @property
    def session(self) -> S:
        if self._session is None:
            self.health.check(self.choice)
            self._session = self.factory(self.choice)
            ep = self.ep_of(self._session)
            if ep and self.health.is_failed(ep):
                self._session = None
                raise DeviceUnavailableError(self.health.reason(ep), "Choose another device.")
        return self._session

    def notices(self) -> list[str]:
        return [s.notice() for s in self.switches]

    def switch_to(self, choice: DeviceChoice) -> None:
        """Use `choice` from now on (the user accepted an offer)."""
        self.choice = choice
        self._session = None

    def drop(self) -> None:
        """Forget the session: the next piece of work opens one again (planned without failed devices)."""
        self._session = None

    def drop_if_failed(self) -> None:
        """Forget the session when its device failed since it was opened (elsewhere in this run)."""
        if self._session is not None and self.health.is_failed(self.ep_of(self._session)):
            self._session = None

    def run(self, work: Callable[[S], R]) -> R:
        """`work(session)` on the current device; on a device failure, mark, offer, and retry once per
        device. Errors of the input or the model are raised unchanged."""
        for _ in range(_MAX_SWITCHES + 1):
            try:
                session = self.session
            except _NOT_DEVICE_FAILURES:
                raise
            except Exception as exc:  # the session could not even be opened there
                ep = self._ep_for_choice()
                found = diagnose(exc, ep)
                if not ep or ep == CPU_EP:
                    raise found.error from exc
                if found.device_lost:
                    self.health.mark_failed(ep, found.error)
                self._offer(found, ep, exc)
                continue
            ep = self.ep_of(session) or self.choice.ep or ""
            try:
                return work(session)
            except _NOT_DEVICE_FAILURES:
                raise
            except Exception as exc:
                found = note_failure(exc, ep, self.health)
                if not ep or ep == CPU_EP or not _device_failure(found):
                    raise found.error from exc
                self._offer(found, ep, exc)
        raise DeviceUnavailableError(
            "Every device that was tried failed.", "Restart NPU Studio; if it keeps happening, run `npu-studio doctor`."
        )

    def _ep_for_choice(self) -> str:
        """The EP the current choice means: the one named, else the one the planner picks for the policy
        on the devices that have not failed ("" when strict and none is there)."""
        if self.choice.ep is not None:
            return self.choice.ep
        if self.choice.policy == Policy.CPU_ONLY:
            return CPU_EP
        try:
            return plan_device(self.choice, DeviceSet.from_devices(self.health.apply(self._report()).devices)).ep
        except DeviceUnavailableError:
            return ""

    def _offer(self, found: Diagnosis, ep: str, exc: BaseException) -> None:
        """Ask where to go next and switch there, or raise."""
        self._tried.add(ep)
        report = self._report()
        offer = FallbackOffer(
            failed=self.choice,
            failed_ep=ep,
            error=found.error,
            code=found.code,
            alternatives=alternatives(report, self.health, self._tried, self.choice.strict),
        )
        if self.ask is None or not offer.alternatives:
            raise DeviceFailedError(offer) from exc
        picked = self.ask(offer)
        if picked is None:
            raise DeviceFailedError(offer) from exc
        self.switches.append(Switch(ep, picked, found.error.message, found.code))
        log.info("switching from %s to %s after: %s", ep, picked.describe(), found.error.message)
        self.switch_to(picked)

    def _report(self) -> DiscoveryReport:
        if self.report is None:
            from engines.runtime.devices import discover

            self.report = discover()
        return self.report


def _device_failure(found: Diagnosis) -> bool:
    return found.error.device_failure or isinstance(found.error, DeviceUnavailableError | SessionCreationError)


def note_failure(exc: BaseException, ep: str, health: DeviceHealth | None = None) -> Diagnosis:
    """What went wrong, in plain words; when it is the device's own failure (not the input's or the
    model's, not the CPU's), the device is marked unusable for the rest of the run. Every caller that
    sees a device fail mid-run (sessions here, the chat host, bench) classifies it through this."""
    found = diagnose(exc, ep)
    if ep and ep != CPU_EP and not isinstance(exc, _NOT_DEVICE_FAILURES) and _device_failure(found):
        (health or HEALTH).mark_failed(ep, found.error)
    return found


def accept_first(offer: FallbackOffer) -> DeviceChoice | None:
    """An `ask` for non-interactive use (CLI, doctor): take the first alternative."""
    return offer.alternatives[0] if offer.alternatives else None

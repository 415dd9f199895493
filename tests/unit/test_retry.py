"""A device that fails mid-run is marked unusable for the run and the work is offered to another device."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from engines.errors import DeviceUnavailableError, ImageError, PlacementError
from engines.runtime.devices import DiscoveryReport
from engines.runtime.fallback import (
    DeviceFailedError,
    DeviceHealth,
    FallbackOffer,
    FallbackRunner,
    accept_first,
    alternatives,
)
from engines.types import CPU_EP, Device, DeviceChoice, DeviceType, Policy

QNN = "QNNExecutionProvider"
DML = "DmlExecutionProvider"
DML_REMOVED = (
    "[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code returned while running Conv node. "
    "Name:'/stem/Conv' Status Message: D:\\a\\_work\\1\\s\\onnxruntime\\core\\providers\\dml\\DmlExecutionProvider"
    "\\src\\MLOperatorAuthorImpl.cpp(2557)\\onnxruntime_pybind11_state.pyd!00007FFD1C2B8F4A: (caller: 00007FFD1C2A) "
    "Exception(3) tid(3a1c) 887A0005 The GPU device instance has been suspended. Use GetDeviceRemovedReason to "
    "determine the appropriate action."
)
QNN_DEVICE = "QNN EP: Failed to create device. Error: QNN_DEVICE_ERROR_HARDWARE_UNAVAILABLE"


def machine(*usable: str) -> DiscoveryReport:
    kinds = {QNN: DeviceType.NPU, DML: DeviceType.GPU, CPU_EP: DeviceType.CPU}
    devices = tuple(
        Device(ep=ep, type=kinds[ep], vendor="", usable=ep in usable, reason="" if ep in usable else "not here")
        for ep in (QNN, DML, CPU_EP)
    )
    return DiscoveryReport("1.32.0", "win32-amd64", (DML, CPU_EP), devices)


class FakeSession:
    """Stands for a classifier: `run` fails natively on the chosen call."""

    def __init__(self, ep: str, fail_on_call: int = 0, error: str = DML_REMOVED) -> None:
        self.placement = SimpleNamespace(primary_ep=ep)
        self.calls = 0
        self.fail_on_call = fail_on_call
        self.error = error

    def run(self, item: int) -> tuple[str, int]:
        self.calls += 1
        if self.calls == self.fail_on_call:
            raise RuntimeError(self.error)
        return self.placement.primary_ep, item


@dataclass
class Factory:
    failures: dict[str, int] = field(default_factory=dict)  # ep -> call number that fails
    errors: dict[str, str] = field(default_factory=dict)
    made: list[DeviceChoice] = field(default_factory=list)
    sessions: list[FakeSession] = field(default_factory=list)

    def __call__(self, choice: DeviceChoice) -> FakeSession:
        self.made.append(choice)
        ep = choice.ep or CPU_EP
        session = FakeSession(ep, self.failures.get(ep, 0), self.errors.get(ep, DML_REMOVED))
        self.sessions.append(session)
        return session


def test_gpu_removed_on_the_third_call_is_marked_and_the_work_goes_on_on_the_cpu() -> None:
    health = DeviceHealth()
    factory = Factory(failures={DML: 3})
    offers: list[FallbackOffer] = []

    def ask(offer: FallbackOffer) -> DeviceChoice | None:
        offers.append(offer)
        return offer.alternatives[0]

    runner = FallbackRunner(factory, DeviceChoice(ep=DML), report=machine(DML, CPU_EP), health=health, ask=ask)
    results = [runner.run(lambda s, i=i: s.run(i)) for i in range(1, 6)]

    assert results == [(DML, 1), (DML, 2), (CPU_EP, 3), (CPU_EP, 4), (CPU_EP, 5)], "item 3 is retried, none lost"
    assert [c.ep or c.policy.value for c in factory.made] == [DML, "cpu"]
    assert health.is_failed(DML) and not health.is_failed(CPU_EP)
    [offer] = offers
    assert offer.failed_ep == DML and offer.code == "0x887A0005"
    assert offer.error.message.startswith("DirectML error 0x887A0005: the GPU was removed or reset")
    assert offer.question().endswith("Retry on the CPU?")
    [notice] = runner.notices()
    assert notice.startswith("The GPU (DirectML) failed: DirectML error 0x887A0005")
    assert "not used again in this run; continuing on the CPU." in notice
    assert "MLOperatorAuthorImpl" not in notice


def test_without_ask_the_failure_carries_the_offer_and_the_host_switches_on_accept() -> None:
    health = DeviceHealth()
    factory = Factory(failures={DML: 3})
    runner = FallbackRunner(factory, DeviceChoice(ep=DML), report=machine(DML, CPU_EP), health=health)
    assert runner.run(lambda s: s.run(1)) == (DML, 1)
    assert runner.run(lambda s: s.run(2)) == (DML, 2)

    with pytest.raises(DeviceFailedError) as info:
        runner.run(lambda s: s.run(3))

    error = info.value
    assert error.message.startswith("DirectML error 0x887A0005")
    assert error.hint == "Retry on the CPU."
    assert error.offer.alternatives == (DeviceChoice(policy=Policy.CPU_ONLY),)
    assert health.is_failed(DML)
    runner.switch_to(error.offer.alternatives[0])
    assert runner.run(lambda s: s.run(3)) == (CPU_EP, 3)


def test_declining_stops_the_work_and_the_device_stays_unusable_for_the_run() -> None:
    health = DeviceHealth()
    report = machine(DML, CPU_EP)
    factory = Factory(failures={DML: 1})
    runner = FallbackRunner(factory, DeviceChoice(ep=DML), report=report, health=health, ask=lambda o: None)
    with pytest.raises(DeviceFailedError):
        runner.run(lambda s: s.run(1))

    later = FallbackRunner(Factory(), DeviceChoice(ep=DML), report=report, health=health)
    with pytest.raises(DeviceFailedError) as info:
        later.run(lambda s: s.run(1))
    assert "failed earlier in this run" in info.value.message
    assert alternatives(report, health, set()) == (DeviceChoice(policy=Policy.CPU_ONLY),)
    gpu = next(d for d in health.apply(report).devices if d.ep == DML)
    assert not gpu.usable and "Restart NPU Studio" in gpu.reason
    health.reset(DML)
    assert not health.is_failed(DML)


def test_npu_then_gpu_fail_and_the_work_ends_on_the_cpu_each_device_tried_once() -> None:
    health = DeviceHealth()
    factory = Factory(failures={QNN: 1, DML: 1}, errors={QNN: QNN_DEVICE})
    asked: list[tuple[str, tuple[DeviceChoice, ...]]] = []

    def ask(offer: FallbackOffer) -> DeviceChoice | None:
        asked.append((offer.failed_ep, offer.alternatives))
        return accept_first(offer)

    runner = FallbackRunner(factory, DeviceChoice(ep=QNN), report=machine(QNN, DML, CPU_EP), health=health, ask=ask)
    value = runner.run(lambda s: s.run(7))

    assert value == (CPU_EP, 7)
    assert runner.choice == DeviceChoice(policy=Policy.CPU_ONLY)
    assert asked == [
        (QNN, (DeviceChoice(ep=DML), DeviceChoice(policy=Policy.CPU_ONLY))),
        (DML, (DeviceChoice(policy=Policy.CPU_ONLY),)),
    ]
    assert health.failed().keys() == {QNN, DML}
    assert len(runner.notices()) == 2 and "NPU (QNN) failed" in runner.notices()[0]


def test_errors_of_the_input_are_not_blamed_on_the_device() -> None:
    health = DeviceHealth()
    factory = Factory()
    runner = FallbackRunner(factory, DeviceChoice(ep=DML), report=machine(DML, CPU_EP), health=health, ask=accept_first)

    def bad_photo(session: FakeSession) -> None:
        raise ImageError("'x.jpg' is truncated (the file ends early).", "Copy it again from its source.")

    with pytest.raises(ImageError):
        runner.run(bad_photo)
    assert not health.is_failed(DML) and runner.switches == [] and len(factory.made) == 1


def test_a_native_failure_on_the_cpu_is_explained_not_retried() -> None:
    health = DeviceHealth()
    runner = FallbackRunner(
        Factory(failures={CPU_EP: 1}, errors={CPU_EP: "bad allocation"}),
        DeviceChoice(policy=Policy.CPU_ONLY),
        report=machine(CPU_EP),
        health=health,
        ask=accept_first,
    )
    with pytest.raises(DeviceUnavailableError) as info:
        runner.run(lambda s: s.run(1))
    assert info.value.message == "The CPU ran out of memory for this model."
    assert not isinstance(info.value, DeviceFailedError)
    assert health.failed() == {}


def test_a_strict_session_that_cannot_open_is_offered_elsewhere_without_marking_the_device() -> None:
    health = DeviceHealth()
    strict_npu = DeviceChoice(ep=QNN, strict=True)

    def factory(choice: DeviceChoice) -> FakeSession:
        if choice.ep == QNN:
            raise PlacementError("Strict mode: QNN ran 40 of 44 nodes; 4 ran on the CPU.", "Turn strict mode off.")
        return FakeSession(choice.ep or CPU_EP)

    runner = FallbackRunner(factory, strict_npu, report=machine(QNN, CPU_EP), health=health, ask=accept_first)
    assert runner.run(lambda s: s.run(1)) == (CPU_EP, 1)
    assert not health.is_failed(QNN), "a model the NPU cannot take fully is not a broken NPU"
    assert "Strict mode" in runner.notices()[0]


def test_an_ask_that_keeps_choosing_a_failed_device_cannot_loop() -> None:
    health = DeviceHealth()
    runner = FallbackRunner(
        Factory(failures={DML: 1}),
        DeviceChoice(ep=DML),
        report=machine(DML, CPU_EP),
        health=health,
        ask=lambda offer: DeviceChoice(ep=DML),
    )
    with pytest.raises(DeviceUnavailableError):
        runner.run(lambda s: s.run(1))


def test_a_policy_choice_resolves_to_its_device_when_opening_fails() -> None:
    health = DeviceHealth()

    def factory(choice: DeviceChoice) -> FakeSession:
        if choice.policy == Policy.PREFER_GPU:
            raise RuntimeError(DML_REMOVED)
        return FakeSession(choice.ep or CPU_EP)

    offers: list[FallbackOffer] = []
    runner = FallbackRunner(
        factory,
        DeviceChoice(policy=Policy.PREFER_GPU),
        report=machine(DML, CPU_EP),
        health=health,
        ask=lambda o: offers.append(o) or accept_first(o),
    )
    assert runner.run(lambda s: s.run(1)) == (CPU_EP, 1)
    assert offers[0].failed_ep == DML and health.is_failed(DML)


def test_an_automatic_choice_that_cannot_open_names_the_device_the_planner_picked() -> None:
    health = DeviceHealth()

    def factory(choice: DeviceChoice) -> FakeSession:
        if choice.ep is None:  # automatic: the planner's first usable device, the NPU here, is lost
            raise RuntimeError(QNN_DEVICE)
        return FakeSession(choice.ep)

    offers: list[FallbackOffer] = []
    runner = FallbackRunner(
        factory,
        DeviceChoice(policy=Policy.AUTO),
        report=machine(QNN, DML, CPU_EP),
        health=health,
        ask=lambda o: offers.append(o) or accept_first(o),
    )
    assert runner.run(lambda s: s.run(1)) == (DML, 1), "the next device in the planner's ranking"
    assert offers[0].failed_ep == QNN and health.is_failed(QNN)
    assert [c.ep for c in offers[0].alternatives] == [DML, None], "the GPU, then the CPU"

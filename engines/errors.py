"""Typed errors that carry a user-readable message and a hint on what to do next."""

from __future__ import annotations

from typing import Any


class StudioError(Exception):
    """Base of every error the app shows to a user: what happened, and what to do.

    A native failure explained by engines/runtime/failures.py also says what users search for
    (`failure_code`: "QNN 1002", "0x887A0005"), whether the device is gone for the rest of the run
    (`device_lost`), whether it was the device's failure at all rather than the input's or the model's
    (`device_failure`: retrying elsewhere may help), and the runtime's own words (`native`). These are
    plain fields, so they survive a trip across a process boundary (see `as_dict` / `from_dict`).
    """

    code = "error"
    extra_fields: tuple[str, ...] = ()  # a subclass's own plain fields (ints, strings), kept across a process boundary

    def __init__(
        self,
        message: str,
        hint: str = "",
        *,
        failure_code: str = "",
        device_lost: bool = False,
        device_failure: bool = False,
        native: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.failure_code = failure_code
        self.device_lost = device_lost
        self.device_failure = device_failure or device_lost
        self.native = native

    def with_diagnosis(self, other: StudioError) -> StudioError:
        """This error carrying `other`'s failure fields (a wrapper keeps what the cause was)."""
        self.failure_code, self.device_lost = other.failure_code, other.device_lost
        self.device_failure, self.native = other.device_failure, other.native
        return self

    def as_dict(self) -> dict[str, object]:
        # The nearest class defined here: the receiving side rebuilds only those (see error_from_dict).
        kind = next(c.__name__ for c in type(self).__mro__ if c.__module__ == __name__)
        return {
            "type": kind,
            "message": self.message,
            "hint": self.hint,
            "failure_code": self.failure_code,
            "device_lost": self.device_lost,
            "device_failure": self.device_failure,
            "native": self.native,
        } | {name: getattr(self, name) for name in self.extra_fields}

    def user_text(self) -> str:
        return f"{self.message} {self.hint}".strip() if self.hint else self.message

    def __str__(self) -> str:
        return self.user_text()


class DeviceUnavailableError(StudioError):
    """The requested device or execution provider is not present or not usable."""

    code = "device-unavailable"


class PlacementError(StudioError):
    """Strict mode: the requested device did not take the graph (some or all nodes ran elsewhere)."""

    code = "placement"


class SessionCreationError(StudioError):
    """ONNX Runtime could not create a session for this model on this device."""

    code = "session"


class ModelError(StudioError):
    """A model file or folder is missing, corrupt, unsafe or does not match its contract."""

    code = "model"


class ImageError(StudioError):
    """An input image could not be read or decoded."""

    code = "image"


class InputContractError(StudioError):
    """The model's inputs or outputs do not match what the engine can feed or read."""

    code = "input-contract"


class GenerationError(StudioError):
    """Text generation failed."""

    code = "generation"


class ContextOverflowError(GenerationError):
    """A message (with the system prompt) is longer than the model's whole context window; or a whole
    conversation is, where its oldest turns may not be dropped. Both counts are fields."""

    code = "context-overflow"
    extra_fields = ("prompt_tokens", "context_length")
    prompt_tokens = 0
    context_length = 0

    def __init__(self, message: str, hint: str = "", *, prompt_tokens: int = 0, context_length: int = 0,
                 **fields: Any) -> None:  # fmt: skip
        super().__init__(message, hint, **fields)
        self.prompt_tokens = prompt_tokens
        self.context_length = context_length


class BusyError(StudioError):
    """The chat model is answering others and its line of waiting requests is full: try again soon."""

    code = "busy"


class StorageError(StudioError):
    """Settings or conversations could not be read or written."""

    code = "storage"


class CancelledError(StudioError):
    """The user cancelled the work."""

    code = "cancelled"

    def __init__(self, message: str = "Cancelled.", hint: str = "") -> None:
        super().__init__(message, hint)


def error_from_dict(data: dict[str, object]) -> StudioError:
    """The error `StudioError.as_dict` described (its class when it is one of these, else StudioError),
    failure fields included. The class is looked up here, never imported from a name in the data."""
    found = globals().get(str(data.get("type", "")))
    cls = found if isinstance(found, type) and issubclass(found, StudioError) else StudioError
    error = cls.__new__(cls)
    StudioError.__init__(
        error,
        str(data.get("message", "")),
        str(data.get("hint", "")),
        failure_code=str(data.get("failure_code", "")),
        device_lost=bool(data.get("device_lost", False)),
        device_failure=bool(data.get("device_failure", False)),
        native=str(data.get("native", "")),
    )
    for name in cls.extra_fields:
        value = data.get(name)
        if isinstance(value, int | str) and not isinstance(value, bool):
            setattr(error, name, value)
    return error

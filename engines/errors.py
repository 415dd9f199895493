"""Typed errors that carry a user-readable message and a hint on what to do next."""

from __future__ import annotations


class StudioError(Exception):
    """Base of every error the app shows to a user: what happened, and what to do."""

    code = "error"

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

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
    """A message (with the system prompt) is longer than the model's whole context window."""

    code = "context-overflow"


class StorageError(StudioError):
    """Settings or conversations could not be read or written."""

    code = "storage"


class CancelledError(StudioError):
    """The user cancelled the work."""

    code = "cancelled"

    def __init__(self, message: str = "Cancelled.", hint: str = "") -> None:
        super().__init__(message, hint)

"""Errors in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`, with the HTTP status the
`openai` client maps to its own exception types (400 BadRequestError, 401 AuthenticationError, 404
NotFoundError, 429 RateLimitError, 503 InternalServerError). An unknown model in a completion request is a
400 naming `model` (the request is what is wrong); `GET /v1/models/{id}` of one is a 404."""

from __future__ import annotations

import math
from typing import Any

from app.server.protocol import InvalidRequestError, PromptTooLongError, QueueFullError
from engines import CancelledError, ContextOverflowError, DeviceUnavailableError, PlacementError, StudioError


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        kind: str = "invalid_request_error",
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.kind = kind
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


def bad_request(message: str, param: str | None = None, code: str = "invalid_value") -> ApiError:
    return ApiError(400, message, param=param, code=code)


def from_studio_error(error: StudioError) -> ApiError:
    """The HTTP answer for an error the chat backend raised or reported."""
    if isinstance(error, QueueFullError):
        wait = max(1, math.ceil(error.retry_after_s))
        return ApiError(
            429, error.user_text(), code="queue_full", kind="rate_limit_error", headers={"Retry-After": str(wait)}
        )
    if isinstance(error, PromptTooLongError | ContextOverflowError):
        return ApiError(400, error.user_text(), param="messages", code="context_length_exceeded")
    if isinstance(error, InvalidRequestError):
        return ApiError(400, error.user_text(), param="messages", code="invalid_value")
    if isinstance(error, DeviceUnavailableError | PlacementError):
        return ApiError(503, error.user_text(), code="device_unavailable", kind="server_error")
    if error.code == "model-not-found":
        return ApiError(400, error.user_text(), param="model", code="model_not_found")
    if error.code == "model-unloaded":
        return ApiError(503, error.user_text(), param="model", code="model_unloaded", kind="server_error")
    if error.code == "shutting-down":
        return ApiError(503, error.user_text(), code="shutting_down", kind="server_error")
    if isinstance(error, CancelledError):
        return ApiError(503, error.user_text(), code="cancelled", kind="server_error")
    code = error.failure_code or error.code
    return ApiError(500 if not error.device_failure else 503, error.user_text(), code=code, kind="server_error")

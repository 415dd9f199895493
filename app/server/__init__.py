"""`npu-studio serve`: the OpenAI-compatible REST API over the chat service, loopback by default, with where
each answer ran on every response.

The pieces, one job each: `protocol` (the request record and events the HTTP layer exchanges with a chat
backend), `requests` (an OpenAI request body checked field by field into that record), `answers` (OpenAI's
response and chunk shapes, placement included), `guard` (host, key, origin and size checks in front of
every route), `api` (the Starlette routes), `bridge` (a backend's thread-side events as an async stream),
`runner` (uvicorn on a socket we bound, in the main thread or a thread of the app).
"""

from __future__ import annotations

# Not a port any local chat peer uses: LM Studio 1234, Ollama 11434, Jan 1337, Foundry Local (a port of its
# own choosing), llama.cpp / vLLM / LocalAI 8000-8080, GPT4All 4891, text-generation-webui 5000.
DEFAULT_PORT = 6780
API_KEY_ENV = "NPU_STUDIO_API_KEY"

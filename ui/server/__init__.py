"""The Server view: the local OpenAI-compatible server, its address, key and request log."""

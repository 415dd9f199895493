"""NPU Studio composition root: CLI, settings, storage and the QThread hosts of the engines."""

__version__ = "0.1.0"

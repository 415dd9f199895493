"""The Settings view: appearance, defaults, the compiled-model cache and diagnostics."""

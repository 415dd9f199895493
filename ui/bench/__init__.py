"""The Benchmark view: the same model on every device, charts and history."""

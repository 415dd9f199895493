"""The Devices view: a card per NPU, GPU and CPU, and execution providers to get."""

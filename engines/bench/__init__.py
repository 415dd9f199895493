"""The same model on every device, side by side; raw onnxruntime and onnxruntime-genai loops."""

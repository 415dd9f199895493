"""NPU Studio engines: everything that touches ONNX Runtime, free of Qt."""

"""Qt widgets of NPU Studio. Talks to the engines only through signals wired by `app.gui`; never
imports an ONNX Runtime package, so the main window can appear before any runtime is loaded."""

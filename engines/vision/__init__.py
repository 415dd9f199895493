"""Images (decode and preprocess), the classifier, quantization."""

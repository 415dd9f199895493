"""`npu-studio --self-test`: the real app driven end to end, and its layout pass."""

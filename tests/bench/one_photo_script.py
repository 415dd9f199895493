"""The one-photo classifier a user would write by hand (the peer of `npu-studio classify PHOTO`).

Pillow draft() + resize + centre crop + one onnxruntime session, then the top-5 with their labels.
    python one_photo_script.py MODEL_DIR PHOTO
"""

import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
from PIL import Image

model_dir, photo = Path(sys.argv[1]), sys.argv[2]
labels = (model_dir / "labels.txt").read_text(encoding="utf-8").splitlines()
session = ort.InferenceSession(str(model_dir / "model.onnx"), providers=["CPUExecutionProvider"])
with Image.open(photo) as file:
    w, h = file.size
    scale = 256 / min(w, h)
    file.draft("RGB", (int(w * scale + 0.5), int(h * scale + 0.5)))
    img = file.convert("RGB")
w, h = img.size
scale = 256 / min(w, h)
new_w, new_h = round(w * scale), round(h * scale)
small = img.resize((new_w, new_h), Image.Resampling.BICUBIC, reducing_gap=3.0)
left, top = (new_w - 224) // 2, (new_h - 224) // 2
x = (np.asarray(small.crop((left, top, left + 224, top + 224)), dtype=np.float32) - 127.0) / 128.0
logits = session.run(None, {"input": np.ascontiguousarray(x.transpose(2, 0, 1)[None])})[0][0]
p = np.exp(logits - logits.max())
p /= p.sum()
for i in np.argsort(-logits)[:5]:
    print(f"{p[i] * 100:6.2f}%  {labels[i]}")

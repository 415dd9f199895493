"""The folder classifier a user would write by hand (the peer of `npu-studio classify FOLDER`).

Pillow draft() + resize + centre crop + one onnxruntime session, batch 1, one photo after another.
    python folder_script.py MODEL_DIR FOLDER  -> JSON lines: file name and top-5 class indices
"""

import json
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
from PIL import Image

model_dir, folder = Path(sys.argv[1]), Path(sys.argv[2])
session = ort.InferenceSession(str(model_dir / "model.onnx"), providers=["CPUExecutionProvider"])
for path in sorted(p for p in folder.iterdir() if p.is_file()):
    with Image.open(path) as file:
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
    top5 = np.argsort(-logits)[:5]
    print(json.dumps({"file": path.name, "top": [int(i) for i in top5]}))

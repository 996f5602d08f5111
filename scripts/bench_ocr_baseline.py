"""The Python baseline for OCR: rapidocr-onnxruntime (the same PP-OCRv4 models on ONNX Runtime)
on the same pages, rendered by pypdfium2 at the same 200 dpi. One JSON line per file, then one
with the peak RSS; the engine is loaded before the clock starts, as docpipe's is.

    python bench_ocr_baseline.py FILE.pdf...
"""
import json
import sys
import time

import pypdfium2 as pdfium
from rapidocr_onnxruntime import RapidOCR

DPI = 200


def peak_rss_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def main(files):
    loading = time.perf_counter()
    engine = RapidOCR()
    load_ms = (time.perf_counter() - loading) * 1000
    for path in files:
        started = time.perf_counter()
        pdf = pdfium.PdfDocument(path)
        texts = []
        for page in pdf:
            image = page.render(scale=DPI / 72, grayscale=True).to_numpy()
            if image.ndim == 2:
                image = image[:, :, None].repeat(3, axis=2)
            result, _ = engine(image)
            texts.append("\n".join(r[1] for r in (result or [])))
        ms = (time.perf_counter() - started) * 1000
        print(json.dumps({"file": path, "pages": len(texts), "ms": ms, "texts": texts}, ensure_ascii=False))
    print(json.dumps({"peak_rss_kb": peak_rss_kb(), "engine_load_ms": load_ms}))


if __name__ == "__main__":
    main(sys.argv[1:])

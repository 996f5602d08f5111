"""Python baseline for the parse benchmark: pypdf text extraction + langchain's
RecursiveCharacterTextSplitter (500 characters, 50 overlap) over the same files as
parse/examples/bench_parse.rs. Prints one JSON object: files, bytes, pages, chunks, seconds,
MB/s, pages/s and peak RSS (VmHWM).

usage: bench_parse_baseline.py {pdf|md} FILE...
"""

import json
import sys
import time

from langchain_text_splitters import RecursiveCharacterTextSplitter
from pypdf import PdfReader


def peak_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def main() -> None:
    kind, files = sys.argv[1], sys.argv[2:]
    splitter = RecursiveCharacterTextSplitter(chunk_size=500, chunk_overlap=50)
    total_bytes = pages = chunks = 0
    start = time.perf_counter()
    for path in files:
        with open(path, "rb") as f:
            data = f.read()
        total_bytes += len(data)
        if kind == "pdf":
            reader = PdfReader(path)
            texts = [page.extract_text() or "" for page in reader.pages]
            pages += len(texts)
            text = "\n".join(texts)
        else:
            pages += 1
            text = data.decode("utf-8", errors="replace")
        chunks += len(splitter.split_text(text))
    seconds = time.perf_counter() - start
    print(
        json.dumps(
            {
                "engine": "python pypdf + langchain",
                "set": kind,
                "files": len(files),
                "bytes": total_bytes,
                "pages": pages,
                "chunks": chunks,
                "seconds": seconds,
                "mb_per_s": total_bytes / 1e6 / seconds,
                "pages_per_s": pages / seconds,
                "peak_rss_mb": peak_rss_mb(),
            }
        )
    )


if __name__ == "__main__":
    main()

"""Python baseline for the parse benchmark: the same job done the usual Python way, over the same
files as shared/parse/examples/bench_parse.rs. Prints one JSON object: files, bytes, pages, chunks,
seconds, MB/s, pages/s and peak RSS (VmHWM).

usage: bench_parse_baseline.py {pypdf|pdfminer|markdown} FILE...

  pypdf     pypdf text extraction, then RecursiveCharacterTextSplitter (500 characters, 50 overlap)
  pdfminer  pdfminer.six extract_text, then the same splitter
  markdown  MarkdownHeaderTextSplitter (# to ######, headings kept as metadata: the section path),
            then the same splitter on each section. This is langchain's documented way to chunk
            Markdown by structure, the job docpipe's Markdown path does.

Both sides read one file at a time, outside the clock: the figure is parsing and chunking, and the
peak RSS is what one document costs, not the whole set held in memory.
"""

import io
import json
import sys
import time

from langchain_text_splitters import MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter

ENGINES = {
    "pypdf": ("python pypdf + langchain", "pdf"),
    "pdfminer": ("python pdfminer.six + langchain", "pdf"),
    "markdown": ("python langchain markdown headers + recursive", "md"),
}


def peak_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def main() -> None:
    kind, files = sys.argv[1], sys.argv[2:]
    engine, set_name = ENGINES[kind]
    splitter = RecursiveCharacterTextSplitter(chunk_size=500, chunk_overlap=50)
    headers = MarkdownHeaderTextSplitter(
        headers_to_split_on=[("#" * n, f"h{n}") for n in range(1, 7)]
    )
    if kind == "pypdf":
        from pypdf import PdfReader
    elif kind == "pdfminer":
        from pdfminer.high_level import extract_pages
        from pdfminer.layout import LTTextContainer

    total_bytes = pages = chunks = 0
    seconds = 0.0
    for path in files:
        with open(path, "rb") as f:
            data = f.read()
        total_bytes += len(data)
        start = time.perf_counter()
        if kind == "pypdf":
            reader = PdfReader(io.BytesIO(data))
            texts = [page.extract_text() or "" for page in reader.pages]
            pages += len(texts)
            chunks += len(splitter.split_text("\n".join(texts)))
        elif kind == "pdfminer":
            # What extract_text does, page by page, so the pages can be counted in the same pass.
            texts = []
            for layout in extract_pages(io.BytesIO(data)):
                pages += 1
                texts.extend(e.get_text() for e in layout if isinstance(e, LTTextContainer))
            chunks += len(splitter.split_text("".join(texts)))
        else:
            pages += 1
            sections = headers.split_text(data.decode("utf-8", errors="replace"))
            chunks += len(splitter.split_documents(sections))
        seconds += time.perf_counter() - start
        del data
    print(
        json.dumps(
            {
                "engine": engine,
                "set": set_name,
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

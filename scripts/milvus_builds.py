#!/usr/bin/env python3
"""How long Milvus took to build the vector index of a collection's sealed segments, read from
its log (issue 41, item 4: what a library 100x larger needs). Compactions build again: a merged
segment's index is built anew, so the build seconds count what the library's growth cost Milvus.

    scripts/milvus_builds.py --log .local/milvus/logs/standalone-1.log --collection docpipe_scale

Milvus builds an index per sealed segment, in the background of its index node. For each HNSW
build of the collection (the last collection of that name the log created), it takes the time from
"index params are ready" to "Successfully build index" and the segment's rows (the datanode's
"updated segment num row", a compaction's "new segment num of rows", or the binlog entries its
flushes recorded), and prints a table and,
last, one JSON line: builds, rows, build seconds, rows per build second.
"""
import argparse
import collections
import json
import re
import sys
from datetime import datetime

LINE = re.compile(r"^\[(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d+) ")


def when(line: str):
    m = LINE.match(line)
    return datetime.strptime(m.group(1), "%Y/%m/%d %H:%M:%S.%f") if m else None


def field(line: str, name: str):
    m = re.search(r"\[" + re.escape(name) + r"=([^\]]+)\]", line)
    return m.group(1) if m else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log", required=True)
    ap.add_argument("--collection", required=True, help="the collection's name")
    a = ap.parse_args()

    collection_id = None
    ready, built = {}, {}  # buildID -> time, (time, segment)
    hnsw = set()
    rows_seen = collections.defaultdict(int)  # segment -> largest numRowsSum
    flushed = collections.defaultdict(int)  # segment -> binlog entries of one field
    compacted = {}  # segment -> rows, for a compaction's result
    with open(a.log, encoding="utf-8", errors="replace") as f:
        for line in f:
            if '"add collection to meta table"' in line and f"[collection={a.collection}]" in line:
                collection_id = field(line, "id")  # the last one created wins
                ready.clear(), built.clear(), hnsw.clear(), rows_seen.clear(), flushed.clear(), compacted.clear()
            elif '"index params are ready"' in line:
                build = field(line, "buildID")
                ready[build] = when(line)
                if "HNSW" in line:
                    hnsw.add(build)
            elif '"Successfully build index"' in line:
                if field(line, "Collection") == collection_id:
                    built[field(line, "buildID")] = (when(line), field(line, "SegmentID"))
            elif '"new segment num of rows"' in line:
                # A compaction's result: its rows once the deletes (upserts' old rows) are gone.
                segment, total = field(line, '"new segment ID"'), field(line, '"new segment num of rows"')
                if segment and total:
                    compacted[segment] = int(total)
            elif '"updated segment num row"' in line:
                segment, total = field(line, "segmentID"), field(line, "numRowsSum")
                if segment and total:
                    rows_seen[segment] = max(rows_seen[segment], int(total))
            elif '"flush segment with meta"' in line and field(line, "collectionID") == collection_id:
                segment = field(line, "segmentID")
                # The binlogs of the first field listed: its entries are the rows this flush added.
                m = re.search(r'\\"binlogs\\":\[(.*?)\]\}', line)
                if m:
                    flushed[segment] += sum(int(n) for n in re.findall(r'\\"entries_num\\":(\d+)', m.group(1)))
    if collection_id is None:
        print(f"no collection {a.collection} created in {a.log}", file=sys.stderr)
        return 1
    builds = []
    for build, (done, segment) in sorted(built.items(), key=lambda kv: kv[1][0]):
        if build not in hnsw or build not in ready:
            continue
        rows = compacted.get(segment) or rows_seen.get(segment) or flushed.get(segment)
        builds.append({"build": build, "segment": segment, "rows": rows,
                       "seconds": (done - ready[build]).total_seconds(), "at": done.strftime("%H:%M:%S")})
    print(f"HNSW builds of {a.collection} (collection {collection_id}) in {a.log}\n")
    print("| finished | segment | rows | seconds | rows/s |")
    print("| --- | --- | ---: | ---: | ---: |")
    for b in builds:
        rate = f"{b['rows'] / b['seconds']:,.0f}" if b["rows"] and b["seconds"] > 0 else "?"
        rows = f"{b['rows']:,}" if b["rows"] else "?"
        print(f"| {b['at']} | {b['segment']} | {rows} | {b['seconds']:.1f} | {rate} |")
    known = [b for b in builds if b["rows"]]
    rows = sum(b["rows"] for b in known)
    secs = sum(b["seconds"] for b in known)
    summary = {"collection": a.collection, "builds": len(builds), "builds_with_rows": len(known),
               "rows": rows, "build_seconds": round(secs, 1),
               "rows_per_build_second": round(rows / secs) if secs else None,
               "largest_segment_rows": max((b["rows"] for b in known), default=None)}
    print()
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""How long one durable commit's flush takes on a directory's disk: the floor under a request
that answers only once its audit records are on disk (`[storage] sqlite_synchronous = "full"`).

Writes the pages a commit appends to SQLite's write-ahead log (a 24-byte frame header and a
4 KiB page each, into a file reused in place as the log is) and times fdatasync, as SQLite's
commit does. Prints the median and p99 for one page and for 14 (what one request at a time
commits on the Bedrock path, counted with strace).

    bench/fsync-floor.py [DIR] [COMMITS]      prints: pages p50_us p99_us, one line each
"""
import os
import sys
import tempfile
import time

PAGE = 4096
LOG_BYTES = 64 << 20


def flush_times(directory, pages, commits):
    fd, path = tempfile.mkstemp(dir=directory, prefix="fsync-floor-")
    try:
        # A log file reused in place, as SQLite's is between checkpoints: written whole and
        # synced first, so that the timed flushes overwrite allocated blocks (a sparse file
        # would make each flush allocate them too, and time more than a commit's flush).
        frame, page = os.urandom(24), os.urandom(PAGE)
        chunk = page * 256
        for _ in range((LOG_BYTES + len(chunk) - 1) // len(chunk)):
            os.write(fd, chunk)
        os.fsync(fd)
        offset, times = 0, []
        for _ in range(commits):
            for _ in range(pages):
                os.pwrite(fd, frame, offset)
                os.pwrite(fd, page, offset + 24)
                offset += 24 + PAGE
            start = time.perf_counter()
            os.fdatasync(fd)
            times.append(time.perf_counter() - start)
            if offset + pages * (24 + PAGE) > LOG_BYTES:
                offset = 0
        times.sort()
        return times[len(times) // 2] * 1e6, times[int(len(times) * 0.99)] * 1e6
    finally:
        os.close(fd)
        os.unlink(path)


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else tempfile.gettempdir()
    commits = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    for pages in (1, 14):
        p50, p99 = flush_times(directory, pages, commits)
        print(f"{pages} {p50:.0f} {p99:.0f}")


if __name__ == "__main__":
    main()

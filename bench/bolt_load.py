#!/usr/bin/env python3
"""Load test of `quiver serve` (loopback only, bounded in time): N clients x M
operations, each chosen at random among
- a query read to its end,
- a large result abandoned mid-stream by closing the socket,
- a large result cut short by RESET and the connection reused,
- a transaction that writes and is abandoned by disconnecting,
- a transaction that writes and commits.

The server must stay up, answer a query after the storm, and its resident memory must
come back near its baseline. Prints operations/s, each action's count and failures,
and the server's RSS before, at peak and after.

    cargo build --release
    pip install neo4j
    python3 bench/bolt_load.py --clients 8 --ops 300
"""

import argparse
import random
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from import_bench import QUIVER  # noqa: E402
from bolt_bench import _msg, _pstr, connect, gather, merged, read_summaries, rss_kb, serve  # noqa: E402


def run(q, n=-1):
    return _msg(b"\xB3\x10" + _pstr(q) + b"\xA0\xA0") + _msg(
        b"\xB1\x3F\xA1" + _pstr("n") + (b"\xFF" if n < 0 else b"\xC9" + struct.pack(">h", n)))


BIG = "UNWIND range(1, 2000000) AS x RETURN x, toString(x) AS s"


def worker(port, ops, seed, out):
    rng = random.Random(seed)
    counts = {}
    fails = 0
    for _ in range(ops):
        action = rng.choice(["query", "abandon", "reset", "abandon_tx", "commit_tx"])
        counts[action] = counts.get(action, 0) + 1
        try:
            s = connect(port)
            _, buf = read_summaries(s, 2)
            if action == "query":
                s.sendall(run("MATCH (n) RETURN count(n) AS c"))
                tags, buf = read_summaries(s, 2, buf)
                assert tags == [0x70, 0x70], tags
            elif action == "abandon":
                s.sendall(run(BIG, 100))
                read_summaries(s, 2, buf)
                s.close()
                continue
            elif action == "reset":
                s.sendall(run(BIG, 100))
                _, buf = read_summaries(s, 2, buf)
                s.sendall(_msg(b"\xB0\x0F"))
                tags, buf = read_summaries(s, 1, buf)
                assert tags == [0x70], tags
                s.sendall(run("RETURN 1 AS one"))
                tags, buf = read_summaries(s, 2, buf)
                assert tags == [0x70, 0x70], tags
            elif action in ("abandon_tx", "commit_tx"):
                s.sendall(_msg(b"\xB1\x11\xA0"))
                s.sendall(run("CREATE (:Load {v: 1})"))
                tags, buf = read_summaries(s, 3, buf)
                assert tags == [0x70, 0x70, 0x70], tags
                if action == "abandon_tx":
                    s.close()
                    continue
                s.sendall(_msg(b"\xB0\x12"))
                tags, buf = read_summaries(s, 1, buf)
                assert tags == [0x70], tags
            s.sendall(_msg(b"\xB0\x02"))
            s.close()
        except Exception as e:  # noqa: BLE001 (counted, reported)
            fails += 1
            print(f"  {action}: {e!r}", file=sys.stderr)
    out.put((counts, fails))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--ops", type=int, default=300, help="operations per client")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "db"
        subprocess.run([QUIVER, "query", "--db", db, "UNWIND range(1, 10000) AS i CREATE (:N {i: i})"],
                       check=True, capture_output=True)
        server, port = serve(db)
        try:
            # Warm up, then the baseline.
            s = connect(port)
            _, buf = read_summaries(s, 2)
            s.sendall(run("MATCH (n) RETURN count(n)"))
            read_summaries(s, 2, buf)
            s.close()
            time.sleep(0.5)
            base = rss_kb(server.pid)
            t = time.time()
            res = gather(worker, [(port, args.ops, i) for i in range(args.clients)])
            wall = time.time() - t
            fails = sum(f for _, f in res)
            counts = merged(c for c, _ in res)
            time.sleep(2)
            assert server.poll() is None, "the server died"
            # Committed writes stay; abandoned ones leave nothing. The RECORD between
            # the two summaries holds the count.
            s = connect(port)
            _, buf = read_summaries(s, 2)
            s.sendall(run("MATCH (n:Load) RETURN count(n) AS c"))
            raw = buf
            while raw.count(b"\x00\x00") < 3:
                raw += s.recv(1 << 16)
            s.close()
            i = raw.index(b"\xB1\x71")  # RECORD
            loads = raw[i + 3]  # a tiny int or a marker
            if loads == 0xC9:
                loads = struct.unpack(">h", raw[i + 4:i + 6])[0]
            elif loads == 0xCA:
                loads = struct.unpack(">i", raw[i + 4:i + 8])[0]
            print(f"Load nodes: {loads}, committed transactions: {counts.get('commit_tx', 0)}")
            tags = [0x70, 0x70] if b"\xB1\x7F" not in raw else [0x7F]
            after = rss_kb(server.pid)
            peak = rss_kb(server.pid, "VmHWM:")
            total = sum(counts.values())
            print(f"{total} operations by {args.clients} clients in {wall:.1f} s ({total / wall:.0f}/s); "
                  f"failures {fails}; {counts}")
            print(f"server RSS: baseline {base / 1024:.0f} MiB, peak {peak / 1024:.0f} MiB, "
                  f"after {after / 1024:.0f} MiB; answers after the storm: {tags == [0x70, 0x70]}")
        finally:
            server.kill()
            server.wait()


if __name__ == "__main__":
    main()

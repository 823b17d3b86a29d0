#!/usr/bin/env python3
"""Adversarial imports: inputs built to break an importer, each run under a memory budget.

For each case it writes the input under --data (git-ignored), runs `quiver import` in a
child process, and prints the outcome (the summary line, or the first line of the error),
the wall time and the child's peak resident memory (ru_maxrss) against the bound the
import promises: the budget plus 64 MiB. It exits non-zero if any case panics, dies on a
signal, or goes past the bound.

    cargo build --release -p quiver-cli
    python3 bench/adversarial_bench.py                  # all cases, --budget 256MiB
    python3 bench/adversarial_bench.py --cases nul,utf8

Cases (what a demanding user could feed it by mistake or on purpose):
  field-1g     one field of 1 GiB (a record past the 64 MiB record limit)
  header-1g    a header line of 1 GiB
  cols-100k    a header of 100,000 columns (past the 16,384 column limit)
  dup-10m      10 million rows whose ids repeat (ids 0..999 over and over); once
               stopping at the first, once with --skip-bad-rows --bad-tolerance 20000000
  rels-missing 10 million relationships whose endpoints are all missing; as above
  utf8         a property with invalid UTF-8 bytes
  nul          a property with a NUL byte
  shrink       a 1 GB file truncated to half while it is being read
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUIVER = ROOT / "target" / "release" / "quiver"
MIB = 1 << 20


def parse_size(s):
    units = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}
    for u, m in units.items():
        if s.lower().endswith(u):
            return int(float(s[: -len(u)]) * m)
    return int(s)


def write_lines(path, header, rows, chunk=1 << 16):
    """Writes header plus rows (an iterator of str) in big blocks."""
    with open(path, "w") as f:
        f.write(header + "\n")
        buf = []
        for r in rows:
            buf.append(r)
            if len(buf) == chunk:
                f.write("\n".join(buf) + "\n")
                buf = []
        if buf:
            f.write("\n".join(buf) + "\n")


def write_gib(path, before, after):
    """Writes `before`, one GiB of 'x' (a single field), then `after`."""
    with open(path, "wb") as f:
        f.write(before)
        block = b"x" * MIB
        for _ in range(1024):
            f.write(block)
        f.write(after)


def make(case, d):
    """Writes the case's files (once) and returns the import arguments for it."""
    d.mkdir(parents=True, exist_ok=True)
    if case == "field-1g":
        p = d / "field-1g.csv"
        if not p.exists():
            write_gib(p, b"id:ID,text\n1,", b"\n2,short\n")
        return [["--nodes", f"N={p}"]]
    if case == "header-1g":
        p = d / "header-1g.csv"
        if not p.exists():
            write_gib(p, b"id:ID,", b"\n1,a\n")
        return [["--nodes", f"N={p}"]]
    if case == "cols-100k":
        p = d / "cols-100k.csv"
        if not p.exists():
            cols = 100_000
            hdr = "id:ID," + ",".join(f"c{i}" for i in range(cols))
            rows = (f"{r}," + ",".join(str(r + i) for i in range(cols)) for r in range(3))
            write_lines(p, hdr, rows)
        return [["--nodes", f"N={p}"]]
    if case == "dup-10m":
        p = d / "dup-10m.csv"
        if not p.exists():
            write_lines(p, "id:ID,v:int", (f"{i % 1000},{i}" for i in range(10_000_000)))
        return [
            ["--nodes", f"N={p}"],
            ["--nodes", f"N={p}", "--skip-bad-rows", "--bad-tolerance", "20000000",
             "--rejects", str(d / "dup.rejects.csv")],
        ]
    if case == "rels-missing":
        n = d / "rm-nodes.csv"
        r = d / "rm-rels.csv"
        if not r.exists():
            write_lines(n, "id:ID", (str(i) for i in range(1000)))
            write_lines(r, ":START_ID,:END_ID",
                        (f"x{i},y{i}" for i in range(10_000_000)))
        return [
            ["--nodes", f"N={n}", "--relationships", f"R={r}"],
            ["--nodes", f"N={n}", "--relationships", f"R={r}", "--skip-bad-rows",
             "--bad-tolerance", "20000000", "--rejects", str(d / "rm.rejects.csv")],
        ]
    if case == "utf8":
        p = d / "utf8.csv"
        with open(p, "wb") as f:
            f.write(b"id:ID,name\n1,ok\n2,bad \xff\xfe bytes\n3,also ok\n")
        return [["--nodes", f"N={p}"],
                ["--nodes", f"N={p}", "--skip-bad-rows", "--rejects", str(d / "u.rejects.csv")]]
    if case == "nul":
        p = d / "nul.csv"
        with open(p, "wb") as f:
            f.write(b"id:ID,name\n1,ok\n2,a\x00b\n3,also ok\n")
        return [["--nodes", f"N={p}"]]
    if case == "shrink":
        p = d / "shrink-src.csv"
        if not p.exists():
            pad = "x" * 80
            write_lines(p, "id:ID,v:int,s",
                        (f"{i},{i * 7},text {i} {pad}" for i in range(10_000_000)))
        return [["--nodes", f"N={d / 'shrink.csv'}", "--id-type", "integer"]]
    raise SystemExit(f"unknown case {case}")


def run(case, args, db, budget, d):
    if db.exists():
        shutil.rmtree(db)
    cmd = [str(QUIVER), "import", "--db", str(db), "--memory-budget", budget, "--json", *args]
    shrink_at = None
    if case == "shrink":
        src, dst = d / "shrink-src.csv", d / "shrink.csv"
        shutil.copyfile(src, dst)
        shrink_at = dst
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = [], []
    ts = [threading.Thread(target=lambda s, b: b.append(s.read()), args=(p.stdout, out)),
          threading.Thread(target=lambda s, b: b.append(s.read()), args=(p.stderr, err))]
    for x in ts:
        x.start()
    if shrink_at is not None:
        # Truncate once the import has read a good part of the file.
        size = shrink_at.stat().st_size
        time.sleep(0.5)
        os.truncate(shrink_at, size // 2)
    _, status, ru = os.wait4(p.pid, 0)
    for x in ts:
        x.join()
    secs = time.perf_counter() - t
    out = out[0].decode(errors="replace")
    err = err[0].decode(errors="replace")
    if os.WIFSIGNALED(status):
        outcome = f"KILLED by signal {os.WTERMSIG(status)}"
        bad = True
    else:
        code = os.WEXITSTATUS(status)
        bad = code == 101 or "panicked" in err
        if code == 0:
            try:
                s = json.loads(out)
                outcome = (f"ok: {s.get('nodes', 0):,} nodes, {s.get('relationships', 0):,} rels, "
                           f"{s.get('rows_rejected', 0):,} rejected")
            except ValueError:
                outcome = "ok: " + out.strip().splitlines()[-1][:200]
        else:
            lines = [l for l in err.strip().splitlines() if l.strip()]
            outcome = f"error (exit {code}): " + (lines[0][:300] if lines else "")
    return outcome, secs, ru.ru_maxrss * 1024, bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(ROOT / "data" / "bench" / "adversarial"))
    ap.add_argument("--budget", default="256MiB")
    ap.add_argument("--cases", default="field-1g,header-1g,cols-100k,dup-10m,rels-missing,utf8,nul,shrink")
    a = ap.parse_args()
    d = Path(a.data)
    bound = parse_size(a.budget) + 64 * MIB
    failed = False
    print(f"{'case':<14} {'flags':<36} {'secs':>7} {'peak RSS':>10} {'bound':>8}  outcome")
    for case in a.cases.split(","):
        for i, args in enumerate(make(case, d)):
            shown, skip = [], False
            for x in args:
                if skip:
                    skip = False
                elif x in ("--nodes", "--relationships", "--rejects"):
                    skip = True
                else:
                    shown.append(x)
            flags = " ".join(shown)
            outcome, secs, rss, bad = run(case, args, d / f"{case}-{i}.qdb", a.budget, d)
            over = rss > bound
            failed |= bad or over
            print(f"{case:<14} {flags or '-':<36} {secs:7.2f} {rss / MIB:8.0f}Mi {bound / MIB:6.0f}Mi  "
                  f"{'OVER BOUND ' if over else ''}{outcome}", flush=True)
            print("RESULT " + json.dumps({"case": case, "flags": flags, "secs": secs, "peak_rss": rss,
                                          "bound": bound, "outcome": outcome}), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

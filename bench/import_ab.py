#!/usr/bin/env python3
"""The import's guard: an earlier build against this one, pair by pair, on the same files.

    python3 bench/import_ab.py                       # the baseline docs/benchmarks.md names
    python3 bench/import_ab.py --base 568324c --pairs 5
    python3 bench/import_ab.py --base 568324c --new f5e1ebe --workloads social

Builds `--base` (and `--new`, when it names a commit; the working tree's
`target/release/quiver` otherwise) in a worktree under `data/ab/` with one shared
target directory (`data/ab/target`: a second commit rebuilds only what differs), generates
each workload's files once with this tree's `quiver generate`, and runs the two imports
alternately, `--pairs` pairs a workload, each into a fresh directory on the same disk.
Every run is a child process measured by wait4: wall time, CPU time (user + system),
peak RSS. It prints each pair, then per workload the medians and new/old as ratios, and a
`RESULT` JSON line per workload for docs/benchmarks.md.

Workloads (the issue's two, and the default path a new user gets):
- `dolt`: dolt 1,000,000 rows in random key order, `--id-type integer`;
- `social`: social `--scale` (1.0 is Pokec size) at `--memory-budget 256MiB`, integer ids;
- `dolt-default`, `social-default`: the same files with no flags (string ids, the
  default budget).

The baseline: the first (newest: the file is newest first) line of docs/benchmarks.md of the form
`import baseline: <commit>` (a merge that touches the import runs this first and records
its ratios and commit there). On a shared machine take the medians of several pairs and
read a ratio within 3% as noise; a change slower than that says why in its commit.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AB = ROOT / "data" / "ab"
HERE = ROOT / "target" / "release" / "quiver"


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw).stdout.strip()


def baseline():
    doc = ROOT / "docs" / "benchmarks.md"
    found = re.findall(r"^import baseline: `?([0-9a-f]{7,40})`?", doc.read_text(), re.M)
    if not found:
        sys.exit("docs/benchmarks.md names no `import baseline: <commit>`; pass --base")
    # The file is newest first: the first baseline is the newest.
    return found[0]


def build(commit):
    """The release CLI of `commit`, built in a worktree under data/ab/ (kept for reuse)."""
    full = sh(["git", "-C", str(ROOT), "rev-parse", "--verify", f"{commit}^{{commit}}"])
    out = AB / "bin" / f"quiver-{full[:12]}"
    if out.exists():
        return out
    tree = AB / "tree"
    if not (tree / ".git").exists():
        AB.mkdir(parents=True, exist_ok=True)
        sh(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--force", str(tree), full])
    else:
        sh(["git", "-C", str(tree), "checkout", "--detach", "--force", full])
    print(f"building {full[:12]} in {tree} ...", file=sys.stderr, flush=True)
    env = dict(os.environ, CARGO_TARGET_DIR=str(AB / "target"))
    t = time.time()
    r = subprocess.run(["cargo", "build", "--release", "-p", "quiver-cli"], cwd=tree, env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"build of {full[:12]} failed:\n{r.stderr[-3000:]}")
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(AB / "target" / "release" / "quiver", out)
    print(f"built {full[:12]} in {time.time() - t:.0f} s", file=sys.stderr, flush=True)
    return out


def generate(args):
    data = AB / "data"
    dolt_dir = data / f"dolt-{args.rows}"
    if not list(dolt_dir.glob("*.csv")):
        sh([str(HERE), "generate", "dolt", "--rows", str(args.rows), "--order", "random",
            "--out", str(dolt_dir)])
    dolt = next(dolt_dir.glob("*.csv"))
    social = data / f"social-{args.scale}"
    if not (social / "edges.csv").exists():
        sh([str(HERE), "generate", "social", "--scale", str(args.scale), "--out", str(social)])
    return dolt, social


def workloads(args, dolt, social):
    d = [f"--nodes=Dolt={dolt}"]
    s = [f"--nodes=User={social / 'nodes.csv'}", f"--relationships=FOLLOWS={social / 'edges.csv'}"]
    all_ = {
        "dolt": d + ["--id-type", "integer"],
        "social": s + ["--id-type", "integer", "--memory-budget", "256MiB"],
        "dolt-default": d,
        "social-default": s,
    }
    return {w: all_[w] for w in args.workloads.split(",")}


def run(binary, flags, db):
    if db.exists():
        shutil.rmtree(db)
    t = time.perf_counter()
    p = subprocess.Popen([str(binary), "import", "--db", str(db)] + flags,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    if status != 0:
        sys.exit(f"{binary} import failed:\n{err.decode()[-2000:]}")
    shutil.rmtree(db)
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", default=None, help="earlier commit (default: docs/benchmarks.md's baseline)")
    ap.add_argument("--new", default=None, help="later commit (default: this tree's target/release/quiver)")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--workloads", default="dolt,social")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--scale", type=float, default=1.0)
    args = ap.parse_args()
    if not HERE.exists():
        sys.exit("build this tree first: cargo build --release -p quiver-cli")
    base = args.base or baseline()
    old = build(base)
    new = build(args.new) if args.new else HERE
    dolt, social = generate(args)
    work = AB / "run"
    work.mkdir(parents=True, exist_ok=True)
    print(f"old = {base} ({old}), new = {args.new or 'this tree'} ({new})")
    for name, flags in workloads(args, dolt, social).items():
        res = {"old": [], "new": []}
        for i in range(args.pairs):
            # Alternate which goes first, so that a drift of the machine hits both.
            order = [("old", old), ("new", new)] if i % 2 == 0 else [("new", new), ("old", old)]
            for tag, b in order:
                res[tag].append(run(b, flags, work / f"{name}-{tag}"))
            o, n = res["old"][-1], res["new"][-1]
            print(f"{name} pair {i + 1}: old {o[0]:.2f} s ({o[1]:.2f} s CPU, {o[2]:.0f} MiB)  "
                  f"new {n[0]:.2f} s ({n[1]:.2f} s CPU, {n[2]:.0f} MiB)  new/old {n[0] / o[0]:.3f}",
                  flush=True)
        med = {t: [statistics.median(x[k] for x in res[t]) for k in range(3)] for t in res}
        ratios = [statistics.median(n[k] / o[k] for o, n in zip(res["old"], res["new"]))
                  for k in range(3)]
        print(f"{name}: median old {med['old'][0]:.2f} s / {med['old'][1]:.2f} s CPU / "
              f"{med['old'][2]:.0f} MiB, new {med['new'][0]:.2f} s / {med['new'][1]:.2f} s CPU / "
              f"{med['new'][2]:.0f} MiB; new/old wall {ratios[0]:.3f}, CPU {ratios[1]:.3f}, "
              f"peak {ratios[2]:.3f} (median of pair ratios)")
        print("RESULT " + json.dumps({
            "workload": name, "base": base, "new": args.new or "tree", "pairs": args.pairs,
            "old": med["old"], "new_": med["new"],
            "ratio_wall": round(ratios[0], 4), "ratio_cpu": round(ratios[1], 4),
            "ratio_peak": round(ratios[2], 4)}), flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Differential test of temporal values against Neo4j 5.26, over Neo4j's whole range
(years -999,999,999 to +999,999,999): dates, local and zoned datetimes and durations
built from strings and maps, near the ends of the range, around year ±9999 and inside
it, in fixed offsets and named zones; their fields, truncations, arithmetic,
`duration.between` and its `in*` forms, comparisons, zone conversions, and values
stored as properties and read back (before and after a checkpoint). Generated at random,
run on both servers through the official driver; the answers must be equal.

    ../shared/neo4j/start.sh     # Neo4j 5.26 on bolt://127.0.0.1:7687 (see its README)
    python3 bench/temporal_diff.py --neo4j bolt://127.0.0.1:7687 --queries 5000

Every value is returned as text (`toString`) or an integer: the Python driver's own
temporal types stop at years 1 to 9999. A query both servers refuse counts as alike
(the errors' wording differs); one only one of them refuses is a difference. Quiver is
served from a fresh database (`quiver serve --no-auth`, target/release/quiver, or
`QUIVER=path`) unless `--quiver URI` names a running server. With `--fixtures FILE`,
every query with Neo4j's answer (differing or not) is written to FILE, which
`crates/query/tests/neo4j_fixtures.rs` replays in CI.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from neo4j import GraphDatabase  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
QUIVER = os.environ.get("QUIVER", str(ROOT / "target" / "release" / "quiver"))

# Years near the ends of Neo4j's range, near jiff's (±9999), and ordinary ones.
YEARS = [-999999999, -999999998, -999999600, -123456789, -100000, -10001, -10000,
         -9999, -9601, -400, -1, 0, 1, 1582, 1900, 1970, 2000, 2024, 2038, 9600,
         9999, 10000, 10001, 100000, 123456789, 999999600, 999999998, 999999999]
ZONES = ["Z", "+01:00", "-05:30", "+14:00", "-18:00", "Europe/Stockholm",
         "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe", "UTC",
         "America/Sao_Paulo", "Pacific/Chatham"]
UNITS_DATE = ["millennium", "century", "decade", "year", "weekYear", "quarter", "month",
              "week", "day"]
UNITS_TIME = ["hour", "minute", "second", "millisecond"]
DATE_FIELDS = ["year", "quarter", "month", "week", "weekYear", "day", "ordinalDay",
               "dayOfWeek", "dayOfQuarter"]


def year_text(y):
    return f"{y:04d}" if 0 <= y <= 9999 else f"{y:+05d}"


def date_str(rng):
    y = rng.choice(YEARS)
    form = rng.randrange(6)
    if form == 0:
        return f"'{year_text(y)}-{rng.randint(1, 12):02d}-{rng.randint(1, 31):02d}'"
    if form == 1:
        return f"'{year_text(y)}-W{rng.randint(1, 53):02d}-{rng.randint(1, 7)}'"
    if form == 2:
        return f"'{year_text(y)}-{rng.randint(1, 366):03d}'"
    if form == 3:
        return f"'{year_text(y)}-{rng.randint(1, 12):02d}'"
    if form == 4:
        return f"'{year_text(y)}-12-31'" if y > 0 else f"'{year_text(y)}-01-01'"
    return f"'{year_text(y)}-02-29'"


def time_str(rng):
    t = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"
    if rng.random() < 0.7:
        t += f":{rng.randint(0, 59):02d}"
        if rng.random() < 0.4:
            t += "." + str(rng.randint(0, 999999999)).rjust(9, "0")[: rng.randint(1, 9)]
    return t


def zone_suffix(rng):
    z = rng.choice(ZONES)
    if z[0] in "Z+-":
        return z
    return f"[{z}]"


def date_map(rng):
    y = rng.choice(YEARS)
    form = rng.randrange(4)
    if form == 0:
        return f"{{year: {y}, month: {rng.randint(1, 12)}, day: {rng.randint(1, 28)}}}"
    if form == 1:
        # Neo4j refuses a week date of its last year given as a map (Java's week-based
        # year resolves through the year after), though it reads one as a string.
        y = min(y, 999999998)
        return f"{{year: {y}, week: {rng.randint(1, 53)}, dayOfWeek: {rng.randint(1, 7)}}}"
    if form == 2:
        return f"{{year: {y}, ordinalDay: {rng.randint(1, 366)}}}"
    return f"{{year: {y}, quarter: {rng.randint(1, 4)}, dayOfQuarter: {rng.randint(1, 92)}}}"


def temporal(rng):
    """A temporal expression and its kind."""
    k = rng.randrange(7)
    if k == 0:
        return f"date({date_str(rng)})", "date"
    if k == 1:
        return f"date({date_map(rng)})", "date"
    if k == 2:
        return f"localdatetime({date_str(rng)[:-1]}T{time_str(rng)}')", "localdatetime"
    if k == 3:
        return f"datetime({date_str(rng)[:-1]}T{time_str(rng)}{zone_suffix(rng)}')", "datetime"
    if k == 4:
        m = date_map(rng)[:-1] + f", hour: {rng.randint(0, 23)}, minute: {rng.randint(0, 59)}"
        z = rng.choice(ZONES)
        return f"datetime({m}, timezone: '{z}'}})", "datetime"
    if k == 5:
        m = date_map(rng)[:-1] + f", hour: {rng.randint(0, 23)}, second: {rng.randint(0, 59)}}}"
        return f"localdatetime({m})", "localdatetime"
    # Neo4j 5.26 computes epochSeconds * 1000 in a long: past ±9.2e15 s it overflows
    # (and answers a date 400 million years off), so the seconds stay inside that.
    s = rng.choice([rng.randint(-9_223_372_036_854_775, 9_223_372_036_854_775),
                    rng.randint(-400_000_000_000, 400_000_000_000)])
    return f"datetime({{epochSeconds: {s}}})", "datetime"


def duration(rng):
    parts = []
    for key, hi in [("years", 2_000_000_000), ("months", 30), ("days", 400), ("hours", 48),
                    ("minutes", 120), ("seconds", 100000), ("nanoseconds", 2_000_000_000)]:
        if rng.random() < 0.4:
            v = rng.choice([rng.randint(-hi, hi), rng.randint(-9, 9)])
            parts.append(f"{key}: {v}")
    if not parts:
        parts.append(f"days: {rng.randint(-10, 10)}")
    return "duration({" + ", ".join(parts) + "})"


def query(rng):
    a, ka = temporal(rng)
    op = rng.randrange(10)
    if op == 0:
        return f"RETURN toString({a}) AS v"
    if op == 1:
        fields = DATE_FIELDS + (["epochSeconds", "offset", "timezone"] if ka == "datetime" else [])
        f = rng.choice(fields)
        return f"WITH {a} AS x RETURN toString(x) AS v, x.{f} AS f"
    if op == 2:
        unit = rng.choice(UNITS_DATE + UNITS_TIME)
        fn = rng.choice(["date", ka])
        return f"RETURN toString({fn}.truncate('{unit}', {a})) AS v"
    if op == 3:
        sign = rng.choice(["+", "-"])
        return f"RETURN toString({a} {sign} {duration(rng)}) AS v"
    if op in (4, 5):
        b, _ = temporal(rng)
        fn = rng.choice(["duration.between", "duration.inMonths", "duration.inDays",
                         "duration.inSeconds"])
        return f"RETURN toString({fn}({a}, {b})) AS v"
    if op == 6:
        b, kb = temporal(rng)
        if kb != ka:
            b = f"{ka}({b})"
        return f"RETURN {a} < {b} AS lt, {a} = {b} AS eq"
    if op == 7:
        z = rng.choice(ZONES)
        fn = rng.choice(["datetime", "localdatetime", "date"])
        if fn == "datetime":
            return f"RETURN toString(datetime({{datetime: {a}, timezone: '{z}'}})) AS v"
        return f"RETURN toString({fn}({a})) AS v"
    if op == 8:
        # Stored and read back.
        return (f"CREATE (n:T {{v: {a}}}) WITH n "
                f"MATCH (m:T) WHERE id(m) = id(n) RETURN toString(m.v) AS v")
    return f"RETURN toString({duration(rng)}) AS v, toString({a}) AS w"


def answer(session, q):
    try:
        tx = session.begin_transaction(timeout=20)
        try:
            rows = [json.dumps(list(rec.values())) for rec in tx.run(q)]
        finally:
            tx.rollback()
        return rows
    except Exception as e:  # the driver's errors: a refusal on either side
        return {"error": str(getattr(e, "code", None) or type(e).__name__)}


def alike(a, b):
    if isinstance(a, dict) and isinstance(b, dict):
        return True
    return a == b


def neo4j_failed(want):
    """Neo4j's own failure (a `Neo.DatabaseError`, as `epochSeconds` of a datetime in year
    999,999,999 overflows inside it): not an answer to compare with."""
    return isinstance(want, dict) and want.get("error", "").startswith("Neo.DatabaseError")


# Values stored, checkpointed, then read back (the segments' columns).
STORED = [
    "date('-999999999-01-01')", "date('+999999999-12-31')", "date('+10000-02-29')",
    "localdatetime('-999999999-01-01T00:00:00.000000001')",
    "localdatetime('+999999999-12-31T23:59:59.999999999')",
    "datetime('+999999999-06-30T12:00:00[Europe/Stockholm]')",
    "datetime('-999999999-01-01T00:00:00+18:00')", "datetime('-12345-05-06T07:08:09-05:30')",
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--neo4j", default="bolt://127.0.0.1:7687")
    ap.add_argument("--quiver", help="a running quiver serve (default: one started here)")
    ap.add_argument("--queries", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fixtures", help="a JSON file to write the queries and Neo4j's answers to")
    ap.add_argument("--show", type=int, default=20, help="differences printed in full")
    a = ap.parse_args()

    server = None
    if a.quiver:
        quri = a.quiver
    else:
        import tempfile
        from bolt_bench import free_port, wait_serving
        tmp = tempfile.mkdtemp(prefix="temporal-")
        port = free_port()
        server = subprocess.Popen([QUIVER, "serve", "--db", f"{tmp}/g.qdb", "--create", "--no-auth",
                                   "--listen", f"127.0.0.1:{port}"], stderr=subprocess.PIPE, text=True)
        wait_serving(server)
        quri = f"bolt://127.0.0.1:{port}"
    neo = GraphDatabase.driver(a.neo4j, auth=None, notifications_min_severity="OFF")
    qv = GraphDatabase.driver(quri, auth=None, notifications_min_severity="OFF")
    rng = random.Random(a.seed)
    fixtures, diffs, done, refused, failed = [], 0, 0, 0, 0
    t0 = time.time()

    def check(q, want, got, setup=None):
        nonlocal diffs
        fixtures.append({"query": q, "neo4j": want} | ({"setup": setup} if setup else {}))
        if not alike(want, got):
            diffs += 1
            if diffs <= a.show:
                print(f"DIFF {q}\n  neo4j:  {want}\n  quiver: {got}")

    try:
        with neo.session() as ns, qv.session() as qs:
            # Stored values, read back from the delta and after a checkpoint.
            setup = [f"UNWIND range(0, {len(STORED) - 1}) AS i CREATE (:S {{i: i}})"]
            setup += [f"MATCH (n:S {{i: {i}}}) SET n.v = {v}" for i, v in enumerate(STORED)]
            for s in (ns, qs):
                s.run("MATCH (n:S) DETACH DELETE n").consume()
                for st in setup:
                    s.run(st).consume()
            read = "MATCH (n:S) RETURN n.i AS i, toString(n.v) AS v ORDER BY i"
            want = [json.dumps(list(r.values())) for r in ns.run(read)]
            got = [json.dumps(list(r.values())) for r in qs.run(read)]
            check(read, want, got, setup)
            qs.run("CHECKPOINT").consume()
            got = [json.dumps(list(r.values())) for r in qs.run(read)]
            if not alike(want, got):
                diffs += 1
                print(f"DIFF after CHECKPOINT {read}\n  neo4j:  {want}\n  quiver: {got}")
            done += 2
            for s in (ns, qs):
                s.run("MATCH (n:S) DETACH DELETE n").consume()
            while done < a.queries:
                q = query(rng)
                want, got = answer(ns, q), answer(qs, q)
                done += 1
                if neo4j_failed(want):
                    failed += 1
                    continue
                refused += isinstance(want, dict) and isinstance(got, dict)
                check(q, want, got)
                if done % 1000 == 0:
                    print(f"... {done} queries, {diffs} differences ({time.time() - t0:.0f} s)", flush=True)
    finally:
        neo.close()
        qv.close()
        if server:
            server.terminate()
            server.wait()
    print(f"temporal_diff: {done} queries, {done - diffs - failed} alike, {diffs} differences, "
          f"{failed} Neo4j failed on itself (seed {a.seed}, {time.time() - t0:.0f} s); of those alike, "
          f"{refused} refused by both")
    if a.fixtures:
        Path(a.fixtures).write_text(json.dumps(fixtures, indent=0) + "\n")
        print(f"wrote {len(fixtures)} fixtures to {a.fixtures}")
    sys.exit(1 if diffs else 0)


if __name__ == "__main__":
    main()

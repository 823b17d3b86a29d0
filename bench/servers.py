"""PostgreSQL and MariaDB servers for the import benchmark, started in a scratch
directory on loopback-free Unix sockets and stopped afterwards.

Install them with the system's packages first (Debian: `apt-get install postgresql
mariadb-server`); the benchmark skips a peer whose binaries are missing. Peak RSS of a
server peer is the sum of its processes' resident sets, sampled every 50 ms (psutil).
"""

import glob
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import psutil


def _sample_rss(pids_fn, stop, out):
    peak = 0
    while not stop.is_set():
        total = 0
        for pid in pids_fn():
            try:
                total += psutil.Process(pid).memory_info().rss
            except psutil.Error:
                pass
        peak = max(peak, total)
        time.sleep(0.05)
    out.append(peak)


def timed_with_rss(cmd, pids_fn):
    """Runs a client command; returns (seconds, peak RSS of the server processes)."""
    stop, out = threading.Event(), []
    t = threading.Thread(target=_sample_rss, args=(pids_fn, stop, out))
    t.start()
    start = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True)
    secs = time.perf_counter() - start
    stop.set()
    t.join()
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])}...: {p.stderr.decode()[-2000:]}")
    return secs, out[0]


def _tree(pid):
    try:
        p = psutil.Process(pid)
        return [pid] + [c.pid for c in p.children(recursive=True)]
    except psutil.Error:
        return []


class Postgres:
    name = "postgres"

    def __init__(self, work: Path):
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
        if not bins:
            raise FileNotFoundError("PostgreSQL is not installed")
        self.bin = Path(bins[-1])
        self.dir = work / "pg"
        self.sock = "/tmp"
        self.port = "54329"

    def _as_postgres(self, args):
        return ["runuser", "-u", "postgres", "--"] + args

    def start(self):
        if self.dir.exists():
            shutil.rmtree(self.dir)
        self.dir.mkdir(parents=True)
        shutil.chown(self.dir, "postgres", "postgres")
        subprocess.run(self._as_postgres([str(self.bin / "initdb"), "-D", str(self.dir), "-A", "trust", "-U", "postgres"]),
                       check=True, capture_output=True)
        subprocess.run(self._as_postgres([str(self.bin / "pg_ctl"), "-D", str(self.dir), "-w", "-l", str(self.dir / "log"),
                                          "-o", f"-p {self.port} -k {self.sock} -c listen_addresses=''", "start"]),
                       check=True, capture_output=True)
        self.pid = int((self.dir / "postmaster.pid").read_text().split()[0])

    def stop(self):
        subprocess.run(self._as_postgres([str(self.bin / "pg_ctl"), "-D", str(self.dir), "-m", "fast", "stop"]), capture_output=True)

    def sql(self, statements):
        return ["psql", "-h", self.sock, "-p", self.port, "-U", "postgres", "-v", "ON_ERROR_STOP=1", "-q"] + sum(
            (["-c", s] for s in statements), [])

    def run(self, statements):
        self.sql_quiet(["DROP SCHEMA public CASCADE", "CREATE SCHEMA public"])
        secs, rss = timed_with_rss(self.sql(statements), lambda: _tree(self.pid))
        size = int(subprocess.run(self.sql(["SELECT pg_database_size('postgres')"]) + ["-t", "-A"],
                                  capture_output=True, check=True).stdout.decode().strip())
        return secs, rss, size

    def sql_quiet(self, statements):
        subprocess.run(self.sql(statements), capture_output=True, check=True)


class MariaDB:
    name = "mariadb"

    def __init__(self, work: Path):
        if not shutil.which("mariadbd"):
            raise FileNotFoundError("MariaDB is not installed")
        self.dir = work / "maria"
        self.sock = str(work / "maria.sock")

    def start(self):
        if self.dir.exists():
            shutil.rmtree(self.dir)
        self.dir.mkdir(parents=True)
        subprocess.run(["mariadb-install-db", f"--datadir={self.dir}", "--user=root", "--auth-root-authentication-method=normal"],
                       check=True, capture_output=True)
        self.proc = subprocess.Popen(["mariadbd", f"--datadir={self.dir}", f"--socket={self.sock}", "--user=root",
                                      "--skip-networking", "--secure-file-priv=", "--innodb-buffer-pool-size=512M",
                                      f"--pid-file={self.dir}/pid"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            if subprocess.run(["mariadb", f"--socket={self.sock}", "-uroot", "-e", "SELECT 1"], capture_output=True).returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError("MariaDB did not start")

    def stop(self):
        self.proc.terminate()
        self.proc.wait()

    def sql(self, statements):
        return ["mariadb", f"--socket={self.sock}", "-uroot", "bench", "-e", ";\n".join(statements)]

    def run(self, statements):
        subprocess.run(["mariadb", f"--socket={self.sock}", "-uroot", "-e", "DROP DATABASE IF EXISTS bench; CREATE DATABASE bench"],
                       check=True, capture_output=True)
        secs, rss = timed_with_rss(self.sql(statements), lambda: [self.proc.pid])
        out = subprocess.run(self.sql(["SELECT COALESCE(SUM(data_length + index_length), 0) FROM information_schema.tables WHERE table_schema='bench'"]) + ["-N"],
                             capture_output=True, check=True).stdout.decode().strip()
        return secs, rss, int(float(out or 0))

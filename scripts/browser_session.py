#!/usr/bin/env python3
"""The Neo4j Browser against `quiver serve`, in headless Chromium: the server serves the
Browser's static site (`--browser`, the copy scripts/neo4j-tools.sh fetches) and Bolt
on one port; the page connects (Bolt over WebSocket), runs a query, and the drawn
graph's overview must say how many nodes and relationships it shows. Saves a
screenshot.

    scripts/neo4j-tools.sh --install                  # the Browser's site (and cypher-shell)
    apt-get install chromium && pip install playwright
    python3 scripts/browser_session.py --screenshot docs/img/browser.png

Builds a small social graph under data/browser-session (git-ignored). Exits non-zero
when the page does not show the result.
"""

import argparse
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUIVER = ROOT / "target" / "release" / "quiver"
QUERY = "MATCH p=()-->() RETURN p LIMIT 25"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--browser-dir", default=str(ROOT / "data" / "neo4j-tools" / "browser"))
    ap.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser") or "")
    ap.add_argument("--screenshot", default=str(ROOT / "data" / "browser-session" / "browser.png"))
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    if not (Path(args.browser_dir) / "index.html").exists():
        sys.exit(f"no Browser site in {args.browser_dir}: run scripts/neo4j-tools.sh --install")
    if not args.chromium:
        sys.exit("no Chromium: apt-get install chromium")
    work = ROOT / "data" / "browser-session"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    subprocess.run([QUIVER, "generate", "social", "--scale", "0.001", "--out", work / "social"],
                   check=True, capture_output=True)
    subprocess.run([QUIVER, "import", "--db", work / "social.qdb", "--quiet", "--id-type", "integer",
                    "--nodes", f"User={work / 'social' / 'nodes.csv'}",
                    "--relationships", f"FOLLOWS={work / 'social' / 'edges.csv'}"], check=True)
    port = free_port()
    server = subprocess.Popen([QUIVER, "serve", "--db", work / "social.qdb", "--no-auth",
                               "--listen", f"127.0.0.1:{port}", "--browser", args.browser_dir],
                              stderr=subprocess.PIPE, text=True)
    try:
        for line in server.stderr:
            if "serving" in line:
                break
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
            page = b.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_selector("text=Connect to Neo4j", timeout=60_000)
            # The connect URL comes from the server's discovery document.
            url = page.input_value("input[data-testid='boltaddress']") if page.query_selector(
                "input[data-testid='boltaddress']") else ""
            page.select_option("select[data-testid='authenticationMethod']", "NO_AUTH")
            page.click("button[data-testid='connect']")
            page.wait_for_selector("text=neo4j$", timeout=30_000)
            page.locator(".monaco-editor textarea").first.click()
            page.keyboard.type(QUERY)
            page.keyboard.press("Control+Enter")
            page.wait_for_selector("text=/Displaying \\d+ nodes?, \\d+ relationships?/", timeout=30_000)
            shown = re.search(r"Displaying (\d+) nodes?, (\d+) relationships?", page.content())
            Path(args.screenshot).parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=args.screenshot)
            b.close()
        nodes, rels = int(shown.group(1)), int(shown.group(2))
        print(f"browser session: connected to {url or f'127.0.0.1:{port}'}, {QUERY!r} drew {nodes} nodes "
              f"and {rels} relationships; screenshot {args.screenshot}")
        if rels != 25 or nodes < 2:
            sys.exit(f"expected 25 relationships drawn, got {rels} (and {nodes} nodes)")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# Fetches Neo4j's client tools into data/neo4j-tools (git-ignored), to use against
# `quiver serve`:
#   data/neo4j-tools/lib/      cypher-shell 5.26 and its jars
#                              (java -cp 'data/neo4j-tools/lib/*' org.neo4j.shell.Main -a bolt://127.0.0.1:7687 -u USER)
#   data/neo4j-tools/browser/  the Neo4j Browser 5.24 web app (quiver serve --browser data/neo4j-tools/browser)
# Needs Java 17 and Maven; with --install, installs them from Debian's packages when
# missing (as root, or through sudo). Prints the lib folder on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--install" ] && ! { command -v java >/dev/null && command -v mvn >/dev/null; }; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq openjdk-17-jre-headless maven >/dev/null
fi
command -v java >/dev/null || { echo "Java 17 is needed: apt-get install openjdk-17-jre-headless (or run with --install)" >&2; exit 2; }
command -v mvn >/dev/null || { echo "Maven is needed: apt-get install maven (or run with --install)" >&2; exit 2; }
out=$PWD/data/neo4j-tools
if [ ! -f "$out/lib/cypher-shell-5.26.0.jar" ]; then
  mvn -q -f scripts/neo4j-tools/pom.xml dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$out/lib"
fi
if [ ! -f "$out/browser/index.html" ]; then
  rm -rf "$out/browser.tmp"
  mkdir -p "$out/browser.tmp"
  python3 - "$out/lib/neo4j-browser-5.24.0.jar" "$out/browser.tmp" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("browser/")])
PY
  rm -rf "$out/browser"
  mv "$out/browser.tmp/browser" "$out/browser"
  rm -rf "$out/browser.tmp"
fi
echo "$out/lib"

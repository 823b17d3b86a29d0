//! Plain HTTP on the Bolt port: the static files of a web app (`quiver serve --browser
//! DIR`: the user's copy of the Neo4j Browser, which Quiver does not ship) and the
//! discovery document the Browser asks its own origin for (where to connect), as
//! Neo4j's HTTP port answers it. A WebSocket upgrade is not handled here: the caller
//! hands the request on to `tungstenite` (see `server::bolt`).
//!
//! One request per connection (`Connection: close`); only `GET`; a path that leaves the
//! folder (`..`, a symlink out of it) is not found.

use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};

/// The longest request head read.
const HEAD_BYTES_MAX: usize = 16 << 10;

/// The length of the request head at the start of `buf` (through its blank line), or
/// `None` while it has not all arrived; an error past 16 KiB.
pub(crate) fn head_len(buf: &[u8]) -> io::Result<Option<usize>> {
    match buf.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(at) => Ok(Some(at + 4)),
        None if buf.len() > HEAD_BYTES_MAX => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "an HTTP request head past 16 KiB",
        )),
        None => Ok(None),
    }
}

/// The value of header `name` (case-insensitive) in a request head.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then_some(v.trim())
    })
}

/// Whether the request asks for a WebSocket upgrade.
pub(crate) fn is_upgrade(head: &[u8]) -> bool {
    let head = String::from_utf8_lossy(head);
    header(&head, "upgrade").is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// The answer to a WebSocket upgrade (RFC 6455): `101 Switching Protocols` with the
/// key's accept value, or `400 Bad Request` for a request that is not a version 13
/// `GET` with a key (the `Err`, whose bytes are sent before the connection closes).
pub(crate) fn upgrade_reply(head: &[u8]) -> Result<Vec<u8>, Vec<u8>> {
    let text = String::from_utf8_lossy(head);
    let get = text.lines().next().is_some_and(|l| l.starts_with("GET "));
    let version = header(&text, "sec-websocket-version") == Some("13");
    match header(&text, "sec-websocket-key") {
        Some(key) if get && version => Ok(format!(
            "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: {}\r\n\r\n",
            tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes())
        )
        .into_bytes()),
        _ => {
            let mut out = Vec::new();
            let _ = reply(&mut out, "400 Bad Request", "text/plain", b"not a WebSocket upgrade\n");
            Err(out)
        }
    }
}

fn content_type(p: &Path) -> &'static str {
    match p.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" | "htm" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "ico" => "image/x-icon",
        "woff" => "font/woff",
        "woff2" => "font/woff2",
        "ttf" => "font/ttf",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// The file under `root` that URL path `path` names (`/` and folders: their
/// `index.html`), or `None` when it is outside `root` or missing.
fn resolve(root: &Path, path: &str) -> Option<PathBuf> {
    let path = path.split(['?', '#']).next().unwrap_or("");
    let mut rel = PathBuf::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        let part = percent_decode(part)?;
        let c = Path::new(&part).components().next()?;
        if !matches!(c, Component::Normal(_)) || part.contains(['/', '\\']) {
            return None;
        }
        rel.push(part);
    }
    let root = root.canonicalize().ok()?;
    let mut p = root.join(rel).canonicalize().ok()?;
    if p.is_dir() {
        p = p.join("index.html");
    }
    (p.starts_with(&root) && p.is_file()).then_some(p)
}

/// `%XX` escapes of a path segment decoded (`None` when malformed or not UTF-8).
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn reply(out: &mut impl Write, status: &str, ctype: &str, body: &[u8]) -> io::Result<()> {
    write!(
        out,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\nX-Content-Type-Options: nosniff\r\n\r\n",
        body.len()
    )?;
    out.write_all(body)?;
    out.flush()
}

/// Answers one plain HTTP request `head`: the discovery document (`/` asked for as
/// JSON), a file of `browser`, or an error that says what this port is.
pub(crate) fn respond(out: &mut impl Write, head: &[u8], browser: Option<&Path>) -> io::Result<()> {
    let text = String::from_utf8_lossy(head);
    let mut first = text.lines().next().unwrap_or("").split_whitespace();
    let (method, path) = (first.next().unwrap_or(""), first.next().unwrap_or("/"));
    if method != "GET" {
        return reply(out, "405 Method Not Allowed", "text/plain", b"only GET\n");
    }
    let wants_json = header(&text, "accept").is_some_and(|a| a.contains("application/json"));
    if path.split('?').next() == Some("/") && (wants_json || browser.is_none()) {
        // What Neo4j's HTTP port answers at `/`: where Bolt is (this same port).
        // (Only a host's characters: the value goes into JSON as it is.)
        let host: String = header(&text, "host")
            .unwrap_or("localhost:7687")
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || ".:-[]_".contains(*c))
            .collect();
        let body = format!(
            "{{\"bolt_direct\":\"bolt://{host}\",\"bolt_routing\":\"neo4j://{host}\",\"neo4j_version\":\"5.26.0\",\"neo4j_edition\":\"community\",\"server\":\"quiver {}\"}}\n",
            env!("CARGO_PKG_VERSION")
        );
        return reply(out, "200 OK", "application/json", body.as_bytes());
    }
    let Some(root) = browser else {
        return reply(
            out,
            "404 Not Found",
            "text/plain",
            b"this is a Bolt port: connect with a Neo4j driver, or serve a web app here with quiver serve --browser DIR\n",
        );
    };
    match resolve(root, path) {
        Some(p) => match std::fs::read(&p) {
            Ok(body) => reply(out, "200 OK", content_type(&p), &body),
            Err(_) => reply(out, "404 Not Found", "text/plain", b"not found\n"),
        },
        None => reply(out, "404 Not Found", "text/plain", b"not found\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_in_the_folder() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("index.html"), "<html>").unwrap();
        std::fs::create_dir(d.path().join("a")).unwrap();
        std::fs::write(d.path().join("a/b c.js"), "x").unwrap();
        let r = |p: &str| resolve(d.path(), p);
        assert!(r("/").unwrap().ends_with("index.html"));
        assert!(r("/a/b%20c.js?v=1").unwrap().ends_with("b c.js"));
        for bad in [
            "/../etc/passwd",
            "/a/../../x",
            "/%2e%2e/x",
            "/a%2f..%2f..%2fx",
            "/nope",
        ] {
            assert_eq!(r(bad), None, "{bad}");
        }
    }

    #[test]
    fn upgrades_are_told_from_plain_requests() {
        assert!(is_upgrade(
            b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: WebSocket\r\n\r\n"
        ));
        assert!(!is_upgrade(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    }
}

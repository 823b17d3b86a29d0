//! A light Bolt load client for throughput benchmarks (`bench/mgbench.py --client rust`):
//! N client threads, each with its own connection, run queries drawn from a weighted mix
//! for a number of seconds and report queries per second. Every record is read and
//! decoded (PackStream into values), as a driver would, but without a driver's
//! per-record objects: with the Python driver on the same two cores as the server, the
//! clients' own CPU bounded the figures; mgbench's own client is C++ for that reason.
//!
//! ```text
//! cargo build --release -p quiver-bolt --example load_client
//! target/release/examples/load_client 127.0.0.1:7687 4 10 1632803 seed \
//!     '1:id:MATCH (n:User {id: $id}) RETURN n' '1:from_to:...'
//! ```
//!
//! A spec is `weight:kind:query` with kind `id` ({id: 1..=n}), `big_id` ({id:
//! 1..=10n}), `from_to` ({from, to}: two different ids) or `none`. Prints one line of
//! JSON: {"clients", "seconds", "queries", "qps", "failures"}.

use quiver_bolt::packstream::{decode, Pack};
use quiver_bolt::server::{read_message, write_message};
use std::io::{BufReader, BufWriter, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

struct Spec {
    weight: u32,
    kind: String,
    query: String,
}

/// A small deterministic generator (xorshift64*), one per client.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn params(kind: &str, rng: &mut Rng, n: u64) -> Pack {
    let id = |rng: &mut Rng, top: u64| Pack::Int(1 + rng.below(top) as i64);
    match kind {
        "id" => Pack::map(vec![("id", id(rng, n))]),
        "big_id" => Pack::map(vec![("id", id(rng, n * 10))]),
        "from_to" => {
            let a = 1 + rng.below(n) as i64;
            let mut b = a;
            while b == a {
                b = 1 + rng.below(n) as i64;
            }
            Pack::map(vec![("from", Pack::Int(a)), ("to", Pack::Int(b))])
        }
        _ => Pack::Map(Vec::new()),
    }
}

type Conn = (BufReader<TcpStream>, BufWriter<TcpStream>);

fn send(w: &mut BufWriter<TcpStream>, tag: u8, fields: Vec<Pack>) -> std::io::Result<()> {
    let mut out = Vec::new();
    write_message(&mut out, &Pack::Struct(tag, fields));
    w.write_all(&out)
}

/// The next message: its tag and fields.
fn recv(r: &mut BufReader<TcpStream>) -> Result<(u8, Vec<Pack>), String> {
    let msg = read_message(r, 1 << 30)
        .map_err(|e| e.to_string())?
        .ok_or("the server closed the connection")?;
    match decode(&msg).map_err(|e| e.to_string())? {
        Pack::Struct(tag, fields) => Ok((tag, fields)),
        other => Err(format!("not a message: {other:?}")),
    }
}

const SUCCESS: u8 = 0x70;
const RECORD: u8 = 0x71;
const FAILURE: u8 = 0x7F;

fn connect(addr: &str) -> Result<Conn, String> {
    let s = TcpStream::connect(addr).map_err(|e| format!("{addr}: {e}"))?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut r = BufReader::with_capacity(1 << 16, s.try_clone().map_err(|e| e.to_string())?);
    let mut w = BufWriter::with_capacity(1 << 16, s);
    // Bolt 5.4 down to 5.1 (the versions with LOGON).
    let mut hs = vec![0x60, 0x60, 0xB0, 0x17, 0, 3, 4, 5];
    hs.extend_from_slice(&[0; 12]);
    w.write_all(&hs)
        .and_then(|_| w.flush())
        .map_err(|e| e.to_string())?;
    let mut v = [0u8; 4];
    r.read_exact(&mut v).map_err(|e| e.to_string())?;
    if v[3] != 5 {
        return Err(format!("no Bolt 5 version agreed: {v:?}"));
    }
    let agent = Pack::map(vec![("product", Pack::str("quiver-bench/1"))]);
    send(
        &mut w,
        0x01,
        vec![Pack::map(vec![
            ("user_agent", Pack::str("quiver-bench/1")),
            ("bolt_agent", agent),
        ])],
    )
    .map_err(|e| e.to_string())?;
    send(
        &mut w,
        0x6A,
        vec![Pack::map(vec![("scheme", Pack::str("none"))])],
    )
    .map_err(|e| e.to_string())?;
    w.flush().map_err(|e| e.to_string())?;
    for what in ["HELLO", "LOGON"] {
        let (tag, f) = recv(&mut r)?;
        if tag != SUCCESS {
            return Err(format!("{what} refused: {f:?}"));
        }
    }
    Ok((r, w))
}

/// Runs `query` with `params` to its end (RUN and PULL pipelined): records read, or the
/// failure (after which the connection is RESET).
fn run(c: &mut Conn, query: &str, params: Pack) -> Result<usize, String> {
    let (r, w) = c;
    let io = |e: std::io::Error| e.to_string();
    send(
        w,
        0x10,
        vec![Pack::str(query), params, Pack::Map(Vec::new())],
    )
    .map_err(io)?;
    send(w, 0x3F, vec![Pack::map(vec![("n", Pack::Int(-1))])]).map_err(io)?;
    w.flush().map_err(io)?;
    let (tag, f) = recv(r)?;
    if tag == FAILURE {
        // The PULL is IGNORED; RESET clears the failure.
        recv(r)?;
        send(w, 0x0F, vec![]).map_err(io)?;
        w.flush().map_err(io)?;
        recv(r)?;
        return Err(format!("{f:?}"));
    }
    let mut records = 0;
    loop {
        let (tag, f) = recv(r)?;
        match tag {
            RECORD => records += 1,
            SUCCESS => return Ok(records),
            _ => {
                send(w, 0x0F, vec![]).map_err(io)?;
                w.flush().map_err(io)?;
                recv(r)?;
                return Err(format!("{f:?}"));
            }
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 7 {
        eprintln!("usage: load_client HOST:PORT CLIENTS SECONDS N_USERS SEED WEIGHT:KIND:QUERY...");
        std::process::exit(2);
    }
    let addr = args[1].clone();
    let number = |i: usize, what: &str| -> f64 {
        match args[i].parse::<f64>() {
            Ok(x) if x > 0.0 => x,
            _ => {
                eprintln!(
                    "load_client: {what} must be a positive number, not {:?}",
                    args[i]
                );
                std::process::exit(2)
            }
        }
    };
    let clients = number(2, "CLIENTS") as usize;
    let seconds = number(3, "SECONDS");
    let n = number(4, "N_USERS") as u64;
    let seed: u64 = args[5].bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    let specs: Vec<Spec> = args[6..]
        .iter()
        .map(|s| {
            let mut it = s.splitn(3, ':');
            match (it.next().and_then(|w| w.parse().ok()), it.next(), it.next()) {
                (Some(weight), Some(kind), Some(query)) => Spec {
                    weight,
                    kind: kind.to_string(),
                    query: query.to_string(),
                },
                _ => {
                    eprintln!("load_client: {s:?} is not WEIGHT:KIND:QUERY (e.g. '1:id:MATCH (n {{id: $id}}) RETURN n')");
                    std::process::exit(2)
                }
            }
        })
        .collect();
    let total: u32 = specs.iter().map(|s| s.weight).sum();
    let start = std::sync::Barrier::new(clients);
    let results: Vec<Result<(u64, u64, f64), String>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..clients)
            .map(|i| {
                let (specs, addr, start) = (&specs, &addr, &start);
                sc.spawn(move || -> Result<(u64, u64, f64), String> {
                    let mut rng = Rng(seed ^ ((i as u64 + 1) * 0x9E37_79B9_7F4A_7C15) | 1);
                    // (A client that cannot connect ends the run: the others wait for it.)
                    let mut c = connect(addr).unwrap_or_else(|e| {
                        eprintln!("load_client: {e}");
                        std::process::exit(1)
                    });
                    // One warm-up run of each query.
                    for s in specs {
                        let _ = run(&mut c, &s.query, params(&s.kind, &mut rng, n));
                    }
                    start.wait();
                    let t0 = Instant::now();
                    let (mut done, mut failed) = (0u64, 0u64);
                    while t0.elapsed() < Duration::from_secs_f64(seconds) {
                        let mut pick = rng.below(total as u64) as u32;
                        let s = specs
                            .iter()
                            .find(|s| {
                                if pick < s.weight {
                                    true
                                } else {
                                    pick -= s.weight;
                                    false
                                }
                            })
                            .expect("a spec");
                        match run(&mut c, &s.query, params(&s.kind, &mut rng, n)) {
                            Ok(_) => done += 1,
                            Err(_) => failed += 1,
                        }
                    }
                    Ok((done, failed, t0.elapsed().as_secs_f64()))
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a client panicked".into())))
            .collect()
    });
    let (mut queries, mut failures, mut qps) = (0u64, 0u64, 0f64);
    for r in results {
        match r {
            Ok((d, f, t)) => {
                queries += d;
                failures += f;
                qps += d as f64 / t;
            }
            Err(e) => {
                eprintln!("load_client: {e}");
                std::process::exit(1);
            }
        }
    }
    println!(
        "{{\"clients\": {clients}, \"seconds\": {seconds}, \"queries\": {queries}, \"qps\": {qps:.1}, \"failures\": {failures}}}"
    );
}

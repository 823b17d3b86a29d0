//! Bolt, the protocol of Neo4j's drivers and tools, served over Quiver.
//!
//! - `packstream`: the value encoding (untrusted input decoded without panics or
//!   unbounded allocation).
//! - `values`: Quiver values as Bolt 5 structures (nodes, relationships and paths with
//!   element ids; dates, times, datetimes, durations) and parameters back.
//! - `users`: the database's users, with Argon2id password hashes.
//! - `server`: handshake, chunking and each connection's state machine; results stream
//!   as they are pulled; statements run on a bounded worker pool, quick graph reads on
//!   the I/O thread.
//! - `net`: the non-blocking sockets (Tokio): accept loop, TLS, WebSocket, HTTP,
//!   deadlines and connection limits.

mod http;
mod net;
pub mod packstream;
mod plan;
pub mod server;
pub mod users;
pub mod values;

pub use net::serve;
pub use server::ServeOptions;
pub use users::Users;

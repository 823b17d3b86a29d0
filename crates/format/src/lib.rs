//! Bytes on disk. Everything here turns values into little-endian byte layouts and reads
//! them back from a byte slice (which may be memory-mapped, loaded into RAM, or a buffer
//! being written); it never opens a file.
//!
//! - [`bitpack`]: fixed-width bit-packing with O(1) random access, streaming writer.
//! - [`column`]: typed column chunks (frame-of-reference ints, dictionary or plain
//!   strings, bitmaps, arrays) with null bitmaps, and their zero-copy readers.
//! - `offsets`: the chunk byte reader and string offsets both string encodings stand on.
//! - [`fsst`]: FSST-compressed strings (a symbol table and codes).
//! - [`segment`]: framing of a segment file: blobs, a JSON footer, checksums, magic.
//!
//! Modules depend one way: `column` on `fsst`, both on `offsets` and `bitpack`;
//! `segment` on none of them.
//!
//! **Invariant:** no reader panics on corrupted bytes: every size is validated when a chunk
//! is opened, and failures are [`FormatError::Corrupted`].

pub mod bitpack;
pub mod column;
pub mod error;
pub mod fsst;
mod offsets;
pub mod segment;

pub use error::FormatError;

/// Version of the on-disk format written by this build (see docs/format.md): 2 added
/// patch files and deletion files, which a reader of version 1 would ignore and so read
/// stale values; 3 added the manifest's first log file (`log`), which a reader of
/// version 2 would ignore and so replay the wrong log; this build reads all three.
pub const FORMAT_VERSION: u32 = 3;

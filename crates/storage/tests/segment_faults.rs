//! A segment file whose n-th write fails (an injected fault, as a full disk would) reports
//! the error to its writer, whichever buffer it hits, and never hangs on its writer
//! thread. Alone in its test binary: fault injection is process-wide.

use quiver_storage::fsio::{faults, SegmentFile};
use std::io::Write;

#[test]
fn every_failed_write_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let piece = vec![7u8; 300_000];
    let total = 5 * 1024 * 1024 + 123;
    // Steps: the create, one per full 1 MiB buffer handed over, one for the tail.
    let mut n = 1;
    loop {
        faults::arm(n);
        let r = (|| -> std::io::Result<u64> {
            let mut f = SegmentFile::create(&path)?;
            let mut left = total;
            while left > 0 {
                let k = left.min(piece.len());
                f.write_all(&piece[..k])?;
                left -= k;
            }
            f.finish()
        })();
        let taken = faults::disarm();
        match r {
            Ok(len) => {
                assert_eq!(len, total as u64);
                assert!(taken < n, "step {n} was taken and did not fail");
                assert_eq!(std::fs::metadata(&path).unwrap().len(), total as u64);
                break;
            }
            Err(e) => assert!(e.to_string().contains("injected fault"), "step {n}: {e}"),
        }
        n += 1;
        assert!(n < 20, "more steps than buffers");
    }
    // The create, five full buffers and the tail.
    assert_eq!(n, 8);
}

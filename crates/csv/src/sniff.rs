//! What a CSV file's first bytes say about how it is written: the delimiter its header
//! splits on and the quote its fields use. Every front end (the CLI, Python, the
//! Spark build) reaches these through `quiver_import::decide`, so a file is read the same
//! way wherever it is imported from.

use std::io::{BufRead, Read};
use std::path::Path;

/// How much of a file is looked at.
const SAMPLE_BYTES: u64 = 64 << 10;

/// The delimiter the files' headers agree on: `,` when a header has several columns by
/// commas (or none by anything), else `;`, tab or `|` when that splits every header (the
/// one that gives the most columns), else `,` (an error then hints at the right one).
/// A header of one column by every candidate says nothing.
pub fn delimiter(files: &[&Path]) -> u8 {
    let mut agreed: Option<u8> = None;
    for f in files {
        let Some(header) = first_line(f) else {
            return b',';
        };
        let columns = |d: u8| header.split(|&b| b == d).count();
        let d = if columns(b',') > 1 {
            b','
        } else {
            match [b';', b'\t', b'|']
                .into_iter()
                .map(|d| (columns(d), d))
                .max()
                .filter(|&(n, _)| n > 1)
            {
                Some((_, d)) => d,
                None => continue,
            }
        };
        match agreed {
            Some(a) if a != d => return b',',
            _ => agreed = Some(d),
        }
    }
    agreed.unwrap_or(b',')
}

/// `'` when the files quote fields with it, as some tools write them: no `"` in the
/// first 64 KiB of any file, some field (split on `delimiter`) starting and ending with
/// `'`, and an even count of `'` on every line (so `O'Brien` is data). `"` otherwise.
pub fn quote(files: &[&Path], delimiter: u8) -> u8 {
    let mut quoted = false;
    for f in files {
        if f.extension().is_some_and(|x| x == "gz")
            || !std::fs::metadata(f).is_ok_and(|m| m.is_file())
        {
            return b'"';
        }
        let mut sample = Vec::new();
        let read =
            std::fs::File::open(f).and_then(|h| h.take(SAMPLE_BYTES).read_to_end(&mut sample));
        if read.is_err() || sample.contains(&b'"') {
            return b'"';
        }
        // The last line may be cut short: leave it out.
        let end = sample
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(sample.len(), |e| e + 1);
        for line in sample[..end].split(|&b| b == b'\n') {
            if line.iter().filter(|&&b| b == b'\'').count() % 2 == 1 {
                return b'"';
            }
            quoted |= line
                .split(|&b| b == delimiter)
                .map(|f| f.strip_suffix(b"\r").unwrap_or(f))
                .any(|f| f.len() >= 2 && f[0] == b'\'' && f[f.len() - 1] == b'\'');
        }
    }
    if quoted {
        b'\''
    } else {
        b'"'
    }
}

/// Another common delimiter (`;`, tab, `|`) that `file`'s header splits on, and into how
/// many columns, when with `delimiter` it is one column: what an error about the file
/// can suggest.
pub fn other_delimiter(file: &Path, delimiter: u8) -> Option<(usize, u8)> {
    let header = first_line(file)?;
    let columns = |d: u8| header.split(|&b| b == d).count();
    if columns(delimiter) > 1 {
        return None;
    }
    [b';', b'\t', b'|']
        .into_iter()
        .filter(|&d| d != delimiter)
        .map(|d| (columns(d), d))
        .max()
        .filter(|&(n, _)| n > 1)
}

/// The first line of a plain file, at most 64 KiB of it (`None` for a gzip file, and for
/// what is not a regular file: reading a pipe would take its lines from the import).
fn first_line(path: &Path) -> Option<Vec<u8>> {
    if path.extension().is_some_and(|x| x == "gz") || !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let mut r = std::io::BufReader::new(std::fs::File::open(path).ok()?);
    let mut line = Vec::new();
    r.by_ref()
        .take(SAMPLE_BYTES)
        .read_until(b'\n', &mut line)
        .ok()?;
    while line.last().is_some_and(|&b| b == b'\n' || b == b'\r') {
        line.pop();
    }
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn headers_agree_on_a_delimiter() {
        let d = tempfile::tempdir().unwrap();
        let semi = file(d.path(), "a.csv", "id;name\n1;x\n");
        let semi2 = file(d.path(), "b.csv", ":START_ID;:END_ID\n1;1\n");
        let comma = file(d.path(), "c.csv", "id,name\n1,x\n");
        let one = file(d.path(), "d.csv", "id\n1\n");
        let tab = file(d.path(), "e.tsv", "id\tname\n1\tx\n");
        assert_eq!(delimiter(&[&semi, &semi2]), b';');
        assert_eq!(delimiter(&[&semi, &one]), b';');
        assert_eq!(delimiter(&[&semi, &comma]), b',');
        assert_eq!(delimiter(&[&tab]), b'\t');
        assert_eq!(delimiter(&[&one]), b',');
        assert_eq!(delimiter(&[&d.path().join("missing.csv")]), b',');
    }

    #[test]
    fn single_quotes_only_where_every_line_pairs_them() {
        let d = tempfile::tempdir().unwrap();
        let single = file(d.path(), "a.csv", "id,name\n1,'x y'\n");
        let apostrophe = file(d.path(), "b.csv", "id,name\n1,O'Brien\n");
        let double = file(d.path(), "c.csv", "id,name\n1,\"x\"\n2,'y'\n");
        assert_eq!(quote(&[&single], b','), b'\'');
        assert_eq!(quote(&[&apostrophe], b','), b'"');
        assert_eq!(quote(&[&double], b','), b'"');
    }
}

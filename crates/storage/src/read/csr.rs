//! Adjacency: CSR parts of a relationship segment (both directions), the neighbour
//! iterator, and the streaming unpacker over a range of packed targets.

use super::*;

/// One file of a CSR: the entries of nodes `footer.first_node ..` `+ footer.n_nodes`.
pub(crate) struct CsrPart {
    pub(crate) footer: CsrFooter,
    pub(crate) file: SegFile,
    /// Position of the part's first entry among the CSR's.
    pub(crate) first_entry: u64,
}

/// A CSR in one file, or in several (a Spark build writes one a task): parts over
/// consecutive node ranges from node 0, entry positions running on across them.
pub(crate) struct Csr {
    pub(crate) parts: Vec<CsrPart>,
    pub(crate) n_nodes: u64,
    pub(crate) n_edges: u64,
}

/// One segment of a relationship type: CSR both ways over its own edges.
pub(crate) struct RelSeg {
    pub(crate) out: Csr,
    pub(crate) inc: Csr,
    /// Edge id of the segment's edge 0.
    pub(crate) first_edge: u64,
    /// Deleted entries of the out CSR and of the in CSR, by position.
    pub(crate) deleted: Option<[Bits; 2]>,
}

impl RelSeg {
    pub(crate) fn csr(&self, dir: Direction) -> &Csr {
        match dir {
            Direction::Out => &self.out,
            Direction::In => &self.inc,
        }
    }

    pub(crate) fn deleted(&self, dir: Direction) -> Option<&Bits> {
        self.deleted.as_ref().map(|d| match dir {
            Direction::Out => &d[0],
            Direction::In => &d[1],
        })
    }
}

/// The entries of one node in one CSR segment: `pos .. end` index the part's arrays;
/// `base + i` is entry `i`'s position in the whole CSR (what deletion bitmaps mark, and
/// the edge id of an entry without one).
pub(crate) struct Part<'a> {
    pub(crate) targets: Packed<'a>,
    pub(crate) edge_ids: Option<Packed<'a>>,
    pub(crate) pos: usize,
    pub(crate) end: usize,
    pub(crate) base: u64,
    pub(crate) eid_base: u64,
    /// Deleted entries of the segment, skipped.
    pub(crate) deleted: Option<&'a Bits>,
}

impl Part<'_> {
    /// Entry `i`'s edge id within the segment (without `eid_base`).
    #[inline]
    pub(crate) fn raw_eid(&self, i: usize) -> u64 {
        self.edge_ids.map_or(self.base + i as u64, |e| e.get(i))
    }
}

/// The neighbours of one node: (neighbour node id, edge id), segment after segment.
pub struct Neighbours<'a> {
    pub(crate) cur: Option<Part<'a>>,
    /// Further segments (empty, and not allocated, for a single-segment type).
    pub(crate) rest: Vec<Part<'a>>,
}

impl Neighbours<'_> {
    /// Moves to the next entry that is not deleted: its index in `cur`, the part that
    /// holds it when this returns.
    #[inline]
    pub(crate) fn advance(&mut self) -> Option<usize> {
        loop {
            let p = self.cur.as_mut()?;
            while p.pos < p.end {
                let i = p.pos;
                p.pos += 1;
                if p.deleted.is_some_and(|d| d.get(p.base + i as u64)) {
                    continue;
                }
                return Some(i);
            }
            self.cur = if self.rest.is_empty() {
                None
            } else {
                Some(self.rest.remove(0))
            };
        }
    }

    /// The next neighbour's node id alone, its edge id not read (the in CSR's is a
    /// second array): for a search that records only which node reached which.
    #[inline]
    pub fn next_target(&mut self) -> Option<u32> {
        let i = self.advance()?;
        Some(self.cur.as_ref()?.targets.get(i) as u32)
    }
}

impl Iterator for Neighbours<'_> {
    type Item = (u32, u64);
    #[inline]
    fn next(&mut self) -> Option<(u32, u64)> {
        let i = self.advance()?;
        let p = self.cur.as_ref()?;
        Some((p.targets.get(i) as u32, p.eid_base + p.raw_eid(i)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.cur.as_ref().map_or(0, |p| p.end - p.pos)
            + self.rest.iter().map(|p| p.end - p.pos).sum::<usize>();
        let deletions = self
            .cur
            .iter()
            .chain(&self.rest)
            .any(|p| p.deleted.is_some());
        (if deletions { 0 } else { n }, Some(n))
    }
}

impl CsrPart {
    pub(crate) fn packed<'a>(
        &self,
        bytes: &'a [u8],
        r: BlobRef,
        width: u32,
        n: u64,
    ) -> Result<Packed<'a>, ReadError> {
        let b = r.slice(bytes).map_err(|source| ReadError::Format {
            file: self.file.path.clone(),
            source,
        })?;
        Packed::new(b, width, n as usize)
            .ok_or_else(|| corrupted(&self.file.path, "packed array too short"))
    }

    /// The part's three arrays in place (mapped or loaded).
    #[allow(clippy::type_complexity)]
    pub(crate) fn arrays(&self) -> Result<(Packed<'_>, Packed<'_>, Option<Packed<'_>>), ReadError> {
        let bytes = self.file.bytes("neighbours of a node")?;
        let f = &self.footer;
        let offsets = self.packed(bytes, f.offsets, f.offsets_width, f.n_nodes + 1)?;
        let targets = self.packed(bytes, f.targets, f.targets_width, f.n_edges)?;
        let edge_ids = match f.edge_ids {
            Some(r) => Some(self.packed(bytes, r, f.edge_ids_width, f.n_edges)?),
            None => None,
        };
        Ok((offsets, targets, edge_ids))
    }

    /// Streams every entry in node order: `f(node, neighbour, raw edge id, position)`,
    /// positions and ids counted across the CSR's parts.
    pub(crate) fn scan(&self, f: &mut dyn FnMut(u32, u32, u64, u64)) -> Result<(), ReadError> {
        let ft = &self.footer;
        let io = |source| ReadError::Io {
            path: self.file.path.clone(),
            source,
        };
        let mut offsets = StreamUnpacker::new(self.file.blob_reader(ft.offsets)?, ft.offsets_width);
        let mut targets = StreamUnpacker::new(self.file.blob_reader(ft.targets)?, ft.targets_width);
        let mut eids = match ft.edge_ids {
            Some(r) => Some(StreamUnpacker::new(
                self.file.blob_reader(r)?,
                ft.edge_ids_width,
            )),
            None => None,
        };
        let mut prev = offsets.next().map_err(io)?;
        let mut pos = self.first_entry;
        for node in 0..ft.n_nodes {
            let end = offsets.next().map_err(io)?;
            if end < prev || end > ft.n_edges {
                return Err(corrupted(&self.file.path, "CSR offsets out of order"));
            }
            for _ in prev..end {
                let t = targets.next().map_err(io)?;
                let e = match &mut eids {
                    Some(u) => u.next().map_err(io)?,
                    None => pos,
                };
                f((ft.first_node + node) as u32, t as u32, e, pos);
                pos += 1;
            }
            prev = end;
        }
        Ok(())
    }
}

impl Csr {
    /// A CSR of the parts opened (in node order), checked to follow one another.
    pub(crate) fn new(parts: Vec<(SegFile, CsrFooter)>) -> Result<Csr, OpenError> {
        let mut out = Vec::with_capacity(parts.len());
        let (mut n_nodes, mut n_edges) = (0u64, 0u64);
        let edge_ids = parts.first().is_some_and(|(_, f)| f.edge_ids.is_some());
        for (file, footer) in parts {
            if footer.first_node != n_nodes || footer.edge_ids.is_some() != edge_ids {
                return Err(OpenError::Corrupted {
                    file: file.path.clone(),
                    what: format!(
                        "a CSR part must start at node {n_nodes} (it starts at {}) and \
                         carry edge ids as the first part does",
                        footer.first_node
                    ),
                });
            }
            n_nodes += footer.n_nodes;
            let first_entry = n_edges;
            n_edges += footer.n_edges;
            out.push(CsrPart {
                footer,
                file,
                first_entry,
            });
        }
        Ok(Csr {
            parts: out,
            n_nodes,
            n_edges,
        })
    }

    /// Whether entries carry explicit edge ids (every part does, or none: `new` checks).
    pub(crate) fn edge_ids(&self) -> bool {
        self.parts[0].footer.edge_ids.is_some()
    }

    /// The part that holds `node`'s entries (`node < n_nodes`).
    #[inline]
    pub(crate) fn part(&self, node: u64) -> &CsrPart {
        if self.parts.len() == 1 {
            return &self.parts[0];
        }
        let i = self
            .parts
            .partition_point(|p| p.footer.first_node + p.footer.n_nodes <= node);
        &self.parts[i.min(self.parts.len() - 1)]
    }

    pub(crate) fn neighbours(&self, node: u32, eid_base: u64) -> Result<Part<'_>, ReadError> {
        if node as u64 >= self.n_nodes {
            return Err(ReadError::NodeOutOfRange {
                id: node as u64,
                n_nodes: self.n_nodes,
            });
        }
        let part = self.part(node as u64);
        let (offsets, targets, edge_ids) = part.arrays()?;
        let local = (node as u64 - part.footer.first_node) as usize;
        let (s, e) = (offsets.get(local) as usize, offsets.get(local + 1) as usize);
        if s > e || e as u64 > part.footer.n_edges {
            return Err(corrupted(&part.file.path, "CSR offsets out of order"));
        }
        Ok(Part {
            targets,
            edge_ids,
            pos: s,
            end: e,
            base: part.first_entry,
            eid_base,
            deleted: None,
        })
    }

    /// Hints the CPU to load what [`neighbours`](Self::neighbours) of `node` reads
    /// first: its offsets, or with `targets` the start of its entries (which reads the
    /// offsets: hint them first, a little earlier).
    pub(crate) fn prefetch(&self, node: u32, targets: bool) {
        if node as u64 >= self.n_nodes {
            return;
        }
        let part = self.part(node as u64);
        let Ok((offsets, t, e)) = part.arrays() else {
            return;
        };
        let local = (node as u64 - part.footer.first_node) as usize;
        if local + 1 >= offsets.len() {
            return;
        }
        if !targets {
            offsets.prefetch(local);
            return;
        }
        let s = offsets.get(local) as usize;
        if s < t.len() {
            t.prefetch(s);
            if let Some(e) = e {
                e.prefetch(s);
            }
        }
    }

    pub(crate) fn degree(&self, node: u32, deleted: Option<&Bits>) -> Result<u64, ReadError> {
        let p = self.neighbours(node, 0)?;
        let gone = deleted.map_or(0, |d| {
            d.count_range(p.base + p.pos as u64, p.base + p.end as u64)
        });
        Ok((p.end - p.pos) as u64 - gone)
    }

    /// Streams every entry in node order: `f(node, neighbour, edge_id)`, skipping
    /// `deleted` positions.
    pub(crate) fn scan(
        &self,
        eid_base: u64,
        deleted: Option<&Bits>,
        mut f: impl FnMut(u32, u32, u64),
    ) -> Result<(), ReadError> {
        for part in &self.parts {
            part.scan(&mut |node, t, e, pos| {
                if !deleted.is_some_and(|d| d.get(pos)) {
                    f(node, t, eid_base + e);
                }
            })?;
        }
        Ok(())
    }

    pub(crate) fn files(&self) -> impl Iterator<Item = &SegFile> {
        self.parts.iter().map(|p| &p.file)
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.files().map(|f| f.len).sum()
    }
}

/// Sequential bit-unpacking from a byte stream (offline scans hold no offsets in memory).
pub(crate) struct StreamUnpacker<'a> {
    pub(crate) r: Box<dyn Read + 'a>,
    pub(crate) width: u32,
    pub(crate) acc: u128,
    pub(crate) bits: u32,
}

impl<'a> StreamUnpacker<'a> {
    pub(crate) fn new(r: Box<dyn Read + 'a>, width: u32) -> Self {
        StreamUnpacker {
            r,
            width,
            acc: 0,
            bits: 0,
        }
    }

    #[inline]
    pub(crate) fn next(&mut self) -> std::io::Result<u64> {
        if self.width == 0 {
            return Ok(0);
        }
        while self.bits < self.width {
            let mut b = [0u8; 1];
            self.r.read_exact(&mut b)?;
            self.acc |= (b[0] as u128) << self.bits;
            self.bits += 8;
        }
        let mask = if self.width == 64 {
            u64::MAX
        } else {
            (1u64 << self.width) - 1
        };
        let v = self.acc as u64 & mask;
        self.acc >>= self.width;
        self.bits -= self.width;
        Ok(v)
    }
}

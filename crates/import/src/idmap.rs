//! External node id -> internal node id, per id space, in memory under a grant.
//!
//! Integer ids that are dense (the common case: `1..n`, in any order) use a paged direct
//! array of 4 bytes per id; sparse integers use a hash table of 12-byte entries; string ids use a
//! hash table of indexes into an arena of the id bytes, so inserting allocates nothing per
//! row. Every growth takes a grant first; a refused grant makes the import sort the space's
//! ids on disk instead (`crate::spill`).

use crate::error::ImportError;
use hashbrown::HashTable;
use quiver_common::{Grant, MemoryBudget};
use std::hash::BuildHasher;

const NONE: u32 = u32::MAX;

/// A key as parsed from the file.
#[derive(Debug, Clone, Copy)]
pub enum Key<'a> {
    Int(i64),
    Str(&'a [u8]),
}

impl<'a> Key<'a> {
    /// Row `r`'s key in a parsed id column (integers or strings as `integer` says).
    #[inline]
    pub fn of(col: &'a quiver_format::column::ColumnBuilder, r: usize, integer: bool) -> Self {
        if integer {
            Key::Int(col.i64_values()[r])
        } else {
            Key::Str(col.bytes_at(r))
        }
    }

    /// Runs `f` on the key as `crate::spill` sorts it (integers in numeric byte order).
    #[inline]
    pub fn with_sort_bytes<R>(self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            Key::Int(k) => f(&crate::spill::int_key(k)),
            Key::Str(s) => f(s),
        }
    }
}

impl<'a> From<Key<'a>> for quiver_storage::IdKey<'a> {
    /// The same key as the database's id index looks it up (an append).
    fn from(k: Key<'a>) -> Self {
        match k {
            Key::Int(i) => quiver_storage::IdKey::Int(i),
            Key::Str(s) => quiver_storage::IdKey::Str(s),
        }
    }
}

/// Ids per page of the dense map (256 KiB of `u32` per page).
const PAGE_BITS: u32 = 16;
const PAGE: usize = 1 << PAGE_BITS;

enum IntMap {
    /// Pages of `PAGE` slots, page `p` covering keys `(dir_base + p) << PAGE_BITS ..`.
    /// Growing never copies slots (only the page directory), so no transient doubling.
    Dense {
        dir_base: i64,
        pages: Vec<Option<Box<[u32]>>>,
        n_pages: u64,
        n: u64,
    },
    Hash(HashTable<(i64, u32)>),
}

struct StrEntry {
    off: u64,
    len: u32,
    node: u32,
}

enum IdMap {
    Int(IntMap),
    Str {
        table: HashTable<StrEntry>,
        arena: Vec<u8>,
    },
}

pub struct IdMapWithGrant {
    map: IdMap,
    /// Set by [`seal`](Self::seal) when integer keys `min..min+n` map to nodes
    /// `first..first+n` in order: lookups are then arithmetic, with no memory access
    /// (the common case of ids exported by a database, e.g. Pokec's).
    identity: Option<(i64, u32, u64)>,
    grant: Grant,
    hasher: foldhash::fast::FixedState,
}

impl IdMapWithGrant {
    pub fn new(integer: bool, budget: &MemoryBudget) -> Self {
        IdMapWithGrant {
            map: if integer {
                IdMap::Int(IntMap::Dense {
                    dir_base: 0,
                    pages: Vec::new(),
                    n_pages: 0,
                    n: 0,
                })
            } else {
                IdMap::Str {
                    table: HashTable::new(),
                    arena: Vec::new(),
                }
            },
            identity: None,
            grant: budget.empty_grant("id map"),
            hasher: foldhash::fast::FixedState::with_seed(0x9e37_79b9),
        }
    }

    pub fn heap_bytes(&self) -> u64 {
        match &self.map {
            IdMap::Int(IntMap::Dense { pages, n_pages, .. }) => {
                n_pages * PAGE as u64 * 4 + pages.capacity() as u64 * 8
            }
            IdMap::Int(IntMap::Hash(t)) => t.capacity() as u64 * 17,
            IdMap::Str { table, arena } => table.capacity() as u64 * 17 + arena.capacity() as u64,
        }
    }

    fn ensure(&mut self, bytes: u64) -> Result<(), ImportError> {
        if bytes > self.grant.bytes() {
            self.grant.try_resize(bytes)?;
        }
        Ok(())
    }

    /// Inserts `key -> node`; returns the node already mapped if the key is a duplicate.
    pub fn insert(&mut self, key: Key<'_>, node: u32) -> Result<Option<u32>, ImportError> {
        match key {
            Key::Int(k) => self.insert_int(k, node),
            Key::Str(s) => self.insert_str(s, node),
        }
    }

    fn insert_int(&mut self, k: i64, node: u32) -> Result<Option<u32>, ImportError> {
        let hasher = self.hasher.clone();
        if let IdMap::Int(IntMap::Dense {
            dir_base,
            pages,
            n_pages,
            n,
        }) = &mut self.map
        {
            let page = k >> PAGE_BITS;
            if pages.is_empty() {
                *dir_base = page;
            }
            // Extend the directory (pointers only) to cover the page, unless the keys are
            // so spread out that even the directory would be mostly empty.
            let lo = page.min(*dir_base);
            let hi = page.max(*dir_base + pages.len() as i64 - 1);
            if (hi as i128 - lo as i128) as u64 > 64 * (*n_pages + 1) + 1024 {
                self.to_hash()?;
                return self.insert_int(k, node);
            }
            if page < *dir_base {
                let extra = (*dir_base - page) as usize;
                pages.splice(0..0, std::iter::repeat_with(|| None).take(extra));
                *dir_base = page;
            } else if (page - *dir_base) as usize >= pages.len() {
                pages.resize_with((page - *dir_base) as usize + 1, || None);
            }
            let slot_page = &mut pages[(page - *dir_base) as usize];
            if slot_page.is_none() {
                // Pages cost 4 bytes per slot, a hash table about 17-34 bytes per id.
                // Keys in random order touch every page early, so occupancy says nothing
                // until the pages are a sizeable part of the budget (1/8); past that,
                // pages less than a quarter full mean the keys are sparse.
                let pages_bytes = (*n_pages + 1) * PAGE as u64 * 4;
                let cap = self.grant.budget().limit_bytes() / 8;
                if pages_bytes > cap && *n < *n_pages * PAGE as u64 / 4 {
                    self.to_hash()?;
                    return self.insert_int(k, node);
                }
                let bytes = (*n_pages + 1) * PAGE as u64 * 4 + pages.capacity() as u64 * 8;
                if bytes > self.grant.bytes() {
                    self.grant.try_resize(bytes)?;
                }
                let IdMap::Int(IntMap::Dense {
                    dir_base,
                    pages,
                    n_pages,
                    ..
                }) = &mut self.map
                else {
                    unreachable!()
                };
                pages[(page - *dir_base) as usize] = Some(vec![NONE; PAGE].into_boxed_slice());
                *n_pages += 1;
            }
            let IdMap::Int(IntMap::Dense {
                dir_base, pages, n, ..
            }) = &mut self.map
            else {
                unreachable!()
            };
            let p = pages[(page - *dir_base) as usize]
                .as_mut()
                .expect("page was just allocated");
            let slot = &mut p[(k & (PAGE as i64 - 1)) as usize];
            if *slot != NONE {
                return Ok(Some(*slot));
            }
            *slot = node;
            *n += 1;
            return Ok(None);
        }
        let needs = match &self.map {
            IdMap::Int(IntMap::Hash(t)) => t.len() == t.capacity(),
            _ => false,
        };
        if needs {
            let cap = match &self.map {
                IdMap::Int(IntMap::Hash(t)) => t.capacity(),
                _ => 0,
            };
            self.ensure(((cap * 2).max(1024) as u64) * 17 + 1024)?;
        }
        let IdMap::Int(IntMap::Hash(t)) = &mut self.map else {
            unreachable!()
        };
        let h = hasher.hash_one(k);
        if let Some(&(_, old)) = t.find(h, |e| e.0 == k) {
            return Ok(Some(old));
        }
        t.insert_unique(h, (k, node), |e| hasher.hash_one(e.0));
        Ok(None)
    }

    fn to_hash(&mut self) -> Result<(), ImportError> {
        let hasher = self.hasher.clone();
        let IdMap::Int(IntMap::Dense {
            dir_base, pages, n, ..
        }) = &mut self.map
        else {
            return Ok(());
        };
        let cap = (*n as usize * 2).max(1024);
        // The pages and the table coexist while converting.
        let need = self.grant.bytes() + cap as u64 * 17;
        self.grant.try_resize(need)?;
        let mut t: HashTable<(i64, u32)> = HashTable::with_capacity(cap);
        for (pi, p) in pages.iter().enumerate() {
            if let Some(p) = p {
                let base = (*dir_base + pi as i64) << PAGE_BITS;
                for (i, &s) in p.iter().enumerate() {
                    if s != NONE {
                        let k = base + i as i64;
                        t.insert_unique(hasher.hash_one(k), (k, s), |e| hasher.hash_one(e.0));
                    }
                }
            }
        }
        self.map = IdMap::Int(IntMap::Hash(t));
        let b = self.heap_bytes();
        self.grant.try_resize(b)?;
        Ok(())
    }

    fn insert_str(&mut self, s: &[u8], node: u32) -> Result<Option<u32>, ImportError> {
        let hasher = self.hasher.clone();
        let (full, arena_need) = match &self.map {
            IdMap::Str { table, arena } => (
                table.len() == table.capacity(),
                arena.len() + s.len() > arena.capacity(),
            ),
            _ => return Ok(None),
        };
        if full || arena_need {
            let IdMap::Str { table, arena } = &self.map else {
                unreachable!()
            };
            let tcap = if full {
                (table.capacity() * 2).max(1024)
            } else {
                table.capacity()
            };
            let acap = if arena_need {
                (arena.capacity() * 2)
                    .max(arena.len() + s.len())
                    .max(1 << 16)
            } else {
                arena.capacity()
            };
            // While a table grows, old and new buckets coexist.
            let old = table.capacity() as u64 * 17;
            self.ensure(tcap as u64 * 17 + acap as u64 + if full { old } else { 0 })?;
            let IdMap::Str { arena, .. } = &mut self.map else {
                unreachable!()
            };
            if arena_need {
                arena.reserve_exact(acap - arena.len());
            }
        }
        let IdMap::Str { table, arena } = &mut self.map else {
            unreachable!()
        };
        let h = hasher.hash_one(s);
        let found = table.find(h, |e| {
            &arena[e.off as usize..e.off as usize + e.len as usize] == s
        });
        if let Some(e) = found {
            return Ok(Some(e.node));
        }
        let off = arena.len() as u64;
        arena.extend_from_slice(s);
        let a: &Vec<u8> = arena;
        table.insert_unique(
            h,
            StrEntry {
                off,
                len: s.len() as u32,
                node,
            },
            |e| hasher.hash_one(&a[e.off as usize..e.off as usize + e.len as usize]),
        );
        let b = self.heap_bytes();
        if b > self.grant.bytes() {
            self.grant.try_resize(b)?;
        }
        Ok(None)
    }

    /// Every key and its node, in no particular order.
    pub fn for_each(
        &self,
        f: &mut dyn FnMut(Key<'_>, u32) -> Result<(), ImportError>,
    ) -> Result<(), ImportError> {
        match &self.map {
            IdMap::Int(IntMap::Dense {
                dir_base, pages, ..
            }) => {
                for (pi, p) in pages.iter().enumerate() {
                    if let Some(p) = p {
                        let base = (*dir_base + pi as i64) << PAGE_BITS;
                        for (i, &s) in p.iter().enumerate() {
                            if s != NONE {
                                f(Key::Int(base + i as i64), s)?;
                            }
                        }
                    }
                }
            }
            IdMap::Int(IntMap::Hash(t)) => {
                for &(k, v) in t.iter() {
                    f(Key::Int(k), v)?;
                }
            }
            IdMap::Str { table, arena } => {
                for e in table.iter() {
                    f(
                        Key::Str(&arena[e.off as usize..e.off as usize + e.len as usize]),
                        e.node,
                    )?;
                }
            }
        }
        Ok(())
    }

    /// Ends the inserts; detects the identity layout that makes lookups arithmetic.
    pub fn seal(&mut self) {
        let IdMap::Int(IntMap::Dense {
            dir_base, pages, n, ..
        }) = &self.map
        else {
            return;
        };
        let Some(first_page) = pages.iter().position(|p| p.is_some()) else {
            return;
        };
        let base = (*dir_base + first_page as i64) << PAGE_BITS;
        let page0 = pages[first_page].as_ref().expect("position found a page");
        let Some(off) = page0.iter().position(|&v| v != NONE) else {
            return;
        };
        let (min, first) = (base + off as i64, page0[off]);
        // Every key min..min+n must hold first + (key - min).
        for k in 0..*n {
            let key = min + k as i64;
            let pi = ((key >> PAGE_BITS) - *dir_base) as usize;
            let ok = pages
                .get(pi)
                .and_then(|p| p.as_ref())
                .is_some_and(|p| p[(key & (PAGE as i64 - 1)) as usize] as u64 == first as u64 + k);
            if !ok {
                return;
            }
        }
        self.identity = Some((min, first, *n));
    }

    /// Looks a key up (read-only; safe to call from many threads).
    #[inline]
    pub fn get(&self, key: Key<'_>) -> Option<u32> {
        if let (Some((min, first, n)), Key::Int(k)) = (self.identity, key) {
            let d = k.wrapping_sub(min) as u64;
            return (k >= min && d < n).then(|| first + d as u32);
        }
        match (&self.map, key) {
            (
                IdMap::Int(IntMap::Dense {
                    dir_base, pages, ..
                }),
                Key::Int(k),
            ) => {
                let pi = (k >> PAGE_BITS).checked_sub(*dir_base)?;
                if pi < 0 {
                    return None;
                }
                let p = pages.get(pi as usize)?.as_ref()?;
                Some(p[(k & (PAGE as i64 - 1)) as usize]).filter(|&v| v != NONE)
            }
            (IdMap::Int(IntMap::Hash(t)), Key::Int(k)) => {
                t.find(self.hasher.hash_one(k), |e| e.0 == k).map(|e| e.1)
            }
            (IdMap::Str { table, arena }, Key::Str(s)) => table
                .find(self.hasher.hash_one(s), |e| {
                    &arena[e.off as usize..e.off as usize + e.len as usize] == s
                })
                .map(|e| e.node),
            _ => None,
        }
    }

    pub fn len(&self) -> u64 {
        match &self.map {
            IdMap::Int(IntMap::Dense { n, .. }) => *n,
            IdMap::Int(IntMap::Hash(t)) => t.len() as u64,
            IdMap::Str { table, .. } => table.len() as u64,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keys in ascending order with their nodes (for the persistent index). The grant
    /// returned covers these arrays *and* the buffers the index writer encodes them into
    /// (about 24 bytes per integer id; keys, 20 bytes and the id bytes twice for strings).
    pub fn sorted(
        &self,
        budget: &MemoryBudget,
    ) -> Result<(quiver_format::column::ColumnBuilder, Vec<u32>, Grant), ImportError> {
        use quiver_common::types::{DataType, ScalarType};
        use quiver_format::column::ColumnBuilder;
        let n = self.len() as usize;
        let n64 = n as u64;
        match &self.map {
            IdMap::Int(m) => {
                let mut keys = ColumnBuilder::new(DataType::Scalar(ScalarType::Long));
                let mut nodes = Vec::new();
                let g = match m {
                    IntMap::Dense {
                        dir_base, pages, ..
                    } => {
                        // Pages are already in key order: no pair array, no sort.
                        let g = budget.try_grant(n64 * 24, "id index")?;
                        keys.reserve_exact(n, 0);
                        nodes.reserve_exact(n);
                        for (pi, p) in pages.iter().enumerate() {
                            if let Some(p) = p {
                                let base = (*dir_base + pi as i64) << PAGE_BITS;
                                for (i, &s) in p.iter().enumerate() {
                                    if s != NONE {
                                        keys.push_i64(base + i as i64);
                                        nodes.push(s);
                                    }
                                }
                            }
                        }
                        g
                    }
                    IntMap::Hash(t) => {
                        let mut g = budget.try_grant(n64 * 40, "id index")?;
                        let mut pairs: Vec<(i64, u32)> = Vec::with_capacity(n);
                        pairs.extend(t.iter().copied());
                        pairs.sort_unstable();
                        keys.reserve_exact(n, 0);
                        nodes.reserve_exact(n);
                        for (k, v) in pairs {
                            keys.push_i64(k);
                            nodes.push(v);
                        }
                        g.try_resize(n64 * 24)?;
                        g
                    }
                };
                Ok((keys, nodes, g))
            }
            IdMap::Str { table, arena } => {
                let bytes = arena.len() as u64;
                let mut g = budget.try_grant(
                    n64 * 8 + (bytes + n64 * 8) + n64 * 4 + (bytes + n64 * 8) + n64 * 4,
                    "id index",
                )?;
                let mut idx: Vec<&StrEntry> = table.iter().collect();
                let key = |e: &StrEntry| &arena[e.off as usize..e.off as usize + e.len as usize];
                idx.sort_unstable_by(|a, b| key(a).cmp(key(b)));
                let mut keys = ColumnBuilder::new(DataType::Scalar(ScalarType::String));
                keys.reserve_exact(n, arena.len());
                let mut nodes = Vec::with_capacity(n);
                for e in idx {
                    keys.push_bytes(key(e));
                    nodes.push(e.node);
                }
                g.try_resize((bytes + n64 * 8) + n64 * 4 + (bytes + n64 * 8) + n64 * 4)?;
                Ok((keys, nodes, g))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_sparse_and_strings() {
        let b = MemoryBudget::new(1 << 30);
        let mut m = IdMapWithGrant::new(true, &b);
        for (i, k) in [5i64, 3, 4, 1000, 2].iter().enumerate() {
            assert_eq!(m.insert(Key::Int(*k), i as u32).unwrap(), None);
        }
        assert_eq!(m.insert(Key::Int(4), 9).unwrap(), Some(2));
        assert_eq!(m.get(Key::Int(1000)), Some(3));
        assert_eq!(m.get(Key::Int(6)), None);
        m.seal();
        assert!(
            m.identity.is_none(),
            "keys 2..5 and 1000 are not an identity run"
        );
        assert_eq!(m.get(Key::Int(-1)), None);
        // Far-away keys turn the map into a hash table.
        m.insert(Key::Int(1 << 40), 10).unwrap();
        m.insert(Key::Int(-(1 << 40)), 11).unwrap();
        assert!(matches!(m.map, IdMap::Int(IntMap::Hash(_))));
        assert_eq!(m.get(Key::Int(5)), Some(0));
        assert_eq!(m.get(Key::Int(1 << 40)), Some(10));
        let (keys, nodes, _g) = m.sorted(&b).unwrap();
        assert_eq!(keys.i64_values()[0], -(1 << 40));
        assert_eq!(nodes[0], 11);
        assert!(keys.i64_values().windows(2).all(|w| w[0] < w[1]));

        let mut s = IdMapWithGrant::new(false, &b);
        for i in 0..5000u32 {
            assert_eq!(
                s.insert(Key::Str(format!("u{i}").as_bytes()), i).unwrap(),
                None
            );
        }
        assert_eq!(s.insert(Key::Str(b"u42"), 1).unwrap(), Some(42));
        assert_eq!(s.get(Key::Str(b"u4999")), Some(4999));
        assert_eq!(s.get(Key::Str(b"nope")), None);
        assert!(b.used_bytes() > 0);
        drop((m, s, _g));
        assert_eq!(b.used_bytes(), 0);
    }

    #[test]
    fn identity_runs_are_arithmetic() {
        let b = MemoryBudget::new(1 << 30);
        let mut m = IdMapWithGrant::new(true, &b);
        for k in 0..200_000i64 {
            m.insert(Key::Int(k + 70_000), 5 + k as u32).unwrap();
        }
        m.seal();
        assert_eq!(m.identity, Some((70_000, 5, 200_000)));
        assert_eq!(m.get(Key::Int(70_000)), Some(5));
        assert_eq!(m.get(Key::Int(269_999)), Some(200_004));
        assert_eq!(m.get(Key::Int(270_000)), None);
        assert_eq!(m.get(Key::Int(69_999)), None);
        assert_eq!(m.get(Key::Int(i64::MIN)), None);
        let mut m = IdMapWithGrant::new(true, &b);
        for (i, k) in [1i64, 2, 4, 3].iter().enumerate() {
            m.insert(Key::Int(*k), i as u32).unwrap();
        }
        m.seal();
        assert!(m.identity.is_none());
        assert_eq!(m.get(Key::Int(4)), Some(2));
    }

    #[test]
    fn refuses_past_budget() {
        let b = MemoryBudget::new(64 << 10);
        let mut m = IdMapWithGrant::new(false, &b);
        let mut failed = false;
        for i in 0..100_000u32 {
            if m.insert(Key::Str(format!("key-{i}").as_bytes()), i)
                .is_err()
            {
                failed = true;
                break;
            }
        }
        assert!(failed);
    }
}

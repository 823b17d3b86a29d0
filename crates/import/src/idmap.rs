//! External node id -> internal node id, per id space, in memory under a grant.
//!
//! Integer ids that are dense (the common case: `1..n`, in any order) use a paged direct
//! array of 4 bytes per id; sparse integers use a hash table of 12-byte entries; string ids use
//! [`StrTable`], slots into an arena of the id bytes, so inserting allocates nothing per
//! row. Every growth takes a grant first; a refused grant makes the import sort the space's
//! ids on disk instead (`crate::spill`).
//!
//! A string id space whose ids are all integers in canonical form (`0`, `42`, `-7`; not
//! `007`, `+7`, `7.0` or ` 7`), which is what most files hold in a column their header
//! leaves untyped, is mapped by the integer machinery: a string is parsed on the way in and
//! on every lookup, and the map still means strings (`'7'` finds the node, `'007'` finds
//! nothing). The first id that is not canonical turns the map into a string map, once.

use crate::error::ImportError;
use crate::strtable::StrTable;
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

enum IdMap {
    Int(IntMap),
    Str(StrTable),
}

pub struct IdMapWithGrant {
    map: IdMap,
    /// Set by [`seal`](Self::seal) when integer keys `min..min+n` map to nodes
    /// `first..first+n` in order: lookups are then arithmetic, with no memory access
    /// (the common case of ids exported by a database, e.g. Pokec's).
    identity: Option<(i64, u32, u64)>,
    /// A string space held as integers (every id so far was a canonical integer).
    canon: bool,
    grant: Grant,
    hasher: foldhash::fast::FixedState,
}

/// The node of key `k` in an identity space `(min, first, n)`: keys `min..min + n` are
/// nodes `first..first + n`.
#[inline(always)]
fn in_identity((min, first, n): (i64, u32, u64), k: i64) -> Option<u32> {
    let d = k.wrapping_sub(min) as u64;
    (k >= min && d < n).then(|| first + d as u32)
}

impl IdMapWithGrant {
    pub fn new(integer: bool, budget: &MemoryBudget) -> Self {
        IdMapWithGrant {
            // A string space starts as canonical integers, and changes at its first id
            // that is not one.
            map: IdMap::Int(IntMap::Dense {
                dir_base: 0,
                pages: Vec::new(),
                n_pages: 0,
                n: 0,
            }),
            identity: None,
            canon: !integer,
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
            IdMap::Str(t) => t.heap_bytes(),
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
            Key::Str(s) if self.canon => match canonical_int(s) {
                Some(k) => self.insert_int(k, node),
                None => {
                    self.decanon()?;
                    self.insert_str(s, node)
                }
            },
            Key::Str(s) => self.insert_str(s, node),
        }
    }

    /// A string space held as strings from the start (`strings` true), never as integers.
    pub fn strings_only(mut self, strings: bool) -> Self {
        if strings && self.canon {
            self.map = IdMap::Str(StrTable::new());
            self.canon = false;
        }
        self
    }

    /// Whether a string space is still held as integers.
    pub fn is_canonical(&self) -> bool {
        self.canon
    }

    /// Turns a string space held as integers into a string map (at its first id that is
    /// not a canonical integer). The integer map and the string map coexist while it runs;
    /// if the grant is refused, nothing changes and the error says so (the import then
    /// sorts the space's ids on disk, reading this map as strings).
    fn decanon(&mut self) -> Result<(), ImportError> {
        if !self.canon {
            return Ok(());
        }
        let n = self.len() as usize;
        let mut digits = 0usize;
        self.for_each_int(&mut |k, _| {
            digits += itoa::Buffer::new().format(k).len();
            Ok(())
        })?;
        let mut table = StrTable::new();
        let room = table.room_for(n, digits);
        let old = self.grant.bytes();
        self.ensure(old + table.bytes_growing_to(room))?;
        table.grow_to(room);
        self.for_each_int(&mut |k, node| {
            table.insert(itoa::Buffer::new().format(k).as_bytes(), node);
            Ok(())
        })?;
        self.map = IdMap::Str(table);
        self.canon = false;
        self.identity = None;
        let b = self.heap_bytes();
        self.grant.try_resize(b)?;
        Ok(())
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
        let IdMap::Str(t) = &self.map else {
            return Ok(None);
        };
        if s.len() > u32::MAX as usize {
            return Err(ImportError::Usage(format!(
                "an id of {} bytes: ids are at most 4 GiB",
                s.len()
            )));
        }
        let room = t.room_for(1, s.len());
        if room != t.room_for(0, 0) {
            let peak = t.bytes_growing_to(room);
            self.ensure(peak)?;
            let IdMap::Str(t) = &mut self.map else {
                unreachable!()
            };
            t.grow_to(room);
            let b = t.heap_bytes();
            self.grant.try_resize(b)?;
        }
        let IdMap::Str(t) = &mut self.map else {
            unreachable!()
        };
        Ok(t.insert(s, node))
    }

    /// Every key and its node, in no particular order (a string space held as integers
    /// gives its keys as the strings they are).
    pub fn for_each(
        &self,
        f: &mut dyn FnMut(Key<'_>, u32) -> Result<(), ImportError>,
    ) -> Result<(), ImportError> {
        if self.canon {
            return self.for_each_int(&mut |k, node| {
                f(Key::Str(itoa::Buffer::new().format(k).as_bytes()), node)
            });
        }
        self.for_each_raw(f)
    }

    /// Every integer key and its node (of an integer map, or a string one held as integers).
    fn for_each_int(
        &self,
        f: &mut dyn FnMut(i64, u32) -> Result<(), ImportError>,
    ) -> Result<(), ImportError> {
        self.for_each_raw(&mut |k, node| match k {
            Key::Int(k) => f(k, node),
            Key::Str(_) => Ok(()),
        })
    }

    fn for_each_raw(
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
            IdMap::Str(t) => {
                let mut r = Ok(());
                t.for_each(|_, k, node| {
                    if r.is_ok() {
                        r = f(Key::Str(k), node);
                    }
                });
                r?;
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
    ///
    /// An integer key of an identity space (ids that ran consecutively, the common case
    /// of a generated or exported graph) is answered here, inlined into the relationship
    /// loop; anything else goes to [`get_mapped`](Self::get_mapped). (The canonical-string
    /// check in front of the identity test had made `get` too big to inline: social's
    /// import ran 3% more instructions.)
    #[inline(always)]
    pub fn get(&self, key: Key<'_>) -> Option<u32> {
        if let (Some(id), Key::Int(k)) = (self.identity, key) {
            return in_identity(id, k);
        }
        self.get_mapped(key)
    }

    /// [`get`](Self::get) past the identity fast path: a canonical string as its
    /// integer, then the maps.
    fn get_mapped(&self, key: Key<'_>) -> Option<u32> {
        let key = match key {
            // A string that is not a canonical integer is no key of a space whose keys all are.
            Key::Str(s) if self.canon => Key::Int(canonical_int(s)?),
            k => k,
        };
        if let (Some(id), Key::Int(k)) = (self.identity, key) {
            return in_identity(id, k);
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
            (IdMap::Str(t), Key::Str(s)) => t.get(s),
            _ => None,
        }
    }

    /// Looks up a relationship's two endpoints, `a` in this map and `b` in `other`: string
    /// maps overlap the two look-ups' cache misses (see [`StrTable::get_two`]).
    #[inline]
    pub fn get_two(&self, a: Key<'_>, other: &Self, b: Key<'_>) -> (Option<u32>, Option<u32>) {
        match (&self.map, a, &other.map, b) {
            (IdMap::Str(ta), Key::Str(a), IdMap::Str(tb), Key::Str(b)) => ta.get_two(a, tb, b),
            _ => (self.get(a), other.get(b)),
        }
    }

    pub fn len(&self) -> u64 {
        match &self.map {
            IdMap::Int(IntMap::Dense { n, .. }) => *n,
            IdMap::Int(IntMap::Hash(t)) => t.len() as u64,
            IdMap::Str(t) => t.len() as u64,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// [`sorted`](Self::sorted) for a string space held as integers: the keys as strings,
    /// in byte order, as the string index wants them. Dense non-negative keys are visited
    /// in that order directly, with no sort: the decimal strings of `0..=max` in byte
    /// order are a walk of the digit trie (`0`, `1`, `10`, `100`, ..., `11`, ...). Other
    /// key sets sort by a key that orders as their strings do.
    fn canon_sorted(
        &self,
        budget: &MemoryBudget,
    ) -> Result<(quiver_format::column::ColumnBuilder, Vec<u32>, Grant), ImportError> {
        use quiver_common::types::{DataType, ScalarType};
        use quiver_format::column::ColumnBuilder;
        let n = self.len() as usize;
        let n64 = n as u64;
        let (mut digits, mut min, mut max) = (0u64, i64::MAX, i64::MIN);
        self.for_each_int(&mut |k, _| {
            digits += itoa::Buffer::new().format(k).len() as u64;
            min = min.min(k);
            max = max.max(k);
            Ok(())
        })?;
        // The keys and nodes, and the index writer's buffers of them (as for strings).
        let out = 2 * ((digits + n64 * 8) + n64 * 4);
        let dense = matches!(self.map, IdMap::Int(IntMap::Dense { .. }));
        let walk = n > 0 && dense && min >= 0 && (max as u64) <= 4 * n64 + 1024;
        let mut g = budget.try_grant(out + if walk { 0 } else { n64 * 32 }, "id index")?;
        let mut keys = ColumnBuilder::new(DataType::Scalar(ScalarType::String));
        keys.reserve_exact(n, digits as usize);
        let mut nodes = Vec::with_capacity(n);
        let mut buf = itoa::Buffer::new();
        if walk {
            let mut visit = |k: u64| {
                if let Some(v) = self.get(Key::Int(k as i64)) {
                    keys.push_bytes(buf.format(k).as_bytes());
                    nodes.push(v);
                }
            };
            visit(0);
            let max = max as u64;
            let mut cur = 1u64;
            for _ in 0..max {
                visit(cur);
                if cur * 10 <= max {
                    cur *= 10;
                } else {
                    while cur % 10 == 9 || cur + 1 > max {
                        cur /= 10;
                    }
                    cur += 1;
                }
            }
        } else if n > 0 {
            // (negative first, as '-' sorts before digits; the absolute value's digits
            // padded to 19 places; the digit count, a prefix first; the key; its node)
            let mut order: Vec<(bool, u64, u8, i64, u32)> = Vec::with_capacity(n);
            self.for_each_int(&mut |k, v| {
                let abs = k.unsigned_abs();
                let d = itoa::Buffer::new().format(abs).len() as u32;
                order.push((k >= 0, abs * 10u64.pow(19 - d), d as u8, k, v));
                Ok(())
            })?;
            order.sort_unstable_by_key(|&(pos, padded, d, _, _)| (pos, padded, d));
            for (_, _, _, k, v) in order {
                keys.push_bytes(buf.format(k).as_bytes());
                nodes.push(v);
            }
        }
        g.try_resize(out)?;
        Ok((keys, nodes, g))
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
        if self.canon {
            return self.canon_sorted(budget);
        }
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
            IdMap::Str(t) => {
                // Key bytes (the arena also holds an 8-byte header a key).
                let bytes = (t.arena_len() - 8 * n) as u64;
                let mut g = budget.try_grant(
                    n64 * 16 + (bytes + n64 * 8) + n64 * 4 + (bytes + n64 * 8) + n64 * 4,
                    "id index",
                )?;
                // Sorted by each key's first 8 bytes (big-endian, zero-padded, so they
                // order as the bytes do) with the whole key only to break ties: the sort
                // then rarely leaves this array for the arena (comparing keys in the arena
                // was 8.9 of 20 s importing 5M 40-byte ids, a cache miss per comparison).
                let mut idx: Vec<(u64, usize)> = Vec::with_capacity(n);
                t.for_each(|off, k, _| idx.push((crate::spill::prefix(k), off)));
                idx.sort_unstable_by(|a, b| {
                    a.0.cmp(&b.0).then_with(|| t.at(a.1).0.cmp(t.at(b.1).0))
                });
                let mut keys = ColumnBuilder::new(DataType::Scalar(ScalarType::String));
                keys.reserve_exact(n, bytes as usize);
                let mut nodes = Vec::with_capacity(n);
                for (_, off) in idx {
                    let (k, node) = t.at(off);
                    keys.push_bytes(k);
                    nodes.push(node);
                }
                g.try_resize((bytes + n64 * 8) + n64 * 4 + (bytes + n64 * 8) + n64 * 4)?;
                Ok((keys, nodes, g))
            }
        }
    }
}

/// The integer a string id is in canonical form (`0`, `42`, `-7`; not `-0`, `007`, `+7`,
/// `7.0`, ` 7`, nor past `i64`), or `None`: exactly the strings that are some `i64`'s
/// decimal text, so a string space held as integers means the same as one held as strings.
///
/// Its own loop rather than `quiver_csv::value::parse_i64` plus a spelling check: it runs
/// on every relationship endpoint of such a space (61M on social 1), and the check
/// before `parse_i64` (which also trims and takes a `+`) made reading relationships
/// 1.3-1.7 s -> 1.8-2.1 s.
#[inline]
pub fn canonical_int(s: &[u8]) -> Option<i64> {
    let (neg, d) = match s.first()? {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if d.is_empty() || d.len() > 19 || (d[0] == b'0' && (d.len() > 1 || neg)) {
        return None;
    }
    let mut v = 0u64;
    for &c in d {
        let x = c.wrapping_sub(b'0');
        if x > 9 {
            return None;
        }
        // 19 digits are below 10^19 < 2^64: no overflow.
        v = v * 10 + x as u64;
    }
    if neg {
        (v <= 1 << 63).then(|| (v as i64).wrapping_neg())
    } else {
        i64::try_from(v).ok()
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
    fn canonical_forms() {
        for (s, v) in [
            ("0", Some(0)),
            ("7", Some(7)),
            ("-7", Some(-7)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("-9223372036854775809", None),
            ("10000000000000000000", None),
            ("-0", None),
            ("007", None),
            ("+7", None),
            ("7.0", None),
            (" 7", None),
            ("7 ", None),
            ("", None),
            ("-", None),
            ("1e3", None),
            ("٣", None),
        ] {
            assert_eq!(canonical_int(s.as_bytes()), v, "{s:?}");
            if let Some(v) = v {
                assert_eq!(v.to_string(), s);
            }
        }
    }

    /// Keys as the model sees them: what `sorted` must give, in byte order.
    fn model_sorted(m: &std::collections::HashMap<Vec<u8>, u32>) -> Vec<(Vec<u8>, u32)> {
        let mut v: Vec<_> = m.iter().map(|(k, &n)| (k.clone(), n)).collect();
        v.sort();
        v
    }

    fn check_against_model(keys: &[Vec<u8>], strings: bool) {
        let b = MemoryBudget::new(1 << 30);
        let mut m = IdMapWithGrant::new(false, &b).strings_only(strings);
        let mut model = std::collections::HashMap::new();
        for (i, k) in keys.iter().enumerate() {
            let got = m.insert(Key::Str(k), i as u32).unwrap();
            let want = model.get(k).copied();
            assert_eq!(got, want, "{:?}", String::from_utf8_lossy(k));
            model.entry(k.clone()).or_insert(i as u32);
        }
        m.seal();
        assert_eq!(m.len(), model.len() as u64);
        for k in keys {
            assert_eq!(m.get(Key::Str(k)), model.get(k).copied());
            // Other spellings of the same number are other strings.
            for other in [
                [b"0".as_slice(), k].concat(),
                [b"+".as_slice(), k].concat(),
                [k.as_slice(), b".0"].concat(),
                [b" ".as_slice(), k].concat(),
            ] {
                assert_eq!(m.get(Key::Str(&other)), model.get(&other).copied());
            }
        }
        let (col, nodes, _g) = m.sorted(&b).unwrap();
        let want = model_sorted(&model);
        assert_eq!(nodes.len(), want.len());
        for (j, (k, n)) in want.iter().enumerate() {
            assert_eq!((col.bytes_at(j), nodes[j]), (k.as_slice(), *n));
        }
        let mut seen = Vec::new();
        m.for_each(&mut |k, n| {
            let Key::Str(k) = k else {
                panic!("a string space gives strings")
            };
            seen.push((k.to_vec(), n));
            Ok(())
        })
        .unwrap();
        seen.sort();
        assert_eq!(seen, want);
    }

    proptest::proptest! {
        /// A string space held as integers (until its first non-canonical id) means what
        /// one held as strings does: the same duplicates, lookups, order and keys.
        #[test]
        fn canonical_space_matches_strings(
            picks in proptest::collection::vec((0u8..12, -3000i64..3000, 0u32..60), 1..400),
        ) {
            let keys: Vec<Vec<u8>> = picks
                .iter()
                .map(|&(form, v, big)| match form {
                    // Mostly canonical integers: dense, negative, far apart, extremes.
                    0..=6 => v.to_string(),
                    7 => (v.abs() * 1_000_000_007 + big as i64).to_string(),
                    8 => [i64::MIN, i64::MAX, 0, -1][big as usize % 4].to_string(),
                    // Now and then a spelling that is not canonical.
                    9 => format!("{:03}", v.abs()),
                    10 => format!("+{}", v.abs()),
                    _ => format!("{v}.0"),
                }
                .into_bytes())
                .collect();
            check_against_model(&keys, false);
            check_against_model(&keys, true);
            // Only canonical keys: the map stays integer all along.
            let canon: Vec<Vec<u8>> =
                keys.iter().filter(|k| canonical_int(k).is_some()).cloned().collect();
            check_against_model(&canon, false);
        }
    }

    #[test]
    fn dense_canonical_keys_walk_in_byte_order() {
        let b = MemoryBudget::new(1 << 30);
        let mut m = IdMapWithGrant::new(false, &b);
        let n = 150_000u32;
        for i in (0..n).rev() {
            m.insert(Key::Str(i.to_string().as_bytes()), i).unwrap();
        }
        m.seal();
        assert!(m.is_canonical());
        assert_eq!(m.get(Key::Str(b"149999")), Some(149_999));
        assert_eq!(m.get(Key::Str(b"0149999")), None);
        let (col, nodes, _g) = m.sorted(&b).unwrap();
        assert_eq!(nodes.len(), n as usize);
        for j in 1..nodes.len() {
            assert!(col.bytes_at(j - 1) < col.bytes_at(j));
        }
        assert_eq!(col.bytes_at(0), b"0");
        assert_eq!(col.bytes_at(2), b"10");
        // A late non-canonical id turns the map into strings, keeping every key.
        m.insert(Key::Str(b"x"), n).unwrap();
        assert!(!m.is_canonical());
        assert_eq!(m.get(Key::Str(b"12345")), Some(12_345));
        assert_eq!(m.get(Key::Str(b"x")), Some(n));
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

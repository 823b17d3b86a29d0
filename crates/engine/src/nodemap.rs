//! The persistent map of node records: a copy-on-write B+tree keyed by node id, its
//! records held inline in full leaves.
//!
//! Why not `imbl::OrdMap`, which the delta's other maps use: a large SET writes its
//! records in id order, and a B-tree that splits every full leaf at its median leaves
//! each leaf half full when keys come in ascending order (imbl's does; measured: 40
//! bytes a 16-byte entry). Its records then had to live behind an `Arc` apiece, so that
//! half-empty leaves stayed small: 200 bytes of delta a SET in all. Here a leaf that
//! overflows at its end gives the new key a leaf of its own and stays full, so ascending
//! inserts (scans, id order, created nodes) fill every leaf, as a leaf that overflows at
//! its start does for a run that ends at keys already there; other inserts split at the
//! median as usual. Records sit in the leaves (no allocation of their own), and a SET on
//! an imported node costs its entry, about 80 bytes.
//!
//! Persistence is the same scheme as imbl's: nodes are `Arc`s, a clone of the map is
//! O(1), and a change copies the nodes on its path that another clone shares
//! (`Arc::make_mut`). The map counts the nodes it reaches (a node shared with another
//! clone counts in both, as the memory would if that clone were the only one kept), so
//! [`NodeMap::heap_bytes`] is what a version holds without walking it. A removal (the
//! delta collecting a record no transaction can see any more) drops a leaf or branch
//! that it empties but merges no neighbours: ids are handed out again
//! ([`crate::store::Store`]'s free lists), so the keys come back to the leaves they left.
//!
//! Most lookups miss: an expansion asks the delta about every node it meets, and few of
//! them have a record. So the map keeps a bitmap of the ids it holds (persistent too:
//! 4,096 ids a 512-byte chunk, 64 chunks a group, copied on write as the tree is), and
//! [`NodeMap::get`] tests it before walking the tree: a bit in a chunk that stays in
//! cache, not a tree walk that leaves it (measured in a soak of reads beside writes:
//! the tree walks were 13% of the server's time).

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

/// Entries a leaf holds. 16 keeps a leaf copy (a transaction's first change to it)
/// around 1.3 KB at the delta's record size.
const LEAF: usize = 16;
/// Children a branch holds.
const FANOUT: usize = 32;

enum Node<V> {
    Leaf(Vec<(u64, V)>),
    /// `keys[i]` is the smallest key under `kids[i + 1]`.
    Branch {
        keys: Vec<u64>,
        kids: Vec<Arc<Node<V>>>,
    },
}

impl<V: Clone> Clone for Node<V> {
    /// Copies with the node's full capacity, so that the copy grows without a reallocation.
    fn clone(&self) -> Self {
        match self {
            Node::Leaf(e) => {
                let mut c = Vec::with_capacity(LEAF);
                c.extend(e.iter().cloned());
                Node::Leaf(c)
            }
            Node::Branch { keys, kids } => {
                let mut k = Vec::with_capacity(FANOUT);
                k.extend_from_slice(keys);
                let mut c = Vec::with_capacity(FANOUT + 1);
                c.extend(kids.iter().cloned());
                Node::Branch { keys: k, kids: c }
            }
        }
    }
}

/// Ids a bitmap chunk covers (as `u64` words).
type Chunk = [u64; 64];

/// 64 chunks: 262,144 ids.
#[derive(Clone)]
struct Group([Option<Arc<Chunk>>; 64]);

/// Ids from here on are not in the bitmap (node ids are dense, so this is far past
/// any database's; a map holding one just walks the tree for them).
const BITS_LIMIT: u64 = 1 << 32;

/// A persistent map from node id to `V`.
pub struct NodeMap<V> {
    root: Option<Arc<Node<V>>>,
    len: usize,
    leaves: usize,
    branches: usize,
    /// The ids below [`BITS_LIMIT`] that have an entry, by group.
    bits: Arc<Vec<Option<Arc<Group>>>>,
    groups: usize,
    chunks: usize,
}

impl<V> Clone for NodeMap<V> {
    fn clone(&self) -> Self {
        NodeMap {
            root: self.root.clone(),
            len: self.len,
            leaves: self.leaves,
            branches: self.branches,
            bits: self.bits.clone(),
            groups: self.groups,
            chunks: self.chunks,
        }
    }
}

impl<V> Default for NodeMap<V> {
    fn default() -> Self {
        NodeMap {
            root: None,
            len: 0,
            leaves: 0,
            branches: 0,
            bits: Arc::new(Vec::new()),
            groups: 0,
            chunks: 0,
        }
    }
}

/// What a split hands up: the right node's smallest key and the node.
type Split<V> = Option<(u64, Arc<Node<V>>)>;

fn leaf_with<V>(first: impl IntoIterator<Item = (u64, V)>) -> Vec<(u64, V)> {
    let mut v = Vec::with_capacity(LEAF);
    v.extend(first);
    v
}

/// Bytes glibc's malloc takes for `n` (as [`crate::delta`] counts them).
fn alloc(n: usize) -> u64 {
    crate::value::alloc_bytes(n as u64)
}

impl<V: Clone> NodeMap<V> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes this version's nodes take: each leaf's entries at full capacity, each
    /// branch's keys and children, and every node's `Arc`; the bitmap's groups and
    /// chunks.
    pub fn heap_bytes(&self) -> u64 {
        let node = alloc(16 + std::mem::size_of::<Node<V>>());
        self.leaves as u64 * (node + alloc(LEAF * std::mem::size_of::<(u64, V)>()))
            + self.branches as u64 * (node + alloc(FANOUT * 8) + alloc((FANOUT + 1) * 8))
            + self.groups as u64 * alloc(16 + std::mem::size_of::<Group>())
            + self.chunks as u64 * alloc(16 + std::mem::size_of::<Chunk>())
            + alloc(16 + 24)
            + alloc(self.bits.capacity() * 8)
    }

    /// Whether `k` may have an entry. Below [`BITS_LIMIT`] the answer is exact: a bit is
    /// set by the insert of its key and cleared by its removal.
    #[inline]
    fn may_have(&self, k: u64) -> bool {
        if k >= BITS_LIMIT {
            return true;
        }
        let Some(Some(g)) = self.bits.get((k >> 18) as usize) else {
            return false;
        };
        match &g.0[((k >> 12) & 63) as usize] {
            Some(c) => c[((k >> 6) & 63) as usize] >> (k & 63) & 1 != 0,
            None => false,
        }
    }

    /// Marks `k` in the bitmap (it has no bit yet), copying what other versions share.
    fn mark(&mut self, k: u64) {
        if k >= BITS_LIMIT {
            return;
        }
        let top = Arc::make_mut(&mut self.bits);
        let g = (k >> 18) as usize;
        if top.len() <= g {
            top.resize(g + 1, None);
        }
        let group = top[g].get_or_insert_with(|| {
            self.groups += 1;
            Arc::new(Group(std::array::from_fn(|_| None)))
        });
        let chunk = Arc::make_mut(group).0[((k >> 12) & 63) as usize].get_or_insert_with(|| {
            self.chunks += 1;
            Arc::new([0; 64])
        });
        Arc::make_mut(chunk)[((k >> 6) & 63) as usize] |= 1 << (k & 63);
    }

    /// Clears `k`'s bit (it has one), copying what other versions share; a chunk left
    /// empty is dropped.
    fn unmark(&mut self, k: u64) {
        if k >= BITS_LIMIT {
            return;
        }
        let top = Arc::make_mut(&mut self.bits);
        let Some(Some(group)) = top.get_mut((k >> 18) as usize) else {
            return;
        };
        let slot = &mut Arc::make_mut(group).0[((k >> 12) & 63) as usize];
        let Some(chunk) = slot.as_mut() else {
            return;
        };
        let c = Arc::make_mut(chunk);
        c[((k >> 6) & 63) as usize] &= !(1 << (k & 63));
        if c.iter().all(|&w| w == 0) {
            *slot = None;
            self.chunks -= 1;
        }
    }

    /// Asks the CPU for the bitmap word [`get`](Self::get) tests first for `k` (the
    /// group's table is small and mostly cached; the chunk's word is the miss).
    #[inline]
    pub fn prefetch(&self, k: u64) {
        if k >= BITS_LIMIT {
            return;
        }
        if let Some(Some(g)) = self.bits.get((k >> 18) as usize) {
            if let Some(c) = &g.0[((k >> 12) & 63) as usize] {
                quiver_common::memory::prefetch(&c[((k >> 6) & 63) as usize]);
            }
        }
    }

    #[inline]
    pub fn get(&self, k: &u64) -> Option<&V> {
        if !self.may_have(*k) {
            return None;
        }
        let mut n = self.root.as_deref()?;
        loop {
            match n {
                Node::Leaf(e) => return e.binary_search_by_key(k, |x| x.0).ok().map(|i| &e[i].1),
                Node::Branch { keys, kids } => n = &kids[keys.partition_point(|s| s <= k)],
            }
        }
    }

    pub fn contains_key(&self, k: &u64) -> bool {
        self.get(k).is_some()
    }

    /// Whether `k` has an entry: the bitmap's answer below [`BITS_LIMIT`], the tree's
    /// past it.
    fn present(&self, k: u64) -> bool {
        if k < BITS_LIMIT {
            self.may_have(k)
        } else {
            self.contains_key(&k)
        }
    }

    /// The value at `k` to change, copying the nodes on its path that other versions
    /// share (none when `k` is absent: the bitmap says so without a walk).
    pub fn get_mut(&mut self, k: &u64) -> Option<&mut V> {
        if !self.present(*k) {
            return None;
        }
        let mut n = Arc::make_mut(self.root.as_mut()?);
        loop {
            match n {
                Node::Leaf(e) => {
                    let i = e.binary_search_by_key(k, |x| x.0).ok()?;
                    return Some(&mut e[i].1);
                }
                Node::Branch { keys, kids } => {
                    let i = keys.partition_point(|s| s <= k);
                    n = Arc::make_mut(&mut kids[i]);
                }
            }
        }
    }

    /// Puts `v` at `k`; the value it replaces, if any.
    pub fn insert(&mut self, k: u64, v: V) -> Option<V> {
        if !self.may_have(k) {
            self.mark(k);
        }
        let Some(root) = self.root.as_mut() else {
            self.root = Some(Arc::new(Node::Leaf(leaf_with([(k, v)]))));
            self.len = 1;
            self.leaves = 1;
            return None;
        };
        let (old, split) = Self::insert_in(
            Arc::make_mut(root),
            k,
            v,
            &mut self.leaves,
            &mut self.branches,
        );
        if let Some((sep, right)) = split {
            let left = self.root.take().expect("the root split");
            let mut keys = Vec::with_capacity(FANOUT);
            keys.push(sep);
            let mut kids = Vec::with_capacity(FANOUT + 1);
            kids.extend([left, right]);
            self.root = Some(Arc::new(Node::Branch { keys, kids }));
            self.branches += 1;
        }
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    fn insert_in(
        n: &mut Node<V>,
        k: u64,
        v: V,
        leaves: &mut usize,
        branches: &mut usize,
    ) -> (Option<V>, Split<V>) {
        match n {
            Node::Leaf(e) => match e.binary_search_by_key(&k, |x| x.0) {
                Ok(i) => (Some(std::mem::replace(&mut e[i].1, v)), None),
                Err(i) if e.len() < LEAF => {
                    e.insert(i, (k, v));
                    (None, None)
                }
                Err(i) => {
                    *leaves += 1;
                    // At an edge of the leaf, the new key starts a leaf of its own and
                    // the full one stays whole: a run of ascending (or descending) keys
                    // then fills every leaf, also where it runs into keys already there
                    // (a SET over imported nodes below created ones). Elsewhere: the
                    // median.
                    let right = if i == e.len() {
                        leaf_with([(k, v)])
                    } else if i == 0 {
                        std::mem::replace(e, leaf_with([(k, v)]))
                    } else {
                        let mut r = leaf_with(e.drain(LEAF / 2..));
                        if i < LEAF / 2 {
                            e.insert(i, (k, v));
                        } else {
                            r.insert(i - LEAF / 2, (k, v));
                        }
                        r
                    };
                    (None, Some((right[0].0, Arc::new(Node::Leaf(right)))))
                }
            },
            Node::Branch { keys, kids } => {
                let i = keys.partition_point(|s| *s <= k);
                let (old, split) =
                    Self::insert_in(Arc::make_mut(&mut kids[i]), k, v, leaves, branches);
                let Some((sep, node)) = split else {
                    return (old, None);
                };
                if kids.len() < FANOUT {
                    keys.insert(i, sep);
                    kids.insert(i + 1, node);
                    return (old, None);
                }
                *branches += 1;
                if i + 1 == kids.len() {
                    // As for leaves: a child added at the end starts a branch.
                    let mut rk = Vec::with_capacity(FANOUT + 1);
                    rk.push(node);
                    let right = Node::Branch {
                        keys: Vec::with_capacity(FANOUT),
                        kids: rk,
                    };
                    return (old, Some((sep, Arc::new(right))));
                }
                keys.insert(i, sep);
                kids.insert(i + 1, node);
                // FANOUT + 1 children: the left keeps `mid`, the key between goes up.
                let mid = kids.len() / 2;
                let mut rkeys = Vec::with_capacity(FANOUT);
                rkeys.extend(keys.drain(mid..));
                let up = keys.pop().expect("a branch has keys");
                let mut rkids = Vec::with_capacity(FANOUT + 1);
                rkids.extend(kids.drain(mid..));
                let right = Node::Branch {
                    keys: rkeys,
                    kids: rkids,
                };
                (old, Some((up, Arc::new(right))))
            }
        }
    }

    /// Removes `k`'s entry; the value it held, if any. Copies the nodes on its path that
    /// other versions share; a node left empty leaves its parent, and a root branch with
    /// one child gives way to it.
    pub fn remove(&mut self, k: &u64) -> Option<V> {
        if !self.present(*k) {
            return None;
        }
        let root = self.root.as_mut()?;
        let old = Self::remove_in(
            Arc::make_mut(root),
            *k,
            &mut self.leaves,
            &mut self.branches,
        )?;
        self.unmark(*k);
        self.len -= 1;
        loop {
            match self.root.as_deref() {
                Some(Node::Leaf(e)) if e.is_empty() => {
                    self.root = None;
                    self.leaves -= 1;
                }
                Some(Node::Branch { kids, .. }) if kids.len() == 1 => {
                    self.root = Some(kids[0].clone());
                    self.branches -= 1;
                    continue;
                }
                Some(Node::Branch { kids, .. }) if kids.is_empty() => {
                    self.root = None;
                    self.branches -= 1;
                }
                _ => {}
            }
            break;
        }
        Some(old)
    }

    /// Removes `k` under `n`; a child it leaves empty is taken out of its branch (with
    /// the separator before it, or after it for the first child).
    fn remove_in(n: &mut Node<V>, k: u64, leaves: &mut usize, branches: &mut usize) -> Option<V> {
        match n {
            Node::Leaf(e) => {
                let i = e.binary_search_by_key(&k, |x| x.0).ok()?;
                Some(e.remove(i).1)
            }
            Node::Branch { keys, kids } => {
                let i = keys.partition_point(|s| *s <= k);
                let kid = Arc::make_mut(&mut kids[i]);
                let old = Self::remove_in(kid, k, leaves, branches)?;
                let empty = match kid {
                    Node::Leaf(e) => e.is_empty().then(|| *leaves -= 1).is_some(),
                    Node::Branch { kids, .. } => kids.is_empty().then(|| *branches -= 1).is_some(),
                };
                if empty {
                    kids.remove(i);
                    if !keys.is_empty() {
                        keys.remove(i.saturating_sub(1));
                    }
                }
                Some(old)
            }
        }
    }

    /// Entries with keys in `range`, in key order.
    pub fn range<R: RangeBounds<u64>>(&self, range: R) -> Range<'_, V> {
        let lo = match range.start_bound() {
            Bound::Included(&x) => Some(x),
            Bound::Excluded(&x) => x.checked_add(1),
            Bound::Unbounded => Some(0),
        };
        let hi = match range.end_bound() {
            Bound::Included(&x) => Bound::Included(x),
            Bound::Excluded(&x) => Bound::Excluded(x),
            Bound::Unbounded => Bound::Unbounded,
        };
        let mut stack = Vec::new();
        if let (Some(lo), Some(mut n)) = (lo, self.root.as_deref()) {
            loop {
                match n {
                    Node::Leaf(e) => {
                        stack.push((n, e.partition_point(|x| x.0 < lo)));
                        break;
                    }
                    Node::Branch { keys, kids } => {
                        let i = keys.partition_point(|s| *s <= lo);
                        stack.push((n, i + 1));
                        n = &kids[i];
                    }
                }
            }
        }
        Range { stack, hi }
    }

    pub fn iter(&self) -> Range<'_, V> {
        self.range(..)
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }
}

/// An iterator over a [`NodeMap`]'s entries in key order.
pub struct Range<'a, V> {
    /// The path to the next entry: each node and the index of what it gives next.
    stack: Vec<(&'a Node<V>, usize)>,
    hi: Bound<u64>,
}

impl<'a, V> Iterator for Range<'a, V> {
    type Item = (&'a u64, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let (n, i) = self.stack.last_mut()?;
            match n {
                Node::Leaf(e) => {
                    if let Some((k, v)) = e.get(*i) {
                        *i += 1;
                        let past = match self.hi {
                            Bound::Included(h) => *k > h,
                            Bound::Excluded(h) => *k >= h,
                            Bound::Unbounded => false,
                        };
                        if past {
                            self.stack.clear();
                            return None;
                        }
                        return Some((k, v));
                    }
                    self.stack.pop();
                }
                Node::Branch { kids, .. } => {
                    if let Some(kid) = kids.get(*i) {
                        *i += 1;
                        self.stack.push((kid, 0));
                    } else {
                        self.stack.pop();
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// Leaves and branches reachable from `n`.
    fn nodes(n: &Node<u32>) -> (usize, usize) {
        match n {
            Node::Leaf(_) => (1, 0),
            Node::Branch { kids, .. } => kids.iter().fold((0, 1), |(l, b), k| {
                let (kl, kb) = nodes(k);
                (l + kl, b + kb)
            }),
        }
    }

    fn check(m: &NodeMap<u32>, model: &BTreeMap<u64, u32>) {
        assert_eq!(m.len(), model.len());
        assert_eq!(
            m.root.as_deref().map_or((0, 0), nodes),
            (m.leaves, m.branches)
        );
        let got: Vec<(u64, u32)> = m.iter().map(|(k, v)| (*k, *v)).collect();
        let want: Vec<(u64, u32)> = model.iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(got, want);
        for k in (0..25_000).step_by(7) {
            assert_eq!(m.get(&k), model.get(&k));
        }
    }

    proptest! {
        #[test]
        fn behaves_as_a_btreemap_and_versions_stay_apart(
            ops in proptest::collection::vec((0u8..6, 0u64..3000, any::<u32>()), 1..2000),
            lo in 0u64..3000, span in 0u64..3000,
        ) {
            let mut m = NodeMap::new();
            let mut model = BTreeMap::new();
            let mut saved: Vec<(NodeMap<u32>, BTreeMap<u64, u32>)> = Vec::new();
            for (j, &(kind, k, v)) in ops.iter().enumerate() {
                match kind {
                    0 | 1 => prop_assert_eq!(m.insert(k, v), model.insert(k, v)),
                    2 => {
                        // Runs of ascending keys, as scans write them.
                        let base = k * 7;
                        for x in base..base + 40 {
                            prop_assert_eq!(m.insert(x, v), model.insert(x, v));
                        }
                    }
                    4 => prop_assert_eq!(m.remove(&k), model.remove(&k)),
                    5 => {
                        // Runs of removals, as a queue's consumer makes them.
                        let base = k * 7;
                        for x in base..base + 40 {
                            prop_assert_eq!(m.remove(&x), model.remove(&x));
                        }
                    }
                    _ => {
                        if let Some(x) = m.get_mut(&k) {
                            *x = v;
                        }
                        if let Some(x) = model.get_mut(&k) {
                            *x = v;
                        }
                    }
                }
                prop_assert_eq!(m.get(&k), model.get(&k));
                if j % 97 == 0 {
                    saved.push((m.clone(), model.clone()));
                }
            }
            check(&m, &model);
            let hi = lo + span;
            let got: Vec<u64> = m.range(lo..hi).map(|(k, _)| *k).collect();
            let want: Vec<u64> = model.range(lo..hi).map(|(k, _)| *k).collect();
            prop_assert_eq!(got, want);
            let got: Vec<u64> = m.range(lo..=hi).map(|(k, _)| *k).collect();
            let want: Vec<u64> = model.range(lo..=hi).map(|(k, _)| *k).collect();
            prop_assert_eq!(got, want);
            let got: Vec<u64> = m.range(..lo).map(|(k, _)| *k).collect();
            let want: Vec<u64> = model.range(..lo).map(|(k, _)| *k).collect();
            prop_assert_eq!(got, want);
            // Earlier versions are untouched by later changes.
            for (old, model) in &saved {
                check(old, model);
            }
        }
    }

    #[test]
    fn ascending_inserts_fill_every_leaf() {
        let mut m = NodeMap::new();
        for k in 0..100_000u64 {
            m.insert(k * 4, k as u32);
        }
        // Every leaf but the last is full.
        assert_eq!(m.leaves, 100_000usize.div_ceil(LEAF));
        // And again in a copy changed in place: the same nodes, copied once.
        let mut c = m.clone();
        for k in 0..100_000u64 {
            *c.get_mut(&(k * 4)).unwrap() += 1;
        }
        assert_eq!(c.leaves, m.leaves);
        assert_eq!(m.get(&400), Some(&100));
        assert_eq!(c.get(&400), Some(&101));
        assert_eq!(c.range(3..9).count(), 2);
        // A run of ascending keys below keys already there fills its leaves too.
        let mut m = NodeMap::new();
        for k in 1_000_000..1_000_100u64 {
            m.insert(k, 0);
        }
        let before = m.leaves;
        for k in 0..100_000u64 {
            m.insert(k, 1);
        }
        assert_eq!(m.leaves - before, 100_000usize.div_ceil(LEAF));
        // Ids past the bitmap are found by the tree alone.
        for k in [BITS_LIMIT - 1, BITS_LIMIT, BITS_LIMIT + 5, u64::MAX] {
            assert_eq!(m.insert(k, 7), None);
            assert_eq!(m.get(&k), Some(&7));
        }
        assert_eq!(m.get(&(BITS_LIMIT + 1)), None);
        assert_eq!(m.get(&500_000), None);
        assert_eq!(c.range(u64::MAX..).count(), 0);
    }
}

//! The delta layer: what changed since the segments were written.
//!
//! A [`Delta`] is a persistent (structure-sharing) value: cloning it is O(1), and a
//! change copies only the paths it touches. That is the whole MVCC scheme:
//! - the store's head is an `Arc<Delta>`; a transaction's snapshot is the head it saw at
//!   begin, which nothing ever mutates, so readers never block and never see a
//!   half-applied commit;
//! - a transaction works on its own clone, so it sees its own writes and nobody else
//!   does;
//! - a commit replays the transaction's [`Op`]s onto the head under the commit lock
//!   (the same function replays the write-ahead log at open) and swaps the new head in.
//!
//! Entities:
//! - nodes created since the segments get ids from `base_nodes` up (an aborted
//!   transaction's ids stay unused, collected ones are handed out again; scans walk
//!   the records, so an id without one costs nothing);
//! - a segment node that a transaction changes gets a [`NodeRec`] on its first change:
//!   its labels, and only the properties changed (an overlay: a key absent from it is
//!   read from the segment, `Value::Null` in it is a removal), so a SET costs about a
//!   hundred bytes, not a copy of the node;
//! - relationships likewise, keyed by (type, edge id); created ones are also listed per
//!   endpoint in `out` / `inc` for expansion.
//!
//! Every record carries the commit timestamp of its last change (`ts`, [`UNCOMMITTED`]
//! inside a transaction); a writer whose snapshot is older than an entity's `ts` has lost
//! the race and fails with a retryable conflict.
//!
//! Garbage: a created entity that is deleted leaves a tombstone (its record, `deleted`)
//! and a grave in [`Delta::graves`], in commit order. Once every open transaction's
//! snapshot sees the deletion, no writer can name the entity any more and the tombstone
//! only costs reads, memory and ids: [`Delta::collect`] removes it (a commit does, for a
//! bounded number of graves) and hands its id back to the store, which gives it to a
//! later creation. A reader is never affected: its snapshot is a version of its own. So
//! a queue's created-and-consumed records cost nothing once gone, and its ids stay
//! within what is live at once.

use crate::nodemap::NodeMap;
use crate::segments;
use crate::value::{alloc_bytes, Value};
use imbl::{HashMap as PMap, OrdMap, OrdSet, Vector};
use quiver_storage::{Database, Direction, ReadError};
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use thin_vec::ThinVec;

/// `ts` of a record changed by a transaction that has not committed.
pub const UNCOMMITTED: u64 = u64::MAX;

/// Property maps: keys in first-set order, no nulls.
pub type Props = Vec<(Arc<str>, Value)>;

/// A record's properties: one pair held inline (a SET on an imported entity, the
/// common case, allocates nothing), or a list. Reads see a slice either way.
#[derive(Debug, Clone, PartialEq)]
pub enum RecProps {
    One((Arc<str>, Value)),
    Many(Props),
}

// The pair's `Value` tag gives `Many` its niche: no word of its own.
const _: () = assert!(std::mem::size_of::<RecProps>() == 48);

impl Default for RecProps {
    fn default() -> Self {
        RecProps::Many(Vec::new())
    }
}

impl Deref for RecProps {
    type Target = [(Arc<str>, Value)];
    #[inline]
    fn deref(&self) -> &Self::Target {
        match self {
            RecProps::One(p) => std::slice::from_ref(p),
            RecProps::Many(v) => v,
        }
    }
}

impl DerefMut for RecProps {
    #[inline]
    fn deref_mut(&mut self) -> &mut Self::Target {
        match self {
            RecProps::One(p) => std::slice::from_mut(p),
            RecProps::Many(v) => v,
        }
    }
}

impl<'a> IntoIterator for &'a RecProps {
    type Item = &'a (Arc<str>, Value);
    type IntoIter = std::slice::Iter<'a, (Arc<str>, Value)>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl From<Props> for RecProps {
    fn from(mut v: Props) -> Self {
        match v.len() {
            1 => RecProps::One(v.pop().expect("one pair")),
            _ => RecProps::Many(v),
        }
    }
}

impl RecProps {
    /// Adds a pair, growing a list one entry at a time (most records hold a few).
    fn push(&mut self, pair: (Arc<str>, Value)) {
        match self {
            RecProps::Many(v) if v.is_empty() => *self = RecProps::One(pair),
            RecProps::Many(v) => {
                v.reserve_exact(1);
                v.push(pair);
            }
            RecProps::One(_) => {
                let RecProps::One(first) = std::mem::take(self) else {
                    unreachable!("matched One")
                };
                let mut v = Vec::with_capacity(2);
                v.extend([first, pair]);
                *self = RecProps::Many(v);
            }
        }
    }

    fn remove(&mut self, i: usize) {
        match self {
            RecProps::One(_) => *self = RecProps::default(),
            RecProps::Many(v) => {
                v.remove(i);
            }
        }
    }

    pub fn clear(&mut self) {
        *self = RecProps::default();
    }

    /// Heap bytes beyond the record: the list, and what the values point to.
    fn heap_bytes(&self) -> u64 {
        let list = match self {
            RecProps::One(_) => 0,
            RecProps::Many(v) => {
                alloc_bytes(v.capacity() as u64 * std::mem::size_of::<(Arc<str>, Value)>() as u64)
            }
        };
        list + self
            .iter()
            .map(|(_, v)| crate::value::heap_bytes(v) as u64)
            .sum::<u64>()
    }
}

/// What [`NodeRec::get`] and [`RelRec::get`] answer for a property the record does not
/// decide (a created entity lacks it).
static NULL: Value = Value::Null;

#[derive(Debug, Clone, PartialEq)]
pub struct NodeRec {
    /// The node's labels, unless `seg_labels` (a thin list: a record without labels of
    /// its own pays one word).
    pub labels: ThinVec<Arc<str>>,
    /// The labels are the segment's, unchanged (and `labels` is empty): a property SET
    /// copies no label list. Read them through [`NodeRec::labels_of`].
    pub seg_labels: bool,
    /// A created node's properties (no nulls); a segment node's changed ones, an overlay
    /// over its segment row (`Value::Null`: removed). Read through [`NodeRec::get`].
    pub props: RecProps,
    pub deleted: bool,
    /// Created in the delta (not a segment node).
    pub created: bool,
    pub ts: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RelRec {
    pub src: u64,
    pub dst: u64,
    /// As [`NodeRec::props`]: whole when created, an overlay otherwise.
    pub props: RecProps,
    pub deleted: bool,
    pub created: bool,
    pub ts: u64,
}

impl NodeRec {
    /// The labels of node `id` (whose record this is).
    pub fn labels_of(&self, db: &Database, id: u64) -> Result<Vec<Arc<str>>, ReadError> {
        if self.seg_labels {
            segments::node_labels(db, id)
        } else {
            Ok(self.labels.to_vec())
        }
    }

    /// Property `key` as the record decides it (`Value::Null`: absent), or `None` when
    /// the segment row holds it (an overlay that did not change it).
    #[inline]
    pub fn get(&self, key: &str) -> Option<&Value> {
        overlay_get(&self.props, self.created, key)
    }

    /// Property `key` of node `id` (whose record this is): the record's, else the
    /// segment row's.
    pub fn value_of(&self, db: &Database, id: u64, key: &str) -> Result<Value, ReadError> {
        match self.get(key) {
            Some(v) => Ok(v.clone()),
            None => segments::node_prop(db, id, key),
        }
    }
}

impl RelRec {
    /// As [`NodeRec::get`].
    #[inline]
    pub fn get(&self, key: &str) -> Option<&Value> {
        overlay_get(&self.props, self.created, key)
    }

    /// As [`NodeRec::value_of`], for relationship `eid` of type `ty`.
    pub fn value_of(
        &self,
        db: &Database,
        ty: usize,
        eid: u64,
        key: &str,
    ) -> Result<Value, ReadError> {
        match self.get(key) {
            Some(v) => Ok(v.clone()),
            None => segments::rel_prop(db, ty, eid, key),
        }
    }
}

#[inline]
fn overlay_get<'p>(props: &'p [(Arc<str>, Value)], whole: bool, key: &str) -> Option<&'p Value> {
    match prop_get(props, key) {
        Some(v) => Some(v),
        None if whole => Some(&NULL),
        None => None,
    }
}

/// `seg` (a segment entity's properties, no nulls) with `overlay` applied.
pub fn overlaid(mut seg: Props, overlay: &[(Arc<str>, Value)]) -> Props {
    for (k, v) in overlay {
        match seg.iter().position(|(x, _)| x == k) {
            Some(i) if v.is_null() => {
                seg.remove(i);
            }
            Some(i) => seg[i].1 = v.clone(),
            None if v.is_null() => {}
            None => seg.push((k.clone(), v.clone())),
        }
    }
    seg
}

/// What a transaction wrote, by name (so that the log does not depend on the ids a
/// process gave labels and types), replayable onto any head.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    CreateNode {
        id: u64,
        labels: Vec<Arc<str>>,
        props: Props,
    },
    DeleteNode {
        id: u64,
    },
    /// `Value::Null` removes the property.
    SetNodeProp {
        id: u64,
        key: Arc<str>,
        value: Value,
    },
    AddLabel {
        id: u64,
        label: Arc<str>,
    },
    RemoveLabel {
        id: u64,
        label: Arc<str>,
    },
    CreateRel {
        ty: Arc<str>,
        eid: u64,
        src: u64,
        dst: u64,
        props: Props,
    },
    /// Endpoints are carried so that a segment relationship needs no reverse lookup.
    DeleteRel {
        ty: Arc<str>,
        eid: u64,
        src: u64,
        dst: u64,
    },
    SetRelProp {
        ty: Arc<str>,
        eid: u64,
        src: u64,
        dst: u64,
        key: Arc<str>,
        value: Value,
    },
}

/// An entity a transaction writes (the unit of conflicts and locks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Entity {
    Node(u64),
    Rel(u32, u64),
}

/// A property value as an index key (integral floats equal integers, as in Cypher).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyVal {
    Int(i64),
    Float(u64),
    Str(Arc<str>),
    Bool(bool),
    /// Kind, then seconds (days for dates) and nanoseconds; times and datetimes by
    /// their instant, as `=` compares them.
    Temporal(u8, i64, u32),
}

impl KeyVal {
    pub fn of(v: &Value) -> Option<KeyVal> {
        Some(match v {
            Value::Int(i) => KeyVal::Int(*i),
            Value::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => KeyVal::Int(*f as i64),
            Value::Float(f) if !f.is_nan() => KeyVal::Float(f.to_bits()),
            Value::Str(s) => KeyVal::Str(s.clone()),
            Value::Bool(b) => KeyVal::Bool(*b),
            Value::Date(d) => KeyVal::Temporal(0, *d, 0),
            Value::LocalDateTime(s) => KeyVal::Temporal(1, s.secs, s.nanos),
            Value::DateTime(s, ..) => KeyVal::Temporal(2, s.secs, s.nanos),
            Value::LocalTime(t) => KeyVal::Temporal(3, *t, 0),
            Value::Time(t, o) => KeyVal::Temporal(4, *t - *o as i64 * 1_000_000_000, 0),
            _ => return None,
        })
    }
}

/// Adjacency of created relationships at one node: (type, edge id, other end).
pub type Adj = Arc<Vec<(u32, u64, u64)>>;

#[derive(Clone)]
pub struct Delta {
    /// Nodes in the segments; created nodes have ids from here.
    pub base_nodes: u64,
    /// One past the highest node id in use.
    pub next_node: u64,
    /// Labels and relationship types the manifest has, then new ones in order of first
    /// use (ids are positions).
    pub labels: Vector<Arc<str>>,
    pub types: Vector<Arc<str>>,
    /// Edges in the segments per type (created edges of a type get ids from there).
    pub base_edges: Vector<u64>,
    /// Node records, inline in full leaves ([`NodeMap`]: a SET on an imported node
    /// costs about 80 bytes).
    pub nodes: NodeMap<NodeRec>,
    pub rels: OrdMap<(u32, u64), Arc<RelRec>>,
    /// Created adjacency per node. B-trees, not hash maps: a HAMT node is allocated
    /// whole for its few entries (measured: about 120 bytes an entry against 40).
    /// [`NodeMap`]s, whose bitmap answers a node without created relationships (nearly
    /// every node an expansion meets) with no tree walk: imbl's `OrdMap` walk was 13% of
    /// a shortest path's search beside 2,000 created relationships.
    pub out: NodeMap<Adj>,
    pub inc: NodeMap<Adj>,
    /// Property names indexed in the segments (`:ID` columns, declared indexes): the
    /// delta indexes them too, so that seeks find created and changed nodes.
    pub indexed: Arc<Vec<Arc<str>>>,
    pub index: PMap<(Arc<str>, KeyVal), OrdSet<u64>>,
    pub deleted_nodes: u64,
    pub deleted_rels: u64,
    /// Segment relationships at the segment nodes deleted, which die with them (see
    /// [`View`](crate::view::View)); an edge between two deleted nodes counts twice. They
    /// hold no record, but reads pay for them until a checkpoint marks them, so they
    /// weigh on the automatic checkpoint as records would ([`Delta::weight`]).
    pub dead_rels: u64,
    /// Created entities deleted, with the commit timestamp of their deletion, oldest
    /// first: what [`Delta::collect`] removes once no open snapshot predates it.
    pub graves: Vector<(u64, Entity)>,
    /// Approximate bytes the records hold.
    pub bytes: u64,
    /// Changes since the segments (records written), for SHOW STORAGE INFO and the
    /// automatic checkpoint.
    pub changes: u64,
    /// Live created nodes (past `base_nodes`) per label: a label scan of the created
    /// nodes skips them all when its label has none ([`Delta::created_with_label`]).
    pub created_labeled: Arc<Vec<(Arc<str>, u64)>>,
    /// Node records that change the graph's shape (created, deleted or relabeled),
    /// kept by [`Delta::put_node`] so that [`Delta::keeps_shape`] needs no walk over
    /// every record (it ran once a query: 13 ms a 1-hop seek beside 408,200 SETs).
    reshaped: u64,
    /// Live records below `base_nodes` with labels of their own (`!seg_labels`: segment
    /// nodes relabeled, or created into a checkpoint's holes), kept by
    /// [`Delta::put_node`]: a label scan looks for segment nodes that gained its label
    /// only when there are some ([`Delta::relabels_segment_nodes`]).
    relabeled: u64,
}

/// Why an op could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("node {0} does not exist")]
    NoNode(u64),
    #[error("relationship {1} of type {0} does not exist")]
    NoRel(Arc<str>, u64),
    #[error(transparent)]
    Read(#[from] ReadError),
}

/// What a deletion record of a segment relationship held when `DETACH DELETE` wrote one
/// per relationship: its `Arc`'d record and its map entry (see [`Delta::weight`]).
const DEAD_REL_BYTES: u64 =
    alloc_bytes(16 + std::mem::size_of::<RelRec>() as u64) + MAP_ENTRY_BYTES;

/// Bytes of one entry of the imbl maps (`rels`, `out`, `inc`): the key and the `Arc`
/// in a B-tree leaf of 16 that ascending inserts leave half full, with its branches.
const MAP_ENTRY_BYTES: u64 = 40;

/// What a node record holds beyond its entry in the map's leaves (which
/// [`NodeMap::heap_bytes`] counts): its own label list and its properties.
fn node_bytes(r: &NodeRec) -> u64 {
    let labels = match r.labels.capacity() {
        0 => 0,
        c => alloc_bytes(16 + c as u64 * 16),
    };
    labels + r.props.heap_bytes()
}

/// Where `name` is in `names` (labels or types: a few). Indexed, not iterated: an imbl
/// iterator's set-up outweighs a few compares (it was 2% of a batched creation's
/// instructions).
fn position(names: &Vector<Arc<str>>, name: &str) -> Option<u32> {
    (0..names.len())
        .find(|&i| names.get(i).is_some_and(|l| &**l == name))
        .map(|i| i as u32)
}

/// Bytes of one node's created adjacency in one direction: the `Arc`'d vector and its
/// entries (the map's own bytes are [`NodeMap::heap_bytes`]).
fn adj_bytes(a: &Adj) -> u64 {
    alloc_bytes(16 + 24)
        + alloc_bytes(a.capacity() as u64 * std::mem::size_of::<(u32, u64, u64)>() as u64)
}

fn rel_bytes(r: &RelRec) -> u64 {
    alloc_bytes(16 + std::mem::size_of::<RelRec>() as u64) + r.props.heap_bytes() + MAP_ENTRY_BYTES
}

pub fn prop_get<'p>(props: &'p [(Arc<str>, Value)], key: &str) -> Option<&'p Value> {
    props.iter().find(|(k, _)| &**k == key).map(|(_, v)| v)
}

/// Sets `key` in an overlay (a null stays, as a removal). A SET of one property holds
/// its pair inline ([`RecProps::One`]).
fn overlay_set(props: &mut RecProps, key: &Arc<str>, value: Value) {
    match props.iter().position(|(k, _)| k == key) {
        Some(i) => props[i].1 = value,
        None => props.push((key.clone(), value)),
    }
}

fn prop_set(props: &mut RecProps, key: &Arc<str>, value: Value) {
    match props.iter().position(|(k, _)| k == key) {
        Some(i) if value.is_null() => {
            props.remove(i);
        }
        Some(i) => props[i].1 = value,
        None if value.is_null() => {}
        None => props.push((key.clone(), value)),
    }
}

impl Delta {
    /// Whether the delta leaves the graph's shape as the segments have it: no node
    /// created or deleted, no label changed, no relationship written (only node
    /// properties set). Degrees and label ranges are then the segments' own.
    pub fn keeps_shape(&self) -> bool {
        self.next_node == self.base_nodes
            && self.deleted_nodes == 0
            && self.deleted_rels == 0
            && self.rels.is_empty()
            && self.out.is_empty()
            && self.inc.is_empty()
            && self.reshaped == 0
    }

    /// Live created nodes past `base_nodes` carrying label `l`.
    pub fn created_with_label(&self, l: u32) -> u64 {
        let Some(name) = self.labels.get(l as usize) else {
            return 0;
        };
        self.created_labeled
            .iter()
            .find(|(x, _)| x == name)
            .map_or(0, |(_, n)| *n)
    }

    /// Whether some live segment node has labels other than its row's (added or removed
    /// since the segments): only then can a node outside the tables that carry a label
    /// have it.
    pub fn relabels_segment_nodes(&self) -> bool {
        self.relabeled > 0
    }

    /// What the delta weighs for the automatic checkpoint: the bytes its records hold,
    /// and as much again for each segment relationship that died with a deleted end as a
    /// deletion record of it would hold.
    pub fn weight(&self) -> u64 {
        self.bytes
            .saturating_add(self.dead_rels.saturating_mul(DEAD_REL_BYTES))
    }

    /// An empty delta over `db` (indexing `indexed` property names).
    pub fn new(db: &Database, indexed: Vec<Arc<str>>) -> Delta {
        Delta {
            base_nodes: db.n_nodes(),
            next_node: db.n_nodes(),
            labels: db.labels().iter().map(|l| Arc::from(l.as_str())).collect(),
            types: db
                .rel_types()
                .iter()
                .map(|r| Arc::from(r.meta.name.as_str()))
                .collect(),
            base_edges: db.rel_types().iter().map(|r| r.meta.n_edges).collect(),
            nodes: NodeMap::new(),
            rels: OrdMap::new(),
            out: NodeMap::new(),
            inc: NodeMap::new(),
            indexed: Arc::new(indexed),
            index: PMap::new(),
            deleted_nodes: 0,
            dead_rels: 0,
            deleted_rels: 0,
            graves: Vector::new(),
            bytes: 0,
            changes: 0,
            reshaped: 0,
            relabeled: 0,
            created_labeled: Arc::new(Vec::new()),
        }
    }

    /// Nothing changed since the segments.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty() && self.rels.is_empty() && self.next_node == self.base_nodes
    }

    pub fn label_id(&self, name: &str) -> Option<u32> {
        position(&self.labels, name)
    }

    pub fn type_id(&self, name: &str) -> Option<u32> {
        position(&self.types, name)
    }

    pub fn intern_label(&mut self, name: &Arc<str>) -> u32 {
        match self.label_id(name) {
            Some(i) => i,
            None => {
                self.labels.push_back(name.clone());
                (self.labels.len() - 1) as u32
            }
        }
    }

    pub fn intern_type(&mut self, name: &Arc<str>) -> u32 {
        match self.type_id(name) {
            Some(i) => i,
            None => {
                self.types.push_back(name.clone());
                self.base_edges.push_back(0);
                (self.types.len() - 1) as u32
            }
        }
    }

    /// Gives `e`'s record timestamp `to` when it is `from` (a commit stamping what its
    /// transaction changed).
    pub fn restamp(&mut self, e: Entity, from: u64, to: u64) {
        match e {
            Entity::Node(n) => {
                if let Some(r) = self.nodes.get_mut(&n) {
                    if r.ts == from {
                        r.ts = to;
                    }
                }
            }
            Entity::Rel(t, id) => {
                if let Some(r) = self.rels.get_mut(&(t, id)) {
                    if r.ts == from {
                        Arc::make_mut(r).ts = to;
                    }
                }
            }
        }
    }

    /// Commit timestamp of an entity's last change (0: never changed since the segments).
    pub fn version(&self, e: Entity) -> u64 {
        match e {
            Entity::Node(n) => self.nodes.get(&n).map_or(0, |r| r.ts),
            Entity::Rel(t, e) => self.rels.get(&(t, e)).map_or(0, |r| r.ts),
        }
    }

    /// The versions of the entities last changed after `ts`.
    pub fn versions_after(&self, ts: u64) -> hashbrown::HashMap<Entity, u64> {
        let mut m = hashbrown::HashMap::new();
        for (&n, r) in self.nodes.iter() {
            if r.ts > ts {
                m.insert(Entity::Node(n), r.ts);
            }
        }
        for (&(t, e), r) in self.rels.iter() {
            if r.ts > ts {
                m.insert(Entity::Rel(t, e), r.ts);
            }
        }
        m
    }

    /// Whether node `n` exists (segment nodes unless deleted; created ones with a live
    /// record).
    pub fn node_exists(&self, n: u64) -> bool {
        match self.nodes.get(&n) {
            Some(r) => !r.deleted,
            None => n < self.base_nodes,
        }
    }

    /// Moves node `id`'s entries in the delta's index from its `old` record to `new`;
    /// `entering`: its labels changed, so an unchanged value goes in too (a segment index built before a label was added
    /// misses it). Values a record leaves to the segment are read from it.
    fn index_update(
        &mut self,
        db: &Database,
        id: u64,
        old: Option<&NodeRec>,
        new: Option<&NodeRec>,
        entering: bool,
    ) -> Result<(), ApplyError> {
        if self.indexed.is_empty() {
            return Ok(());
        }
        let value = |r: Option<&NodeRec>, key: &str| -> Result<Option<KeyVal>, ApplyError> {
            Ok(match r {
                None => None,
                Some(r) => KeyVal::of(&r.value_of(db, id, key)?),
            })
        };
        let indexed = self.indexed.clone();
        for key in indexed.iter() {
            // A property neither record changed, on a node whose labels did not change,
            // is the segment index's business.
            let touched = |r: Option<&NodeRec>| {
                r.is_some_and(|r| r.created || prop_get(&r.props, key).is_some())
            };
            if !entering && !touched(old) && !touched(new) && old.is_some() && new.is_some() {
                continue;
            }
            let a = value(old, key)?;
            let b = value(new, key)?;
            if a == b {
                if let (true, Some(b)) = (entering, b) {
                    self.index.entry((key.clone(), b)).or_default().insert(id);
                }
                continue;
            }
            if let Some(a) = a {
                let k = (key.clone(), a);
                if let Some(set) = self.index.get_mut(&k) {
                    set.remove(&id);
                    if set.is_empty() {
                        self.index.remove(&k);
                    }
                }
            }
            if let Some(b) = b {
                self.index.entry((key.clone(), b)).or_default().insert(id);
            }
        }
        Ok(())
    }

    /// Nodes of the delta whose property `key` equals `v` (created or changed nodes; a
    /// segment index still answers for the others).
    pub fn index_lookup(&self, key: &str, v: &Value) -> Vec<u64> {
        match KeyVal::of(v) {
            Some(kv) => self
                .index
                .get(&(Arc::from(key), kv))
                .map(|s| s.iter().copied().collect())
                .unwrap_or_default(),
            None => Vec::new(),
        }
    }

    /// Live node `id`'s property `key` (null when it has none).
    pub fn node_value(&self, db: &Database, id: u64, key: &str) -> Result<Value, ApplyError> {
        Ok(self.node_rec(db, id)?.value_of(db, id, key)?)
    }

    /// Like [`node_value`](Self::node_value) for a relationship.
    pub fn rel_value(
        &self,
        db: &Database,
        name: &Arc<str>,
        eid: u64,
        ends: (u64, u64),
        key: &str,
    ) -> Result<Value, ApplyError> {
        let (ty, r) = self.rel_rec(db, name, eid, ends)?;
        Ok(r.value_of(db, ty as usize, eid, key)?)
    }

    /// The record of node `id`, copied from the segments on first use.
    fn node_rec(&self, db: &Database, id: u64) -> Result<NodeRec, ApplyError> {
        if let Some(r) = self.nodes.get(&id) {
            if r.deleted {
                return Err(ApplyError::NoNode(id));
            }
            return Ok(r.clone());
        }
        if id >= self.base_nodes || db.node_deleted(id) {
            return Err(ApplyError::NoNode(id));
        }
        Ok(NodeRec {
            labels: ThinVec::new(),
            seg_labels: true,
            props: RecProps::default(),
            deleted: false,
            created: false,
            ts: 0,
        })
    }

    fn put_node(
        &mut self,
        db: &Database,
        id: u64,
        old: Option<&NodeRec>,
        rec: NodeRec,
    ) -> Result<(), ApplyError> {
        let old_live = old.filter(|o| !o.deleted);
        let new_live = (!rec.deleted).then_some(&rec);
        // A label change puts every indexed value in (a segment index built before a
        // label was added misses the node; entries are a set, so again is harmless).
        let entering =
            old.is_some_and(|o| o.seg_labels != rec.seg_labels || o.labels != rec.labels);
        self.index_update(db, id, old_live, new_live, entering)?;
        let reshapes = |r: &NodeRec| !r.seg_labels || r.deleted || r.created;
        let below = id < self.base_nodes;
        let relabels = |r: &NodeRec| below && !r.seg_labels && !r.deleted;
        let prev = self.nodes.get(&id);
        let (prev_bytes, prev_reshapes, prev_relabels) = match prev {
            Some(p) => (node_bytes(p), reshapes(p), relabels(p)),
            None => (0, false, false),
        };
        if !below {
            // Live created nodes per label: a scan of a label none carries skips them.
            let before: &[Arc<str>] = match prev {
                Some(p) if !p.deleted => &p.labels,
                _ => &[],
            };
            let after: &[Arc<str>] = if rec.deleted { &[] } else { &rec.labels };
            if before != after {
                let counts = Arc::make_mut(&mut self.created_labeled);
                // (By name in a plain list: a database has a few labels.)
                let mut count = |l: &Arc<str>, up: bool| match counts
                    .iter_mut()
                    .find(|(x, _)| Arc::ptr_eq(x, l) || x == l)
                {
                    Some((_, n)) if up => *n += 1,
                    Some((_, n)) => *n = n.saturating_sub(1),
                    None if up => counts.push((l.clone(), 1)),
                    None => {}
                };
                if before.is_empty() {
                    // A creation (the common case).
                    after.iter().for_each(|l| count(l, true));
                } else {
                    for l in before.iter().filter(|l| !after.contains(l)) {
                        count(l, false);
                    }
                    for l in after.iter().filter(|l| !before.contains(l)) {
                        count(l, true);
                    }
                }
            }
        }
        self.changes += 1;
        self.reshaped = self.reshaped + reshapes(&rec) as u64 - prev_reshapes as u64;
        self.relabeled = self.relabeled + relabels(&rec) as u64 - prev_relabels as u64;
        let map_before = self.nodes.heap_bytes();
        let rec_bytes = node_bytes(&rec);
        self.nodes.insert(id, rec);
        self.bytes = (self.bytes + self.nodes.heap_bytes().saturating_sub(map_before) + rec_bytes)
            .saturating_sub(prev_bytes);
        Ok(())
    }

    /// The type id and live record of relationship `eid` of type `name`, copied from
    /// the segments on first use.
    fn rel_rec(
        &self,
        db: &Database,
        name: &Arc<str>,
        eid: u64,
        (src, dst): (u64, u64),
    ) -> Result<(u32, RelRec), ApplyError> {
        let no = || ApplyError::NoRel(name.clone(), eid);
        let ty = self.type_id(name).ok_or_else(no)?;
        if let Some(r) = self.rels.get(&(ty, eid)) {
            return if r.deleted {
                Err(no())
            } else {
                Ok((ty, (**r).clone()))
            };
        }
        let in_segments = (ty as usize) < db.rel_types().len()
            && self.base_edges.get(ty as usize).is_some_and(|&b| eid < b);
        if !in_segments {
            return Err(no());
        }
        let rec = RelRec {
            src,
            dst,
            props: RecProps::default(),
            deleted: false,
            created: false,
            ts: 0,
        };
        Ok((ty, rec))
    }

    fn put_rel(&mut self, ty: u32, eid: u64, rec: RelRec) {
        let prev = self.rels.get(&(ty, eid)).map_or(0, |p| rel_bytes(p));
        self.bytes = self.bytes + rel_bytes(&rec) - prev.min(self.bytes);
        self.changes += 1;
        self.rels.insert((ty, eid), Arc::new(rec));
    }

    /// Adds `entry` to `node`'s created adjacency; returns the bytes it now holds
    /// beyond what it held.
    fn adj_push(map: &mut NodeMap<Adj>, node: u64, entry: (u32, u64, u64)) -> i64 {
        let map_before = map.heap_bytes() as i64;
        let before = map.get(&node).map_or(0, adj_bytes) as i64;
        let after = match map.get_mut(&node) {
            Some(a) => {
                let v = Arc::make_mut(a);
                if v.len() == v.capacity() {
                    // Double as `push` would, but from one entry (most nodes get a few).
                    v.reserve_exact(v.len().max(1));
                }
                v.push(entry);
                adj_bytes(a)
            }
            None => {
                let mut v = Vec::with_capacity(1);
                v.push(entry);
                let a = Arc::new(v);
                let bytes = adj_bytes(&a);
                map.insert(node, a);
                bytes
            }
        };
        after as i64 - before + (map.heap_bytes() as i64 - map_before)
    }

    /// Takes relationship `eid` out of `node`'s created adjacency; a node left without
    /// any leaves the map. Returns the bytes given back.
    fn adj_remove(map: &mut NodeMap<Adj>, node: u64, ty: u32, eid: u64) -> u64 {
        let Some(a) = map.get_mut(&node) else {
            return 0;
        };
        Arc::make_mut(a).retain(|&(t, e, _)| !(t == ty && e == eid));
        if !a.is_empty() {
            return 0;
        }
        let before = map.heap_bytes() + map.get(&node).map_or(0, adj_bytes);
        map.remove(&node);
        before.saturating_sub(map.heap_bytes())
    }

    /// Gives the graves this transaction dug (stamped [`UNCOMMITTED`], at the back) the
    /// commit's timestamp, as [`Delta::restamp`] does its records.
    pub fn stamp_graves(&mut self, ts: u64) {
        let n = self.graves.len();
        for i in (0..n).rev() {
            match self.graves.get_mut(i) {
                Some(g) if g.0 == UNCOMMITTED => g.0 = ts,
                _ => break,
            }
        }
    }

    /// Removes up to `max` tombstones of created entities deleted at or before
    /// `horizon` (every open snapshot sees those deletions), oldest first, and gives
    /// their bytes back. The ids they held go to `nodes` and `rels` (type, edge id), for
    /// creations to take again. A grave whose record is no longer its tombstone (the log
    /// replayed a creation of the id since) is dropped alone.
    pub fn collect(
        &mut self,
        horizon: u64,
        max: usize,
        nodes: &mut Vec<u64>,
        rels: &mut Vec<(u32, u64)>,
    ) {
        let mut n = 0;
        while n < max {
            match self.graves.front() {
                Some(&(ts, _)) if ts <= horizon && ts != UNCOMMITTED => {}
                _ => break,
            }
            let Some((ts, e)) = self.graves.pop_front() else {
                break;
            };
            n += 1;
            match e {
                Entity::Node(id) => {
                    let Some(r) = self.nodes.get(&id) else {
                        continue;
                    };
                    if !(r.deleted && r.created && r.ts == ts) {
                        continue;
                    }
                    let map_before = self.nodes.heap_bytes();
                    let rec = node_bytes(r);
                    self.nodes.remove(&id);
                    // (Its created adjacency left the maps with its last relationship.)
                    let freed = rec + map_before.saturating_sub(self.nodes.heap_bytes());
                    self.bytes = self.bytes.saturating_sub(freed);
                    self.deleted_nodes = self.deleted_nodes.saturating_sub(1);
                    // (A created, deleted record reshapes.)
                    self.reshaped = self.reshaped.saturating_sub(1);
                    nodes.push(id);
                }
                Entity::Rel(t, eid) => {
                    let Some(r) = self.rels.get(&(t, eid)) else {
                        continue;
                    };
                    if !(r.deleted && r.created && r.ts == ts) {
                        continue;
                    }
                    let freed = rel_bytes(r);
                    self.rels.remove(&(t, eid));
                    self.bytes = self.bytes.saturating_sub(freed);
                    self.deleted_rels = self.deleted_rels.saturating_sub(1);
                    rels.push((t, eid));
                }
            }
        }
    }

    /// Applies one op, stamping what it changes with `ts`.
    pub fn apply(&mut self, db: &Database, op: &Op, ts: u64) -> Result<(), ApplyError> {
        match op {
            Op::CreateNode { id, labels, props } => {
                for l in labels {
                    self.intern_label(l);
                }
                let rec = NodeRec {
                    labels: labels.iter().cloned().collect(),
                    seg_labels: false,
                    props: RecProps::from(props.clone()),
                    deleted: false,
                    created: true,
                    ts,
                };
                self.next_node = self.next_node.max(id + 1);
                self.put_node(db, *id, None, rec)?;
            }
            Op::DeleteNode { id } => {
                let old = self.node_rec(db, *id)?;
                if *id < self.base_nodes && !old.created {
                    for t in 0..db.rel_types().len() {
                        for dir in [Direction::Out, Direction::In] {
                            self.dead_rels += db.degree(t, *id as u32, dir)?;
                        }
                    }
                }
                let mut rec = old.clone();
                rec.deleted = true;
                rec.ts = ts;
                rec.props.clear();
                self.deleted_nodes += 1;
                if old.created && *id >= self.base_nodes {
                    self.graves.push_back((ts, Entity::Node(*id)));
                }
                self.put_node(db, *id, Some(&old), rec)?;
            }
            Op::SetNodeProp { id, key, value } => {
                let old = self.node_rec(db, *id)?;
                let mut rec = old.clone();
                if rec.created {
                    prop_set(&mut rec.props, key, value.clone());
                } else {
                    overlay_set(&mut rec.props, key, value.clone());
                }
                rec.ts = ts;
                self.put_node(db, *id, Some(&old), rec)?;
            }
            Op::AddLabel { id, label } | Op::RemoveLabel { id, label } => {
                let old = self.node_rec(db, *id)?;
                let mut rec = old.clone();
                if rec.seg_labels {
                    rec.labels = segments::node_labels(db, *id)?.into();
                    rec.seg_labels = false;
                }
                rec.labels.retain(|l| l != label);
                if matches!(op, Op::AddLabel { .. }) {
                    self.intern_label(label);
                    rec.labels.push(label.clone());
                }
                rec.ts = ts;
                self.put_node(db, *id, Some(&old), rec)?;
            }
            Op::CreateRel {
                ty,
                eid,
                src,
                dst,
                props,
            } => {
                let t = self.intern_type(ty);
                let rec = RelRec {
                    src: *src,
                    dst: *dst,
                    props: RecProps::from(props.clone()),
                    deleted: false,
                    created: true,
                    ts,
                };
                self.put_rel(t, *eid, rec);
                let grew = Self::adj_push(&mut self.out, *src, (t, *eid, *dst))
                    + Self::adj_push(&mut self.inc, *dst, (t, *eid, *src));
                self.bytes = (self.bytes as i64 + grew).max(0) as u64;
            }
            Op::DeleteRel { ty, eid, src, dst } => {
                let (t, old) = self.rel_rec(db, ty, *eid, (*src, *dst))?;
                if old.created {
                    let freed = Self::adj_remove(&mut self.out, old.src, t, *eid)
                        + Self::adj_remove(&mut self.inc, old.dst, t, *eid);
                    self.bytes = self.bytes.saturating_sub(freed);
                }
                let mut rec = old.clone();
                rec.deleted = true;
                rec.props.clear();
                rec.ts = ts;
                self.deleted_rels += 1;
                if old.created && self.base_edges.get(t as usize).is_some_and(|&b| *eid >= b) {
                    self.graves.push_back((ts, Entity::Rel(t, *eid)));
                }
                self.put_rel(t, *eid, rec);
            }
            Op::SetRelProp {
                ty,
                eid,
                src,
                dst,
                key,
                value,
            } => {
                let (t, mut rec) = self.rel_rec(db, ty, *eid, (*src, *dst))?;
                if rec.created {
                    prop_set(&mut rec.props, key, value.clone());
                } else {
                    overlay_set(&mut rec.props, key, value.clone());
                }
                rec.ts = ts;
                self.put_rel(t, *eid, rec);
            }
        }
        Ok(())
    }

    /// The live record of node `id`, if the delta holds one (`Some(None)`: deleted or a
    /// hole among created ids; `None`: read the segments).
    #[inline]
    pub fn node(&self, id: u64) -> Option<Option<&NodeRec>> {
        if id >= self.base_nodes {
            return Some(self.nodes.get(&id).filter(|r| !r.deleted));
        }
        self.nodes.get(&id).map(|r| (!r.deleted).then_some(r))
    }

    /// Like [`node`](Self::node) for relationships.
    #[inline]
    pub fn rel(&self, ty: u32, eid: u64) -> Option<Option<&RelRec>> {
        match self.rels.get(&(ty, eid)) {
            Some(r) => Some((!r.deleted).then_some(&**r)),
            // Past the segments' ids: a created relationship collected, or an id no
            // commit used.
            None if self.base_edges.get(ty as usize).is_none_or(|&b| eid >= b) => Some(None),
            None => None,
        }
    }

    /// Like [`rel`](Self::rel) for the relationship from `src` to `dst`: also
    /// `Some(None)` for a segment relationship with a deleted end (deleted with it; see
    /// [`View`](crate::view::View)).
    #[inline]
    pub fn rel_at(&self, ty: u32, eid: u64, src: u64, dst: u64) -> Option<Option<&RelRec>> {
        let r = self.rel(ty, eid);
        let seg = self.base_edges.get(ty as usize).is_some_and(|&b| eid < b)
            && !matches!(r, Some(Some(r)) if r.created);
        if seg
            && self.deleted_nodes > 0
            && (self.node(src) == Some(None) || self.node(dst) == Some(None))
        {
            return Some(None);
        }
        r
    }

    /// Created relationships at `node`: outgoing (`out`) or incoming.
    /// Asks the CPU for what [`adjacency`](Self::adjacency) reads first for `node`.
    #[inline]
    pub fn prefetch_adjacency(&self, node: u64, out: bool) {
        if out {
            self.out.prefetch(node)
        } else {
            self.inc.prefetch(node)
        }
    }

    pub fn adjacency(&self, node: u64, out: bool) -> Option<&Adj> {
        if out {
            self.out.get(&node)
        } else {
            self.inc.get(&node)
        }
    }
}

//! The manifest: what a generation holds. JSON, so that it can be read by people and
//! tools; its checksum sits in `CURRENT` beside its name.

use quiver_common::types::DataType;
use quiver_format::segment::BlobRef;
use serde::{Deserialize, Serialize};

/// Version of the manifest layout (bumped with `quiver_format::FORMAT_VERSION`).
pub const MANIFEST_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub format_version: u32,
    pub generation: u64,
    /// `quiver <version>` that wrote it.
    pub written_by: String,
    pub n_nodes: u64,
    /// Label names; label ids are indexes into this list.
    pub labels: Vec<String>,
    pub id_spaces: Vec<IdSpaceMeta>,
    pub node_tables: Vec<NodeTableMeta>,
    pub rel_types: Vec<RelTypeMeta>,
    /// Declared property indexes (`CREATE INDEX ON :Label(prop)`).
    #[serde(default)]
    pub indexes: Vec<IndexMeta>,
    /// Changes to entities of earlier segments that a checkpoint carried over as ops
    /// (the log's encoding), replayed at every open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_ops: Option<SegmentMeta>,
    /// The first write-ahead log file (`wal-<n>.log`) this generation replays, then
    /// every later one: a checkpoint that let commits go on while it wrote names the
    /// file they went to. `None` (older databases, fresh imports): the generation's
    /// number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<u64>,
    /// Uniqueness constraints by name. One on a single property is kept by its index
    /// (`IndexMeta::unique`; one declared before names were kept has none here and is
    /// shown under a name made from its label and property); one on several properties
    /// (`REQUIRE (n.a, n.b) IS UNIQUE`) is kept with the index on its first property.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<ConstraintMeta>,
    /// Vector indexes (`CREATE VECTOR INDEX`): what is indexed, how it is compared, and
    /// the HNSW graph file over the nodes below `covers_nodes`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vector_indexes: Vec<VectorIndexMeta>,
    /// Full-text indexes (`CREATE FULLTEXT INDEX`): what they cover. A search scans the
    /// text where it is stored (no inverted index yet).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fulltext_indexes: Vec<FulltextIndexMeta>,
}

/// A full-text index over string properties `properties` of nodes with any of `labels`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FulltextIndexMeta {
    pub name: String,
    pub labels: Vec<String>,
    pub properties: Vec<String>,
    /// Neo4j's `fulltext.analyzer` (`standard-no-stop-words` by default; also
    /// `standard`/`english`, which drop English stop words).
    pub analyzer: String,
}

/// A vector index over property `property` of the nodes with `label`: vectors of
/// `dimensions` numbers compared by `similarity` (`cosine` or `euclidean`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct VectorIndexMeta {
    pub name: String,
    pub label: String,
    pub property: String,
    pub dimensions: u32,
    pub similarity: String,
    /// The HNSW graph (`quiver_vector`) of the vectors the segments held when it was
    /// built; none before the first build (a search is then exact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<SegmentMeta>,
    /// The graph holds the nodes below this id as they were when it was built; 0 after
    /// a checkpoint rewrote the property's column or the label's nodes (the graph is
    /// then rebuilt, and searched by no one until it is).
    #[serde(default)]
    pub covers_nodes: u64,
    /// Vectors in the graph.
    #[serde(default)]
    pub entries: u64,
    /// An index of relationships of type `label` (searched exactly: no graph yet).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub relationship: bool,
}

/// A named uniqueness constraint: no two nodes with `label` share the values of all of
/// `properties` (nodes missing one are not held to it).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ConstraintMeta {
    pub name: String,
    pub label: String,
    pub properties: Vec<String>,
}

impl Manifest {
    /// The manifest of a database with nothing in it yet.
    pub fn empty(generation: u64, written_by: String) -> Manifest {
        Manifest {
            format_version: quiver_format::FORMAT_VERSION,
            generation,
            written_by,
            n_nodes: 0,
            labels: Vec::new(),
            id_spaces: Vec::new(),
            node_tables: Vec::new(),
            rel_types: Vec::new(),
            indexes: Vec::new(),
            base_ops: None,
            log: None,
            constraints: Vec::new(),
            vector_indexes: Vec::new(),
            fulltext_indexes: Vec::new(),
        }
    }

    /// Names the log file this generation replays explicitly, before the manifest
    /// becomes the next generation's (whose number would name another file).
    pub fn pin_log(&mut self) {
        self.log = Some(self.log_start());
        // A reader that does not know the field would replay the wrong file.
        self.format_version = self.format_version.max(3);
    }

    /// The number of the first log file this generation replays.
    pub fn log_start(&self) -> u64 {
        self.log.unwrap_or(self.generation)
    }

    /// Every file the manifest references (relative to the database directory).
    /// Adds `r`'s segments to the relationship type of its name (or `r` as a new type):
    /// an append's. Refused (with the message) when the type has other property columns.
    pub fn add_rel_segments(&mut self, r: RelTypeMeta) -> Result<(), String> {
        let Some(x) = self.rel_types.iter_mut().find(|x| x.name == r.name) else {
            self.rel_types.push(r);
            return Ok(());
        };
        if x.columns != r.columns {
            let names = |c: &[PropertyMeta]| {
                c.iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return Err(format!(
                "relationship type {} has the properties ({}) in the database, and ({}) in the appended files; one type has one property schema",
                r.name,
                names(&x.columns),
                names(&r.columns)
            ));
        }
        x.n_edges += r.n_edges;
        x.segments.extend(r.segments);
        if x.start_space != r.start_space {
            x.start_space = None;
        }
        if x.end_space != r.end_space {
            x.end_space = None;
        }
        Ok(())
    }

    pub fn files(&self) -> Vec<&str> {
        let mut v: Vec<&str> = Vec::new();
        for t in &self.node_tables {
            v.extend(t.segments.iter().map(|s| s.file.as_str()));
            v.extend(t.patches.iter().map(|s| s.file.as_str()));
            v.extend(t.deleted.iter().map(|d| d.file.file.as_str()));
        }
        for r in &self.rel_types {
            for s in &r.segments {
                v.extend(s.files().map(|f| f.file.as_str()));
            }
            v.extend(r.patches.iter().map(|s| s.file.as_str()));
        }
        v.extend(self.id_spaces.iter().map(|s| s.index.file.as_str()));
        v.extend(self.indexes.iter().map(|i| i.segment.file.as_str()));
        v.extend(
            self.vector_indexes
                .iter()
                .filter_map(|i| i.file.as_ref().map(|f| f.file.as_str())),
        );
        v.extend(self.base_ops.iter().map(|s| s.file.as_str()));
        v
    }
}

/// A declared index: sorted (value, node) pairs of one property of one label.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct IndexMeta {
    pub label: String,
    pub property: String,
    pub n_entries: u64,
    pub segment: SegmentMeta,
    /// The index holds the nodes below this id (nodes a later checkpoint wrote are not
    /// in it until it is rebuilt). Older manifests did not record it: all nodes.
    #[serde(default = "all_nodes")]
    pub covers_nodes: u64,
    /// A uniqueness constraint: no two nodes with the label share a value.
    #[serde(default)]
    pub unique: bool,
}

fn all_nodes() -> u64 {
    u64::MAX
}

/// How a property index orders its keys.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum IndexKeyKind {
    /// Integers, dates and times (as their integer encoding).
    Integer,
    Float,
    String,
}

/// Footer of a property index segment.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PropIndexFooter {
    pub kind: IndexKeyKind,
    pub n_entries: u64,
    /// Sorted keys (a column chunk of i64, f64 or strings).
    pub keys: BlobRef,
    /// Node of each key, bit-packed.
    pub nodes: BlobRef,
    pub nodes_width: u32,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum IdType {
    String,
    Integer,
}

impl IdType {
    /// As `--id-type` spells it.
    pub fn name(self) -> &'static str {
        match self {
            IdType::String => "string",
            IdType::Integer => "integer",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct IdSpaceMeta {
    /// `ID(User)` -> `Some("User")`; plain `:ID` -> `None`.
    pub name: Option<String>,
    pub id_type: IdType,
    pub n_ids: u64,
    /// Index file: sorted external ids -> internal node ids.
    pub index: SegmentMeta,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PropertyMeta {
    pub name: String,
    pub dtype: DataType,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SegmentMeta {
    /// File name relative to the database directory (`g000001/nodes-0000.seg`).
    pub file: String,
    pub bytes: u64,
}

/// A group of nodes imported together: they share a property schema. Internal node ids
/// `first_node .. first_node + n_rows` belong to it, in row order.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NodeTableMeta {
    pub name: String,
    pub first_node: u64,
    pub n_rows: u64,
    /// Labels every node of the table has (ids into `Manifest::labels`).
    pub labels: Vec<u32>,
    /// Index into `columns` of the per-row extra labels (`:LABEL`), stored as `string[]`.
    pub label_column: Option<usize>,
    /// Index into `columns` of the external id, and its id space.
    pub id_column: Option<usize>,
    pub id_space: Option<usize>,
    pub columns: Vec<PropertyMeta>,
    /// Segment files holding consecutive rows, in order. An import writes one; later
    /// imports, writes and checkpoints add more.
    pub segments: Vec<SegmentMeta>,
    /// Patch files ([`PatchFooter`]), oldest first: column chunks a checkpoint rewrote
    /// (changed values folded in) or added (a property the segments lack). A later
    /// patch's chunk replaces an earlier one's, and any patch's the segment's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patches: Vec<SegmentMeta>,
    /// Rows deleted since the table was written: a bitmap over its rows
    /// ([`BitmapFooter`], one map). Scans, seeks and counts skip them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted: Option<DeletedMeta>,
}

/// A file of deletion bitmaps and how many bits are set.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DeletedMeta {
    pub count: u64,
    pub file: SegmentMeta,
}

/// Footer of a deletion file: `maps` bitmaps of `len` bits each (little-endian `u64`
/// words; bit `i` set: entry `i` is deleted).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BitmapFooter {
    pub len: u64,
    pub maps: Vec<BlobRef>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RelTypeMeta {
    pub name: String,
    pub n_edges: u64,
    /// Relationship properties, one row per edge id (input order).
    pub columns: Vec<PropertyMeta>,
    /// Segments in edge-id order; each holds its own CSR both ways.
    pub segments: Vec<RelSegmentMeta>,
    /// Id spaces of the endpoints as given in the header, for export.
    pub start_space: Option<usize>,
    pub end_space: Option<usize>,
    /// Patch files of the property table (as for [`NodeTableMeta::patches`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patches: Vec<SegmentMeta>,
}

/// One segment of a relationship type: its edges are edge ids
/// `sum(previous n_edges) ..` of the type.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RelSegmentMeta {
    pub n_edges: u64,
    /// CSR by source (out) and by target (in).
    pub out: SegmentMeta,
    pub r#in: SegmentMeta,
    /// The properties of these edges, one row per edge, in edge-id order.
    pub props: Option<SegmentMeta>,
    /// Edges deleted since the segment was written: two bitmaps ([`BitmapFooter`]) over
    /// the entry positions of the out CSR and of the in CSR; expansions skip them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted: Option<DeletedMeta>,
    /// A segment written in parts (a Spark build: one task a part): the out CSR's
    /// further parts after `out`, each over the node range after the previous one's
    /// ([`CsrFooter::first_node`]); entry positions run on across parts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub out_parts: Vec<SegmentMeta>,
    /// The in CSR's further parts after `in`, likewise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub in_parts: Vec<SegmentMeta>,
    /// The property rows' further files after `props`, in edge-id order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub props_parts: Vec<SegmentMeta>,
}

impl RelSegmentMeta {
    /// A segment of one part each way.
    pub fn new(
        n_edges: u64,
        out: SegmentMeta,
        r#in: SegmentMeta,
        props: Option<SegmentMeta>,
        deleted: Option<DeletedMeta>,
    ) -> RelSegmentMeta {
        RelSegmentMeta {
            n_edges,
            out,
            r#in,
            props,
            deleted,
            out_parts: Vec::new(),
            in_parts: Vec::new(),
            props_parts: Vec::new(),
        }
    }

    /// Every file of the segment (CSR parts both ways, property files, deletions).
    pub fn files(&self) -> impl Iterator<Item = &SegmentMeta> {
        [&self.out, &self.r#in]
            .into_iter()
            .chain(&self.out_parts)
            .chain(&self.in_parts)
            .chain(&self.props)
            .chain(&self.props_parts)
            .chain(self.deleted.iter().map(|d| &d.file))
    }

    /// Every file of the segment, to move or rename.
    pub fn files_mut(&mut self) -> impl Iterator<Item = &mut SegmentMeta> {
        [&mut self.out, &mut self.r#in]
            .into_iter()
            .chain(&mut self.out_parts)
            .chain(&mut self.in_parts)
            .chain(&mut self.props)
            .chain(&mut self.props_parts)
            .chain(self.deleted.iter_mut().map(|d| &mut d.file))
    }

    /// Whether the segment is written in several parts.
    pub fn is_parted(&self) -> bool {
        !self.out_parts.is_empty() || !self.in_parts.is_empty() || !self.props_parts.is_empty()
    }
}

/// Footer of a node table or relationship property segment.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TableFooter {
    pub n_rows: u64,
    pub columns: Vec<PropertyMeta>,
    pub row_groups: Vec<RowGroupMeta>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RowGroupMeta {
    pub first_row: u64,
    pub n_rows: u64,
    /// One chunk per column.
    pub chunks: Vec<BlobRef>,
}

/// Footer of a patch file: column chunks that stand in for chunks of a table's row
/// groups (copy-on-write per chunk, so a checkpoint rewrites only what changed).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PatchFooter {
    /// The table's columns as of this patch: the segments' columns, then any the
    /// patches added (each added column has a chunk for every row group).
    pub columns: Vec<PropertyMeta>,
    pub chunks: Vec<PatchChunk>,
}

/// One chunk of a patch file.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct PatchChunk {
    /// Row group, counted across the table's segments.
    pub row_group: u64,
    pub column: u32,
    pub n_rows: u64,
    pub blob: BlobRef,
}

/// Footer of a CSR segment.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CsrFooter {
    /// The first node of the part (0 unless the CSR is written in parts): its offsets
    /// are those of nodes `first_node .. first_node + n_nodes`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub first_node: u64,
    pub n_nodes: u64,
    pub n_edges: u64,
    /// `n_nodes + 1` offsets into the targets, bit-packed.
    pub offsets: BlobRef,
    pub offsets_width: u32,
    /// Neighbour node ids, sorted within each node, bit-packed.
    pub targets: BlobRef,
    pub targets_width: u32,
    /// Edge id of each entry (absent when the edge id is the entry's position).
    pub edge_ids: Option<BlobRef>,
    pub edge_ids_width: u32,
}

/// Footer of an id index segment.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct IdIndexFooter {
    pub id_type: IdType,
    pub n_ids: u64,
    /// Integer ids that are exactly `min .. min + n_ids` with node id `first_node + k`
    /// for key `min + k` need no arrays.
    pub dense: Option<(i64, u64)>,
    /// Integer ids that are exactly `min .. min + n_ids` in another order than their
    /// nodes (rows not sorted by id) need no key array: `nodes[k - min]` is key `k`'s
    /// node. Absent in indexes written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dense_keys: Option<i64>,
    /// Sorted keys: an `i64` column chunk or a string column chunk.
    pub keys: BlobRef,
    /// Node id of each key, bit-packed.
    pub nodes: BlobRef,
    pub nodes_width: u32,
}

fn is_zero(x: &u64) -> bool {
    *x == 0
}

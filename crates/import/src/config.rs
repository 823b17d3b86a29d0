//! What an import is given and what it reports: the input groups, the configuration
//! every front end fills (through [`crate::decide::settle`] for how files are read), and
//! the summary with its per-phase figures.

use super::*;

/// Files imported together: `--nodes User=a.csv,b.csv` or `--relationships FOLLOWS=f.csv`.
#[derive(Clone)]
pub struct InputGroup {
    /// Labels (`User` or `User:Person`) for nodes, the type for relationships.
    pub spec: Option<String>,
    /// The CSV files, or the names a [`RecordSource`] is known by in messages.
    pub files: Vec<PathBuf>,
    /// Input that is read as CSV but is not a CSV file (Parquet files, an Arrow stream:
    /// `quiver-arrow`); `files` then only names it.
    pub source: Option<Arc<dyn RecordSource>>,
}

impl std::fmt::Debug for InputGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InputGroup")
            .field("spec", &self.spec)
            .field("files", &self.files)
            .field("source", &self.source.is_some())
            .finish()
    }
}

impl InputGroup {
    /// Parses `Label=file1,file2` or `file1,file2`.
    pub fn parse(text: &str) -> Result<InputGroup, String> {
        let (spec, files) = match text.split_once('=') {
            Some((s, f)) => (Some(s.trim().to_string()).filter(|s| !s.is_empty()), f),
            None => (None, text),
        };
        let files: Vec<PathBuf> = files
            .split(',')
            .filter(|f| !f.is_empty())
            .map(PathBuf::from)
            .collect();
        if files.is_empty() {
            return Err(format!(
                "'{text}' names no files; write e.g. User=users.csv"
            ));
        }
        Ok(InputGroup {
            spec,
            files,
            source: None,
        })
    }
}

#[derive(Debug, Clone)]
pub struct ImportConfig {
    pub db: PathBuf,
    pub nodes: Vec<InputGroup>,
    pub relationships: Vec<InputGroup>,
    pub dialect: Dialect,
    pub id_type: IdType,
    pub memory_budget_bytes: u64,
    pub threads: usize,
    /// Where spill files go (default: beside the database, on the same disk).
    pub temp_dir: Option<PathBuf>,
    pub skip_bad_rows: bool,
    /// Most rows that may be skipped before the import stops (`None`: unlimited).
    pub bad_tolerance: Option<u64>,
    pub rejects: Option<PathBuf>,
    pub overwrite: bool,
    pub no_edge_properties: bool,
    pub infer_types: bool,
    /// Field values read as "no value" in property columns, besides the empty field
    /// (real exports write `NA`, `\N` or `NULL`).
    pub null_markers: Vec<Vec<u8>>,
    /// Sort every id space on disk from the start, as when the ids do not fit the
    /// budget (`--spill-ids`; tests use it to compare both paths on the same input).
    pub spill_ids: bool,
    /// Hold string ids as strings from the start, even while they are all canonical
    /// integers (which the id map otherwise resolves as integers; tests use it to compare
    /// both representations on the same input).
    pub string_ids_as_strings: bool,
    /// Columns of plain headers named by the user: `(label, column)` for node ids,
    /// `(type, column)` for relationship endpoints (`--id-column`, `--start-column`,
    /// `--end-column`).
    pub id_columns: Vec<(String, String)>,
    pub start_columns: Vec<(String, String)>,
    pub end_columns: Vec<(String, String)>,
    /// Set (e.g. by a Ctrl-C handler) to stop the import: it ends with
    /// `ImportError::Interrupted` within a window's time and removes what it staged.
    pub cancel: Arc<AtomicBool>,
    /// An append into a live database: where its new nodes' ids start, asked once the
    /// nodes are read (with their count), so that the range is taken from the ids the
    /// database hands out meanwhile. `None`: right after the database's nodes.
    pub node_ids: Option<NodeIds>,
}

/// See [`ImportConfig::node_ids`]: the first id of `n` new nodes, or why none can be had.
#[derive(Clone)]
pub struct NodeIds(pub Arc<dyn Fn(u64) -> Result<u64, String> + Send + Sync>);

impl std::fmt::Debug for NodeIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeIds")
    }
}

impl ImportConfig {
    /// The node groups, then the relationship groups, each with its header kind.
    pub(crate) fn groups(&self) -> impl Iterator<Item = (&InputGroup, HeaderKind)> {
        let nodes = self.nodes.iter().map(|g| (g, HeaderKind::Nodes));
        nodes.chain(
            self.relationships
                .iter()
                .map(|g| (g, HeaderKind::Relationships)),
        )
    }

    pub fn new(db: impl Into<PathBuf>) -> Self {
        ImportConfig {
            db: db.into(),
            nodes: Vec::new(),
            relationships: Vec::new(),
            dialect: Dialect::default(),
            id_type: IdType::String,
            memory_budget_bytes: default_budget_bytes(),
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            temp_dir: None,
            skip_bad_rows: false,
            bad_tolerance: None,
            rejects: None,
            overwrite: false,
            no_edge_properties: false,
            infer_types: false,
            null_markers: Vec::new(),
            spill_ids: false,
            string_ids_as_strings: false,
            id_columns: Vec::new(),
            start_columns: Vec::new(),
            end_columns: Vec::new(),
            cancel: Arc::new(AtomicBool::new(false)),
            node_ids: None,
        }
    }
}

/// Half of physical memory (see `limits::IMPORT_BUDGET_RAM_FRACTION`).
pub fn default_budget_bytes() -> u64 {
    let (n, d) = quiver_common::limits::IMPORT_BUDGET_RAM_FRACTION;
    quiver_common::size::physical_memory_bytes() / d * n
}

/// What an import did.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct ImportSummary {
    pub db: PathBuf,
    /// Files whose header had no annotation (a newcomer's file): the header they were
    /// read with, in Neo4j's convention (pasted as the file's first line, it pins it).
    pub inferred_headers: Vec<(PathBuf, String)>,
    pub nodes_by_label: Vec<(String, u64)>,
    pub rels_by_type: Vec<(String, u64)>,
    pub n_nodes: u64,
    pub n_rels: u64,
    /// Data records read (headers excluded) = imported + rejected.
    pub rows_read: u64,
    pub rows_rejected: u64,
    pub rejects_path: Option<PathBuf>,
    pub bytes_read: u64,
    pub seconds: f64,
    pub budget_bytes: u64,
    /// Most bytes the budget granted at once.
    pub budget_peak_bytes: u64,
    pub peak_rss_bytes: u64,
    pub db_bytes: u64,
    pub spilled_edges: u64,
    /// Ids resolved by sorting on disk, because their space did not fit the budget.
    pub spilled_ids: u64,
    pub row_groups: u64,
    /// Each phase (reading nodes, indexing ids, ...) in order.
    pub phases: Vec<PhaseStats>,
}

/// Wall time of one import phase and the peak resident memory up to its end.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct PhaseStats {
    pub name: String,
    pub seconds: f64,
    pub peak_rss_bytes: u64,
}

impl ImportSummary {
    pub fn rows_per_second(&self) -> f64 {
        self.rows_read as f64 / self.seconds.max(1e-9)
    }
}

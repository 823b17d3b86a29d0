//! Progress reporting: the importer says which phase it is in and how far along; the CLI
//! draws it. Every phase has a total, so that the ETA stays honest after the first phase.

/// The phases of an import, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Reading node files (unit: bytes).
    Nodes,
    /// Writing the id indexes (unit: ids).
    IdIndex,
    /// Reading relationship files (unit: bytes).
    Relationships,
    /// Building CSR adjacency (unit: relationships placed, both directions).
    Csr,
    /// Publishing (fsync, manifest switch).
    Publish,
}

impl Phase {
    pub const ALL: [Phase; 5] = [
        Phase::Nodes,
        Phase::IdIndex,
        Phase::Relationships,
        Phase::Csr,
        Phase::Publish,
    ];

    /// The phase whose [`Phase::name`] is `name`.
    pub fn from_name(name: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Phase::Nodes => "reading nodes",
            Phase::IdIndex => "indexing ids",
            Phase::Relationships => "reading relationships",
            Phase::Csr => "building adjacency",
            Phase::Publish => "publishing",
        }
    }

    pub fn unit_is_bytes(self) -> bool {
        matches!(self, Phase::Nodes | Phase::Relationships)
    }
}

/// Receives progress. Implementations must be cheap: `advance` is called per window.
pub trait Progress: Send + Sync {
    fn phase(&self, phase: Phase, total: u64);
    /// `done` units of the phase's total, `rows` records (0 when not applicable).
    fn advance(&self, done: u64, rows: u64);
    fn finish(&self) {}
}

/// Reports nothing.
pub struct NoProgress;

impl Progress for NoProgress {
    fn phase(&self, _: Phase, _: u64) {}
    fn advance(&self, _: u64, _: u64) {}
}

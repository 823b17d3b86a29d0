//! Shared vocabulary of Quiver: named limits, the property data types, the memory budget
//! with its RAII grants, human-readable byte sizes and process memory readings.
//!
//! This crate knows nothing about files, CSV or queries; every other crate may depend on it.

pub mod cpu;
pub mod limits;
pub mod memory;
pub mod size;
pub mod types;

pub use memory::{BudgetExceeded, Grant, MemoryBudget};
pub use types::{DataType, ScalarType};

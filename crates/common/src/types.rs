//! Property data types, as written in Neo4j import headers (`age:int`, `tags:string[]`)
//! and as stored in columns.

use serde::{Deserialize, Serialize};

/// A scalar property type. The declared width of integers (byte, short, int, long) and
/// floats is kept so that `export` writes back the header the user gave; storage is
/// physical: every integer-like type is an `i64` column, every float an `f64` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScalarType {
    Byte,
    Short,
    Int,
    Long,
    Float,
    Double,
    Boolean,
    String,
    Char,
    /// Days since 1970-01-01.
    Date,
    /// Microseconds since 1970-01-01T00:00:00, no time zone.
    LocalDateTime,
    /// Microseconds since 1970-01-01T00:00:00Z (offsets are applied on import).
    DateTime,
}

/// How a scalar is laid out in a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Physical {
    I64,
    F64,
    Bool,
    Bytes,
}

impl ScalarType {
    pub fn physical(self) -> Physical {
        use ScalarType::*;
        match self {
            Byte | Short | Int | Long | Date | LocalDateTime | DateTime => Physical::I64,
            Float | Double => Physical::F64,
            Boolean => Physical::Bool,
            String | Char => Physical::Bytes,
        }
    }

    /// Inclusive range for the declared integer width.
    pub fn int_range(self) -> Option<(i64, i64)> {
        match self {
            ScalarType::Byte => Some((i8::MIN as i64, i8::MAX as i64)),
            ScalarType::Short => Some((i16::MIN as i64, i16::MAX as i64)),
            ScalarType::Int => Some((i32::MIN as i64, i32::MAX as i64)),
            ScalarType::Long => Some((i64::MIN, i64::MAX)),
            _ => None,
        }
    }

    /// Parses a header type name (case-insensitive, Neo4j spelling).
    pub fn from_name(name: &str) -> Option<Self> {
        use ScalarType::*;
        Some(match name.to_ascii_lowercase().as_str() {
            "byte" => Byte,
            "short" => Short,
            "int" | "integer" => Int,
            "long" => Long,
            "float" => Float,
            "double" => Double,
            "boolean" | "bool" => Boolean,
            "string" => String,
            "char" => Char,
            "date" => Date,
            "localdatetime" => LocalDateTime,
            "datetime" => DateTime,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        use ScalarType::*;
        match self {
            Byte => "byte",
            Short => "short",
            Int => "int",
            Long => "long",
            Float => "float",
            Double => "double",
            Boolean => "boolean",
            String => "string",
            Char => "char",
            Date => "date",
            LocalDateTime => "localdatetime",
            DateTime => "datetime",
        }
    }
}

/// A property type: a scalar or an array of scalars.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DataType {
    Scalar(ScalarType),
    Array(ScalarType),
}

impl DataType {
    pub fn element(self) -> ScalarType {
        match self {
            DataType::Scalar(s) | DataType::Array(s) => s,
        }
    }

    pub fn is_array(self) -> bool {
        matches!(self, DataType::Array(_))
    }

    /// Parses `int`, `string[]`, ... as written after the colon in a header.
    pub fn from_name(name: &str) -> Option<Self> {
        match name.strip_suffix("[]") {
            Some(el) => ScalarType::from_name(el).map(DataType::Array),
            None => ScalarType::from_name(name).map(DataType::Scalar),
        }
    }

    pub fn name(self) -> String {
        match self {
            DataType::Scalar(s) => s.name().to_string(),
            DataType::Array(s) => format!("{}[]", s.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for n in [
            "int",
            "long",
            "string[]",
            "datetime",
            "boolean[]",
            "char",
            "localdatetime",
        ] {
            assert_eq!(DataType::from_name(n).unwrap().name(), n);
        }
        assert_eq!(
            DataType::from_name("INTEGER"),
            Some(DataType::Scalar(ScalarType::Int))
        );
        assert_eq!(DataType::from_name("blob"), None);
    }
}

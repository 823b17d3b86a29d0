//! Why a statement was refused, in openCypher's words: the detail codes its TCK names
//! after an error's type (`SyntaxError ... : VariableAlreadyBound`). Every error the
//! parser and the binder raise carries one, as do the run-time errors the kit checks;
//! clients see it in the Bolt failure's message and the TCK runner compares it.

macro_rules! details {
    ($($name:ident),* $(,)?) => {
        /// An openCypher error detail code.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Detail {
            $($name),*
        }

        impl Detail {
            /// The code as openCypher spells it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Detail::$name => stringify!($name)),*
                }
            }
        }
    };
}

details! {
    // Syntax.
    UnexpectedSyntax,
    InvalidNumberLiteral,
    IntegerOverflow,
    FloatingPointOverflow,
    InvalidUnicodeLiteral,
    InvalidUnicodeCharacter,
    // Scoping.
    UndefinedVariable,
    VariableAlreadyBound,
    VariableTypeConflict,
    NoVariablesInScope,
    NoExpressionAlias,
    ColumnNameConflict,
    DifferentColumnsInUnion,
    InvalidClauseComposition,
    // Patterns.
    NoSingleRelationshipType,
    RequiresDirectedRelationship,
    InvalidRelationshipPattern,
    CreatingVarLength,
    RelationshipUniquenessViolation,
    InvalidDelete,
    // Expressions and arguments.
    InvalidArgumentType,
    InvalidArgumentValue,
    InvalidArgumentPassingMode,
    InvalidNumberOfArguments,
    NegativeIntegerArgument,
    NonConstantExpression,
    InvalidParameterUse,
    UnknownFunction,
    MapElementAccessByNonString,
    InvalidPropertyType,
    NumberOutOfRange,
    // Aggregation.
    InvalidAggregation,
    NestedAggregation,
    AmbiguousAggregationExpression,
    // Run-time.
    MissingParameter,
    ProcedureNotFound,
    DeletedEntityAccess,
    DeleteConnectedNode,
    MergeReadOwnWrites,
}

impl std::fmt::Display for Detail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

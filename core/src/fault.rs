//! Who has to act on an error: the one classification every crate's error type reports
//! through its `fault()`, so that an embedder can tell a wrong script from a bug without
//! knowing which layer failed.

use std::fmt;

/// Who has to act on an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The script, its arguments or its files are wrong (syntax, names, types, shapes, data).
    User,
    /// Valid input that lafuse does not implement (yet).
    Unsupported,
    /// More than the machine can give (memory), or a resource that is missing.
    Resource,
    /// A bug in lafuse.
    Internal,
}

impl Fault {
    /// A short name: `"user"`, `"unsupported"`, `"resource"` or `"internal"`.
    pub fn name(self) -> &'static str {
        match self {
            Fault::User => "user",
            Fault::Unsupported => "unsupported",
            Fault::Resource => "resource",
            Fault::Internal => "internal",
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

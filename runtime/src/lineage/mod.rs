//! Lineage (LIMA section 3): the exact computation history of every value, as a DAG of
//! immutable items ([`item`]) that the executor builds before each instruction, serializable
//! to a text log and back ([`log`]).

pub mod item;
pub mod log;
pub mod trace;

pub use item::{items_created_on_this_thread, literal_data, Item, ItemKind, Lineage, LiteralValue};
pub use log::{deserialize, deserialize_items, serialize, LogDefect, LogError};
pub use trace::{value_item, LineageMap, TraceStats, Tracer};

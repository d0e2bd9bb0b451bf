//! Lineage (LIMA section 3): the exact computation history of every value, as a DAG of
//! immutable items ([`item`]) that the executor builds before each instruction, serializable
//! to a text log and back ([`log`]); the reuse cache ([`cache`]) maps items to the values
//! they identify, so that a value computed before is not computed again (LIMA section 4).

pub mod cache;
pub mod item;
pub mod log;
pub mod reuse;
pub mod trace;

pub use cache::{
    value_bytes, CacheConfig, CacheStats, EntryState, EvictionPolicy, Probe, Reservation,
    ReuseCache,
};
pub use item::{items_created_on_this_thread, literal_data, Item, ItemKind, Lineage, LiteralValue};
pub use log::{deserialize, deserialize_items, serialize, LogDefect, LogError};
pub use trace::{value_item, LineageMap, TraceStats, Tracer};

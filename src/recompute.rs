//! Recomputation from lineage (LIMA section 3.1, "reconstruct"): a lineage log turned back
//! into a HOP DAG that computes the value the log describes, with no control flow, only the
//! operations on the way to that value; [`crate::Engine::recompute`] runs it.
//!
//! Each item becomes one hop, and an item shared in the log one shared hop: literal items
//! become literal hops, instruction items the hop whose `OpKind` their data holds (see
//! `lineage.rs`, which writes it), over their inputs in order. What only the original run
//! decided was recorded in the items and is replayed from them: `rand` holds the seed it used
//! in its seed position, `time()` the value it returned (the recomputation returns it again),
//! and a read the identity of its file, which must still be the file it was (same size and
//! modification time; checked here, then dropped from the read's inputs). A value that depends
//! on a variable bound from outside the script cannot be recomputed: its history is not in
//! the log. The log may have millions of lines: nothing here recurses.

use crate::error::{Error, FileChange, ItemDefect, Recompute};
use crate::lineage::literal_of_item;
use lafuse_compiler::hops::{DagBuilder, DataGenOp, HopDag, HopId, Literal, OpKind};
use lafuse_runtime::lineage::{self, trace, ItemKind, Lineage, LogDefect, LogError};
use serde::Deserialize;
use std::collections::HashMap;

/// The variable the recomputed value is bound to: the DAG's one output.
pub const RESULT: &str = "result";

/// The DAG that recomputes the value whose lineage log is `log`, binding it to the transient
/// write [`RESULT`]: verified, with sizes propagated (reads of files are sized from what the
/// files state, as a script's block is planned). Relative paths of reads are taken from the
/// current directory, as the script took them. [`crate::Engine::recompute`] runs it.
///
/// ```
/// let log = "(1) (L) \"\" \"2·INT\"\n\
///            (2) (L) \"\" \"3.5·DOUBLE\"\n\
///            (3) (I) \"b(*)\" \"{\\\"b\\\":\\\"*\\\"}\" (1) (2)\n";
/// let dag = lafuse::recompute_dag(log)?;
/// assert_eq!(dag.outputs()[0].0, lafuse::RECOMPUTE_RESULT);
/// # Ok::<(), lafuse::Error>(())
/// ```
pub fn recompute_dag(log: &str) -> Result<HopDag, Error> {
    let items = lineage::deserialize_items(log).map_err(|e| Error::Recompute(Recompute::Log(e)))?;
    let root = items
        .last()
        .cloned()
        .ok_or(Error::Recompute(Recompute::Log(LogError {
            line: 0,
            defect: LogDefect::Empty,
        })))?;
    // Items are named in errors by their number in the log, which starts their line.
    let numbers: HashMap<u64, usize> = items
        .iter()
        .enumerate()
        .map(|(i, item)| (item.id(), i + 1))
        .collect();
    drop(items);
    let root = expand_deduplicated(&root, &numbers)?;
    let mut dag = Rebuild::new(&numbers).dag(&root)?;
    crate::compile::size_reads_from_files(&mut dag)?;
    Ok(dag)
}

/// The DAG with its dedup items (`D`, LIMA section 3.2: one execution of a loop body or
/// function whose lineage was recorded once as a patch) expanded into the items they stand for,
/// before hops are built.
fn expand_deduplicated(root: &Lineage, numbers: &HashMap<u64, usize>) -> Result<Lineage, Error> {
    root.expand().ok_or_else(|| {
        let broken = root
            .topological()
            .into_iter()
            .find(|i| i.kind() == ItemKind::Dedup && i.expand().is_none());
        Error::Recompute(Recompute::Deduplicated {
            item: broken
                .and_then(|d| numbers.get(&d.id()).copied())
                .unwrap_or(0),
        })
    })
}

/// A read's file identity as `trace::file_item` records it.
#[derive(Deserialize)]
struct FileIdentity {
    path: String,
    size: String,
    modified: String,
}

/// The hops built so far, by item id.
struct Rebuild<'n> {
    numbers: &'n HashMap<u64, usize>,
    builder: DagBuilder,
    hops: HashMap<u64, HopId>,
}

impl<'n> Rebuild<'n> {
    fn new(numbers: &'n HashMap<u64, usize>) -> Rebuild<'n> {
        Rebuild {
            numbers,
            builder: DagBuilder::new(),
            hops: HashMap::new(),
        }
    }

    /// The item's number in the log (0 for an item not read from it).
    fn number(&self, item: &Lineage) -> usize {
        self.numbers.get(&item.id()).copied().unwrap_or(0)
    }

    fn defect(&self, item: &Lineage, defect: ItemDefect) -> Error {
        Error::Recompute(Recompute::Item {
            item: self.number(item),
            opcode: item.opcode().to_string(),
            defect,
        })
    }

    /// Builds the hops of every item below `root` (inputs first: `topological` walks without
    /// recursion) and binds the root's value to [`RESULT`].
    fn dag(mut self, root: &Lineage) -> Result<HopDag, Error> {
        for item in root.topological() {
            let hop = match item.kind() {
                ItemKind::Literal => {
                    let literal = literal_of_item(item.data()).ok_or_else(|| {
                        self.defect(
                            &item,
                            ItemDefect::Literal {
                                data: item.data().to_string(),
                            },
                        )
                    })?;
                    self.builder.literal(literal)
                }
                ItemKind::Creation if item.opcode() == trace::INPUT_VARIABLE => {
                    return Err(Error::Recompute(Recompute::InputVariable {
                        name: item.data().to_string(),
                    }))
                }
                // A read's file identity: the read checks it and leaves it out of its inputs.
                ItemKind::Creation if item.opcode() == trace::FILE_IDENTITY => continue,
                ItemKind::Creation => return Err(self.defect(&item, ItemDefect::Creation)),
                ItemKind::Placeholder => return Err(self.defect(&item, ItemDefect::Placeholder)),
                // `expand_deduplicated` leaves none.
                ItemKind::Dedup => {
                    return Err(Error::Recompute(Recompute::Deduplicated {
                        item: self.number(&item),
                    }))
                }
                ItemKind::Instruction => self.instruction(&item)?,
            };
            self.hops.insert(item.id(), hop);
        }
        let value = self.hop_of(root)?;
        let output = self.builder.output(RESULT, value);
        output.map_err(|source| self.defect(root, ItemDefect::Hop { source }))?;
        Ok(self.builder.build()?)
    }

    /// The hop built for `item`; an item without one is a file identity out of place.
    fn hop_of(&self, item: &Lineage) -> Result<HopId, Error> {
        self.hops
            .get(&item.id())
            .copied()
            .ok_or_else(|| self.defect(item, ItemDefect::Creation))
    }

    /// The hop of an instruction item: its op kind from the data, over its inputs' hops.
    fn instruction(&mut self, item: &Lineage) -> Result<HopId, Error> {
        let op: OpKind = serde_json::from_str(item.data())
            .map_err(|source| self.defect(item, ItemDefect::OpKind { source }))?;
        let mut inputs = item.inputs();
        match &op {
            // The value it returned, its one input, is what it returns again.
            OpKind::DataGen(DataGenOp::Time) => {
                return match inputs {
                    [value]
                        if value.kind() == ItemKind::Literal
                            && matches!(literal_of_item(value.data()), Some(Literal::Int(_))) =>
                    {
                        self.hop_of(value)
                    }
                    _ => Err(self.defect(item, ItemDefect::TimeValue)),
                };
            }
            OpKind::PersistentRead { .. } => {
                let Some((file, rest)) = inputs.split_last().filter(|(file, _)| {
                    file.kind() == ItemKind::Creation && file.opcode() == trace::FILE_IDENTITY
                }) else {
                    return Err(self.defect(item, ItemDefect::ReadIdentity));
                };
                self.check_file(item, file)?;
                inputs = rest;
            }
            OpKind::Literal(_)
            | OpKind::TransientRead { .. }
            | OpKind::TransientWrite { .. }
            | OpKind::PersistentWrite { .. }
            | OpKind::Print
            | OpKind::Stop
            | OpKind::Assert => return Err(self.defect(item, ItemDefect::NotAValue)),
            _ => {}
        }
        let ids = inputs
            .iter()
            .map(|input| self.hop_of(input))
            .collect::<Result<Vec<_>, _>>()?;
        let added = self.builder.add(op, &ids);
        added.map_err(|source| self.defect(item, ItemDefect::Hop { source }))
    }

    /// The file a read item read is still the file it was: same size, same modification time.
    fn check_file(&self, read: &Lineage, file: &Lineage) -> Result<(), Error> {
        let recorded: FileIdentity = serde_json::from_str(file.data())
            .map_err(|source| self.defect(file, ItemDefect::FileIdentity { source }))?;
        let (size, modified) = trace::file_state(&recorded.path);
        let change = if size == "missing" {
            FileChange::Missing
        } else if size != recorded.size {
            FileChange::Size {
                recorded: recorded.size,
                now: size,
            }
        } else if modified != recorded.modified {
            FileChange::Modified {
                recorded: recorded.modified,
                now: modified,
            }
        } else {
            return Ok(());
        };
        Err(Error::Recompute(Recompute::FileChanged {
            path: recorded.path,
            item: self.number(read),
            change,
        }))
    }
}

//! The executor's side of lineage tracing (LIMA section 3.1, TRACE): before an instruction
//! runs, the items of its outputs are built from the items of its inputs and the instruction's
//! lineage patches; the frame's lineage map follows the symbol table (loads take a variable's
//! item, stores set it).
//!
//! The runtime knows nothing of HOPs: the patches come with the instructions (built by the
//! compiler from the hops they compute), so an item depends on what was computed, never on
//! which instruction or fused operator computed it. What only the run decides (a file's
//! identity, an unseeded `rand`'s seed, `time()`'s value) is drawn here, before the
//! instruction runs, and handed to both the item and the instruction.

use super::item::{literal_data, Lineage, LiteralValue};
use super::log::serialize;
use crate::error::{FileError, Internal, Result, RuntimeError};
use crate::exec::{Instruction, Op};
use crate::value::Value;
use std::collections::HashMap;
use std::time::Duration;

/// A frame's variables' items, parallel to its symbol table.
pub type LineageMap = HashMap<String, Lineage>;

/// What tracing cost, for `--stats` (items are counted per thread by the item module).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TraceStats {
    /// Time spent in TRACE steps (building and substituting items, drawing run-time data).
    pub time: Duration,
}

/// Tracing state the executor works on: the current frame's map and the counters.
pub struct Tracer<'a> {
    pub map: &'a mut LineageMap,
    pub stats: &'a mut TraceStats,
    /// Inside a deduplicated scope (a loop body or function, LIMA section 3.2): where its
    /// run-time inputs go, and whether items are built at all.
    pub scope: Option<&'a mut ScopeRecording>,
}

/// What a deduplicated scope's execution records for its dedup items (LIMA section 3.2):
/// the values only the run decides (an unseeded `rand`'s seed, `time()`, a read file's
/// identity) are the patch's placeholders after the scope's inputs, and the dedup items'
/// inputs after the inputs' items, as LIMA models seeds.
#[derive(Debug, Default)]
pub struct ScopeRecording {
    /// How many placeholders the scope's inputs take (run-time inputs are numbered after).
    pub inputs: usize,
    /// The run-time inputs drawn so far, in execution order.
    pub runtime: Vec<Lineage>,
    /// Items are not built (the path's patch is expected to be known): only run-time inputs
    /// are drawn and recorded, so the patch can be applied (or the scope replayed) after.
    pub skip: bool,
}

impl ScopeRecording {
    /// Records the run-time input `item`; the placeholder the patch takes for it.
    fn placeholder_for(&mut self, item: Lineage) -> Lineage {
        self.runtime.push(item);
        Lineage::placeholder(self.inputs + self.runtime.len() - 1)
    }
}

/// The opcode of variables bound from outside the script (a prepared script's or an embedded
/// DAG's inputs), whose history lafuse cannot know: the item names the variable.
pub const INPUT_VARIABLE: &str = "input";

/// The opcode of a read file's identity ([`file_item`]), the last input of a read's item.
pub const FILE_IDENTITY: &str = "file";

/// The literal item of a scalar; `None` for a matrix, list or frame (which have no literal).
pub fn value_item(v: &Value) -> Option<Lineage> {
    let data = match v {
        Value::Matrix(_) | Value::List(_) | Value::Frame(_) => return None,
        Value::Double(x) => literal_data(&LiteralValue::Double(*x)),
        Value::Int(x) => literal_data(&LiteralValue::Int(*x)),
        Value::Bool(x) => literal_data(&LiteralValue::Bool(*x)),
        Value::Str(s) => literal_data(&LiteralValue::Str(s)),
    };
    Some(Lineage::literal(data))
}

/// What the TRACE step decided for one instruction, before it runs.
#[derive(Debug, Default)]
pub(crate) struct Traced {
    /// The items of the instruction's outputs, in the order of its output registers.
    pub outputs: Vec<Lineage>,
    /// The seed `rand` must use (the one recorded).
    pub seed: Option<i64>,
    /// The value `time()` must return (the one recorded).
    pub time: Option<i64>,
    /// `lineage(X)`: the log of X's item.
    pub log: Option<String>,
    /// A fused operator's inputs' items, by position, for an operator that keeps copies of its
    /// inputs elsewhere (GPU memory) and reuses them by lineage. Empty inside a deduplicated
    /// scope, whose items are placeholders standing for other values in each iteration.
    pub inputs: Vec<Option<Lineage>>,
}

fn register_item(items: &[Option<Lineage>], instr: &Instruction, i: usize) -> Result<Lineage> {
    let reg = *instr.inputs.get(i).ok_or_else(|| {
        RuntimeError::Internal(Internal::MissingInput {
            opcode: instr.op.opcode(),
            input: i,
        })
    })?;
    items
        .get(reg as usize)
        .and_then(Option::clone)
        .ok_or_else(|| {
            RuntimeError::Internal(Internal::EmptyRegister {
                opcode: instr.op.opcode(),
                register: reg,
            })
        })
}

fn register_value<'r>(
    regs: &'r [Option<Value>],
    instr: &Instruction,
    i: usize,
) -> Option<&'r Value> {
    regs.get(*instr.inputs.get(i)? as usize)?.as_ref()
}

/// Whether `instr` has a run-time input (see [`draw_runtime`]).
fn has_runtime_input(instr: &Instruction) -> bool {
    matches!(instr.op, Op::Rand | Op::Sample | Op::Time | Op::Read { .. })
        && instr.lineage.is_some()
}

/// Draws what only the run decides for `instr`, before it runs: an unseeded `rand`'s seed
/// and `time()`'s value (handed to the instruction through `traced`), a read file's
/// identity. The item is the patch's run-time input (the placeholder after the registers').
fn draw_runtime(
    instr: &Instruction,
    regs: &[Option<Value>],
    traced: &mut Traced,
) -> Result<Lineage> {
    Ok(match &instr.op {
        Op::Rand | Op::Sample => {
            let at = if matches!(instr.op, Op::Rand) { 5 } else { 3 };
            let given = register_value(regs, instr, at)
                .map(Value::as_i64)
                .transpose()?
                .unwrap_or(-1);
            let seed = if given == -1 {
                crate::datagen::clock_seed()
            } else {
                given
            };
            traced.seed = Some(seed);
            Lineage::literal(literal_data(&LiteralValue::Int(seed)))
        }
        Op::Time => {
            let nanos = crate::exec::now_nanos();
            traced.time = Some(nanos);
            Lineage::literal(literal_data(&LiteralValue::Int(nanos)))
        }
        Op::Read { params } => {
            let path = register_value(regs, instr, 0)
                .map(Value::display_string)
                .unwrap_or_default();
            let format = params
                .iter()
                .position(|p| p.as_ref() == "format")
                .and_then(|i| register_value(regs, instr, 1 + i))
                .map(Value::display_string);
            file_item(&path, format.as_deref())
        }
        _ => {
            return Err(RuntimeError::Internal(Internal::LineagePatch {
                opcode: instr.op.opcode(),
            }))
        }
    })
}

/// The TRACE step: the items of `instr`'s outputs, from the items of its input registers.
pub(crate) fn before(
    instr: &Instruction,
    regs: &[Option<Value>],
    items: &[Option<Lineage>],
    tracer: &mut Tracer<'_>,
) -> Result<Traced> {
    let mut traced = Traced::default();
    let runtime = if has_runtime_input(instr) {
        let item = draw_runtime(instr, regs, &mut traced)?;
        Some(match tracer.scope.as_deref_mut() {
            Some(scope) => scope.placeholder_for(item),
            None => item,
        })
    } else {
        None
    };
    derive(instr, items, tracer.map, &mut traced, runtime)?;
    if matches!(instr.op, Op::Fused { .. }) && tracer.scope.is_none() {
        traced.inputs = instr
            .inputs
            .iter()
            .map(|&r| items.get(r as usize).cloned().flatten())
            .collect();
    }
    Ok(traced)
}

/// The TRACE step of a scope whose items are not built ([`ScopeRecording::skip`]): only the
/// run-time input is drawn and recorded.
pub(crate) fn before_skipped(
    instr: &Instruction,
    regs: &[Option<Value>],
    scope: &mut ScopeRecording,
) -> Result<Traced> {
    let mut traced = Traced::default();
    if has_runtime_input(instr) {
        let item = draw_runtime(instr, regs, &mut traced)?;
        scope.runtime.push(item);
    }
    Ok(traced)
}

/// The items of `instr`'s outputs (into `traced`), given its run-time input's item; loads
/// and stores move items between registers and `map`.
fn derive(
    instr: &Instruction,
    items: &[Option<Lineage>],
    map: &mut LineageMap,
    traced: &mut Traced,
    runtime: Option<Lineage>,
) -> Result<()> {
    match &instr.op {
        Op::Load(name) | Op::Take(name) => {
            let item = map
                .get(name.as_ref())
                .cloned()
                .unwrap_or_else(|| Lineage::creation(INPUT_VARIABLE, name.as_ref()));
            traced.outputs.push(item);
            return Ok(());
        }
        Op::Store(name) => {
            let item = register_item(items, instr, 0)?;
            map.insert(name.to_string(), item);
            return Ok(());
        }
        Op::Lineage => {
            traced.log = Some(serialize(&register_item(items, instr, 0)?));
        }
        _ => {}
    }
    let Some(patches) = &instr.lineage else {
        // Side effects without a value (print, stop, write) need no item.
        if instr.output.is_none() && instr.op.result_registers().is_none() {
            return Ok(());
        }
        return Err(RuntimeError::Internal(Internal::LineagePatch {
            opcode: instr.op.opcode(),
        }));
    };
    let mut inputs = (0..instr.inputs.len())
        .map(|i| register_item(items, instr, i))
        .collect::<Result<Vec<_>>>()?;
    inputs.extend(runtime);
    for patch in patches.iter() {
        let item = patch.substitute(&inputs).ok_or_else(|| {
            RuntimeError::Internal(Internal::LineagePatch {
                opcode: instr.op.opcode(),
            })
        })?;
        traced.outputs.push(item);
    }
    Ok(())
}

/// Traces `instructions` (a compiled block that ran with [`ScopeRecording::skip`]) after the
/// fact, without their values: items flow through registers into `map` as they would have,
/// and run-time inputs are taken, in order, from `recorded` (the scope's placeholders for
/// them, numbered from `first_placeholder`). What a skipped scope needs when the path it took
/// has no patch yet.
pub fn replay(
    instructions: &[Instruction],
    num_regs: usize,
    map: &mut LineageMap,
    first_placeholder: &mut usize,
) -> Result<()> {
    let mut items: Vec<Option<Lineage>> = vec![None; num_regs];
    for instr in instructions {
        let mut traced = Traced::default();
        let runtime = has_runtime_input(instr).then(|| {
            *first_placeholder += 1;
            Lineage::placeholder(*first_placeholder - 1)
        });
        derive(instr, &items, map, &mut traced, runtime)?;
        if !matches!(instr.op, Op::Write { .. }) {
            set_outputs(instr, &mut items, traced)?;
        }
        for &r in &instr.release {
            if let Some(slot) = items.get_mut(r as usize) {
                *slot = None;
            }
        }
    }
    Ok(())
}

/// A file's identity as a read sees it: path, format, size and modification time. LIMA
/// assumes inputs are read-only; recording size and time as well makes a rewritten file a
/// different item, so a later reuse cannot hand back a value computed from the old content.
pub fn file_item(path: &str, format: Option<&str>) -> Lineage {
    let (size, modified) = file_state(path);
    let data = serde_json::json!({
        "path": path,
        "format": format.unwrap_or("auto"),
        "size": size,
        "modified": modified,
    });
    Lineage::creation(FILE_IDENTITY, data.to_string())
}

/// The size and modification time of the file at `path` as [`file_item`] records them: the
/// size in bytes and nanoseconds since the epoch, `"unknown"` for a time the system does not
/// give, and `"missing"` for both where the file cannot be read.
pub fn file_state(path: &str) -> (String, String) {
    match std::fs::metadata(path) {
        Ok(meta) => (
            meta.len().to_string(),
            meta.modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or_else(|| "unknown".to_string(), |d| d.as_nanos().to_string()),
        ),
        Err(_) => ("missing".to_string(), "missing".to_string()),
    }
}

/// After `instr` ran: its output registers get their items; a `write` also writes the log of
/// the written value's item beside the file (`f.lineage`).
pub(crate) fn after(
    instr: &Instruction,
    regs: &[Option<Value>],
    items: &mut [Option<Lineage>],
    traced: Traced,
) -> Result<()> {
    if let Op::Write { .. } = &instr.op {
        let item = register_item(items, instr, 0)?;
        let path = register_value(regs, instr, 1)
            .map(Value::display_string)
            .unwrap_or_default();
        let lineage_path = format!("{path}.lineage");
        std::fs::write(&lineage_path, serialize(&item))
            .map_err(|e| RuntimeError::file(&lineage_path, FileError::Write(e.into())))?;
        return Ok(());
    }
    set_outputs(instr, items, traced)
}

/// Gives `instr`'s output registers the items `traced` built for them.
fn set_outputs(instr: &Instruction, items: &mut [Option<Lineage>], traced: Traced) -> Result<()> {
    let targets: Vec<u32> = instr
        .op
        .result_registers()
        .unwrap_or_else(|| instr.output.into_iter().collect());
    for (reg, item) in targets.into_iter().zip(traced.outputs) {
        let slot = items.get_mut(reg as usize).ok_or(RuntimeError::Internal(
            Internal::RegisterOutOfRange { register: reg },
        ))?;
        *slot = Some(item);
    }
    Ok(())
}

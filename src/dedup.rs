//! Lineage deduplication of last-level loops and functions (LIMA section 3.2): a loop body or
//! function without nested loops or calls adds one dedup item per variable it assigns per
//! iteration or call, pointing to the lineage patch of the control path taken, instead of one
//! item per operation. (A function's frame keeps only its results' items.)
//!
//! Setup, once per scope: the body's `if` blocks get bit positions in depth-first order, the
//! variables it reads are collected, and an empty map of patches is prepared. Per execution,
//! the taken path is a bit vector (bit `i` is the outcome of branch `i`). Until the loop has a
//! patch, an iteration is traced with the body's inputs bound to placeholders, and what the
//! body assigned is kept as the patch of its path. Once it has one, iterations skip tracing
//! (no items are built; only the values the run decides are drawn: seeds, times, file
//! identities, which become placeholders after the inputs, as LIMA models seeds); when an
//! iteration ends on a path without a patch, its blocks are traced after the fact from what
//! ran ([`trace::replay`]), so every iteration's lineage is exact.
//!
//! A patch is keyed by the path's bits, the body's inputs (names, in order), the compiled
//! plans that ran (a plan compiled for other sizes may trace differently), and the number of
//! run-time inputs. Expanding the dedup items ([`Lineage::expand`]) gives exactly the lineage
//! tracing without deduplication gives.

use crate::calls::{expr_calls, stmt_calls};
use crate::compile::{stmt_reads, CompiledBlock, EXPR_RESULT};
use lafuse_compiler::ast;
use lafuse_compiler::program::Block;
use lafuse_runtime::lineage::trace::{self, ScopeRecording};
use lafuse_runtime::lineage::{Lineage, LineageMap};
use lafuse_runtime::RuntimeError;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// At most this many branches in a deduplicated body (the path is a 64-bit vector).
const MAX_BRANCHES: usize = 64;

/// What deduplication knows of one loop or function: its setup and the patches traced so far.
pub(crate) struct ScopeDedup {
    /// Bit positions of the body's `if` blocks, by block address.
    branches: HashMap<usize, u32>,
    /// The variables the body (its conditions included) may read before assigning them,
    /// sorted: its inputs.
    reads: Vec<String>,
    patches: HashMap<PatchKey, Arc<Patch>>,
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct PatchKey {
    inputs: Vec<String>,
    taken: u64,
    evaluated: u64,
    plans: Vec<usize>,
    runtime: usize,
}

/// The lineage of one path through the body: per variable it assigns, a DAG over
/// placeholders, with the positions of the body's inputs it uses (its placeholder `k` stands
/// for input `used[k]`, then for the run-time inputs).
struct Patch {
    outputs: Vec<PatchOutput>,
}

struct PatchOutput {
    name: String,
    root: Lineage,
    used: Vec<usize>,
    /// What the dedup items say: the variable and the path.
    data: Arc<str>,
}

/// One iteration (or call) in progress.
pub(crate) struct Iteration {
    key: PatchKey,
    /// The items of the body's inputs when the iteration started.
    actual: Vec<Lineage>,
    /// The plans that ran, in order (replayed when the path has no patch yet).
    ran: Vec<Arc<CompiledBlock>>,
    pub(crate) recording: ScopeRecording,
    /// While traced: the frame's own map, set aside for the placeholders' one.
    set_aside: Option<LineageMap>,
}

/// What deduplication did in a run, for `--stats`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DedupCounts {
    pub(crate) patches: u64,
    pub(crate) items: u64,
}

impl ScopeDedup {
    /// Setup for the loop or function with `body`, or `None` where the body is not last-level (a nested
    /// loop or call), has too many branches, or needs items while it runs (`lineage(X)`,
    /// `write`, which write logs of the values they see).
    pub(crate) fn setup(body: &[Block]) -> Option<ScopeDedup> {
        let mut setup = ScopeDedup {
            branches: HashMap::new(),
            reads: Vec::new(),
            patches: HashMap::new(),
        };
        let mut reads: Vec<&str> = Vec::new();
        setup.walk(body, &mut HashSet::new(), &mut reads)?;
        let mut reads: Vec<String> = reads.into_iter().map(str::to_string).collect();
        reads.sort();
        reads.dedup();
        setup.reads = reads;
        Some(setup)
    }

    /// Walks `blocks` in execution order: numbers their branches and collects the variables
    /// they may read before assigning them (the body's inputs; a variable `assigned` on
    /// every path so far is not one). `None` where the body cannot be deduplicated.
    fn walk<'b>(
        &mut self,
        blocks: &'b [Block],
        assigned: &mut HashSet<&'b str>,
        reads: &mut Vec<&'b str>,
    ) -> Option<()> {
        for block in blocks {
            match block {
                Block::Basic(basic) => {
                    for stmt in &basic.stmts {
                        if needs_items(stmt) {
                            return None;
                        }
                        let mut read = Vec::new();
                        stmt_reads(stmt, &mut read);
                        reads.extend(read.into_iter().filter(|r| !assigned.contains(r)));
                        match &stmt.kind {
                            ast::StmtKind::Assign { target, .. } => {
                                assigned.insert(&target.name);
                            }
                            ast::StmtKind::MultiAssign { targets, .. } => {
                                assigned.extend(targets.iter().map(|t| t.name.as_str()));
                            }
                            _ => {}
                        }
                    }
                }
                Block::If {
                    cond,
                    then_blocks,
                    else_blocks,
                    ..
                } => {
                    if self.branches.len() == MAX_BRANCHES || expr_calls(cond, &needs_items_named) {
                        return None;
                    }
                    let position = self.branches.len() as u32;
                    self.branches
                        .insert(block as *const Block as usize, position);
                    let mut read = Vec::new();
                    crate::compile::expr_reads(cond, &mut read);
                    reads.extend(read.into_iter().filter(|r| !assigned.contains(r)));
                    // What one branch assigns is not assigned after the `if`.
                    self.walk(then_blocks, &mut assigned.clone(), reads)?;
                    self.walk(else_blocks, &mut assigned.clone(), reads)?;
                }
                Block::For { .. } | Block::While { .. } | Block::Call(_) => return None,
            }
        }
        Some(())
    }

    /// Starts an iteration over the frame's `map`: traced (the map is set aside for one
    /// binding the body's inputs to placeholders) until the loop has a patch, skipped after.
    pub(crate) fn start(&self, map: &mut LineageMap) -> Iteration {
        let mut inputs = Vec::new();
        let mut actual = Vec::new();
        for name in &self.reads {
            if let Some(item) = map.get(name) {
                inputs.push(name.clone());
                actual.push(item.clone());
            }
        }
        let skip = !self.patches.is_empty();
        let set_aside = (!skip).then(|| {
            let placeholders = inputs
                .iter()
                .enumerate()
                .map(|(k, name)| (name.clone(), Lineage::placeholder(k)))
                .collect();
            std::mem::replace(map, placeholders)
        });
        Iteration {
            recording: ScopeRecording {
                inputs: inputs.len(),
                runtime: Vec::new(),
                skip,
            },
            key: PatchKey {
                inputs,
                taken: 0,
                evaluated: 0,
                plans: Vec::new(),
                runtime: 0,
            },
            actual,
            ran: Vec::new(),
            set_aside,
        }
    }

    /// Ends `it`: finds (or traces) the patch of the path it took and binds each variable
    /// the body assigned to its dedup item in the frame's `map`.
    pub(crate) fn finish(
        &mut self,
        mut it: Iteration,
        map: &mut LineageMap,
        counts: &mut DedupCounts,
    ) -> Result<(), RuntimeError> {
        it.key.runtime = it.recording.runtime.len();
        let traced = match it.set_aside.take() {
            Some(own) => Some(std::mem::replace(map, own)),
            None => None,
        };
        let patch = match self.patches.get(&it.key) {
            Some(patch) => Arc::clone(patch),
            None => {
                let assigned = match traced {
                    Some(assigned) => assigned,
                    None => replay(&it)?,
                };
                let patch = Arc::new(make_patch(&it.key, assigned));
                counts.patches += 1;
                self.patches.insert(it.key.clone(), Arc::clone(&patch));
                patch
            }
        };
        let inputs_then: Vec<&Lineage> = it.actual.iter().chain(&it.recording.runtime).collect();
        for out in &patch.outputs {
            let inputs = out.used.iter().map(|&k| inputs_then[k].clone()).collect();
            map.insert(
                out.name.clone(),
                Lineage::dedup(Arc::clone(&out.data), out.root.clone(), inputs),
            );
            counts.items += 1;
        }
        Ok(())
    }

    /// Records the outcome of branch `block` (an `if` of the body) in the iteration's path.
    pub(crate) fn branch(&self, it: &mut Iteration, block: &Block, taken: bool) {
        if let Some(&bit) = self.branches.get(&(block as *const Block as usize)) {
            it.key.evaluated |= 1 << bit;
            if taken {
                it.key.taken |= 1 << bit;
            }
        }
    }
}

impl Iteration {
    /// Gives the frame its own map back after the body failed.
    pub(crate) fn abandon(mut self, map: &mut LineageMap) {
        if let Some(own) = self.set_aside.take() {
            *map = own;
        }
    }

    /// Notes that `plan` runs in the iteration.
    pub(crate) fn ran(&mut self, plan: &Arc<CompiledBlock>) {
        self.key.plans.push(Arc::as_ptr(plan) as usize);
        self.ran.push(Arc::clone(plan));
    }
}

/// What the skipped iteration `it` assigned, traced after the fact from the plans that ran.
fn replay(it: &Iteration) -> Result<LineageMap, RuntimeError> {
    let mut map: LineageMap = it
        .key
        .inputs
        .iter()
        .enumerate()
        .map(|(k, name)| (name.clone(), Lineage::placeholder(k)))
        .collect();
    let mut next_runtime = it.key.inputs.len();
    for plan in &it.ran {
        trace::replay(
            &plan.instructions,
            plan.num_regs,
            &mut map,
            &mut next_runtime,
        )?;
        map.remove(EXPR_RESULT);
    }
    Ok(map)
}

/// The patch of a path from what its traced iteration left in the map: every variable not
/// bound to its own input placeholder, with its placeholders renumbered to those it uses.
fn make_patch(key: &PatchKey, assigned: LineageMap) -> Patch {
    let mut outputs: Vec<PatchOutput> = assigned
        .into_iter()
        .filter(|(name, item)| {
            name != EXPR_RESULT
                && key
                    .inputs
                    .iter()
                    .position(|n| n == name)
                    .is_none_or(|k| item.placeholder_position() != Some(k))
        })
        .map(|(name, root)| {
            let mut used: Vec<usize> = root
                .topological()
                .iter()
                .filter_map(Lineage::placeholder_position)
                .collect();
            used.sort_unstable();
            used.dedup();
            let mut renumbered: Vec<Lineage> = Vec::new();
            let max = used.last().map_or(0, |&m| m + 1);
            renumbered.resize_with(max, || Lineage::placeholder(usize::MAX));
            for (k, &position) in used.iter().enumerate() {
                renumbered[position] = Lineage::placeholder(k);
            }
            let root = root.substitute(&renumbered).unwrap_or(root);
            let data = format!("{name} path {:b}/{:b}", key.taken, key.evaluated).into();
            PatchOutput {
                name,
                root,
                used,
                data,
            }
        })
        .collect();
    outputs.sort_by(|a, b| a.name.cmp(&b.name));
    Patch { outputs }
}

/// Whether a statement calls `lineage` or `write`, which need the items of the values they
/// see while the body runs (or holds a loop, which makes the body not last-level).
fn needs_items(stmt: &ast::Stmt) -> bool {
    matches!(
        stmt.kind,
        ast::StmtKind::For { .. } | ast::StmtKind::While { .. }
    ) || stmt_calls(stmt, &needs_items_named)
}

fn needs_items_named(name: &str) -> bool {
    matches!(name, "lineage" | "write")
}

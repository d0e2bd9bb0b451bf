//! Lineage items (LIMA section 3.1): immutable nodes of a lineage DAG, each an operation and its
//! output, with an opcode, data (a literal's value, a file's identity, a seed), ordered inputs,
//! a hash and a height computed once at construction.
//!
//! Nothing here recurses over a DAG: hashing folds the inputs' cached hashes, equality walks
//! both DAGs with an explicit stack (exiting early on hash and height, skipping shared sub-DAGs
//! by identity and pairs already compared), and dropping unlinks a chain iteratively. A lineage
//! DAG of millions of items is therefore safe on any thread's stack.

use std::collections::HashSet;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What kind of node an item is; its letter in the lineage log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ItemKind {
    /// A scalar literal (`L`): the value is the data, there is no opcode.
    Literal,
    /// A leaf that creates a value (`C`): a read, `rand` with its seed, `seq`, `time`.
    Creation,
    /// An operation on its inputs (`I`).
    Instruction,
    /// An input position of a lineage patch (`P`): a fused operator's, or a deduplicated
    /// loop body's; replaced by the actual input's item when the patch is applied.
    Placeholder,
    /// One execution of a deduplicated loop body or function (`D`): its first input is the
    /// root of the lineage patch of the path taken (a DAG over placeholders), the others the
    /// values the patch's placeholders stand for, in order. See [`Lineage::expand`].
    Dedup,
}

impl ItemKind {
    /// The letter the lineage log writes.
    pub fn letter(self) -> char {
        match self {
            ItemKind::Literal => 'L',
            ItemKind::Creation => 'C',
            ItemKind::Instruction => 'I',
            ItemKind::Placeholder => 'P',
            ItemKind::Dedup => 'D',
        }
    }

    pub fn from_letter(c: char) -> Option<ItemKind> {
        Some(match c {
            'L' => ItemKind::Literal,
            'C' => ItemKind::Creation,
            'I' => ItemKind::Instruction,
            'P' => ItemKind::Placeholder,
            'D' => ItemKind::Dedup,
            _ => return None,
        })
    }
}

/// One node of a lineage DAG; shared through [`Lineage`].
pub struct Item {
    id: u64,
    kind: ItemKind,
    opcode: Arc<str>,
    data: Arc<str>,
    inputs: Vec<Lineage>,
    hash: u64,
    height: u32,
}

/// A shared, immutable lineage item: what identifies a value exactly. Cloning is cheap (a
/// reference count); equality is structural (see the module docs).
#[derive(Clone)]
pub struct Lineage(Arc<Item>);

/// Ids in creation order, unique within the process (they name items in a log; equality never
/// looks at them).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// Items created on this thread, for `--stats` (a per-thread count, so that runs on other
    /// threads, such as parallel tests, do not blur it).
    static CREATED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many lineage items this thread has created so far; the difference of two readings is
/// what a run in between created.
pub fn items_created_on_this_thread() -> u64 {
    CREATED.with(|c| c.get())
}

impl Lineage {
    /// A new item over `inputs`. The hash and height follow from the inputs' (no walk).
    pub fn new(
        kind: ItemKind,
        opcode: impl Into<Arc<str>>,
        data: impl Into<Arc<str>>,
        inputs: Vec<Lineage>,
    ) -> Lineage {
        let (opcode, data) = (opcode.into(), data.into());
        let height = inputs.iter().map(|i| i.0.height).max().map_or(1, |h| h + 1);
        let mut hash = mix(fnv(kind.letter().to_string().as_bytes()) ^ fnv(opcode.as_bytes()));
        hash = mix(hash ^ fnv(data.as_bytes()).rotate_left(17));
        for input in &inputs {
            hash = mix(hash.rotate_left(5) ^ input.0.hash);
        }
        hash = mix(hash ^ u64::from(height));
        CREATED.with(|c| c.set(c.get() + 1));
        Lineage(Arc::new(Item {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            kind,
            opcode,
            data,
            inputs,
            hash,
            height,
        }))
    }

    /// A scalar literal; `data` is its value as [`literal_data`] encodes it.
    pub fn literal(data: impl Into<Arc<str>>) -> Lineage {
        Lineage::new(ItemKind::Literal, "", data, Vec::new())
    }

    /// A leaf creating a value: `opcode` with `data` saying exactly what it made.
    pub fn creation(opcode: impl Into<Arc<str>>, data: impl Into<Arc<str>>) -> Lineage {
        Lineage::new(ItemKind::Creation, opcode, data, Vec::new())
    }

    /// An operation over `inputs`, with `data` for its parameters that are not inputs.
    pub fn instruction(
        opcode: impl Into<Arc<str>>,
        data: impl Into<Arc<str>>,
        inputs: Vec<Lineage>,
    ) -> Lineage {
        Lineage::new(ItemKind::Instruction, opcode, data, inputs)
    }

    /// One execution of a deduplicated scope: `patch` (a DAG over placeholders) applied to
    /// `inputs`, kept unexpanded. `data` names what the item stands for (a variable of the
    /// scope, the path taken).
    pub fn dedup(data: impl Into<Arc<str>>, patch: Lineage, inputs: Vec<Lineage>) -> Lineage {
        let mut all = Vec::with_capacity(inputs.len() + 1);
        all.push(patch);
        all.extend(inputs);
        Lineage::new(ItemKind::Dedup, "dedup", data, all)
    }

    /// Input position `position` of a patch.
    pub fn placeholder(position: usize) -> Lineage {
        Lineage::new(
            ItemKind::Placeholder,
            "IN",
            position.to_string(),
            Vec::new(),
        )
    }

    pub fn id(&self) -> u64 {
        self.0.id
    }
    pub fn kind(&self) -> ItemKind {
        self.0.kind
    }
    pub fn opcode(&self) -> &str {
        &self.0.opcode
    }
    pub fn data(&self) -> &str {
        &self.0.data
    }
    pub fn inputs(&self) -> &[Lineage] {
        &self.0.inputs
    }
    /// The structural hash: equal DAGs hash alike, in every process.
    pub fn hash(&self) -> u64 {
        self.0.hash
    }
    /// 1 for a leaf, else one more than the highest input.
    pub fn height(&self) -> u32 {
        self.0.height
    }
    /// Whether both are the very same item (not merely equal).
    pub fn same(&self, other: &Lineage) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
    fn addr(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// The placeholder position of a placeholder item.
    pub fn placeholder_position(&self) -> Option<usize> {
        (self.0.kind == ItemKind::Placeholder)
            .then(|| self.0.data.parse().ok())
            .flatten()
    }

    /// Every distinct item of the DAG below and including `self`, inputs before the items
    /// that read them (a post-order without recursion); each shared item once.
    pub fn topological(&self) -> Vec<Lineage> {
        let mut order = Vec::new();
        let mut seen: HashSet<usize> = HashSet::new();
        // (item, whether its inputs have been pushed)
        let mut stack: Vec<(Lineage, bool)> = vec![(self.clone(), false)];
        while let Some((item, expanded)) = stack.pop() {
            if expanded {
                order.push(item);
                continue;
            }
            if !seen.insert(item.addr()) {
                continue;
            }
            stack.push((item.clone(), true));
            for input in item.inputs().iter().rev() {
                if !seen.contains(&input.addr()) {
                    stack.push((input.clone(), false));
                }
            }
        }
        order
    }

    /// The patch `self` (a DAG with placeholders) applied to `inputs`: a copy in which
    /// placeholder `i` is `inputs[i]`, rebuilt bottom-up without recursion. Items without a
    /// placeholder below them are shared, not copied. `None` when a placeholder's position has
    /// no input.
    pub fn substitute(&self, inputs: &[Lineage]) -> Option<Lineage> {
        let mut made: std::collections::HashMap<usize, Lineage> = Default::default();
        for item in self.topological() {
            let new = if let Some(position) = item.placeholder_position() {
                inputs.get(position)?.clone()
            } else if item.inputs().is_empty() {
                item.clone()
            } else {
                let ins: Vec<Lineage> = item
                    .inputs()
                    .iter()
                    .map(|i| made.get(&i.addr()).cloned().unwrap_or_else(|| i.clone()))
                    .collect();
                if ins.iter().zip(item.inputs()).all(|(a, b)| a.same(b)) {
                    item.clone()
                } else {
                    Lineage::new(item.kind(), item.0.opcode.clone(), item.0.data.clone(), ins)
                }
            };
            made.insert(item.addr(), new);
        }
        made.remove(&self.addr())
    }
}

impl Lineage {
    /// The DAG with every dedup item replaced by its patch applied to its inputs: the lineage
    /// tracing without deduplication gives. Bottom-up without recursion; sub-DAGs without a
    /// dedup item are shared, not copied. `None` if a dedup item is malformed (a patch
    /// with a placeholder beyond its inputs, as only a damaged log can have).
    pub fn expand(&self) -> Option<Lineage> {
        let mut made: std::collections::HashMap<usize, Lineage> = Default::default();
        for item in self.topological() {
            let ins: Vec<Lineage> = item
                .inputs()
                .iter()
                .map(|i| made.get(&i.addr()).cloned().unwrap_or_else(|| i.clone()))
                .collect();
            let new = if item.kind() == ItemKind::Dedup {
                // The patch is the original first input (patches of last-level scopes hold no
                // dedup items); the others are expanded already.
                item.inputs().first()?.substitute(&ins[1..])?
            } else if ins.iter().zip(item.inputs()).all(|(a, b)| a.same(b)) {
                item.clone()
            } else {
                Lineage::new(item.kind(), item.0.opcode.clone(), item.0.data.clone(), ins)
            };
            made.insert(item.addr(), new);
        }
        made.remove(&self.addr())
    }

    /// Whether the DAG holds a dedup item.
    pub fn has_dedup(&self) -> bool {
        self.topological()
            .iter()
            .any(|i| i.kind() == ItemKind::Dedup)
    }
}

impl PartialEq for Lineage {
    /// Structural equality: same kind, opcode, data and equal inputs in order, compared with
    /// an explicit stack; unequal hashes or heights end it at once, and a pair of items met
    /// twice (shared sub-DAGs) is compared once.
    fn eq(&self, other: &Lineage) -> bool {
        let mut stack = vec![(self.clone(), other.clone())];
        let mut compared: HashSet<(usize, usize)> = HashSet::new();
        while let Some((a, b)) = stack.pop() {
            if a.same(&b) {
                continue;
            }
            if a.0.hash != b.0.hash
                || a.0.height != b.0.height
                || a.0.kind != b.0.kind
                || a.0.inputs.len() != b.0.inputs.len()
                || a.0.opcode != b.0.opcode
                || a.0.data != b.0.data
            {
                return false;
            }
            if !compared.insert((a.addr(), b.addr())) {
                continue;
            }
            for (x, y) in a.0.inputs.iter().zip(&b.0.inputs) {
                stack.push((x.clone(), y.clone()));
            }
        }
        true
    }
}

impl Eq for Lineage {}

impl std::hash::Hash for Lineage {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.0.hash);
    }
}

impl fmt::Debug for Lineage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Lineage({} {} {:?} {:?}, {} inputs, height {}, hash {:016x})",
            self.0.id,
            self.0.kind.letter(),
            &*self.0.opcode,
            &*self.0.data,
            self.0.inputs.len(),
            self.0.height,
            self.0.hash
        )
    }
}

impl Drop for Item {
    /// Unlinks the inputs iteratively: an item whose last reference goes takes its inputs'
    /// inputs onto a list instead of dropping them recursively, so a chain of millions of
    /// items drops on a small stack.
    fn drop(&mut self) {
        let mut pending = std::mem::take(&mut self.inputs);
        while let Some(Lineage(arc)) = pending.pop() {
            if let Some(mut item) = Arc::into_inner(arc) {
                pending.append(&mut item.inputs);
                // `item` drops here with no inputs left.
            }
        }
    }
}

/// A scalar literal's data: its DML type and a representation that reads back exactly
/// (doubles as the shortest round-trip decimal, so `0.1` stays `0.1`; strings quoted).
pub fn literal_data(value: &LiteralValue<'_>) -> String {
    match value {
        LiteralValue::Double(v) => {
            if v.is_nan() {
                "NaN·DOUBLE".to_string()
            } else {
                format!("{v:?}·DOUBLE")
            }
        }
        LiteralValue::Int(v) => format!("{v}·INT"),
        LiteralValue::Bool(v) => format!("{}·BOOLEAN", if *v { "true" } else { "false" }),
        LiteralValue::Str(s) => format!("{}·STRING", serde_json::to_string(s).unwrap_or_default()),
    }
}

/// A scalar as [`literal_data`] takes it.
#[derive(Clone, Copy, Debug)]
pub enum LiteralValue<'a> {
    Double(f64),
    Int(i64),
    Bool(bool),
    Str(&'a str),
}

/// FNV-1a over bytes: a hash that is the same in every process and build.
fn fnv(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// SplitMix64's finalizer: spreads every input bit over the result.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x() -> Lineage {
        Lineage::creation("read", "X.csv")
    }

    #[test]
    fn equal_structure_is_equal_and_hashes_alike() {
        let a = Lineage::instruction("b(+)", "", vec![x(), Lineage::literal("1·INT")]);
        let b = Lineage::instruction("b(+)", "", vec![x(), Lineage::literal("1·INT")]);
        assert!(!a.same(&b));
        assert_eq!(a, b);
        assert_eq!(a.hash(), b.hash());
        let c = Lineage::instruction("b(+)", "", vec![Lineage::literal("1·INT"), x()]);
        assert_ne!(a, c, "inputs are ordered");
        let d = Lineage::instruction("b(-)", "", vec![x(), Lineage::literal("1·INT")]);
        assert_ne!(a, d);
        assert_eq!(a.height(), 2);
    }

    #[test]
    fn patches_substitute_their_placeholders_in_order() {
        let patch = Lineage::instruction(
            "b(*)",
            "",
            vec![Lineage::placeholder(1), Lineage::placeholder(0)],
        );
        let (p, q) = (x(), Lineage::creation("read", "Y.csv"));
        let applied = patch.substitute(&[p.clone(), q.clone()]).unwrap();
        assert_eq!(applied, Lineage::instruction("b(*)", "", vec![q, p]));
        assert!(patch.substitute(&[x()]).is_none());
    }

    #[test]
    fn literals_read_back_exactly() {
        assert_eq!(literal_data(&LiteralValue::Double(0.1)), "0.1·DOUBLE");
        assert_eq!(literal_data(&LiteralValue::Double(1.0)), "1.0·DOUBLE");
        assert_eq!(literal_data(&LiteralValue::Int(-3)), "-3·INT");
        assert_eq!(literal_data(&LiteralValue::Str("a b")), "\"a b\"·STRING");
    }

    /// The scale: a lineage DAG of ten million items (a chain over seven shared
    /// literals and a read) hashes, compares, walks, serializes, reads back and drops on a
    /// 512 KiB stack.
    #[test]
    fn ten_million_items_need_no_deep_stack() {
        const ITEMS: usize = 10_000_000;
        std::thread::Builder::new()
            .stack_size(512 << 10)
            .spawn(|| {
                let literals: Vec<Lineage> = (0..7)
                    .map(|i| Lineage::literal(format!("{i}·INT")))
                    .collect();
                let mut a = x();
                for i in 0..ITEMS - 8 {
                    a = Lineage::instruction("b(+)", "", vec![a, literals[i % 7].clone()]);
                }
                assert_eq!(a.height() as usize, ITEMS - 7);
                assert_eq!(a.topological().len(), ITEMS);
                let log = crate::lineage::serialize(&a);
                assert_eq!(log.lines().count(), ITEMS);
                let back = crate::lineage::deserialize(&log).unwrap();
                drop(log);
                assert!(!back.same(&a));
                assert_eq!(back.hash(), a.hash());
                assert_eq!(back, a);
                drop(a);
                drop(back);
            })
            .unwrap()
            .join()
            .unwrap();
    }

    /// A dedup item stands for its patch applied to its inputs: expanding gives the items
    /// tracing without deduplication builds, chains of dedup items (a loop-carried variable)
    /// included.
    #[test]
    fn dedup_items_expand_to_their_patches_applied() {
        // The body `s = s * 2 + i`, deduplicated over three iterations.
        let patch = Lineage::instruction(
            "b(+)",
            "",
            vec![
                Lineage::instruction(
                    "b(*)",
                    "",
                    vec![Lineage::placeholder(0), Lineage::literal("2·INT")],
                ),
                Lineage::placeholder(1),
            ],
        );
        let mut dedup = x();
        let mut plain = x();
        for i in 1..=3 {
            let lit = Lineage::literal(format!("{i}·INT"));
            dedup = Lineage::dedup("s", patch.clone(), vec![dedup, lit.clone()]);
            plain = Lineage::instruction(
                "b(+)",
                "",
                vec![
                    Lineage::instruction("b(*)", "", vec![plain, Lineage::literal("2·INT")]),
                    lit,
                ],
            );
        }
        assert!(dedup.has_dedup());
        assert_ne!(
            dedup, plain,
            "a dedup item is compared as it is, unexpanded"
        );
        let expanded = dedup.expand().unwrap();
        assert!(!expanded.has_dedup());
        assert_eq!(expanded, plain);
        // The log keeps the patch once, and reads back to the same dedup items.
        let log = crate::lineage::serialize(&dedup);
        assert_eq!(log.matches("(P)").count(), 2);
        let back = crate::lineage::deserialize(&log).unwrap();
        assert_eq!(back, dedup);
        assert_eq!(back.expand().unwrap(), plain);
        // A patch with a placeholder beyond the item's inputs cannot be expanded.
        let broken = Lineage::dedup("s", patch, vec![x()]);
        assert!(broken.expand().is_none());
    }
}

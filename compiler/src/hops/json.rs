//! JSON import/export of HOP DAGs and their stable structural hash.
//!
//! Import validates with the verifier and reports problems as user errors: a DAG file handed
//! over by an embedder is the embedder's input, and no input may panic the compiler.

use super::ir::{Hop, HopDag, Literal, OpKind};
use super::linearize::linearize;
use super::size::propagate_sizes;
use super::verify::verify;
use crate::error::{CompileCause, CompileError, DagError, Result};
use crate::span::Span;
use std::hash::Hasher;

impl HopDag {
    /// Serialises the DAG as pretty-printed JSON (deterministic: field and hop order fixed).
    pub fn to_json(&self) -> String {
        // Serialising plain data with string keys cannot fail.
        serde_json::to_string_pretty(self)
            .unwrap_or_else(|e| format!("{{\"error\": {:?}}}", e.to_string()))
    }

    /// Parses and validates a DAG. Sizes of non-leaf hops may be omitted (they are inferred);
    /// sizes that are given must agree with what the inputs imply. Any problem (malformed
    /// JSON, bad ids, cycles, wrong arity, inconsistent types or shapes) is a user error.
    ///
    /// ```
    /// use lafuse_compiler::hops::HopDag;
    /// let text = r#"{"hops": [
    ///   {"op": {"tread": {"name": "X"}}, "inputs": [], "data_type": "matrix",
    ///    "value_type": "double", "rows": 3, "cols": 2, "nnz": 6},
    ///   {"op": {"r": "t"}, "inputs": [0], "data_type": "matrix", "value_type": "double"},
    ///   {"op": {"twrite": {"name": "Y"}}, "inputs": [1], "data_type": "matrix", "value_type": "double"}
    /// ], "roots": [2]}"#;
    /// let dag = HopDag::from_json(text).unwrap();
    /// assert_eq!(dag.hop(lafuse_compiler::hops::HopId(1)).dims(), Some((2, 3)));
    /// assert!(HopDag::from_json("{\"hops\": [], \"roots\": [7]}").is_err());
    /// ```
    pub fn from_json(text: &str) -> Result<HopDag> {
        let mut dag: HopDag = serde_json::from_str(text).map_err(|e| {
            CompileError::at(
                DagError::Json {
                    detail: e.to_string(),
                },
                Span::default(),
            )
        })?;
        let user =
            |e: super::verify::VerifyError| CompileError::at(DagError::Invalid(e), Span::default());
        // Structure first (ids, cycles, arity, types) so size inference can index safely; the
        // size check in `verify` compares given sizes with inferred ones.
        verify(&dag).map_err(user)?;
        // What size inference calls a bug is the imported DAG's fault here.
        propagate_sizes(&mut dag).map_err(|mut e| {
            if let CompileCause::Internal(why) = *e.cause {
                e.cause = Box::new(DagError::Inconsistent(why).into());
            }
            e
        })?;
        verify(&dag).map_err(user)?;
        Ok(dag)
    }

    /// A 64-bit hash of the DAG's structure: ops, types, sizes, input wiring (including which
    /// inputs are shared) and root order. Independent of hop numbering, of dead hops and of
    /// spans; stable across runs and platforms (FNV-1a over a canonical encoding).
    pub fn structural_hash(&self) -> u64 {
        let order = linearize(self);
        let mut position = vec![u32::MAX; self.hops.len()];
        for (i, id) in order.iter().enumerate() {
            position[id.index()] = i as u32;
        }
        let mut h = Fnv64::new();
        h.write_u64(order.len() as u64);
        for id in &order {
            hash_hop(self.hop(*id), &position, &mut h);
        }
        h.write_u64(self.roots.len() as u64);
        for r in &self.roots {
            h.write_u32(position.get(r.index()).copied().unwrap_or(u32::MAX));
        }
        h.finish()
    }
}

fn hash_hop(hop: &Hop, position: &[u32], h: &mut Fnv64) {
    // The op's serde encoding is its stable identity (names are part of the format).
    let op = serde_json::to_string(&hop.op).unwrap_or_default();
    h.write(op.as_bytes());
    h.write_u8(0xff);
    if let OpKind::Literal(Literal::Double(v)) = &hop.op {
        h.write_u64(super::ir::double_bits(*v));
    }
    h.write(hop.data_type.name().as_bytes());
    h.write(hop.value_type.name().as_bytes());
    for v in [hop.rows, hop.cols, hop.nnz] {
        match v {
            Some(v) => {
                h.write_u8(1);
                h.write_u64(v);
            }
            None => h.write_u8(0),
        }
    }
    h.write_u64(hop.inputs.len() as u64);
    for input in &hop.inputs {
        h.write_u32(position.get(input.index()).copied().unwrap_or(u32::MAX));
    }
}

/// FNV-1a, 64 bit: tiny, fixed, and the same on every platform (std's SipHash keys and
/// `Hash` impls are not a stable format). The one stable hash of the project: DAG and CPlan
/// structural hashes, the object store's file names.
pub struct Fnv64(u64);

impl Fnv64 {
    pub fn new() -> Fnv64 {
        Fnv64(0xcbf2_9ce4_8422_2325)
    }
}

impl Default for Fnv64 {
    fn default() -> Fnv64 {
        Fnv64::new()
    }
}

impl Hasher for Fnv64 {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= *b as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn write_u32(&mut self, v: u32) {
        self.write(&v.to_le_bytes());
    }

    fn write_u64(&mut self, v: u64) {
        self.write(&v.to_le_bytes());
    }
}

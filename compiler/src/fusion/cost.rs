//! The analytical cost model of fusion plans (paper section 4.2, formula (3); reference 4.9),
//! kept in one place so that researchers can vary it: a [`CostModel`] value holds the
//! bandwidth and compute constants, and [`plan_cost`] costs a plan described by a
//! [`PlanChooser`] (the memo table under an assignment of interesting points, or a finished
//! [`Selection`]) with per-operator *cost vectors*.
//!
//! Per fused operator (and per unfused operation) the time is
//! `8·|out| / write_bw + max(Σ input bytes / read_bw, Σ flops / compute_bw)`, scaled by the
//! sparsity of the driver for Outer operators (named by [`outer_driver`], as the CPlan
//! construction names it; an Outer plan the construction does not build as an Outer operator
//! is costed as what it builds instead), unless the operator is faster over tiles of its
//! outer product, computing every cell ([`CostModel::outer_tile_density`]). Inside one operator an input read by several
//! fused operations is read once, and a common subexpression is computed once (cost vectors
//! keyed by hop); across operators, a hop fused into several operators is charged in each
//! (redundant compute), and a materialized hop is computed once, however many operators read it.
//!
//! The model is a complete value: besides the bandwidths it holds the per-operation FLOP
//! weights ([`OpWeights`], SystemDS `ComputeCost` by default), every constant can be set by
//! name ([`CostModel::set`], listed in [`CostModel::PARAMETERS`]), and a [`MachineProfile`]
//! (small JSON, written by `lafuse calibrate`) carries a measured model with its provenance.

use crate::fusion::dag::FusionDag;
use crate::fusion::hop_set::HopSet;
use crate::fusion::memo::{typed_score, MemoEntry, MemoTable, TemplateKind};
use crate::fusion::select::Selection;
use crate::fusion::sparsity::outer_driver;
use crate::hops::{
    AggOp, BinaryOp, CumulativeOp, Direction, HopId, NaryOp, OpKind, TernaryOp, UnaryOp,
};
use lafuse_core::prefers_sparse;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// What a 64-byte line read at a scattered position costs, in lines read as a stream
/// ([`CostModel::gather_time`]): each is a cache miss whose latency the loop driving it
/// mostly waits for, where a stream is prefetched. Measured on the reference machine: `X *
/// Y` over a 10000 x 1000 `X` of sparsity 0.01 and a dense `Y` reads 8 % of `Y`'s lines in
/// 1.1-1.4 ms unfused or fused, 4.6-5.8 GB/s of lines against 28 GB/s streamed. An operator
/// that gathers from several inputs at the same non-zeros issues their misses together, so
/// it pays the largest of its gathers, not their sum (`sum(X * Y) + sum(X * Z)` fused: 1.3-1.9
/// ms a run, against 3-4 ms for the unfused `X * Y` and `X * Z` and their sums).
pub const GATHERED_LINE_COST: f64 = 5.0;

/// The FLOPs per output cell (per reduced cell for aggregations, per multiply-add for matrix
/// multiplies) of the operations whose cost differs from one FLOP, relative to an operation of
/// weight 1 (`+`, `*`, comparisons, `x^2`, ...). The defaults are SystemDS's `ComputeCost`
/// weights (reference 4.9); `lafuse calibrate` measures them on the machine at hand.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OpWeights {
    /// `sqrt(x)`, 2.
    pub sqrt: f64,
    /// `exp(x)`, 18.
    pub exp: f64,
    /// `sin(x)`, 18.
    pub sin: f64,
    /// `sigmoid(x)`, 21.
    pub sigmoid: f64,
    /// `log(x)` and `log(x, b)`, 32.
    pub log: f64,
    /// `cos(x)`, 22.
    pub cos: f64,
    /// `tan(x)`, 42.
    pub tan: f64,
    /// `asin(x)`, 93.
    pub asin: f64,
    /// `sinh(x)`, 93.
    pub sinh: f64,
    /// `acos(x)`, 103.
    pub acos: f64,
    /// `cosh(x)`, 103.
    pub cosh: f64,
    /// `atan(x)`, 40.
    pub atan: f64,
    /// `tanh(x)`, 40.
    pub tanh: f64,
    /// `x %/% y`, 6.
    pub int_div: f64,
    /// `x %% y`, 8.
    pub modulus: f64,
    /// `x / y`, 22.
    pub div: f64,
    /// `x ^ y` for an exponent other than the literal 2 (`x^2` is `x*x`, weight 1), 16.
    pub pow: f64,
    /// `ifelse(c, a, b)`, 2.
    pub if_else: f64,
    /// `sum` and `mean` per reduced cell (Kahan summation), 4.
    pub sum: f64,
    /// `var` per reduced cell, 16.
    pub var: f64,
    /// A matrix multiply per multiply-add, 2 (times `ncol(left)·sparsity(left)` per output cell).
    pub matmul: f64,
    /// An Outer operator's dot products `u_i · v_j` taken one non-zero of the driver at a
    /// time, per multiply-add, 2 (SystemDS has one weight for both). Each reads rows of the
    /// factors scattered over memory, so it is slower than a blocked multiply; the operator
    /// runs over tiles of `U %*% t(V)` at `matmul`'s rate instead where that is faster
    /// ([`CostModel::outer_tile_density`]).
    pub outer_dot: f64,
}

impl OpWeights {
    /// SystemDS's `ComputeCost` weights.
    pub const SYSTEMDS: OpWeights = OpWeights {
        sqrt: 2.0,
        exp: 18.0,
        sin: 18.0,
        sigmoid: 21.0,
        log: 32.0,
        cos: 22.0,
        tan: 42.0,
        asin: 93.0,
        sinh: 93.0,
        acos: 103.0,
        cosh: 103.0,
        atan: 40.0,
        tanh: 40.0,
        int_div: 6.0,
        modulus: 8.0,
        div: 22.0,
        pow: 16.0,
        if_else: 2.0,
        sum: 4.0,
        var: 16.0,
        matmul: 2.0,
        outer_dot: 2.0,
    };
}

impl Default for OpWeights {
    fn default() -> OpWeights {
        OpWeights::SYSTEMDS
    }
}

/// The constants of the cost model (reference 4.9 and 11.2; SystemDS
/// `PlanSelectionFuseCostBasedV2`). Bandwidths in bytes per second, compute in FLOP per second.
///
/// Serialized (inside a [`MachineProfile`]) with SystemDS's one-core values for missing fields,
/// so a hand-written profile may give only the constants it changes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CostModel {
    /// Bandwidth of writing a materialized intermediate (allocation plus write), 2 GB/s.
    pub write_bandwidth: f64,
    /// Bandwidth of reading a materialized input from memory, 32 GB/s.
    pub read_bandwidth: f64,
    /// Peak compute rate: 2 GFLOP/s per core times the cores ([`CostModel::systemds`]).
    pub compute_bandwidth: f64,
    /// The sparsity assumed for an Outer operator's driver whose sparsity is unknown, 0.1.
    pub unknown_sparsity: f64,
    /// The FLOP weights of the operations ([`flops_weighted`]).
    pub weights: OpWeights,
    /// Whether values are priced as they are stored ([`CostModel::written_cells`],
    /// [`CostModel::flops`], [`CostModel::gathers`]): a value stored sparse
    /// ([`prefers_sparse`]) written at its CSR bytes, an element-wise operation or
    /// aggregation over such values computed at their non-zeros, a dense input such an
    /// operation reads at a sparse operand's non-zeros gathered at the lines those touch.
    /// False (SystemDS's rule, reference 4.9): every value at its dense cells, every read a
    /// stream, which plan choices (ratios of costs) tolerate but a price in seconds does not:
    /// the tiered JIT weighs runs against compile time with this on
    /// ([`CostModel::pricing_stored_values`]). Not part of a machine profile.
    #[serde(skip)]
    pub stored_values: bool,
}

/// One named constant of the cost model, as [`CostModel::set`] and the CLI's `--cost NAME=VALUE`
/// know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parameter {
    /// The name, also the field's path in the profile's `model` object (`weights.exp`).
    pub name: &'static str,
    /// The unit of the value.
    pub unit: &'static str,
    /// What the constant means.
    pub meaning: &'static str,
}

const fn param(name: &'static str, unit: &'static str, meaning: &'static str) -> Parameter {
    Parameter {
        name,
        unit,
        meaning,
    }
}

impl CostModel {
    /// Every constant of the model, by name: the values [`CostModel::set`] and
    /// [`CostModel::get`] accept.
    pub const PARAMETERS: &'static [Parameter] = &[
        param(
            "write_bandwidth",
            "bytes/s",
            "writing a materialized intermediate (allocation plus write)",
        ),
        param(
            "read_bandwidth",
            "bytes/s",
            "reading a materialized input from memory",
        ),
        param(
            "compute_bandwidth",
            "FLOP/s",
            "compute rate of weight-1 operations over all cores",
        ),
        param(
            "unknown_sparsity",
            "fraction in (0, 1]",
            "sparsity assumed for an Outer driver of unknown sparsity",
        ),
        param("weights.sqrt", "FLOP/cell", "sqrt(x)"),
        param("weights.exp", "FLOP/cell", "exp(x)"),
        param("weights.sin", "FLOP/cell", "sin(x)"),
        param("weights.sigmoid", "FLOP/cell", "sigmoid(x)"),
        param("weights.log", "FLOP/cell", "log(x), log(x, b)"),
        param("weights.cos", "FLOP/cell", "cos(x)"),
        param("weights.tan", "FLOP/cell", "tan(x)"),
        param("weights.asin", "FLOP/cell", "asin(x)"),
        param("weights.sinh", "FLOP/cell", "sinh(x)"),
        param("weights.acos", "FLOP/cell", "acos(x)"),
        param("weights.cosh", "FLOP/cell", "cosh(x)"),
        param("weights.atan", "FLOP/cell", "atan(x)"),
        param("weights.tanh", "FLOP/cell", "tanh(x)"),
        param("weights.int_div", "FLOP/cell", "x %/% y"),
        param("weights.modulus", "FLOP/cell", "x %% y"),
        param("weights.div", "FLOP/cell", "x / y"),
        param(
            "weights.pow",
            "FLOP/cell",
            "x ^ y, exponent not the literal 2",
        ),
        param("weights.if_else", "FLOP/cell", "ifelse(c, a, b)"),
        param(
            "weights.sum",
            "FLOP/reduced cell",
            "sum, mean (Kahan summation)",
        ),
        param("weights.var", "FLOP/reduced cell", "var"),
        param(
            "weights.matmul",
            "FLOP/multiply-add",
            "matrix multiply, per multiply-add",
        ),
        param(
            "weights.outer_dot",
            "FLOP/multiply-add",
            "an Outer operator's dot products, one non-zero at a time, per multiply-add",
        ),
    ];

    /// SystemDS's constants with `cores` cores of local parallelism (`cores` of 0 counts as 1).
    pub fn systemds(cores: u32) -> CostModel {
        CostModel {
            write_bandwidth: 2.0 * GIB,
            read_bandwidth: 32.0 * GIB,
            compute_bandwidth: 2.0 * GIB * f64::from(cores.max(1)),
            unknown_sparsity: 0.1,
            weights: OpWeights::SYSTEMDS,
            stored_values: false,
        }
    }

    /// The same model, pricing values as they are stored ([`CostModel::stored_values`]).
    pub fn pricing_stored_values(self) -> CostModel {
        CostModel {
            stored_values: true,
            ..self
        }
    }

    /// The slot of a named constant; one match, so [`CostModel::get`] and [`CostModel::set`]
    /// cannot disagree.
    fn slot(&mut self, name: &str) -> Option<&mut f64> {
        let w = &mut self.weights;
        Some(match name {
            "write_bandwidth" => &mut self.write_bandwidth,
            "read_bandwidth" => &mut self.read_bandwidth,
            "compute_bandwidth" => &mut self.compute_bandwidth,
            "unknown_sparsity" => &mut self.unknown_sparsity,
            "weights.sqrt" => &mut w.sqrt,
            "weights.exp" => &mut w.exp,
            "weights.sin" => &mut w.sin,
            "weights.sigmoid" => &mut w.sigmoid,
            "weights.log" => &mut w.log,
            "weights.cos" => &mut w.cos,
            "weights.tan" => &mut w.tan,
            "weights.asin" => &mut w.asin,
            "weights.sinh" => &mut w.sinh,
            "weights.acos" => &mut w.acos,
            "weights.cosh" => &mut w.cosh,
            "weights.atan" => &mut w.atan,
            "weights.tanh" => &mut w.tanh,
            "weights.int_div" => &mut w.int_div,
            "weights.modulus" => &mut w.modulus,
            "weights.div" => &mut w.div,
            "weights.pow" => &mut w.pow,
            "weights.if_else" => &mut w.if_else,
            "weights.sum" => &mut w.sum,
            "weights.var" => &mut w.var,
            "weights.matmul" => &mut w.matmul,
            "weights.outer_dot" => &mut w.outer_dot,
            _ => return None,
        })
    }

    /// The value of a named constant ([`CostModel::PARAMETERS`]), `None` for an unknown name.
    pub fn get(&self, name: &str) -> Option<f64> {
        let mut copy = *self;
        copy.slot(name).map(|v| *v)
    }

    /// Sets a named constant ([`CostModel::PARAMETERS`]). Every value must be positive and
    /// finite, `unknown_sparsity` at most 1; errors name the parameter, or list the names.
    pub fn set(&mut self, name: &str, value: f64) -> Result<(), CostModelError> {
        check_value(name, value)?;
        match self.slot(name) {
            Some(slot) => {
                *slot = value;
                Ok(())
            }
            None => Err(CostModelError::UnknownParameter {
                name: name.to_string(),
            }),
        }
    }

    /// Applies one `NAME=VALUE` override (the CLI's `--cost`).
    pub fn apply_override(&mut self, assignment: &str) -> Result<(), CostModelError> {
        let (name, value) =
            assignment
                .split_once('=')
                .ok_or_else(|| CostModelError::NotAnAssignment {
                    text: assignment.to_string(),
                })?;
        let (name, value) = (name.trim(), value.trim());
        let number: f64 = value.parse().map_err(|_| CostModelError::NotANumber {
            name: name.to_string(),
            value: value.to_string(),
        })?;
        self.set(name, number)
    }

    /// Checks every constant as [`CostModel::set`] would (a profile read from a file).
    pub fn validate(&self) -> Result<(), CostModelError> {
        CostModel::PARAMETERS
            .iter()
            .try_for_each(|p| check_value(p.name, self.get(p.name).unwrap_or(f64::NAN)))
    }

    /// The constants as a table: name, value, unit and meaning, one per line.
    pub fn explain(&self) -> String {
        let mut out = String::new();
        for p in CostModel::PARAMETERS {
            let value = self.get(p.name).unwrap_or(f64::NAN);
            out.push_str(&format!(
                "{:<20} {:>12.6e}  {:<20} {}\n",
                p.name, value, p.unit, p.meaning
            ));
        }
        out
    }

    /// Reads the model of a machine profile ([`MachineProfile::from_json`]).
    pub fn from_profile_json(text: &str) -> Result<CostModel, CostModelError> {
        Ok(MachineProfile::from_json(text)?.model)
    }

    /// A machine profile of this model without measurements, as JSON.
    pub fn to_profile_json(&self) -> String {
        MachineProfile::new(*self, Provenance::default()).to_json()
    }

    /// The FLOPs of one hop under this model's weights ([`flops_weighted`]); pricing stored
    /// values, an element-wise operation whose result is stored sparse, or an aggregation or
    /// reorganisation of a sparse-stored input, at the non-zeros the sparse kernels visit.
    pub fn flops(&self, dag: &FusionDag<'_>, h: HopId) -> f64 {
        let all = flops_weighted(dag, h, &self.weights);
        if !self.stored_values {
            return all;
        }
        let visited = match dag.op(h) {
            OpKind::Unary(_) | OpKind::Binary(_) => self.stored_sparsity(dag, h),
            OpKind::AggUnary { .. } | OpKind::Reorg(_) => dag
                .input(h, 0)
                .map_or(1.0, |i| self.stored_sparsity(dag, i)),
            _ => 1.0,
        };
        all * visited
    }

    /// The sparsity of `h`'s value where it is stored sparse ([`prefers_sparse`], non-zeros
    /// known), else 1: the share of its cells a kernel visits.
    fn stored_sparsity(&self, dag: &FusionDag<'_>, h: HopId) -> f64 {
        match (dag.dims(h), dag.hop(h).nnz) {
            (Some((r, c)), Some(nnz)) if prefers_sparse(r, c, nnz) => {
                nnz as f64 / (r as f64 * c as f64)
            }
            _ => 1.0,
        }
    }

    /// Pricing stored values, the bytes `reader` reads of its dense input `c` where it reads
    /// them at scattered positions: where `reader` is an element-wise operation whose result
    /// is stored sparse (it visits only the cells a sparse operand's non-zeros drive, as the
    /// sparse kernels and the fused skeletons' CSR walks do) and `c` is dense and of its shape,
    /// the 64-byte lines of `c` that hold one of those cells, `1 - (1 - s)^8` of them for
    /// non-zeros spread evenly at sparsity `s` (a dense `Y` read by `X * Y` at a sparse `X`'s
    /// 1 % is read at 8 % of its lines). `None` where `c` is read as a stream.
    pub fn gathers(&self, dag: &FusionDag<'_>, reader: HopId, c: HopId) -> Option<f64> {
        let element_wise = matches!(dag.op(reader), OpKind::Unary(_) | OpKind::Binary(_));
        if !self.stored_values || !element_wise || dag.dims(c) != dag.dims(reader) {
            return None;
        }
        let visited = self.stored_sparsity(dag, reader);
        let dense = 8.0 * cells(dag, c);
        if visited >= 1.0 || self.bytes(dag, c) < dense {
            return None;
        }
        Some(dense * (1.0 - (1.0 - visited).powi(8)))
    }

    /// Seconds to read `bytes` of 64-byte lines at scattered positions: [`GATHERED_LINE_COST`]
    /// times their streaming read.
    pub fn gather_time(&self, bytes: f64) -> f64 {
        GATHERED_LINE_COST * self.read_time(bytes)
    }

    /// The cells an operator writes for `h`, as [`CostModel::write_time`] takes them: its dense
    /// cells, or pricing stored values, its [`CostModel::bytes`] in cells (the CSR estimate
    /// where that is smaller).
    pub fn written_cells(&self, dag: &FusionDag<'_>, h: HopId) -> f64 {
        if self.stored_values {
            self.bytes(dag, h) / 8.0
        } else {
            cells(dag, h)
        }
    }

    /// The time of one operator from its cost vector: `write + max(read, compute)`, scaled by
    /// `sparsity_scale` (1 except for Outer operators). Formula (3) of the paper, per operator.
    pub fn operator_time(&self, v: &CostVector, sparsity_scale: f64) -> f64 {
        let write = self.write_time(v.output_cells);
        let read = self.read_time(v.input_bytes.values().sum::<f64>())
            + self.gather_time(v.gathered_bytes.values().copied().fold(0.0, f64::max));
        let compute = self.compute_time(v.flops);
        combine_times(write, read, compute, sparsity_scale)
    }

    /// The density of an Outer operator's driver (non-zeros over cells) from which it runs
    /// over tiles of `U %*% t(V)` (every cell, the dot products at a blocked multiply's
    /// rate, [`OpWeights::matmul`]) rather than one non-zero at a time
    /// ([`OpWeights::outer_dot`]): the ratio of the two weights, at most 1. With SystemDS's
    /// weights (equal) only a driver without zeros runs over tiles; `lafuse calibrate`
    /// measures both.
    pub fn outer_tile_density(&self) -> f64 {
        (self.weights.matmul / self.weights.outer_dot).min(1.0)
    }

    /// Seconds to write `cells` dense cells.
    pub fn write_time(&self, cells: f64) -> f64 {
        8.0 * cells / self.write_bandwidth
    }

    /// Seconds to read `bytes`.
    pub fn read_time(&self, bytes: f64) -> f64 {
        bytes / self.read_bandwidth
    }

    /// Seconds to compute `flops` weighted FLOPs.
    pub fn compute_time(&self, flops: f64) -> f64 {
        flops / self.compute_bandwidth
    }

    /// The memory estimate of a hop's value in bytes: dense `8·cells`, or a CSR estimate when
    /// the non-zeros are known and that is smaller (reference 4.9 `getSafeMemEst`).
    pub fn bytes(&self, dag: &FusionDag<'_>, h: HopId) -> f64 {
        let dense = 8.0 * cells(dag, h);
        match (dag.dims(h), dag.hop(h).nnz) {
            (Some((r, _)), Some(nnz)) => dense.min(12.0 * nnz as f64 + 4.0 * (r as f64 + 1.0)),
            _ => dense,
        }
    }

    /// The sparsity of a hop's value, [`CostModel::unknown_sparsity`] when unknown.
    pub fn sparsity(&self, dag: &FusionDag<'_>, h: HopId) -> f64 {
        match (dag.dims(h), dag.hop(h).nnz) {
            (Some((r, c)), Some(nnz)) if r > 0 && c > 0 => {
                (nnz as f64 / (r as f64 * c as f64)).min(1.0)
            }
            _ => self.unknown_sparsity,
        }
    }
}

/// Formula (3) of the paper for one operator: its write time plus the larger of its read and
/// compute times (reads and computation overlap), scaled by `sparsity_scale`. Every cost and
/// every bound on a cost is this formula over summed terms.
pub fn combine_times(write: f64, read: f64, compute: f64, sparsity_scale: f64) -> f64 {
    (write + read.max(compute)) * sparsity_scale
}

impl Default for CostModel {
    /// SystemDS's constants for one core: plans (and tests) do not depend on the machine.
    fn default() -> CostModel {
        CostModel::systemds(1)
    }
}

/// A value is valid for a parameter when positive and finite; a sparsity is at most 1.
fn check_value(name: &str, value: f64) -> Result<(), CostModelError> {
    let bound = if !(value.is_finite() && value > 0.0) {
        "a positive finite number"
    } else if name == "unknown_sparsity" && value > 1.0 {
        "at most 1"
    } else {
        return Ok(());
    };
    Err(CostModelError::InvalidValue {
        name: name.to_string(),
        value,
        bound,
    })
}

/// Why a cost model constant, override or machine profile was refused. Every cause is the
/// user's (a command-line override, a profile file) except a profile of a version this lafuse
/// does not read.
#[derive(Clone, Debug, PartialEq)]
pub enum CostModelError {
    /// No constant of this name ([`CostModel::PARAMETERS`] lists them).
    UnknownParameter { name: String },
    /// A value outside the constant's range (`bound` says which).
    InvalidValue {
        name: String,
        value: f64,
        bound: &'static str,
    },
    /// An override that is not `NAME=VALUE`.
    NotAnAssignment { text: String },
    /// An override whose value is not a number.
    NotANumber { name: String, value: String },
    /// A profile that is not the JSON of one (serde's message, with line and column).
    ProfileSyntax { why: String },
    /// A profile whose `format` tag is not [`PROFILE_FORMAT`].
    ProfileFormat { found: String },
    /// A profile of another version than [`PROFILE_VERSION`].
    ProfileVersion { found: u32 },
    /// A profile with an invalid constant.
    ProfileValue(Box<CostModelError>),
}

impl CostModelError {
    /// Who has to act on this error.
    pub fn fault(&self) -> crate::error::Fault {
        match self {
            CostModelError::ProfileVersion { .. } => crate::error::Fault::Unsupported,
            _ => crate::error::Fault::User,
        }
    }
}

impl std::fmt::Display for CostModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CostModelError::UnknownParameter { name } => write!(
                f,
                "unknown cost model parameter '{name}'; the parameters are: {}",
                CostModel::PARAMETERS
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            CostModelError::InvalidValue { name, value, bound } => {
                write!(
                    f,
                    "cost model parameter '{name}' must be {bound}, got {value}"
                )
            }
            CostModelError::NotAnAssignment { text } => {
                write!(f, "expected NAME=VALUE, got '{text}'")
            }
            CostModelError::NotANumber { name, value } => {
                write!(f, "the value of '{name}' is not a number: '{value}'")
            }
            CostModelError::ProfileSyntax { why } => write!(f, "invalid machine profile: {why}"),
            CostModelError::ProfileFormat { found } => write!(
                f,
                "invalid machine profile: format is '{found}', expected '{PROFILE_FORMAT}'"
            ),
            CostModelError::ProfileVersion { found } => write!(
                f,
                "unsupported: machine profile version {found} (this lafuse reads version \
                 {PROFILE_VERSION})"
            ),
            CostModelError::ProfileValue(e) => write!(f, "invalid machine profile: {e}"),
        }
    }
}

impl std::error::Error for CostModelError {}

/// The `format` tag of a machine profile file.
pub const PROFILE_FORMAT: &str = "lafuse-machine-profile";
/// The profile version this lafuse writes and reads.
pub const PROFILE_VERSION: u32 = 1;

/// Where a machine profile came from. Informational: the model does not depend on it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Provenance {
    /// What produced the profile ("measured by lafuse calibrate", or empty when written by hand).
    pub source: String,
    /// The lafuse version that wrote it.
    pub lafuse_version: String,
    /// The CPU model string.
    pub cpu: String,
    /// The cores the measurements used (the model's compute rate covers them all).
    pub cores: u32,
    /// When it was measured, ISO 8601 UTC.
    pub date: String,
}

fn default_format() -> String {
    PROFILE_FORMAT.to_string()
}

fn default_version() -> u32 {
    PROFILE_VERSION
}

/// A machine profile: a [`CostModel`] with its provenance and, optionally, the raw measurements
/// it was derived from (name to value, units in the names). Stored as small JSON, by
/// default at `~/.config/lafuse/machine.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineProfile {
    /// Always [`PROFILE_FORMAT`].
    #[serde(default = "default_format")]
    pub format: String,
    /// [`PROFILE_VERSION`].
    #[serde(default = "default_version")]
    pub version: u32,
    /// Where the profile came from.
    #[serde(default)]
    pub provenance: Provenance,
    /// The constants; missing ones are SystemDS's one-core values.
    #[serde(default)]
    pub model: CostModel,
    /// The measurements behind the constants (for the record, not read back into the model).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub measurements: BTreeMap<String, f64>,
}

impl MachineProfile {
    /// A profile of `model` without measurements.
    pub fn new(model: CostModel, provenance: Provenance) -> MachineProfile {
        MachineProfile {
            format: default_format(),
            version: PROFILE_VERSION,
            provenance,
            model,
            measurements: BTreeMap::new(),
        }
    }

    /// Parses and checks a profile: its format tag and version, and every constant positive
    /// ([`CostModel::validate`]). Errors say what is wrong and where (serde's line and column).
    pub fn from_json(text: &str) -> Result<MachineProfile, CostModelError> {
        let profile: MachineProfile = serde_json::from_str(text)
            .map_err(|e| CostModelError::ProfileSyntax { why: e.to_string() })?;
        if profile.format != PROFILE_FORMAT {
            return Err(CostModelError::ProfileFormat {
                found: profile.format,
            });
        }
        if profile.version != PROFILE_VERSION {
            return Err(CostModelError::ProfileVersion {
                found: profile.version,
            });
        }
        profile
            .model
            .validate()
            .map_err(|e| CostModelError::ProfileValue(Box::new(e)))?;
        Ok(profile)
    }

    /// The profile as pretty-printed JSON with a final newline. Non-finite measurements are
    /// left out (JSON has no NaN); the model is valid, hence finite.
    pub fn to_json(&self) -> String {
        let mut clean = self.clone();
        clean.measurements.retain(|_, v| v.is_finite());
        serde_json::to_string_pretty(&clean).unwrap_or_default() + "\n"
    }
}

/// `max(rows, 1) · max(cols, 1)`, 1 for scalars and unknown sizes (reference 4.9).
pub fn cells(dag: &FusionDag<'_>, h: HopId) -> f64 {
    let hop = dag.hop(h);
    let r = hop.rows.unwrap_or(1).max(1) as f64;
    let c = hop.cols.unwrap_or(1).max(1) as f64;
    r * c
}

/// The floating-point operations of one hop under SystemDS's weights
/// ([`OpWeights::SYSTEMDS`]); a model's own weights are [`CostModel::flops`].
pub fn flops(dag: &FusionDag<'_>, h: HopId) -> f64 {
    flops_weighted(dag, h, &OpWeights::SYSTEMDS)
}

/// The floating-point operations of one hop (SystemDS `ComputeCost.getHOPComputeCost`,
/// reference 4.9): a per-cell weight times the output cells; matrix multiplies
/// `w.matmul·ncol(left)·sparsity(left)` per output cell, aggregations their weight times the
/// reduced length. Leaves (inputs, literals) cost nothing.
pub fn flops_weighted(dag: &FusionDag<'_>, h: HopId, w: &OpWeights) -> f64 {
    let out = cells(dag, h);
    let first = dag.input(h, 0);
    let weight = match dag.op(h) {
        OpKind::Literal(_)
        | OpKind::TransientRead { .. }
        | OpKind::PersistentRead { .. }
        | OpKind::TransientWrite { .. }
        | OpKind::PersistentWrite { .. } => return 0.0,
        OpKind::Unary(u) => match u {
            UnaryOp::Sqrt => w.sqrt,
            UnaryOp::Exp => w.exp,
            UnaryOp::Sin => w.sin,
            UnaryOp::Sigmoid => w.sigmoid,
            UnaryOp::Log => w.log,
            UnaryOp::Cos => w.cos,
            UnaryOp::Tan => w.tan,
            UnaryOp::Asin => w.asin,
            UnaryOp::Sinh => w.sinh,
            UnaryOp::Acos => w.acos,
            UnaryOp::Cosh => w.cosh,
            UnaryOp::Atan => w.atan,
            UnaryOp::Tanh => w.tanh,
            _ => 1.0,
        },
        OpKind::Binary(b) => match b {
            BinaryOp::IntDiv => w.int_div,
            BinaryOp::Mod => w.modulus,
            BinaryOp::Div => w.div,
            BinaryOp::Log => w.log,
            BinaryOp::Pow => {
                let two = dag.input(h, 1).and_then(|e| dag.literal_f64(e)) == Some(2.0);
                if two {
                    1.0
                } else {
                    w.pow
                }
            }
            _ => 1.0,
        },
        OpKind::Ternary(TernaryOp::IfElse) => w.if_else,
        OpKind::Ternary(_) => 1.0,
        OpKind::Nary(NaryOp::Min | NaryOp::Max) => dag.inputs(h).len() as f64,
        OpKind::Cumulative(CumulativeOp::Cumsum | CumulativeOp::Cumprod) => 1.0,
        OpKind::MatMul => {
            let left = match first {
                Some(l) => l,
                None => return 0.0,
            };
            let k = dag.hop(left).cols.unwrap_or(1).max(1) as f64;
            let sp = match (dag.dims(left), dag.hop(left).nnz) {
                (Some((r, c)), Some(nnz)) if r > 0 && c > 0 => {
                    (nnz as f64 / (r as f64 * c as f64)).min(1.0)
                }
                _ => 1.0,
            };
            w.matmul * k * sp
        }
        OpKind::AggUnary { op, dir } => {
            let agg = match op {
                AggOp::Sum | AggOp::Mean => w.sum,
                AggOp::Var => w.var,
                _ => 1.0,
            };
            let (r, c) = first.map_or((1.0, 1.0), |i| {
                let hop = dag.hop(i);
                (
                    hop.rows.unwrap_or(1).max(1) as f64,
                    hop.cols.unwrap_or(1).max(1) as f64,
                )
            });
            let reduced = match dir {
                Direction::Full => r * c,
                Direction::Row => c,
                Direction::Col => r,
            };
            agg * reduced
        }
        _ => 1.0,
    };
    weight * out
}

/// The cost vector of one operator (paper section 4.2): output size, the distinct
/// materialized inputs it reads (keyed by hop, so a shared read counts once), and the
/// operations it computes (keyed by hop, so a CSE inside the operator counts once).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CostVector {
    /// Cells of the operator's output.
    pub output_cells: f64,
    /// Bytes of each distinct materialized matrix input.
    pub input_bytes: BTreeMap<HopId, f64>,
    /// Pricing stored values ([`CostModel::stored_values`]), the bytes of the 64-byte lines
    /// of each dense input read at a sparse operand's non-zeros ([`CostModel::gathers`]).
    pub gathered_bytes: BTreeMap<HopId, f64>,
    /// Total FLOPs of the operations computed inside the operator.
    pub flops: f64,
}

/// How a costing walk finds the plan of a hop: as the root of an operator, or inside an
/// operator of a template. The rules are those of [`crate::fusion::select::select_fuse_all`],
/// so the cost of a plan is the cost of the selection that traversal builds from it.
pub trait PlanChooser {
    /// The plan of `h` when it starts an operator (`None`: computed unfused).
    fn root(&self, h: HopId) -> Option<&MemoEntry>;
    /// The plan of `h` when fused into an operator of `template` (`None`: `h` is read
    /// materialized and starts its own operator).
    fn within(&self, h: HopId, template: TemplateKind) -> Option<&MemoEntry>;
}

/// The memo table filtered by a `usable` predicate (an assignment of interesting points).
pub struct MemoChooser<'m> {
    /// The memo table.
    pub memo: &'m MemoTable,
    /// Which entries the plan may use.
    pub usable: &'m dyn Fn(HopId, &MemoEntry) -> bool,
}

impl PlanChooser for MemoChooser<'_> {
    fn root(&self, h: HopId) -> Option<&MemoEntry> {
        if self.memo.is_excluded(h) {
            return None;
        }
        self.memo
            .group(h)
            .iter()
            .filter(|e| e.is_valid() && (self.usable)(h, e))
            .min_by_key(|e| (e.template.rank(), std::cmp::Reverse(e.num_refs())))
    }

    fn within(&self, h: HopId, template: TemplateKind) -> Option<&MemoEntry> {
        self.memo
            .group(h)
            .iter()
            .filter(|e| template.can_absorb(e.template) && (self.usable)(h, e))
            .min_by_key(|e| typed_score(e, template))
    }
}

/// A finished selection: roots start operators with their recorded plan; inside an operator
/// the hop's selected plan the template can absorb with the smallest typed score, as
/// [`crate::fusion::select::select_fuse_all`] chose it.
pub struct SelectionChooser<'s>(pub &'s Selection);

impl PlanChooser for SelectionChooser<'_> {
    fn root(&self, h: HopId) -> Option<&MemoEntry> {
        self.0.roots.get(&h)
    }

    fn within(&self, h: HopId, template: TemplateKind) -> Option<&MemoEntry> {
        self.0
            .plans
            .get(&h)?
            .iter()
            .filter(|e| template.can_absorb(e.template))
            .min_by_key(|e| typed_score(e, template))
    }
}

/// The hops a costing walk stays within (a partition's), with their FLOPs under the model
/// computed once: the plan search costs the same hops for every plan it evaluates.
#[derive(Clone, Debug)]
pub struct CostScope {
    hops: HopSet,
    /// FLOPs by hop index; NaN outside the scope.
    flops: Vec<f64>,
}

impl CostScope {
    /// The scope of `hops`, their FLOPs under `model`.
    pub fn new(
        dag: &FusionDag<'_>,
        model: &CostModel,
        hops: impl IntoIterator<Item = HopId>,
    ) -> CostScope {
        let mut scope = CostScope {
            hops: HopSet::new(dag),
            flops: vec![f64::NAN; dag.arena_len()],
        };
        for h in hops {
            scope.hops.insert(h);
            if let Some(f) = scope.flops.get_mut(h.index()) {
                *f = model.flops(dag, h);
            }
        }
        scope
    }

    /// Whether the walk may visit `h`.
    pub fn contains(&self, h: HopId) -> bool {
        self.hops.contains(h)
    }
}

/// The FLOPs of `h` under `model`: the scope's, where it holds them.
fn flops_in(dag: &FusionDag<'_>, model: &CostModel, scope: Option<&CostScope>, h: HopId) -> f64 {
    match scope.and_then(|s| s.flops.get(h.index())) {
        Some(f) if !f.is_nan() => *f,
        _ => model.flops(dag, h),
    }
}

/// The modelled execution time (seconds) of the plan `chooser` describes, starting from the
/// materialized hops `starts`; with `scope`, hops outside it are not costed (a partition's
/// share of the plan, reference 4.9 `getPlanCost`).
///
/// Every materialized hop is computed once: as an operator root with its plan and the plans
/// of the hops it fuses (a fused hop charged once per operator that fuses it), or unfused
/// when it has no plan. Leaves cost nothing. A MultiAgg is one operator over the Cell bodies
/// of its aggregates, with one cost vector (shared reads counted once).
pub fn plan_cost(
    dag: &FusionDag<'_>,
    model: &CostModel,
    chooser: &dyn PlanChooser,
    starts: &[HopId],
    scope: Option<&CostScope>,
) -> f64 {
    plan_cost_bounded(dag, model, chooser, starts, scope, f64::INFINITY)
}

/// [`plan_cost`] that gives up with `+∞` as soon as the running sum exceeds `bound` (the
/// best cost found so far; reference 4.9 early abort): such a plan cannot win.
pub fn plan_cost_bounded(
    dag: &FusionDag<'_>,
    model: &CostModel,
    chooser: &dyn PlanChooser,
    starts: &[HopId],
    scope: Option<&CostScope>,
    bound: f64,
) -> f64 {
    let mut total = 0.0;
    let mut done = HopSet::new(dag);
    let mut work: Vec<HopId> = starts.iter().rev().copied().collect();
    while let Some(h) = work.pop() {
        if scope.is_some_and(|s| !s.contains(h)) || !done.insert(h) {
            continue;
        }
        let inputs = dag.inputs(h);
        if dag.op(h).is_sink() || inputs.is_empty() {
            work.extend(inputs.iter().rev());
            continue;
        }
        if dag.is_read_in_place(h) {
            // Never computed: its readers read the matrix under it ([`materialized_read`]),
            // which is materialized in its place (a partition's start whose reader is
            // outside the partition, as the whole plan's walk reaches it from that reader).
            debug_assert!(chooser.root(h).is_none(), "no template roots {h:?}");
            work.push(dag.inputs(h)[0]);
            continue;
        }
        let mut v = CostVector {
            output_cells: model.written_cells(dag, h),
            ..CostVector::default()
        };
        match chooser.root(h) {
            Some(e) if e.template == TemplateKind::MAgg => {
                // One operator computes every aggregate of the MultiAgg over shared reads;
                // its first member accounts for it (reference 4.9), the others are done.
                let members: Vec<HopId> = e.inputs.iter().flatten().copied().collect();
                let first = members.first().copied().unwrap_or(h);
                if first != h && !done.contains(first) && scope.is_none_or(|s| s.contains(first)) {
                    // Cost the operator from its first member: visit it first, come back.
                    done.remove(h);
                    work.insert(0, h);
                    work.push(first);
                    continue;
                }
                let todo: Vec<HopId> = members
                    .into_iter()
                    .filter(|&a| a == h || !done.contains(a))
                    .collect();
                v.output_cells = 0.0;
                let mut body = BTreeSet::new();
                for a in todo {
                    done.insert(a);
                    v.output_cells += model.written_cells(dag, a);
                    match chooser.within(a, TemplateKind::Cell) {
                        Some(c) => cost_body(
                            dag, model, chooser, scope, a, c, &mut v, &mut body, &mut work,
                        ),
                        None => {
                            body.insert(a);
                            v.flops += flops_in(dag, model, scope, a);
                            for (pos, &c) in dag.inputs(a).iter().enumerate() {
                                let read = materialized_read(dag, a, pos, c);
                                read_materialized(dag, model, a, read, &mut v, &mut work);
                            }
                        }
                    }
                }
            }
            Some(e) => {
                let mut body = BTreeSet::new();
                cost_body(
                    dag, model, chooser, scope, h, e, &mut v, &mut body, &mut work,
                );
                if e.template == TemplateKind::Outer {
                    match outer_operator(dag, h, &body) {
                        OuterOperator::Driven(driver) => {
                            let sparsity = model.sparsity(dag, driver);
                            total += outer_time(dag, model, &body, &v, sparsity);
                            if total > bound {
                                return f64::INFINITY;
                            }
                            continue;
                        }
                        OuterOperator::EveryCell => {}
                        OuterOperator::Dropped => {
                            total += unfused_body_time(dag, model, h, &body, &mut done);
                            if total > bound {
                                return f64::INFINITY;
                            }
                            continue;
                        }
                    }
                }
            }
            None => {
                v.flops = flops_in(dag, model, scope, h);
                for (pos, &c) in inputs.iter().enumerate() {
                    let read = materialized_read(dag, h, pos, c);
                    read_materialized(dag, model, h, read, &mut v, &mut work);
                }
            }
        }
        total += model.operator_time(&v, 1.0);
        if total > bound {
            return f64::INFINITY;
        }
    }
    total
}

/// The time of an Outer operator over a driver of `sparsity` whose body `body` has the cost
/// vector `v` (its outer products' multiply-adds charged at [`OpWeights::matmul`]): the
/// faster of its two ways to run, as the skeleton chooses by the driver's density
/// ([`CostModel::outer_tile_density`]). One non-zero at a time, the dot products cost
/// [`OpWeights::outer_dot`] per multiply-add and everything scales with the sparsity; over
/// tiles, every cell is computed, the dot products at the blocked multiply's weight.
fn outer_time(
    dag: &FusionDag<'_>,
    model: &CostModel,
    body: &BTreeSet<HopId>,
    v: &CostVector,
    sparsity: f64,
) -> f64 {
    let w = &model.weights;
    let products: f64 = body
        .iter()
        .filter(|&&b| dag.is_outer_product_like_mm(b))
        .map(|&b| model.flops(dag, b))
        .sum();
    let one_at_a_time = CostVector {
        // Never cheaper than the blocked multiply (which keeps the selection's lower bounds,
        // the sparsity-scaled blocked cost, below every plan's cost).
        flops: v.flops + products * ((w.outer_dot / w.matmul).max(1.0) - 1.0),
        ..v.clone()
    };
    model
        .operator_time(&one_at_a_time, sparsity)
        .min(model.operator_time(v, 1.0))
}

/// What the CPlan construction builds from an Outer plan, hence what costing charges for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OuterOperator {
    /// An Outer operator visiting the non-zeros of its driver ([`outer_driver`]): its time is
    /// scaled by the driver's sparsity, the input it really iterates over (an unknown sparsity
    /// counts as [`CostModel::unknown_sparsity`]).
    Driven(HopId),
    /// A cell-wise or full-sum plan whose outer product is read materialized (another operator
    /// computes it) or that has none (an outer broadcast `u op t(v)`): built as the Cell plan
    /// its body is, which visits every cell, as every Cell plan is costed.
    EveryCell,
    /// No operator: a final product without its outer product, or a body no factor of which
    /// can drive it (`X + 1 / (U %*% t(V))`). Its hops run unfused.
    Dropped,
}

/// How the construction builds the Outer plan rooted at `root` whose fused hops are `body`.
/// Costing asks [`outer_driver`], the rule the construction takes its main input from, rather
/// than a rule of its own (SystemDS scales by the input of most cells, reference 4.9, which
/// may be a dense side input of the driver's size, or no factor at all), so an operator is
/// never costed over an input it does not iterate over; and where the construction builds no Outer operator, costing charges what it builds
/// instead, so the search does not pick a plan for a saving that never materializes.
fn outer_operator(dag: &FusionDag<'_>, root: HopId, body: &BTreeSet<HopId>) -> OuterOperator {
    // The construction reads column-range indexing and literal `seq`s as inputs computed
    // unfused (no body node slices or counts): in its region they are inputs, not hops.
    let in_region =
        |x: HopId| body.contains(&x) && dag.op(x) != &OpKind::Index && !dag.is_literal_seq(x);
    if let Some(driver) = outer_driver(dag, root, &in_region) {
        return OuterOperator::Driven(driver);
    }
    let computes_outer_product = body.iter().any(|&b| dag.is_outer_product_like_mm(b));
    let cell_wise_root = matches!(
        dag.op(root),
        OpKind::Binary(_)
            | OpKind::AggUnary {
                op: AggOp::Sum,
                dir: Direction::Full,
            }
    );
    if !computes_outer_product && cell_wise_root {
        OuterOperator::EveryCell
    } else {
        OuterOperator::Dropped
    }
}

/// The time of a dropped operator's `body` run unfused: each hop an operation of its own that
/// reads its inputs materialized and writes its output. Its hops are then computed (`done`),
/// so a later reader reads them rather than computing them again; one already computed as an
/// operator of its own is not charged twice. The operator's own inputs were queued by
/// [`cost_body`].
fn unfused_body_time(
    dag: &FusionDag<'_>,
    model: &CostModel,
    root: HopId,
    body: &BTreeSet<HopId>,
    done: &mut HopSet,
) -> f64 {
    let mut time = 0.0;
    for &b in body {
        // The root is in `done` already: it is the hop being costed. A transpose its
        // products read in place is not computed at all.
        if b != root && (!done.insert(b) || dag.is_read_in_place(b)) {
            continue;
        }
        let mut v = CostVector {
            output_cells: model.written_cells(dag, b),
            flops: model.flops(dag, b),
            ..CostVector::default()
        };
        for (pos, &c) in dag.inputs(b).iter().enumerate() {
            let c = materialized_read(dag, b, pos, c);
            add_read(dag, model, b, c, &mut v);
        }
        time += model.operator_time(&v, 1.0);
    }
    time
}

/// Adds the operations an operator computes from `h` (with plan `e`) down its fusion
/// references to `v`, depth-first in input order with an explicit stack (fused chains can be
/// as deep as the DAG). A hop already in `body` is a CSE of this operator and counted once;
/// unfused inputs are read materialized and queued in `work`.
#[allow(clippy::too_many_arguments)]
fn cost_body<'c>(
    dag: &FusionDag<'_>,
    model: &CostModel,
    chooser: &'c dyn PlanChooser,
    scope: Option<&CostScope>,
    h: HopId,
    e: &'c MemoEntry,
    v: &mut CostVector,
    body: &mut BTreeSet<HopId>,
    work: &mut Vec<HopId>,
) {
    let mut stack: Vec<(HopId, &MemoEntry)> = vec![(h, e)];
    let mut fused = Vec::new();
    while let Some((h, e)) = stack.pop() {
        if !body.insert(h) {
            continue;
        }
        v.flops += flops_in(dag, model, scope, h);
        for (pos, &c) in dag.inputs(h).iter().enumerate() {
            let plan = if e.template != TemplateKind::MAgg && e.is_ref(pos) {
                chooser.within(c, e.template)
            } else {
                None
            };
            match plan {
                Some(ce) => fused.push((c, ce)),
                None => {
                    let read = materialized_read(dag, h, pos, c);
                    read_materialized(dag, model, h, read, v, work)
                }
            }
        }
        stack.extend(fused.drain(..).rev());
    }
}

/// The hop an operator reads for input `pos` of `h` (`c`) where it reads it materialized:
/// the matrix under `c` where `c` is a transpose that products read in place
/// ([`FusionDag::is_read_in_place`]: unfused, Row's final `t(X) %*% B`, Outer's final
/// `t(U) %*% W`), else `c` itself. No template roots such a transpose, so whatever the plan
/// it costs nothing unless an operator fuses it: the executor never computes it otherwise.
fn materialized_read(dag: &FusionDag<'_>, h: HopId, pos: usize, c: HopId) -> HopId {
    if pos == 0 && dag.is_matmul(h) && dag.is_read_in_place(c) {
        dag.inputs(c)[0]
    } else {
        c
    }
}

/// `reader` reads the materialized `c`: its bytes join the operator's reads, and `c` is queued
/// to be costed itself.
fn read_materialized(
    dag: &FusionDag<'_>,
    model: &CostModel,
    reader: HopId,
    c: HopId,
    v: &mut CostVector,
    work: &mut Vec<HopId>,
) {
    add_read(dag, model, reader, c, v);
    work.push(c);
}

/// Adds `reader`'s read of the materialized `c` to `v`: streamed, or gathered where `reader`
/// reads it at a sparse operand's non-zeros ([`CostModel::gathers`]). A matrix several hops of
/// the operator read counts once: streamed if any of them streams it, else gathered at the
/// most any of them gathers.
fn add_read(dag: &FusionDag<'_>, model: &CostModel, reader: HopId, c: HopId, v: &mut CostVector) {
    if !dag.is_matrix(c) {
        return;
    }
    match model.gathers(dag, reader, c) {
        Some(_) if v.input_bytes.contains_key(&c) => {}
        Some(lines) => {
            let most = v.gathered_bytes.entry(c).or_insert(lines);
            *most = most.max(lines);
        }
        None => {
            v.gathered_bytes.remove(&c);
            v.input_bytes.insert(c, model.bytes(dag, c));
        }
    }
}

/// The modelled cost of a whole selection under `model` (all operators and all unfused
/// operations of the DAG), so that any policy's plan can be compared under one model.
pub fn cost_of(dag: &FusionDag<'_>, model: &CostModel, selection: &Selection) -> f64 {
    let starts = crate::fusion::select::selection_roots(dag);
    plan_cost(dag, model, &SelectionChooser(selection), &starts, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fusion::template::test_util::{build, outer_log_sum, view};

    #[test]
    fn flops_follow_systemds_weights() {
        let mut ids = Vec::new();
        let dag = build(|b| {
            let x = b.input("X", 10, 20, 200);
            let v = b.input("v", 20, 1, 20);
            let d = b.binary(BinaryOp::Div, x, x).unwrap();
            let two = b.literal_f64(2.0);
            let sq = b.binary(BinaryOp::Pow, x, two).unwrap();
            let mm = b.matmul(x, v).unwrap();
            let s = b.agg(AggOp::Sum, Direction::Row, x).unwrap();
            ids.extend([d, sq, mm, s]);
            vec![d, sq, mm, s]
        });
        let f = view(&dag);
        assert_eq!(flops(&f, ids[0]), 22.0 * 200.0);
        assert_eq!(flops(&f, ids[1]), 200.0);
        assert_eq!(flops(&f, ids[2]), 2.0 * 20.0 * 10.0);
        assert_eq!(flops(&f, ids[3]), 4.0 * 20.0 * 10.0);
    }

    #[test]
    fn operator_time_is_write_plus_max_of_read_and_compute() {
        let m = CostModel {
            write_bandwidth: 1.0,
            read_bandwidth: 2.0,
            compute_bandwidth: 4.0,
            unknown_sparsity: 0.1,
            weights: OpWeights::SYSTEMDS,
            stored_values: false,
        };
        let mut v = CostVector {
            output_cells: 1.0,
            ..CostVector::default()
        };
        v.input_bytes.insert(HopId(0), 8.0);
        v.flops = 4.0;
        // write 8/1 + max(8/2, 4/4).
        assert_eq!(m.operator_time(&v, 1.0), 12.0);
        v.flops = 40.0;
        assert_eq!(m.operator_time(&v, 0.5), 9.0);
    }

    #[test]
    fn model_weights_scale_flops() {
        let mut ids = Vec::new();
        let dag = build(|b| {
            let x = b.input("X", 10, 20, 200);
            let v = b.input("v", 20, 1, 20);
            let d = b.binary(BinaryOp::Div, x, x).unwrap();
            let mm = b.matmul(x, v).unwrap();
            ids.extend([d, mm]);
            vec![d, mm]
        });
        let f = view(&dag);
        let default = CostModel::default();
        assert_eq!(default.flops(&f, ids[0]), flops(&f, ids[0]));
        let mut m = CostModel::default();
        m.set("weights.div", 5.0).unwrap();
        m.set("weights.matmul", 0.5).unwrap();
        assert_eq!(m.flops(&f, ids[0]), 5.0 * 200.0);
        assert_eq!(m.flops(&f, ids[1]), 0.5 * 20.0 * 10.0);
    }

    #[test]
    fn every_parameter_can_be_set_and_read_back() {
        let names: BTreeSet<&str> = CostModel::PARAMETERS.iter().map(|p| p.name).collect();
        assert_eq!(names.len(), CostModel::PARAMETERS.len(), "names are unique");
        let mut m = CostModel::default();
        for (i, p) in CostModel::PARAMETERS.iter().enumerate() {
            let value = 0.5 / (i + 1) as f64;
            m.set(p.name, value).unwrap();
            assert_eq!(m.get(p.name), Some(value), "{}", p.name);
        }
        // Each name reaches its own field: all values are distinct, and the JSON keeps them.
        let back = CostModel::from_profile_json(&m.to_profile_json()).unwrap();
        assert_eq!(back, m);
        for (i, p) in CostModel::PARAMETERS.iter().enumerate() {
            assert_eq!(back.get(p.name), Some(0.5 / (i + 1) as f64), "{}", p.name);
        }
        // And every field has a name: no field kept its default.
        let json: serde_json::Value = serde_json::from_str(&m.to_profile_json()).unwrap();
        let model = &json["model"];
        let fields =
            model.as_object().unwrap().len() - 1 + model["weights"].as_object().unwrap().len();
        assert_eq!(fields, CostModel::PARAMETERS.len());
    }

    #[test]
    fn a_profile_of_another_version_is_unsupported_and_other_refusals_are_the_users() {
        use crate::error::Fault;
        let version = CostModel::from_profile_json(r#"{"version": 2}"#).unwrap_err();
        assert_eq!(version, CostModelError::ProfileVersion { found: 2 });
        assert_eq!(version.fault(), Fault::Unsupported);
        let mut m = CostModel::default();
        for refused in [
            m.set("read_bw", 1.0).unwrap_err(),
            m.set("write_bandwidth", -1.0).unwrap_err(),
            m.apply_override("read_bandwidth").unwrap_err(),
            CostModel::from_profile_json("{").unwrap_err(),
            CostModel::from_profile_json(r#"{"model": {"read_bandwidth": 0}}"#).unwrap_err(),
        ] {
            assert_eq!(refused.fault(), Fault::User, "{refused}");
        }
    }

    #[test]
    fn default_profile_round_trips() {
        let text = CostModel::default().to_profile_json();
        assert!(
            text.contains("\"format\": \"lafuse-machine-profile\""),
            "{text}"
        );
        assert_eq!(
            CostModel::from_profile_json(&text).unwrap(),
            CostModel::default()
        );
        let mut profile = MachineProfile::new(
            CostModel::systemds(4),
            Provenance {
                source: "measured by lafuse calibrate".into(),
                lafuse_version: "0.1.0".into(),
                cpu: "Test CPU".into(),
                cores: 4,
                date: "2024-01-02T03:04:05Z".into(),
            },
        );
        profile.measurements.insert("exp_ns_per_cell".into(), 3.5);
        profile.measurements.insert("not_a_number".into(), f64::NAN);
        let back = MachineProfile::from_json(&profile.to_json()).unwrap();
        assert_eq!(back.provenance, profile.provenance);
        assert_eq!(back.model, profile.model);
        assert_eq!(back.measurements.len(), 1, "NaN measurements are left out");
        assert_eq!(back.measurements["exp_ns_per_cell"], 3.5);
    }

    #[test]
    fn partial_profile_keeps_systemds_constants() {
        let m = CostModel::from_profile_json(
            r#"{"model": {"read_bandwidth": 1e10, "weights": {"exp": 7}}}"#,
        )
        .unwrap();
        let expected = CostModel {
            read_bandwidth: 1e10,
            weights: OpWeights {
                exp: 7.0,
                ..OpWeights::SYSTEMDS
            },
            ..CostModel::default()
        };
        assert_eq!(m, expected);
    }

    #[test]
    fn overrides_by_name() {
        let mut m = CostModel::default();
        m.apply_override("read_bandwidth=1e9").unwrap();
        m.apply_override(" weights.log = 3 ").unwrap();
        assert_eq!(m.read_bandwidth, 1e9);
        assert_eq!(m.weights.log, 3.0);

        let err = m.set("read_bw", 1.0).unwrap_err().to_string();
        assert!(
            err.contains("unknown cost model parameter 'read_bw'"),
            "{err}"
        );
        assert!(
            err.contains("read_bandwidth") && err.contains("weights.matmul"),
            "{err}"
        );
        let err = m.set("write_bandwidth", 0.0).unwrap_err().to_string();
        assert!(
            err.contains("'write_bandwidth' must be a positive finite number"),
            "{err}"
        );
        assert!(m.set("compute_bandwidth", f64::INFINITY).is_err());
        assert!(m
            .set("unknown_sparsity", 1.5)
            .unwrap_err()
            .to_string()
            .contains("at most 1"));
        assert_eq!(
            m.write_bandwidth,
            CostModel::default().write_bandwidth,
            "unchanged"
        );

        let err = m.apply_override("read_bandwidth").unwrap_err().to_string();
        assert!(err.contains("expected NAME=VALUE"), "{err}");
        let err = m
            .apply_override("read_bandwidth=fast")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a number: 'fast'"), "{err}");
    }

    #[test]
    fn bad_profiles_are_rejected_with_a_reason() {
        let err = CostModel::from_profile_json("{\"model\": {")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("invalid machine profile:") && err.contains("line 1"),
            "{err}"
        );
        let err = CostModel::from_profile_json(r#"{"model": {"read_bandwith": 1}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `read_bandwith`"), "{err}");
        let err = CostModel::from_profile_json(r#"{"model": {"read_bandwidth": -1}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("'read_bandwidth' must be a positive"), "{err}");
        let err = CostModel::from_profile_json(r#"{"format": "other"}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("expected 'lafuse-machine-profile'"), "{err}");
        let err = CostModel::from_profile_json(r#"{"version": 2}"#)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("unsupported: machine profile version 2"),
            "{err}"
        );
    }

    #[test]
    fn explain_lists_every_parameter() {
        let text = CostModel::default().explain();
        assert_eq!(text.lines().count(), CostModel::PARAMETERS.len());
        assert!(
            text.lines()
                .any(|l| l.starts_with("weights.exp") && l.contains("1.8")),
            "{text}"
        );
    }

    /// Priced as stored, `X * Y` over a sparse X is written at its CSR bytes, computed at its
    /// non-zeros and gathers the dense Y's lines those touch, and `sum` of it reads only
    /// those, and `t(X)` moves only its non-zeros; `X + 1` is dense, and so are the products
    /// and transposes of dense inputs. SystemDS's rule (the default) prices every value dense
    /// and streams every read.
    #[test]
    fn stored_values_price_sparse_values_at_their_non_zeros() {
        let mut ids = [HopId(0); 6];
        let dag = build(|b| {
            let x = b.input("X", 1000, 100, 1000);
            let y = b.input("Y", 1000, 100, 100_000);
            let xy = b.binary(BinaryOp::Mul, x, y).unwrap();
            let one = b.literal_f64(1.0);
            let x1 = b.binary(BinaryOp::Add, x, one).unwrap();
            let yy = b.binary(BinaryOp::Mul, y, y).unwrap();
            let s = b.agg(AggOp::Sum, Direction::Full, xy).unwrap();
            let tx = b.transpose(x).unwrap();
            let ty = b.transpose(y).unwrap();
            ids = [xy, x1, yy, s, tx, ty];
            vec![s, x1, yy, tx, ty]
        });
        let [xy, x1, yy, s, tx, ty] = ids;
        let dag = view(&dag);
        let by_cells = CostModel::default();
        let stored = by_cells.pricing_stored_values();
        for h in ids {
            assert_eq!(by_cells.written_cells(&dag, h), cells(&dag, h));
            assert_eq!(by_cells.flops(&dag, h), flops(&dag, h));
        }
        // 1000 non-zeros of 100000 cells: 12 bytes each plus the row pointers.
        assert_eq!(
            stored.written_cells(&dag, xy),
            (12.0 * 1000.0 + 4.0 * 1001.0) / 8.0
        );
        assert_eq!(stored.flops(&dag, xy), flops(&dag, xy) * 0.01);
        assert_eq!(stored.flops(&dag, s), flops(&dag, s) * 0.01);
        // A transpose of a CSR matrix moves its non-zeros (a Row operator that fuses
        // `t(X) %*% ...` was priced at every cell of `X`: 1e8 FLOPs at 1e5 x 1e3, 16 ms of a
        // 4.6 ms operator, so the tiered JIT deferred the fusion that saves a pass over `X`).
        assert_eq!(stored.flops(&dag, tx), flops(&dag, tx) * 0.01);
        for dense in [x1, yy, ty] {
            assert_eq!(stored.written_cells(&dag, dense), cells(&dag, dense));
            assert_eq!(stored.flops(&dag, dense), flops(&dag, dense));
        }
        let (x, y) = (dag.inputs(xy)[0], dag.inputs(xy)[1]);
        let lines = 8.0 * 100_000.0 * (1.0 - 0.99f64.powi(8));
        let gathered = stored.gathers(&dag, xy, y).unwrap();
        assert!(
            (gathered - lines).abs() < 1e-9 * lines,
            "{gathered} against {lines}"
        );
        // X is read as a stream (CSR); `X + 1` and `Y * Y` visit every cell.
        assert_eq!(stored.gathers(&dag, xy, x), None);
        assert_eq!(stored.gathers(&dag, x1, x), None);
        assert_eq!(stored.gathers(&dag, yy, y), None);
        assert_eq!(by_cells.gathers(&dag, xy, y), None);
    }

    /// `s = sum(X * Y * (U %*% t(V)))` over a sparse X and a dense Y of X's shape: both are
    /// factors of the cell-wise part of the same size. Gives the DAG and `[X, Y, s]`.
    fn sparse_and_dense_factors() -> (crate::hops::HopDag, [HopId; 3]) {
        let mut ids = [HopId(0); 3];
        let dag = build(|b| {
            let x = b.input("X", 2000, 2000, 4000);
            let y = b.input("Y", 2000, 2000, 4_000_000);
            let u = b.input("U", 2000, 10, 20_000);
            let v = b.input("V", 2000, 10, 20_000);
            let vt = b.transpose(v).unwrap();
            let uv = b.matmul(u, vt).unwrap();
            let xy = b.binary(BinaryOp::Mul, x, y).unwrap();
            let g = b.binary(BinaryOp::Mul, xy, uv).unwrap();
            let s = b.agg(AggOp::Sum, Direction::Full, g).unwrap();
            ids = [x, y, s];
            vec![s]
        });
        (dag, ids)
    }

    /// The fused hops and cost vector of the operator `chooser` roots at `root`, as
    /// [`plan_cost_bounded`] gathers them.
    fn operator_body(
        dag: &FusionDag<'_>,
        model: &CostModel,
        chooser: &dyn PlanChooser,
        root: HopId,
    ) -> (BTreeSet<HopId>, CostVector) {
        let entry = chooser.root(root).expect("an operator is rooted there");
        let mut v = CostVector {
            output_cells: cells(dag, root),
            ..CostVector::default()
        };
        let mut body = BTreeSet::new();
        cost_body(
            dag,
            model,
            chooser,
            None,
            root,
            entry,
            &mut v,
            &mut body,
            &mut Vec::new(),
        );
        (body, v)
    }

    /// The selection of one hand-made plan: `roots` start operators; every entry of
    /// `plans` (roots included) is the hop's plan.
    fn hand_selection(plans: &[(HopId, MemoEntry)], roots: &[HopId]) -> Selection {
        let mut selection = Selection {
            selector: "hand".into(),
            ..Selection::default()
        };
        for (h, e) in plans {
            selection.plans.entry(*h).or_default().push(e.clone());
            if roots.contains(h) {
                selection.roots.insert(*h, e.clone());
            }
        }
        selection
    }

    /// The invariant that costing and construction name an Outer operator's driver by one rule
    /// (`sparsity::outer_driver`): with a sparse X and a dense Y both factors of the cell-wise
    /// part, the operator the construction builds iterates over X, and costing scales it by X
    /// (the rule costing had of its own, the input of most cells and then most bytes, took Y).
    #[test]
    fn costing_and_construction_name_the_same_outer_driver() {
        use crate::fusion::cplan::construct_cplans;
        use crate::fusion::{plan_fusion, CostBased, FuseAll, PlanSelector};
        let (dag, [x, y, s]) = sparse_and_dense_factors();
        let f = view(&dag);
        let model = CostModel::default();
        let gen = CostBased::default();
        for selector in [&FuseAll as &dyn PlanSelector, &gen] {
            let plan = plan_fusion(&dag, selector).unwrap();
            let program = construct_cplans(&dag, &plan.memo, &plan.selection).unwrap();
            let op = program
                .operators
                .iter()
                .find(|o| o.outputs == [s])
                .unwrap_or_else(|| panic!("no operator at s:\n{}", program.explain()));
            assert_eq!(op.cplan.template.name(), "outer", "{}", program.explain());
            assert_eq!(op.inputs[0], x, "{}", program.explain());
            let chooser = SelectionChooser(&plan.selection);
            let (body, _) = operator_body(&f, &model, &chooser, s);
            assert_eq!(outer_operator(&f, s, &body), OuterOperator::Driven(x));
            assert!(op.inputs.contains(&y));
        }
    }

    /// An Outer operator's modelled time is scaled by its driver's sparsity: X's 0.001, not
    /// dense Y's 1.
    #[test]
    fn an_outer_operator_is_costed_at_its_drivers_sparsity() {
        use crate::fusion::{plan_fusion, FuseAll};
        let (dag, [x, _, s]) = sparse_and_dense_factors();
        let f = view(&dag);
        let model = CostModel::default();
        let plan = plan_fusion(&dag, &FuseAll).unwrap();
        let chooser = SelectionChooser(&plan.selection);
        let (body, v) = operator_body(&f, &model, &chooser, s);
        assert_eq!(model.sparsity(&f, x), 0.001);
        let scope = CostScope::new(&f, &model, body.iter().copied());
        let cost = plan_cost(&f, &model, &chooser, &[s], Some(&scope));
        assert_eq!(cost, model.operator_time(&v, 0.001));
        assert!(cost < model.operator_time(&v, 1.0) / 100.0);
    }

    /// The model of a machine where dot products one non-zero at a time cost ten times a
    /// blocked multiply's multiply-add (about what `lafuse calibrate` measures at rank 100 on
    /// the development machines: 6.7e9 against 5e10 to 1e11 multiply-adds per second).
    fn calibrated_like() -> CostModel {
        let mut model = CostModel::systemds(2);
        model.set("weights.matmul", 0.2).unwrap();
        model.set("weights.outer_dot", 2.0).unwrap();
        model
    }

    /// An Outer operator costs the cheaper of its two ways to run: its driver's non-zeros one
    /// at a time (the dot products at `weights.outer_dot`, scaled by the driver's sparsity) or
    /// every cell over tiles (at `weights.matmul`), the switch the skeleton makes at
    /// `outer_tile_density`, the ratio of the two weights.
    #[test]
    fn an_outer_operator_costs_the_cheaper_of_non_zeros_and_tiles() {
        use crate::fusion::{plan_fusion, FuseAll};
        let model = calibrated_like();
        assert!((model.outer_tile_density() - 0.1).abs() < 1e-12);
        assert_eq!(CostModel::default().outer_tile_density(), 1.0);
        for (nnz, tiles_cheaper) in [(4_000_000, true), (400_000, false), (40_000, false)] {
            let (dag, [uv, s]) = outer_log_sum(nnz);
            let f = view(&dag);
            let plan = plan_fusion(&dag, &FuseAll).unwrap();
            let chooser = SelectionChooser(&plan.selection);
            let (body, v) = operator_body(&f, &model, &chooser, s);
            let products = model.flops(&f, uv);
            let sparsity = nnz as f64 / 4e6;
            let one_at_a_time = CostVector {
                flops: v.flops + 9.0 * products,
                ..v.clone()
            };
            let non_zeros = model.operator_time(&one_at_a_time, sparsity);
            let tiles = model.operator_time(&v, 1.0);
            let scope = CostScope::new(&f, &model, body.iter().copied());
            let cost = plan_cost(&f, &model, &chooser, &[s], Some(&scope));
            assert_eq!(cost, non_zeros.min(tiles), "nnz {nnz}");
            assert_eq!(tiles < non_zeros, tiles_cheaper, "nnz {nnz}");
        }
    }

    /// Fused Outer runs at least as fast as the unfused multiply and cell-wise operations it
    /// replaces at every sparsity (over tiles, the same blocked multiply without writing and
    /// reading the product), and the cost-based selection under a calibrated-like model picks
    /// it at sparsity 1, 0.1 and 0.01.
    #[test]
    fn the_calibrated_model_picks_fused_outer_at_every_sparsity() {
        use crate::fusion::cplan::construct_cplans;
        use crate::fusion::{plan_fusion, CostBased};
        for nnz in [4_000_000, 400_000, 40_000] {
            let (dag, [_, s]) = outer_log_sum(nnz);
            let selector = CostBased::new(calibrated_like());
            let plan = plan_fusion(&dag, &selector).unwrap();
            let program = construct_cplans(&dag, &plan.memo, &plan.selection).unwrap();
            let op = program.operators.iter().find(|o| o.outputs == [s]);
            assert_eq!(
                op.map(|o| o.cplan.template.name()),
                Some("outer"),
                "nnz {nnz}:\n{}",
                program.explain()
            );
        }
    }

    /// `X + 1 / (U %*% t(V))` has no factor an Outer operator could drive by (`1 / f` is not
    /// 0 where any input is): `outer_driver` names none, the construction builds no operator
    /// from a plan rooting one there (its hops run unfused), and costing charges that plan
    /// what those hops cost unfused, the same as no fusion at all.
    #[test]
    fn an_outer_plan_no_factor_can_drive_is_costed_as_its_hops_unfused() {
        use crate::fusion::cplan::construct_cplans;
        use crate::fusion::memo::CloseState;
        use crate::fusion::sparsity::outer_driver;
        let mut ids = [HopId(0); 3];
        let dag = build(|b| {
            let x = b.input("X", 2000, 2000, 4000);
            let u = b.input("U", 2000, 10, 20_000);
            let v = b.input("V", 2000, 10, 20_000);
            let vt = b.transpose(v).unwrap();
            let uv = b.matmul(u, vt).unwrap();
            let one = b.literal_f64(1.0);
            let inv = b.binary(BinaryOp::Div, one, uv).unwrap();
            let r = b.binary(BinaryOp::Add, x, inv).unwrap();
            ids = [uv, inv, r];
            vec![r]
        });
        let [uv, inv, r] = ids;
        let f = view(&dag);
        let model = CostModel::default();
        let outer = |n| MemoEntry::new(TemplateKind::Outer, n, CloseState::OpenValid);
        let selection = hand_selection(
            &[
                (r, outer(2).with_ref(1, inv)),
                (inv, outer(2).with_ref(1, uv)),
                (uv, outer(2)),
            ],
            &[r],
        );
        let all = |h: HopId| [uv, inv, r].contains(&h);
        assert_eq!(outer_driver(&f, r, &all), None);
        let program = construct_cplans(&dag, &crate::fusion::MemoTable::new(), &selection).unwrap();
        assert!(program.operators.is_empty(), "{}", program.explain());
        let chooser = SelectionChooser(&selection);
        let (body, _) = operator_body(&f, &model, &chooser, r);
        assert_eq!(outer_operator(&f, r, &body), OuterOperator::Dropped);
        let unfused = cost_of(&f, &model, &Selection::default());
        assert_eq!(cost_of(&f, &model, &selection), unfused);
    }

    /// An Outer plan whose `U %*% t(V)` is read materialized (another operator, or none,
    /// computes it) is built as the Cell plan its body is, which visits every cell: costing
    /// charges it unscaled, not at the sparsity of its sparse factor X.
    #[test]
    fn an_outer_plan_without_its_outer_product_is_costed_at_every_cell() {
        use crate::fusion::cplan::construct_cplans;
        use crate::fusion::memo::CloseState;
        let mut ids = [HopId(0); 6];
        let dag = build(|b| {
            let x = b.input("X", 2000, 2000, 4000);
            let u = b.input("U", 2000, 10, 20_000);
            let v = b.input("V", 2000, 10, 20_000);
            let vt = b.transpose(v).unwrap();
            let uv = b.matmul(u, vt).unwrap();
            let ten = b.literal_f64(10.0);
            let shifted = b.binary(BinaryOp::Add, uv, ten).unwrap();
            let lg = b.unary(crate::hops::UnaryOp::Log, shifted).unwrap();
            let g = b.binary(BinaryOp::Mul, x, lg).unwrap();
            let s = b.agg(AggOp::Sum, Direction::Full, g).unwrap();
            ids = [x, uv, shifted, lg, g, s];
            vec![s]
        });
        let [x, _, shifted, lg, g, s] = ids;
        let f = view(&dag);
        let model = CostModel::default();
        let outer = |n| MemoEntry::new(TemplateKind::Outer, n, CloseState::OpenValid);
        let selection = hand_selection(
            &[
                (s, outer(1).with_ref(0, g)),
                (g, outer(2).with_ref(1, lg)),
                (lg, outer(1).with_ref(0, shifted)),
                (shifted, outer(2)),
            ],
            &[s],
        );
        let program = construct_cplans(&dag, &crate::fusion::MemoTable::new(), &selection).unwrap();
        let op = &program.operators[0];
        assert_eq!(op.cplan.template.name(), "cell", "{}", program.explain());
        let chooser = SelectionChooser(&selection);
        let (body, v) = operator_body(&f, &model, &chooser, s);
        assert_eq!(outer_operator(&f, s, &body), OuterOperator::EveryCell);
        assert!(model.sparsity(&f, x) < 0.01);
        let scope = CostScope::new(&f, &model, body.iter().copied());
        let cost = plan_cost(&f, &model, &chooser, &[s], Some(&scope));
        assert_eq!(cost, model.operator_time(&v, 1.0));
    }
}

//! PTX operators as a [`Backend`] (feature `cuda`): every plan is built for the CPU by the
//! backend it wraps (so an operator can always run there), and its GPU kernels are generated
//! on the first call that places it on the GPU, one per main-input format.
//!
//! A call runs on the GPU when the placement says so, a GPU is present, the GPU backend
//! generates the plan, and (`auto`) the [`PlacementModel`] expects the GPU to be faster with
//! the transfers counted; otherwise, or when the device fails, on the CPU. Results are the
//! same either way up to the order of sums.

use super::{generate, PtxKernel, ENTRY};
use crate::backend::{Backend, Built, CodegenError, Executable, Operand, Placement, Request};
use crate::zero_cells::{self, InputBound};
use lafuse_compiler::fusion::cplan::{CNode, CPlan, OuterType, TemplateSpec};
use lafuse_runtime::lineage::Lineage;
use lafuse_runtime::{Matrix, ValueRange};
use lafuse_skeletons::gpu::abi::{GpuMain, KernelShape};
use lafuse_skeletons::gpu::device::{gpu, Gpu, GpuCall};
use lafuse_skeletons::{Input, SkeletonError};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The `auto` placement's cost model: a call goes to the GPU when its estimated time there
/// (uploading what is not on the device, reading everything at device bandwidth, a launch)
/// beats reading its inputs at the CPU's bandwidth. Bandwidths in bytes per second.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlacementModel {
    pub host_to_device: f64,
    pub device_read: f64,
    pub cpu_read: f64,
    /// Launch, argument upload and synchronization.
    pub overhead: Duration,
}

impl Default for PlacementModel {
    /// PCIe 5 x16 in practice, HBM3 at a conservative 2 TB/s, a server socket's 50 GB/s.
    fn default() -> Self {
        PlacementModel {
            host_to_device: 25e9,
            device_read: 2e12,
            cpu_read: 50e9,
            overhead: Duration::from_micros(40),
        }
    }
}

impl PlacementModel {
    /// Whether a call reading `bytes` (of which `upload` must first cross to the device)
    /// should run on the GPU.
    pub fn prefers_gpu(&self, bytes: f64, upload: f64) -> bool {
        let gpu =
            upload / self.host_to_device + bytes / self.device_read + self.overhead.as_secs_f64();
        let cpu = bytes / self.cpu_read;
        gpu < cpu
    }
}

/// Calls placed on the GPU and on the CPU, and why calls meant for the GPU ran on the CPU.
#[derive(Debug, Default)]
pub struct PlacementCounters {
    pub gpu_calls: AtomicU64,
    pub cpu_calls: AtomicU64,
    pub device_failures: AtomicU64,
}

/// The GPU backend around a CPU backend `B`.
pub struct GpuBackend<B> {
    cpu: B,
    placement: Placement,
    model: PlacementModel,
    counters: Arc<PlacementCounters>,
}

impl<B: Backend> GpuBackend<B> {
    pub fn new(cpu: B, placement: Placement, model: PlacementModel) -> Self {
        GpuBackend {
            cpu,
            placement,
            model,
            counters: Arc::default(),
        }
    }

    /// The placement counters shared by every operator this backend built.
    pub fn counters(&self) -> Arc<PlacementCounters> {
        self.counters.clone()
    }
}

impl<B: Backend> Backend for GpuBackend<B> {
    fn name(&self) -> &'static str {
        "gpu"
    }

    fn build(&self, requests: &[Request<'_>]) -> Vec<Result<Built, CodegenError>> {
        self.cpu
            .build(requests)
            .into_iter()
            .zip(requests)
            .map(|(cpu, r)| {
                let cpu = cpu?;
                let op = GpuOperator {
                    plan: r.plan.clone(),
                    cpu: cpu.executable,
                    placement: self.placement,
                    model: self.model,
                    kernels: Default::default(),
                    counters: self.counters.clone(),
                    generation_nanos: AtomicU64::new(0),
                };
                Ok(Built {
                    executable: Arc::new(op),
                    origin: cpu.origin,
                })
            })
            .collect()
    }
}

/// The density of a dense driver from which an Outer operator computes every cell on the GPU
/// rather than the driver's non-zeros (converted to CSR on the host). On an H200 every cell of
/// a 20000 x 2000 driver at rank 10 took 0.35 ms and the non-zeros 25 ps each (0.10 ms at
/// density 0.1): the kernels alone break even near 0.35, and a dense driver's conversion and
/// its larger upload move the point lower.
const DENSE_OUTER_MIN_DENSITY: f64 = 0.25;

/// Whether a call of `plan` with `kernel` waits for a device run's check: kernels generated
/// and validated by `ptxas`, and checked against the CPU by `lafuse bench --suite gpu`, but not
/// yet on a GPU (session 29's: products in a Row plan's product space, left outer products,
/// the device versions of the runtime's helpers, and session 30's `tanh`). Such calls run on the CPU unless
/// `LAFUSE_GPU_UNCHECKED=1`; a device run that passes the suite's checks retires this.
fn awaits_device_check(plan: &CPlan, kernel: &PtxKernel) -> bool {
    static UNCHECKED: OnceLock<bool> = OnceLock::new();
    let allowed = *UNCHECKED
        .get_or_init(|| std::env::var_os("LAFUSE_GPU_UNCHECKED").is_some_and(|v| v == "1"));
    let new_shape = matches!(
        kernel.kernel.shape,
        KernelShape::RowB1 | KernelShape::OuterLeft { .. }
    );
    // `tanh` is the shared vector library's (`lafuse_tanh_v1`) since session 30, not yet run
    // on a device either.
    let helpers = plan.nodes.iter().any(|n| {
        crate::native::expr::node_calls_helper(plan, n)
            || matches!(
                n,
                CNode::Unary {
                    f: lafuse_compiler::hops::UnaryOp::Tanh,
                    ..
                }
            )
    });
    !allowed && (new_shape || helpers)
}

/// Non-zeros over cells (1 for an empty matrix).
fn density(m: &Matrix) -> f64 {
    let cells = m.rows() * m.cols();
    if cells == 0 {
        1.0
    } else {
        m.nnz() as f64 / cells as f64
    }
}

/// The main-input format a GPU call of `plan` reads, or `None` where only the CPU computes
/// this call exactly (an Outer product whose driver's zeros cannot be skipped).
fn gpu_main(plan: &CPlan, inputs: &[Operand<'_>], known: &[Option<ValueRange>]) -> Option<GpuMain> {
    let main_sparse = matches!(inputs.first(), Some(Operand::Matrix(m)) if m.is_sparse());
    let skippable = || {
        let bounds: Vec<InputBound> = inputs
            .iter()
            .enumerate()
            .map(|(pos, o)| match o {
                Operand::Scalar(s) => InputBound::Scalar(*s),
                Operand::Matrix(_) if pos == 0 => InputBound::Unknown,
                Operand::Matrix(m) => InputBound::Matrix {
                    range: known
                        .get(pos)
                        .copied()
                        .flatten()
                        .unwrap_or_else(|| m.value_range()),
                    cols: m.cols(),
                },
            })
            .collect();
        zero_cells::zeros_skippable(plan, &bounds)
    };
    match &plan.template {
        TemplateSpec::Cell { sparse_safe, .. } | TemplateSpec::MAgg { sparse_safe, .. } => {
            Some(if *sparse_safe && main_sparse && skippable() {
                GpuMain::Csr
            } else {
                GpuMain::Dense
            })
        }
        TemplateSpec::Outer { outer_type } => {
            // Over a dense driver dense enough, every cell in tiles (cell-wise outputs and
            // full sums); else the non-zeros of the driver as CSR where its zeros may be
            // skipped, every cell in tiles where not.
            let tiles = matches!(outer_type, OuterType::CellWise | OuterType::FullAgg);
            let dense_driver = matches!(inputs.first(), Some(Operand::Matrix(m))
                    if !m.is_sparse() && density(m) >= DENSE_OUTER_MIN_DENSITY);
            if tiles && dense_driver {
                Some(GpuMain::Dense)
            } else if skippable() {
                Some(GpuMain::Csr)
            } else if tiles {
                Some(GpuMain::Dense)
            } else {
                None
            }
        }
        // A sparse main input is densified for the row kernel.
        TemplateSpec::Row { .. } => Some(GpuMain::Dense),
    }
}

/// A fused operator that runs on the GPU or the CPU, call by call.
pub struct GpuOperator {
    plan: Arc<CPlan>,
    cpu: Arc<dyn Executable>,
    placement: Placement,
    model: PlacementModel,
    /// The kernel per main-input format (dense, CSR), generated on first use; a refusal is
    /// kept too, so an unsupported plan is not generated again.
    kernels: [OnceLock<Result<PtxKernel, CodegenError>>; 2],
    counters: Arc<PlacementCounters>,
    generation_nanos: AtomicU64,
}

impl fmt::Debug for GpuOperator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuOperator")
            .field("template", &self.plan.template.name())
            .field("placement", &self.placement)
            .finish()
    }
}

impl GpuOperator {
    /// The kernel for `main`, generated now if it was not.
    fn kernel(&self, main: GpuMain) -> &Result<PtxKernel, CodegenError> {
        let slot = &self.kernels[usize::from(main == GpuMain::Csr)];
        slot.get_or_init(|| {
            let k = generate(&self.plan, main);
            if let Ok(k) = &k {
                self.generation_nanos
                    .fetch_add(k.generation.as_nanos() as u64, Ordering::Relaxed);
            }
            k
        })
    }

    /// Whether `auto` placement sends this call to the GPU: inputs the device holds by their
    /// lineage need no upload.
    fn worth_it(&self, device: &Gpu, inputs: &[Operand<'_>], lineage: &[Option<Lineage>]) -> bool {
        let (mut bytes, mut upload) = (0.0, 0.0);
        for (k, o) in inputs.iter().enumerate() {
            let b = match o {
                Operand::Matrix(Matrix::Dense(d)) => d.values.len() as f64 * 8.0,
                Operand::Matrix(Matrix::Sparse(s)) => s.values.len() as f64 * 16.0,
                Operand::Scalar(_) => 0.0,
            };
            bytes += b;
            let held = lineage
                .get(k)
                .and_then(Option::as_ref)
                .is_some_and(|l| device.holds(l));
            if !held {
                upload += b;
            }
        }
        self.model.prefers_gpu(bytes, upload)
    }

    fn on_gpu(
        &self,
        device: &Gpu,
        kernel: &PtxKernel,
        inputs: &[Operand<'_>],
        out_shapes: &[(usize, usize)],
        known: &[Option<ValueRange>],
        lineage: &[Option<Lineage>],
    ) -> Result<Vec<Matrix>, CodegenError> {
        let ins: Vec<Input<'_>> = inputs
            .iter()
            .zip((0..).map(|k| known.get(k).copied().flatten()))
            .map(|(o, range)| match o {
                Operand::Scalar(s) => Input::Scalar(*s),
                Operand::Matrix(m) if range.is_some_and(|r| r.is_finite()) => {
                    Input::FiniteMatrix(m)
                }
                Operand::Matrix(m) => Input::Matrix(m),
            })
            .collect();
        let call = GpuCall {
            inputs: &ins,
            lineage,
            out_shapes,
        };
        device
            .run(&kernel.ptx, ENTRY, &kernel.kernel, &call)
            .map_err(CodegenError::Skeleton)
    }
}

impl Executable for GpuOperator {
    fn execute(
        &self,
        inputs: &[Operand<'_>],
        out_shapes: &[(usize, usize)],
        known: &[Option<ValueRange>],
    ) -> Result<Vec<Matrix>, CodegenError> {
        self.execute_traced(inputs, out_shapes, known, &[])
    }

    fn execute_traced(
        &self,
        inputs: &[Operand<'_>],
        out_shapes: &[(usize, usize)],
        known: &[Option<ValueRange>],
        lineage: &[Option<Lineage>],
    ) -> Result<Vec<Matrix>, CodegenError> {
        let cpu = || {
            self.counters.cpu_calls.fetch_add(1, Ordering::Relaxed);
            self.cpu.execute(inputs, out_shapes, known)
        };
        if self.placement == Placement::Cpu {
            return cpu();
        }
        let Ok(device) = gpu() else {
            return cpu();
        };
        let Some(main) = gpu_main(&self.plan, inputs, known) else {
            return cpu();
        };
        let kernel = match self.kernel(main) {
            Ok(k) => k,
            Err(CodegenError::Unsupported(_)) => return cpu(),
            Err(e) => return Err(e.clone()),
        };
        let shapes: Vec<(usize, usize)> = inputs
            .iter()
            .map(|o| match o {
                Operand::Matrix(m) => m.shape(),
                Operand::Scalar(_) => (1, 1),
            })
            .collect();
        if !kernel.kernel.accepts(&shapes)
            || awaits_device_check(&self.plan, kernel)
            || (self.placement == Placement::Auto && !self.worth_it(device, inputs, lineage))
        {
            return cpu();
        }
        match self.on_gpu(device, kernel, inputs, out_shapes, known, lineage) {
            Ok(out) => {
                self.counters.gpu_calls.fetch_add(1, Ordering::Relaxed);
                Ok(out)
            }
            // The device failed (out of device memory, a driver error): the CPU computes the
            // same result.
            Err(CodegenError::Skeleton(
                e @ (SkeletonError::Device { .. } | SkeletonError::DeviceMemory(_)),
            )) => {
                if self
                    .counters
                    .device_failures
                    .fetch_add(1, Ordering::Relaxed)
                    == 0
                {
                    eprintln!("warning: {e}; running the operator on the CPU");
                }
                cpu()
            }
            Err(e) => Err(e),
        }
    }

    fn compile_time(&self) -> Duration {
        self.cpu.compile_time()
            + Duration::from_nanos(self.generation_nanos.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx::samples::outer;

    /// Session 29's kernels (product-space Row, left products, device helpers) run on the CPU
    /// until a device run has checked them; the others run on the GPU.
    #[test]
    fn kernels_not_yet_checked_on_a_device_wait_for_one() {
        if std::env::var_os("LAFUSE_GPU_UNCHECKED").is_some() {
            return;
        }
        let waits = |plan: &CPlan, main| {
            let kernel = generate(plan, main).unwrap();
            awaits_device_check(plan, &kernel)
        };
        assert!(waits(&outer(OuterType::Left), GpuMain::Csr));
        assert!(!waits(&outer(OuterType::Right), GpuMain::Csr));
        for (name, plan) in crate::ptx::samples::helpers() {
            assert!(waits(&plan, GpuMain::Dense), "{name}");
        }
        for (name, plan) in crate::ptx::samples::rows() {
            assert_eq!(
                waits(&plan, GpuMain::Dense),
                name.contains("NoAggB1"),
                "{name}"
            );
        }
    }

    #[test]
    fn a_dense_driver_takes_the_tiled_outer_kernel_where_it_computes_the_output() {
        let m = |rows: usize, cols: usize, value: f64| {
            Matrix::from_dense_values(rows, cols, vec![value; rows * cols]).unwrap()
        };
        let (x, u, v) = (m(40, 30, 0.5), m(40, 3, 0.25), m(30, 3, 0.75));
        let inputs = [
            Operand::Matrix(&x),
            Operand::Matrix(&u),
            Operand::Matrix(&v),
        ];
        let known = [None, None, None];
        for ty in [OuterType::CellWise, OuterType::FullAgg] {
            assert_eq!(
                gpu_main(&outer(ty), &inputs, &known),
                Some(GpuMain::Dense),
                "{ty:?}"
            );
        }
        // The tiles compute no right product: its dense driver goes to the CSR kernel where
        // its zeros may be skipped, else to the CPU.
        let right = outer(OuterType::Right);
        let zeros = crate::zero_cells::zeros_skippable(
            &right,
            &[
                InputBound::Unknown,
                InputBound::Matrix {
                    range: u.value_range(),
                    cols: 3,
                },
                InputBound::Matrix {
                    range: v.value_range(),
                    cols: 3,
                },
            ],
        );
        assert_eq!(
            gpu_main(&right, &inputs, &known),
            zeros.then_some(GpuMain::Csr)
        );
        // A driver mostly zeros, even stored dense, is walked by its non-zeros.
        let mut vals = vec![0.0; 40 * 30];
        vals[7] = 2.0;
        let sparse = Matrix::from_dense_values(40, 30, vals).unwrap();
        let inputs = [
            Operand::Matrix(&sparse),
            Operand::Matrix(&u),
            Operand::Matrix(&v),
        ];
        assert_eq!(
            gpu_main(&outer(OuterType::FullAgg), &inputs, &known),
            Some(GpuMain::Csr)
        );
    }
}

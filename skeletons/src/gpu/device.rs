//! The GPU itself (feature `cuda`): the CUDA driver found at run time, one context and stream,
//! loaded kernels by their PTX, device memory through the [`DeviceMemory`] manager, and a
//! kernel run from host inputs to host outputs.
//!
//! No GPU is a normal condition: [`gpu`] checks for the driver library before the first call
//! (cudarc panics otherwise) and reports why there is none; callers then run on the CPU.

use super::abi::{fnv, GpuKernel, GpuMain, PtxText, BLOCK_THREADS};
use super::launch::{self, Grid};
use super::memory::{BufferId, CacheMeta, DeviceAllocator, DeviceMemory, OutOfDeviceMemory};
use crate::abi::{CsrView, DenseView, KernelArgs};
use crate::prep::{self, Input, InputRole};
use crate::{InputUse, Result, ShapeNeed, SkeletonError};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, LaunchConfig,
    PushKernelArg,
};
use lafuse_runtime::lineage::{ItemKind, Lineage};
use lafuse_runtime::{Matrix, SparseMatrix};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Why there is no GPU to run on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuUnavailable {
    /// The CUDA driver library (`libcuda.so`) is not installed.
    NoDriver,
    /// The driver did not open device 0 (`detail` is its message).
    NoDevice { detail: String },
}

impl fmt::Display for GpuUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuUnavailable::NoDriver => {
                f.write_str("no GPU: the CUDA driver library (libcuda.so) is not installed")
            }
            GpuUnavailable::NoDevice { detail } => write!(f, "no GPU: CUDA device 0: {detail}"),
        }
    }
}

/// Device buffers from the driver, for the memory manager.
struct CudaAllocator {
    stream: Arc<CudaStream>,
}

impl DeviceAllocator for CudaAllocator {
    type Buffer = CudaSlice<u8>;

    fn allocate(&mut self, bytes: usize) -> std::result::Result<CudaSlice<u8>, OutOfDeviceMemory> {
        // SAFETY: every byte of a buffer is written (upload, memset or kernel) before it is
        // read back.
        unsafe { self.stream.alloc::<u8>(bytes.max(8)) }.map_err(|_| OutOfDeviceMemory)
    }

    fn free(&mut self, buffer: CudaSlice<u8>) {
        drop(buffer);
    }
}

/// What the GPU did, for `--stats`.
#[derive(Clone, Copy, Debug, Default)]
pub struct GpuCounters {
    pub launches: u64,
    pub modules_loaded: u64,
    pub bytes_to_device: u64,
    pub bytes_from_device: u64,
    /// Wall time of uploads, kernels and downloads (the stream synchronized after each run).
    pub busy: Duration,
    /// Time in kernels (CUDA events around each launch), and the last launch's.
    pub kernels: Duration,
    pub last_kernel: Duration,
}

struct State {
    memory: DeviceMemory<Lineage, CudaAllocator>,
    /// Loaded modules by their text's key ([`PtxText::key`]).
    modules: HashMap<u64, Arc<CudaModule>>,
    /// Their entries by module key and the entry name's hash (the entry names a module has,
    /// `lafuse_kernel`, `lafuse_kernel_narrow` and `lafuse_fold_columns`, hash apart).
    functions: HashMap<(u64, u64), CudaFunction>,
    counters: GpuCounters,
}

/// The process's GPU: device 0.
pub struct Gpu {
    name: String,
    stream: Arc<CudaStream>,
    state: Mutex<State>,
}

/// Values of cached device inputs stay after this many earlier uploads of the same lineage
/// (MEMPHIS's delayed caching: a value used once is not worth the device memory).
pub const CACHE_DELAY: u32 = 1;

/// Groups of partial rows the first level of a device fold makes (each folded by its own
/// threads), so a fold of a thousand partial rows is not a thousand dependent loads.
const FOLD_GROUPS: usize = 32;

/// A value's lineage names its dense row-major form on the device; its CSR arrays (row
/// pointers, column indexes, values), or those of its transpose (`by_columns`), are cached under
/// items derived from it (the CSR form of a value is a function of the value).
fn csr_keys(main: &Lineage, by_columns: bool) -> [Lineage; 3] {
    let names = if by_columns {
        ["gpu_csc_col_ptr", "gpu_csc_row_idx", "gpu_csc_values"]
    } else {
        ["gpu_csr_row_ptr", "gpu_csr_col_idx", "gpu_csr_values"]
    };
    names.map(|what| Lineage::new(ItemKind::Instruction, what, "", vec![main.clone()]))
}

/// The CSR arrays a CSR kernel reads, with their shape; where the device cache holds them
/// already (`on_device`, pinned for the call) the host arrays are empty and never read.
#[derive(Clone, Copy)]
struct CsrArrays<'a> {
    rows: usize,
    cols: usize,
    nnz: usize,
    row_ptr: &'a [usize],
    col_idx: &'a [u32],
    values: &'a [f64],
    on_device: Option<[BufferId; 3]>,
}

impl<'a> CsrArrays<'a> {
    fn of(s: &'a SparseMatrix) -> Self {
        CsrArrays {
            rows: s.rows,
            cols: s.cols,
            nnz: s.values.len(),
            row_ptr: &s.row_ptr[..],
            col_idx: &s.col_idx[..],
            values: &s.values[..],
            on_device: None,
        }
    }
}

/// One kernel launch of an operator's call: the function, its argument block on the device,
/// its (x, y) blocks, and what it is for errors.
struct Launch {
    func: CudaFunction,
    args: u64,
    blocks: (u32, u32),
    what: &'static str,
}

static GPU: OnceLock<std::result::Result<Gpu, GpuUnavailable>> = OnceLock::new();

/// The GPU, or why there is none (checked once per process).
pub fn gpu() -> std::result::Result<&'static Gpu, GpuUnavailable> {
    GPU.get_or_init(open).as_ref().map_err(Clone::clone)
}

/// The GPU if this process has opened it (never opens it: statistics ask through this).
pub fn used() -> Option<&'static Gpu> {
    GPU.get().and_then(|g| g.as_ref().ok())
}

fn open() -> std::result::Result<Gpu, GpuUnavailable> {
    // SAFETY: only probes for the library (dlopen), calling nothing in it.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(GpuUnavailable::NoDriver);
    }
    let ctx = CudaContext::new(0).map_err(|e| GpuUnavailable::NoDevice {
        detail: e.to_string(),
    })?;
    // One stream: the order of operations is the stream's; the per-buffer event tracking for
    // several streams would only cost time.
    // SAFETY: every buffer is used on this one stream.
    unsafe { ctx.disable_event_tracking() };
    let name = ctx.name().unwrap_or_else(|_| "CUDA device 0".into());
    let stream = ctx.default_stream();
    Ok(Gpu {
        name,
        stream: stream.clone(),
        state: Mutex::new(State {
            memory: DeviceMemory::new(CudaAllocator { stream }, CACHE_DELAY),
            modules: HashMap::new(),
            functions: HashMap::new(),
            counters: GpuCounters::default(),
        }),
    })
}

fn driver(step: &'static str, e: impl fmt::Display) -> SkeletonError {
    SkeletonError::Device {
        step,
        detail: e.to_string(),
    }
}

/// The GPU reads side inputs whole: nothing is streamed block by block.
#[derive(Clone, Copy, Debug)]
struct WholeInput(InputUse);

impl InputRole for WholeInput {
    fn is_skipped(self) -> bool {
        self.0.is_skipped()
    }
    fn is_scalar(self) -> bool {
        self.0.is_scalar()
    }
    fn mismatch(self, r: usize, c: usize, m: usize, n: usize) -> Option<ShapeNeed> {
        self.0.mismatch(r, c, m, n)
    }
    fn is_transposed(self) -> bool {
        self.0.is_transposed()
    }
    fn is_streamed(self) -> bool {
        false
    }
}

fn bytes_of<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: plain-old-data (f64, usize, u32, the repr(C) argument structs) viewed as bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// One kernel run's inputs: values (by CPlan position) and, where the caller knows them, their
/// lineage (device copies of inputs are reused by lineage).
pub struct GpuCall<'a> {
    pub inputs: &'a [Input<'a>],
    pub lineage: &'a [Option<Lineage>],
    pub out_shapes: &'a [(usize, usize)],
}

impl Gpu {
    /// The device's name (`NVIDIA H100 80GB HBM3`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the device holds the dense copy of the value `lineage` names (no access is
    /// counted: the placement asks before it decides).
    pub fn holds(&self, lineage: &Lineage) -> bool {
        self.state.lock().is_ok_and(|s| s.memory.contains(lineage))
    }

    /// The counters and the memory manager's statistics so far.
    pub fn stats(&self) -> (GpuCounters, super::memory::DeviceMemoryStats) {
        match self.state.lock() {
            Ok(s) => (s.counters, s.memory.stats()),
            Err(_) => Default::default(),
        }
    }

    /// Runs `kernel` (from `ptx`) on the call's inputs; the main input is read in the kernel's
    /// format (a dense one densified, a CSR one made from a dense one, as needed).
    pub fn run(
        &self,
        ptx: &PtxText,
        entry: &str,
        kernel: &GpuKernel,
        call: &GpuCall<'_>,
    ) -> Result<Vec<Matrix>> {
        let start = Instant::now();
        let mut st = self
            .state
            .lock()
            .map_err(|_| driver("locking the GPU's state", "poisoned by an earlier panic"))?;
        let main =
            call.inputs
                .first()
                .and_then(Input::as_matrix)
                .ok_or(SkeletonError::ScalarInput {
                    pos: 0,
                    read_as: "the main input".into(),
                })?;
        let (m, n) = main.shape();
        let roles: Vec<WholeInput> = kernel.uses.iter().map(|&u| WholeInput(u)).collect();
        let prepared = prep::prepare(call.inputs, &roles, m, n)?;
        let views = prepared.views();
        // Outer: the length of the dot products (U's columns) and the final product's width.
        let cols_of = |u: InputUse| {
            kernel
                .uses
                .iter()
                .position(|&x| x == u)
                .and_then(|k| views.get(k))
                .map_or(0, |v| v.cols)
        };
        // `(X * (U %*% t(V))) %*% V` reads V as the final product's matrix too.
        let k2 = match cols_of(InputUse::FinalW) {
            0 if kernel.shape == super::abi::KernelShape::OuterRight => cols_of(InputUse::OuterV),
            0 if kernel.shape == super::abi::KernelShape::RowB1 => cols_of(InputUse::ColVectorT),
            // `t(U) %*% (X * (U %*% t(V)))` reads U's rows as the final product's matrix.
            0 => match cols_of(InputUse::FinalWT) {
                0 if matches!(kernel.shape, super::abi::KernelShape::OuterLeft { .. }) => {
                    cols_of(InputUse::OuterU)
                }
                w => w,
            },
            w => w,
        };
        let k = cols_of(InputUse::OuterU);
        // The main input in the kernel's format.
        let csr_owned;
        let dense_owned;
        let (main_vals, csr): (&[f64], Option<&SparseMatrix>) = match (kernel.main, main) {
            (GpuMain::Csr, Matrix::Sparse(s)) => (&s.values[..], Some(s)),
            (GpuMain::Csr, Matrix::Dense(d)) => {
                csr_owned = d.to_sparse();
                (&csr_owned.values[..], Some(&csr_owned))
            }
            (GpuMain::Dense, Matrix::Dense(d)) => (&d.values[..], None),
            (GpuMain::Dense, Matrix::Sparse(s)) => {
                dense_owned = s.to_dense().map_err(prep::out_of_memory)?;
                (&dense_owned.values[..], None)
            }
        };
        // A kernel that walks the driver by columns reads the CSR of its transpose, made on the
        // host only where the device does not hold it yet under the driver's lineage (checked
        // under the state's lock, so it stays there for the call).
        let main_key = call.lineage.first().and_then(Option::as_ref);
        let by_columns = kernel.walks_columns();
        let transpose_keys = main_key
            .filter(|_| by_columns)
            .map(|k| csr_keys(k, true))
            .filter(|keys| keys.iter().all(|p| st.memory.contains(p)));
        let walked;
        let mut arrays = match csr {
            Some(s) if transpose_keys.is_some() => Some(CsrArrays {
                rows: n,
                cols: m,
                nnz: s.values.len(),
                row_ptr: &[],
                col_idx: &[],
                values: &[],
                on_device: None,
            }),
            Some(s) if by_columns => {
                walked = lafuse_runtime::kernels::transpose_csr(s).map_err(prep::kernel_error)?;
                Some(CsrArrays::of(&walked))
            }
            Some(s) => Some(CsrArrays::of(s)),
            None => None,
        };
        // Pinned (held) from here to the end of the call, so no upload of the call evicts
        // them; nothing returns early before they are released.
        let mut held: Vec<BufferId> = Vec::new();
        if let (Some(keys), Some(a)) = (transpose_keys, arrays.as_mut()) {
            let ids = keys.map(|p| st.memory.lookup(&p));
            held.extend(ids.iter().flatten());
            // Present a moment ago under the same lock: every lookup hits.
            if let [Some(p), Some(c), Some(v)] = ids {
                a.on_device = Some([p, c, v]);
            }
        }
        let grid = launch::grid(kernel, m, n);
        let entry = kernel.entry_for(entry, n);
        let nnz = csr.map_or(0, |s| s.values.len());
        let out_len = launch::out_len(kernel, grid, m, n, nnz, k2);
        let result = self.run_locked(
            &mut st,
            &mut held,
            ptx,
            entry,
            kernel,
            call,
            &views,
            main_vals,
            arrays,
            (m, n),
            grid,
            out_len,
            (k, k2),
        );
        for id in held {
            st.memory.release(id);
        }
        st.counters.busy += start.elapsed();
        let out = result?;
        launch::finish(kernel, grid, out, (m, n), csr, call.out_shapes)
    }

    #[allow(clippy::too_many_arguments)]
    fn run_locked(
        &self,
        st: &mut State,
        held: &mut Vec<BufferId>,
        ptx: &PtxText,
        entry: &str,
        kernel: &GpuKernel,
        call: &GpuCall<'_>,
        views: &[DenseView],
        main_vals: &[f64],
        csr: Option<CsrArrays<'_>>,
        (m, n): (usize, usize),
        grid: Grid,
        out_len: usize,
        (k, k2): (usize, usize),
    ) -> Result<Vec<f64>> {
        let func = self.function(st, ptx, entry)?;
        let stream = &self.stream;
        // Uploads `bytes` into a fresh buffer (or finds the cached copy of `lineage`) and
        // returns its device address.
        let mut upload = |st: &mut State, bytes: &[u8], lineage: Option<&Lineage>| -> Result<u64> {
            if let Some(key) = lineage {
                if let Some(id) = st.memory.lookup(key) {
                    held.push(id);
                    let (p, _sync) = st.memory.buffer(id).device_ptr(stream);
                    return Ok(p);
                }
            }
            let id = st
                .memory
                .acquire(bytes.len())
                .map_err(SkeletonError::DeviceMemory)?;
            held.push(id);
            let buf = st.memory.buffer_mut(id);
            let mut view = buf.slice_mut(0..bytes.len());
            stream
                .memcpy_htod(bytes, &mut view)
                .map_err(|e| driver("upload", e))?;
            st.counters.bytes_to_device += bytes.len() as u64;
            if let Some(key) = lineage {
                let meta = CacheMeta {
                    lineage_height: key.height(),
                    compute_cost: bytes.len() as f64,
                };
                let _ = st.memory.cache(key.clone(), id, meta);
            }
            let (p, _sync) = st.memory.buffer(id).device_ptr(stream);
            Ok(p)
        };
        let lineage_of = |k: usize| call.lineage.get(k).and_then(Option::as_ref);
        // Side inputs.
        let mut dev_views: Vec<DenseView> = Vec::with_capacity(views.len());
        for (k, v) in views.iter().enumerate() {
            let mut dv = *v;
            if v.len > 0 {
                // SAFETY: a prepared view points at `len` initialized values kept alive by
                // `prepared` for the call.
                let vals = unsafe { std::slice::from_raw_parts(v.data, v.len) };
                // A transposed copy is not the lineage's value.
                let key = (!kernel.uses[k].is_transposed())
                    .then(|| lineage_of(k))
                    .flatten();
                dv.data = upload(st, bytes_of(vals), key)? as *const f64;
            }
            dv.row0 = 0;
            dev_views.push(dv);
        }
        // The main input.
        let main_key = lineage_of(0);
        let mut args = KernelArgs {
            main: DenseView::EMPTY,
            main_csr: CsrView::EMPTY,
            inputs: std::ptr::null(),
            num_inputs: dev_views.len(),
            out: std::ptr::null_mut(),
            out_len,
            rows: m,
            cols: n,
            k,
            k2,
            tile: std::ptr::null(),
            tile_stride: 0,
            col_lo: 0,
            col_hi: 0,
            out_stride: 0,
        };
        match csr {
            Some(s) => {
                let [rp, ci, va] = match s.on_device {
                    Some(ids) => ids.map(|id| st.memory.buffer(id).device_ptr(stream).0),
                    // A CSR has `rows + 1` row pointers: empty arrays stand for cached ones.
                    None if s.row_ptr.is_empty() => {
                        return Err(driver(
                            "finding the driver's transposed CSR in the device cache",
                            "it was evicted during the call (a bug in lafuse)",
                        ))
                    }
                    None => {
                        let [kp, kc, kv] = match main_key {
                            Some(k) => csr_keys(k, kernel.walks_columns()).map(Some),
                            None => [None, None, None],
                        };
                        [
                            upload(st, bytes_of(s.row_ptr), kp.as_ref())?,
                            upload(st, bytes_of(s.col_idx), kc.as_ref())?,
                            upload(st, bytes_of(s.values), kv.as_ref())?,
                        ]
                    }
                };
                args.main_csr = CsrView {
                    row_ptr: rp as *const usize,
                    col_idx: ci as *const u32,
                    values: va as *const f64,
                    nnz: s.nnz,
                    rows: s.rows,
                    cols: s.cols,
                };
            }
            None => {
                let d = upload(st, bytes_of(main_vals), main_key)?;
                args.main = DenseView {
                    data: d as *const f64,
                    len: main_vals.len(),
                    rows: m,
                    cols: n,
                    row0: 0,
                };
            }
        }
        // The output.
        let out_bytes = out_len * 8;
        let out_id = st
            .memory
            .acquire(out_bytes)
            .map_err(SkeletonError::DeviceMemory)?;
        held.push(out_id);
        if launch::out_zeroed(kernel) {
            let buf = st.memory.buffer_mut(out_id);
            let mut view = buf.slice_mut(0..out_bytes.max(8));
            stream
                .memset_zeros(&mut view)
                .map_err(|e| driver("zeroing the output", e))?;
        }
        args.out = st.memory.buffer(out_id).device_ptr(stream).0 as *mut f64;
        // The argument block: `KernelArgs`, then the input views.
        let head = std::mem::size_of::<KernelArgs>();
        let mut block =
            Vec::with_capacity(head + dev_views.len() * std::mem::size_of::<DenseView>());
        block.extend_from_slice(bytes_of(std::slice::from_ref(&args)));
        block.extend_from_slice(bytes_of(&dev_views));
        let args_id = st
            .memory
            .acquire(block.len())
            .map_err(SkeletonError::DeviceMemory)?;
        held.push(args_id);
        let args_dev = st.memory.buffer(args_id).device_ptr(stream).0;
        let inputs_at = args_dev + head as u64;
        block[std::mem::offset_of!(KernelArgs, inputs)..][..8]
            .copy_from_slice(&inputs_at.to_ne_bytes());
        {
            let buf = st.memory.buffer_mut(args_id);
            let mut view = buf.slice_mut(0..block.len());
            stream
                .memcpy_htod(&block[..], &mut view)
                .map_err(|e| driver("argument upload", e))?;
        }
        let launched = m > 0 && n > 0;
        let result_len = launch::result_len(kernel, out_len, n);
        // A column sum's partial rows are folded on the device, into a buffer of its own.
        let mut result_id = out_id;
        let mut launches = Vec::new();
        if launched {
            launches.push(Launch {
                func: func.clone(),
                args: args_dev,
                blocks: (grid.x, grid.y),
                what: "kernel",
            });
        }
        if launched && kernel.folds_columns() {
            // Two fixed levels: groups of partial rows, then the groups.
            let parts = launch::partial_rows(kernel, grid);
            let groups = parts.clamp(1, FOLD_GROUPS);
            let stage = st
                .memory
                .acquire(2 * groups * n * 8)
                .map_err(SkeletonError::DeviceMemory)?;
            let dest = st
                .memory
                .acquire(2 * n * 8)
                .map_err(SkeletonError::DeviceMemory)?;
            held.extend([stage, dest]);
            launches.push(self.fold(st, held, ptx, &args, out_id, parts, stage, groups, n)?);
            launches.push(self.fold(st, held, ptx, &args, stage, groups, dest, 1, n)?);
            result_id = dest;
        }
        if launched {
            // SAFETY: the kernel was generated for this argument layout, the folds read the
            // kernel's partial rows and write their own buffers (see `fold`); every pointer in
            // the argument blocks is a device buffer of the length the layout states, alive
            // until the stream is synchronized below.
            st.counters.last_kernel = unsafe { self.launch_timed(st, &launches) }?;
        }
        // A folded row comes back as (value, correction) pairs.
        let pairs = launched && kernel.folds_columns();
        let fetched = if pairs { 2 * result_len } else { result_len };
        let result_bytes = fetched * 8;
        let mut out = if launched {
            vec![0.0f64; fetched]
        } else {
            launch::initial_output(kernel, result_len)
        };
        if launched && result_len > 0 {
            let out_bytes = result_bytes;
            let buf = st.memory.buffer(result_id);
            let view = buf.slice(0..out_bytes);
            // SAFETY: `out` is `out_bytes` bytes of f64 storage.
            let dst =
                unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<u8>(), out_bytes) };
            stream
                .memcpy_dtoh(&view, dst)
                .map_err(|e| driver("download", e))?;
            st.counters.bytes_from_device += out_bytes as u64;
        }
        stream
            .synchronize()
            .map_err(|e| driver("synchronizing", e))?;
        if pairs {
            out = out.chunks_exact(2).map(|p| p[0]).collect();
        }
        Ok(out)
    }

    /// The launch that folds `parts` partial rows of `n` (value, correction) pairs at `from`
    /// into `groups` rows of pairs at `to` ([`FOLD_ENTRY`](super::abi::FOLD_ENTRY)), its
    /// argument block uploaded.
    #[allow(clippy::too_many_arguments)]
    fn fold(
        &self,
        st: &mut State,
        held: &mut Vec<BufferId>,
        ptx: &PtxText,
        template: &KernelArgs,
        from: BufferId,
        parts: usize,
        to: BufferId,
        groups: usize,
        n: usize,
    ) -> Result<Launch> {
        let stream = &self.stream;
        let fold = self.function(st, ptx, super::abi::FOLD_ENTRY)?;
        let mut args = *template;
        args.out = st.memory.buffer(from).device_ptr(stream).0 as *mut f64;
        args.rows = parts;
        args.cols = n;
        args.main = DenseView {
            data: st.memory.buffer(to).device_ptr(stream).0 as *const f64,
            len: 2 * groups * n,
            rows: groups,
            cols: 2 * n,
            row0: 0,
        };
        let id = st
            .memory
            .acquire(std::mem::size_of::<KernelArgs>())
            .map_err(SkeletonError::DeviceMemory)?;
        held.push(id);
        let at = st.memory.buffer(id).device_ptr(stream).0;
        {
            let buf = st.memory.buffer_mut(id);
            let mut view = buf.slice_mut(0..std::mem::size_of::<KernelArgs>());
            stream
                .memcpy_htod(bytes_of(std::slice::from_ref(&args)), &mut view)
                .map_err(|e| driver("argument upload", e))?;
        }
        let blocks = (
            n.div_ceil(BLOCK_THREADS as usize).max(1) as u32,
            groups as u32,
        );
        // The fold kernel reads `rows` partial rows of `cols` pairs at `out` and writes
        // `groups` rows of `cols` pairs at `main.data`: both buffers have those lengths.
        Ok(Launch {
            func: fold,
            args: at,
            blocks,
            what: "fold",
        })
    }

    /// Launches `launches` in order, back to back on the stream, and waits for the last;
    /// returns their time by CUDA events (from before the first to after the last, so the
    /// host's launch latency of all but the first overlaps the device's work), also counted
    /// in the totals.
    ///
    /// # Safety
    /// Each launch's `args` must hold the argument layout its function was generated for,
    /// every pointer in it a live device buffer of the length it states.
    unsafe fn launch_timed(&self, st: &mut State, launches: &[Launch]) -> Result<Duration> {
        let stream = &self.stream;
        let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        let before = stream
            .record_event(timing)
            .map_err(|e| driver("event", e))?;
        for l in launches {
            let cfg = LaunchConfig {
                grid_dim: (l.blocks.0, l.blocks.1, 1),
                block_dim: (BLOCK_THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut launch = stream.launch_builder(&l.func);
            launch.arg(&l.args);
            // SAFETY: as the caller promises.
            unsafe { launch.launch(cfg) }.map_err(|e| driver(l.what, e))?;
        }
        let after = stream
            .record_event(timing)
            .map_err(|e| driver("event", e))?;
        let what = launches.last().map_or("kernel", |l| l.what);
        after.synchronize().map_err(|e| driver(what, e))?;
        let ms = before
            .elapsed_ms(&after)
            .map_err(|e| driver("event timing", e))?;
        let t = Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3);
        st.counters.kernels += t;
        st.counters.launches += launches.len() as u64;
        Ok(t)
    }

    /// Entry `entry` of `ptx`, whose module is loaded once per process (its entries, the
    /// kernel's, the narrow one and the fold, share it).
    fn function(&self, st: &mut State, ptx: &PtxText, entry: &str) -> Result<CudaFunction> {
        let key = (ptx.key(), fnv(entry.as_bytes()));
        if let Some(f) = st.functions.get(&key) {
            return Ok(f.clone());
        }
        let module = match st.modules.get(&ptx.key()) {
            Some(m) => m.clone(),
            None => {
                let m = self
                    .stream
                    .context()
                    .load_module(cudarc::nvrtc::Ptx::from_src(ptx.as_str()))
                    .map_err(|e| driver("loading the PTX module", e))?;
                st.counters.modules_loaded += 1;
                st.modules.insert(ptx.key(), m.clone());
                m
            }
        };
        let f = module
            .load_function(entry)
            .map_err(|e| driver("finding the kernel", e))?;
        st.functions.insert(key, f.clone());
        Ok(f)
    }

    /// Device-to-device copy bandwidth of `bytes`-byte buffers in bytes per second (bytes read
    /// plus written), the best of `reps`: what memory-bound kernels are measured against.
    pub fn copy_bandwidth(&self, bytes: usize, reps: usize) -> Result<f64> {
        let stream = &self.stream;
        let a = stream
            .alloc_zeros::<u8>(bytes)
            .map_err(|e| driver("allocating", e))?;
        let mut b = stream
            .alloc_zeros::<u8>(bytes)
            .map_err(|e| driver("allocating", e))?;
        let mut best = f64::INFINITY;
        for _ in 0..reps.max(1) {
            stream
                .synchronize()
                .map_err(|e| driver("synchronizing", e))?;
            let t = Instant::now();
            stream
                .memcpy_dtod(&a, &mut b)
                .map_err(|e| driver("copying", e))?;
            stream
                .synchronize()
                .map_err(|e| driver("synchronizing", e))?;
            best = best.min(t.elapsed().as_secs_f64());
        }
        Ok(2.0 * bytes as f64 / best)
    }
}

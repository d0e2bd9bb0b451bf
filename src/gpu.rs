//! Whether this build and machine can run fused operators on a GPU, and why not where not:
//! the engine says so once and runs everything on the CPU.

/// The GPU's name, or why fused operators cannot run on one.
pub fn available() -> Result<String, String> {
    #[cfg(feature = "cuda")]
    {
        lafuse_codegen::ptx::device::gpu()
            .map(|g| g.name().to_string())
            .map_err(|e| e.to_string())
    }
    #[cfg(not(feature = "cuda"))]
    {
        Err("lafuse was built without the `cuda` feature, so it has no GPU backend".into())
    }
}

/// The GPU's counters and memory statistics for `--stats`, once a GPU has been used.
pub fn stats_text() -> Option<String> {
    #[cfg(feature = "cuda")]
    {
        let gpu = lafuse_codegen::ptx::device::used()?;
        let (c, memory) = gpu.stats();
        Some(format!(
            "GPU {}: {} kernel launches, {} modules loaded, {:.1} MB to and {:.1} MB from the \
             device, {:.3} s busy\n{memory}\n",
            gpu.name(),
            c.launches,
            c.modules_loaded,
            c.bytes_to_device as f64 / 1e6,
            c.bytes_from_device as f64 / 1e6,
            c.busy.as_secs_f64(),
        ))
    }
    #[cfg(not(feature = "cuda"))]
    {
        None
    }
}

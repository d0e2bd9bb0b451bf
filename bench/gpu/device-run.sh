#!/usr/bin/env bash
# The device check of the GPU issue, in one run on a GPU host (the `device` tool's machine):
# the engine through `--device gpu` against `--device cpu`, `lafuse bench --suite gpu`, and the
# peers (CuPy, PyTorch eager and torch.compile) on the same expressions. Expects the static
# binary at .gpu/lafuse (bench/gpu/build-static.sh) and writes everything under $OUT.
# LAFUSE_GPU_PEERS=0 leaves the peers out (a run that only compares lafuse's own kernels);
# LAFUSE_GPU_NCU=0 leaves out the Nsight Compute profile of the Row kernel.
set -u
B=${LAFUSE_BIN:-.gpu/lafuse}
# The binary travels compressed (the device tool carries 64 MiB in all).
if [ ! -x "$B" ] && [ -f "$B.xz" ]; then
    xz -dc "$B.xz" > "$B" 2>/dev/null ||
        python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" "$B.xz" "$B"
    chmod +x "$B"
fi
OUT=${OUT:-/tmp/lafuse-gpu-out}
mkdir -p "$OUT"
log="$OUT/log.txt"
{
    echo "== environment"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
    ldd "$B" 2>&1 | grep -v "^\s*linux-vdso"
    "$B" --version 2>&1
    echo "== engine: --device cpu vs --device gpu"
    # LLVM's fused operators on the CPU, as the GPU placement compiles them (the default
    # tiered JIT would run these small blocks unfused).
    timeout 120 "$B" run bench/gpu/check.dml --device cpu --jit llvm > "$OUT/cpu.txt" 2>&1
    # LAFUSE_GPU_UNCHECKED=1: the kernels that await a device check run on the GPU too.
    LAFUSE_GPU_UNCHECKED=1 timeout 120 "$B" run bench/gpu/check.dml --device gpu --stats \
        > "$OUT/gpu.txt" 2> "$OUT/gpu-stats.txt"
    paste "$OUT/cpu.txt" "$OUT/gpu.txt"
    python3 tests/corpus/compare.py "$OUT/cpu.txt" "$OUT/gpu.txt" && echo "engine outputs agree"
    cat "$OUT/gpu-stats.txt"
    rm -f "$OUT/cpu.txt" "$OUT/gpu.txt" "$OUT/gpu-stats.txt"
    echo "== lafuse bench --suite gpu"
    timeout 200 "$B" bench --suite gpu --out "$OUT/bench" 2>&1 | grep -v "^\[" 
    rm -f "$OUT/bench/results.csv"
    # Nsight Compute on one launch of the default Row kernel's narrow entry at full size (the
    # figure issue 29 misses): throughput, occupancy, what its warps wait on.
    ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    if [ -n "$ncu" ] && [ "${LAFUSE_GPU_NCU:-1}" != 0 ]; then
        echo "== ncu: the Row kernel's narrow entry, t(X) %*% (X %*% v) at 20000x2000"
        timeout 150 "$ncu" --clock-control none --kernel-name lafuse_kernel_narrow \
            --launch-skip 2 --launch-count 1 --section SpeedOfLight --section Occupancy \
            --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
            "$B" bench --suite gpu --filter "row dense 20000x2000 block-r1-m80 (default)" \
            --out "$OUT/ncu-bench" > "$OUT/ncu-row.txt" 2>&1
        echo "ncu exit $? (report: ncu-row.txt)"
        rm -rf "$OUT/ncu-bench"
    fi
} > "$log" 2>&1
if [ "${LAFUSE_GPU_PEERS:-1}" != 0 ]; then
    echo "== peers" >> "$log"
    PYTHONUNBUFFERED=1 timeout 150 python3 bench/gpu/peers.py --reps 10 > "$OUT/peers.jsonl" 2>> "$log"
fi
echo "done" >> "$log"

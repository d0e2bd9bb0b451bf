#!/usr/bin/env bash
# ptxas-venv.sh: makes sure a Python virtual environment holding NVIDIA's ptxas (PyPI package
# nvidia-cuda-nvcc) exists, and prints the path of its ptxas on stdout. ptxas checks and assembles
# the PTX that lafuse's NVPTX back end emits, on machines without a CUDA toolkit.
#
# Usage: bench/gpu/ptxas-venv.sh [VENV_DIR]     (default: <repo>/.venv-ptxas)
#
# Environment:
#   LAFUSE_NVCC_PKG  the pip requirement (default nvidia-cuda-nvcc==13.0.88: CUDA 13.0, the version
#                    of the GPU hosts' driver 580 and toolkit, so that what this ptxas accepts and
#                    emits, the hosts' driver loads; 13.x still targets sm_80 and sm_90). Newer:
#                    up to 13.5.37; for CUDA 12: nvidia-cuda-nvcc-cu12==12.9.86.
#   PYTHON           the interpreter that creates the venv (default python3).
#
# Example: "$(bench/gpu/ptxas-venv.sh)" -arch=sm_80 kernel.ptx -o /dev/null
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
venv=${1:-$repo/.venv-ptxas}
pkg=${LAFUSE_NVCC_PKG:-nvidia-cuda-nvcc==13.0.88}
python=${PYTHON:-python3}

find_ptxas() {
    # The wheel's layout differs by CUDA major (nvidia/cu13/bin for 13.x, nvidia/cuda_nvcc/bin for
    # 12.x) and the site-packages path by Python version, so search rather than assume.
    # A venv not yet made has no lib/: find fails then, which is no error here (pipefail).
    { find "$venv/lib" -path '*/site-packages/nvidia/*/bin/ptxas' -type f 2>/dev/null || true; } | head -n 1
}

ptxas=$(find_ptxas)
if [[ -z "$ptxas" ]]; then
    if [[ ! -x "$venv/bin/pip" ]]; then
        "$python" -m venv "$venv" ||
            { echo "ptxas-venv.sh: '$python -m venv $venv' failed (is python3-venv installed?)" >&2; exit 1; }
    fi
    # pip's progress goes to stderr so that stdout carries only the path.
    "$venv/bin/pip" install -q "$pkg" >&2 ||
        { echo "ptxas-venv.sh: pip install $pkg failed (no network, or no such version: set LAFUSE_NVCC_PKG)" >&2; exit 1; }
    ptxas=$(find_ptxas)
    [[ -n "$ptxas" ]] ||
        { echo "ptxas-venv.sh: $pkg installed into $venv but holds no nvidia/*/bin/ptxas" >&2; exit 1; }
fi
"$ptxas" --version >/dev/null ||
    { echo "ptxas-venv.sh: $ptxas does not run (wrong architecture or missing libraries?)" >&2; exit 1; }
echo "$ptxas"

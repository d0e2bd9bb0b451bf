#!/usr/bin/env bash
# build-static.sh: builds a release `lafuse` with LLVM 14 linked statically, for a GPU host that has
# no LLVM installed (e.g. Ubuntu 24.04), then copies it to $1 and strips it.
#
# Usage: bench/gpu/build-static.sh OUTPUT_PATH
#
# Environment:
#   LAFUSE_LLVM_STATIC_DIR  where libpolly-14-dev is unpacked (default /work/llvm-static). Debian 12's
#                           llvm-config-14 --link-static lists libPolly.a and libPollyISL.a, which
#                           only libpolly-14-dev ships; it is unpacked there (dpkg -x, no install)
#                           rather than installed, so the system stays untouched.
#   FEATURES                cargo features of lafuse-cli (default when unset: gpu-static).
#   LAFUSE_KEEP_DEFAULT_FEATURES=1  do not pass --no-default-features (see below).
#   CARGO_TARGET_DIR        default: <repo>/target/gpu-static, because the extra RUSTFLAGS below
#                           would otherwise invalidate the ordinary (dynamic) build's cache.
#
# Why --no-default-features: llvm-sys 140 panics in its build script when more than one of
# prefer-static / prefer-dynamic / force-static / force-dynamic is enabled ("Only one of the
# features ... can be enabled at once"); there is no precedence. The default `llvm` feature links
# dynamically, so `gpu-static` must be built without it and must itself enable everything `llvm`
# enables except the dynamic-linking feature.
#
# Tested on Debian 12 (llvm-14-dev 1:14.0.6-12, rustc 1.95) with a probe crate: the result needs
# libffi.so.8, libz.so.1, libtinfo.so.6, libstdc++.so.6, libgcc_s.so.1, libm/libc (glibc >= 2.36),
# not libLLVM; libz3 and libxml2 are listed by llvm-config but dropped by the linker's --as-needed
# because nothing lafuse calls uses them.
set -euo pipefail

out=${1:?"usage: $0 OUTPUT_PATH (where the stripped static lafuse binary goes)"}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
static_dir=${LAFUSE_LLVM_STATIC_DIR:-/work/llvm-static}
features=${FEATURES-gpu-static}
llvm_config=${LLVM_CONFIG:-llvm-config-14}

command -v "$llvm_config" >/dev/null ||
    { echo "build-static.sh: $llvm_config not found; install llvm-14-dev (the static LLVM libraries come from it)" >&2; exit 1; }
llvm_prefix=$("$llvm_config" --prefix)
llvm_libdir=$("$llvm_config" --libdir)

# (a) libPolly.a / libPollyISL.a: from the system if libpolly-14-dev is installed, else unpacked.
polly_libdir=""
if [[ ! -f "$llvm_libdir/libPolly.a" ]]; then
    polly_libdir="$static_dir${llvm_libdir}"
    if [[ ! -f "$polly_libdir/libPolly.a" || ! -f "$polly_libdir/libPollyISL.a" ]]; then
        # The Polly archives must come from the same LLVM build as the other static libraries.
        ver=$(dpkg-query -W -f='${Version}' llvm-14-dev 2>/dev/null) ||
            { echo "build-static.sh: llvm-14-dev is not a dpkg package here; provide libPolly.a under $polly_libdir yourself" >&2; exit 1; }
        tmp=$(mktemp -d) && chmod 755 "$tmp"  # apt drops to user _apt to download
        trap 'rm -rf "$tmp"' EXIT
        echo "build-static.sh: downloading libpolly-14-dev=$ver into $static_dir" >&2
        (cd "$tmp" && apt-get download "libpolly-14-dev=$ver") ||
            { echo "build-static.sh: apt-get download libpolly-14-dev=$ver failed (run apt-get update? network?)" >&2; exit 1; }
        mkdir -p "$static_dir"
        dpkg -x "$tmp"/libpolly-14-dev_*.deb "$static_dir"
        [[ -f "$polly_libdir/libPolly.a" ]] ||
            { echo "build-static.sh: the libpolly-14-dev package did not contain $llvm_libdir/libPolly.a" >&2; exit 1; }
    fi
fi

# (b) The build. LLVM_SYS_140_PREFIX pins llvm-sys to this LLVM rather than whichever
# `llvm-config` comes first on PATH.
export LLVM_SYS_140_PREFIX="$llvm_prefix"
if [[ -n "$polly_libdir" ]]; then
    export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-L native=$polly_libdir"
fi
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target/gpu-static}
cargo_args=(build --release -p lafuse-cli --features "$features")
[[ "${LAFUSE_KEEP_DEFAULT_FEATURES:-0}" == 1 ]] || cargo_args+=(--no-default-features)
echo "build-static.sh: LLVM_SYS_140_PREFIX=$LLVM_SYS_140_PREFIX RUSTFLAGS='${RUSTFLAGS:-}' cargo ${cargo_args[*]}" >&2
(cd "$repo" && cargo "${cargo_args[@]}")

# (c) Copy, strip, and check that no libLLVM is needed at run time.
bin="$CARGO_TARGET_DIR/release/lafuse"
mkdir -p "$(dirname "$out")"
cp "$bin" "$out"
strip "$out"
needed=$(readelf -d "$out" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
echo "build-static.sh: $out ($(stat -c %s "$out") bytes) needs: $(echo $needed)" >&2
if grep -q '^libLLVM' <<<"$needed"; then
    echo "build-static.sh: $out still needs libLLVM: llvm-sys linked dynamically (check that no feature enables inkwell/llvm14-0-prefer-dynamic)" >&2
    exit 1
fi
for lib in libz3 libxml2; do
    if grep -q "^$lib" <<<"$needed"; then
        echo "build-static.sh: warning: $out needs $lib; the GPU host must have it installed" >&2
    fi
done

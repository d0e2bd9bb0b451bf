#!/usr/bin/env bash
# build-static.sh: builds a release `lafuse` with LLVM 14 linked statically, for a GPU host that has
# no LLVM 14 installed (e.g. Ubuntu 24.04), then copies it to $1 and strips it.
#
# Usage: bench/gpu/build-static.sh OUTPUT_PATH
#
# How: no cargo feature. llvm-sys (through inkwell's llvm14-0-prefer-dynamic, the project's
# setting) first asks `llvm-config --link-shared` and falls back to static linking when that fails.
# This script points llvm-sys (LLVM_SYS_140_PREFIX) at a wrapper llvm-config that refuses
# --link-shared and passes everything else to the real llvm-config-14. The wrapper also leaves out
# libPolly.a and libPollyISL.a, which Debian's llvm-config lists but only libpolly-14-dev ships: the
# only LLVM code that refers to Polly is LLVMLTO and LLVMExtensions, which lafuse does not use (if
# it ever does, the link fails with "undefined reference to getPollyPluginInfo()"; then unpack
# libpolly-14-dev with `apt-get download` + `dpkg -x` and add its lib directory to RUSTFLAGS as
# `-L native=DIR`, and stop filtering Polly here).
#
# Why not a cargo feature enabling inkwell/llvm14-0-force-static: llvm-sys's build script panics
# when more than one of prefer-static / prefer-dynamic / force-static / force-dynamic is enabled,
# and CI runs `cargo test --workspace --all-features`, which would enable both.
#
# Environment:
#   LAFUSE_LLVM_STATIC_DIR  where the wrapper prefix (bin/llvm-config) is written
#                           (default /work/llvm-static; outside the repository).
#   LLVM_CONFIG             the real llvm-config (default llvm-config-14).
#   FEATURES                extra cargo features of lafuse-cli (default: none).
#   LAFUSE_NO_DEFAULT_FEATURES=1  pass --no-default-features.
#   CARGO_TARGET_DIR        default <repo>/target/gpu-static: LLVM_SYS_140_PREFIX differs from the
#                           ordinary build's, and sharing its target directory would relink LLVM
#                           back and forth between the two.
#
# Tested on Debian 12 (llvm-14-dev 1:14.0.6-12, rustc 1.95) with a probe crate (NVPTX PTX
# emission, new-pass-manager passes, MCJIT): the result needs libffi.so.8, libz.so.1,
# libtinfo.so.6, libstdc++.so.6 (GLIBCXX_3.4.29), libgcc_s.so.1, libm, libc (GLIBC_2.36), which
# Ubuntu 24.04 has; not libLLVM, and not libz3 or libxml2 (llvm-config lists them, the linker's
# --as-needed drops them: nothing linked uses them).
set -euo pipefail

out=${1:?"usage: $0 OUTPUT_PATH (where the stripped, statically LLVM-linked lafuse goes)"}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
wrap_dir=${LAFUSE_LLVM_STATIC_DIR:-/work/llvm-static}
llvm_config=${LLVM_CONFIG:-llvm-config-14}

real=$(command -v "$llvm_config") ||
    { echo "build-static.sh: $llvm_config not found; install llvm-14-dev (the static LLVM libraries come from it)" >&2; exit 1; }
[[ -f "$("$real" --libdir)/libLLVMCore.a" ]] ||
    { echo "build-static.sh: $("$real" --libdir)/libLLVMCore.a missing; llvm-14-dev's static libraries are needed" >&2; exit 1; }

# The wrapper, rewritten only when its text changes: llvm-sys asks cargo to rebuild it whenever
# anything under LLVM_SYS_140_PREFIX changes, and that rebuild relinks everything above it.
wrapper_text=$(cat <<EOF
#!/bin/sh
# Written by lafuse's bench/gpu/build-static.sh: llvm-config for a static-only LLVM 14 link.
for a in "\$@"; do
    if [ "\$a" = --link-shared ]; then
        echo "llvm-config (lafuse build-static.sh wrapper): static linking only" >&2
        exit 1
    fi
done
# Drop Polly's archives (see build-static.sh); keep llvm-config's exit status.
out=\$("$real" "\$@") || exit \$?
printf '%s\n' "\$out" | sed -e 's/\(^\| \)libPolly\(ISL\)\?\.a//g' -e 's/\(^\| \)-lPolly\(ISL\)\?//g'
EOF
)
wrapper="$wrap_dir/bin/llvm-config"
if [[ ! -x "$wrapper" || "$(cat "$wrapper")" != "$wrapper_text" ]]; then
    mkdir -p "$wrap_dir/bin"
    printf '%s\n' "$wrapper_text" > "$wrapper"
    chmod 755 "$wrapper"
fi
"$wrapper" --link-static --libnames >/dev/null ||
    { echo "build-static.sh: the wrapper $wrapper fails for --link-static --libnames" >&2; exit 1; }

export LLVM_SYS_140_PREFIX="$wrap_dir"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target/gpu-static}
cargo_args=(build --release -p lafuse-cli)
[[ -n "${FEATURES:-}" ]] && cargo_args+=(--features "$FEATURES")
[[ "${LAFUSE_NO_DEFAULT_FEATURES:-0}" == 1 ]] && cargo_args+=(--no-default-features)
echo "build-static.sh: LLVM_SYS_140_PREFIX=$LLVM_SYS_140_PREFIX CARGO_TARGET_DIR=$CARGO_TARGET_DIR cargo ${cargo_args[*]}" >&2
(cd "$repo" && cargo "${cargo_args[@]}")

# Copy, strip, and refuse a result that still needs libLLVM at run time.
bin="$CARGO_TARGET_DIR/release/lafuse"
mkdir -p "$(dirname "$out")"
cp "$bin" "$out"
strip "$out"
needed=$(readelf -d "$out" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
echo "build-static.sh: $out ($(stat -c %s "$out") bytes) needs:" $needed >&2
if grep -q '^libLLVM' <<<"$needed"; then
    echo "build-static.sh: $out still needs libLLVM: llvm-sys linked dynamically (did it use $wrapper? a stale build script output under $CARGO_TARGET_DIR?)" >&2
    exit 1
fi
for lib in libz3 libxml2; do
    if grep -q "^$lib" <<<"$needed"; then
        echo "build-static.sh: warning: $out needs $lib; the GPU host must have it installed" >&2
    fi
done

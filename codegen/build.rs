//! The build's identity for the on-disk object store's fingerprint: a hash of the code
//! generator's own sources and of the ABI generated code is compiled against. A change to
//! either makes every stored entry a miss, where the crate version alone would not.

use std::hash::Hasher;
use std::path::{Path, PathBuf};

/// FNV-1a, 64 bits: an identity, not a defence (the entries themselves carry SHA-256).
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(listing) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in listing.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn main() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let abi = root.join("../skeletons/src/abi.rs");
    let mut files = vec![root.join("Cargo.toml"), abi.clone()];
    files_under(&root.join("src"), &mut files);
    files.sort();
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    for file in &files {
        let relative = file.strip_prefix(&root).unwrap_or(file);
        h.write(relative.to_string_lossy().as_bytes());
        h.write_u8(0);
        h.write(&std::fs::read(file).unwrap_or_default());
        h.write_u8(0xff);
    }
    println!("cargo:rustc-env=LAFUSE_CODEGEN_BUILD={:016x}", h.finish());
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=Cargo.toml");
    println!("cargo:rerun-if-changed={}", abi.display());
}

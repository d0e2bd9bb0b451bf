//! The on-disk object store: compiled operators' machine code kept across processes, so that a
//! script run again (a benchmark's repetitions, a researcher's next experiment) loads its
//! operators instead of compiling them. An entry is keyed by the exact text of the verified,
//! not yet optimized module (what emission made of the plan: any change to the code generator
//! changes it) and by the code-generation fingerprint (lafuse's version, LLVM's, the host CPU
//! and its features, the pass pipeline); both are stored in the entry and compared on every
//! load, so a hash collision or a stale entry is a miss, never wrong code. Entries are written
//! to a temporary file and renamed into place, so concurrent processes never read a partial
//! one. A store that cannot be read or written only costs compilations.

use super::orc::ObjectJit;
use super::{llvm, CodegenError, Machine};
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::targets::TargetMachine;
use lafuse_compiler::hops::json::Fnv64;
use std::hash::Hasher;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// First bytes of an entry file.
const MAGIC: &[u8] = b"lafuse object store entry 1\n";

/// What an entry holds besides its key.
pub(crate) struct StoredObject {
    /// The optimized module's IR text (what `explain --level ir` shows).
    pub ir: String,
    /// The relocatable machine code.
    pub object: Vec<u8>,
}

/// What [`compile_through`] made.
pub(crate) struct Through<R> {
    pub machine: Machine,
    /// What `prepare` returned.
    pub built: R,
    /// The machine code came from the store.
    pub loaded: bool,
    /// Time of linking the object into the process (part of the call's time).
    pub load: Duration,
}

/// Compiles module `name` through `store`: `prepare` emits and verifies it (its text is then
/// the key); where the store holds that key, its object code is loaded, else `optimize` runs,
/// the module is compiled to object code, loaded and kept. Operators and the process-wide
/// libraries both compile through here.
pub(crate) fn compile_through<R>(
    store: &ObjectStore,
    name: &str,
    prepare: impl FnOnce(&'static Context, &Module<'static>) -> Result<R, CodegenError>,
    optimize: impl FnOnce(&Module<'static>, &TargetMachine) -> Result<(), CodegenError>,
    helpers: impl Fn(&str) -> Option<usize>,
) -> Result<Through<R>, CodegenError> {
    let fingerprint = llvm::codegen_fingerprint();
    let made = llvm::object_module(
        name,
        |ctx, module, tm| {
            let built = prepare(ctx, module)?;
            let key = module.print_to_string().to_string();
            if let Some(found) = store.load(fingerprint, &key) {
                return Ok(((built, key, found.ir, true), Some(found.object)));
            }
            optimize(module, tm)?;
            let ir = module.print_to_string().to_string();
            Ok(((built, key, ir, false), None))
        },
        helpers,
    )?;
    let (built, key, ir, loaded) = made.built;
    let start = Instant::now();
    let jit = ObjectJit::load(&made.object, &made.symbols)?;
    let load = start.elapsed();
    if !loaded {
        store.save(fingerprint, &key, &ir, &made.object);
    }
    Ok(Through {
        machine: Machine::Object(jit, ir),
        built,
        loaded,
        load,
    })
}

/// A directory of compiled operators.
#[derive(Debug)]
pub struct ObjectStore {
    dir: PathBuf,
}

fn put(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(bytes);
}

fn take<'a>(data: &mut &'a [u8]) -> Option<&'a [u8]> {
    let len = usize::try_from(u64::from_le_bytes(data.get(..8)?.try_into().ok()?)).ok()?;
    let rest = data.get(8..)?;
    let (part, rest) = (rest.get(..len)?, rest.get(len..)?);
    *data = rest;
    Some(part)
}

impl ObjectStore {
    /// A store in `dir`, created if missing.
    pub fn open(dir: &Path) -> std::io::Result<ObjectStore> {
        std::fs::create_dir_all(dir)?;
        Ok(ObjectStore {
            dir: dir.to_path_buf(),
        })
    }

    fn path(&self, fingerprint: &str, key: &str) -> PathBuf {
        let mut h = Fnv64::new();
        h.write(fingerprint.as_bytes());
        h.write_u8(0xff); // not UTF-8: the parts cannot run into each other
        h.write(key.as_bytes());
        let h = h.finish();
        self.dir.join(format!("{h:016x}.lfo"))
    }

    /// The entry for `key` under `fingerprint`, if the store holds exactly that.
    pub(crate) fn load(&self, fingerprint: &str, key: &str) -> Option<StoredObject> {
        let bytes = std::fs::read(self.path(fingerprint, key)).ok()?;
        let mut data = bytes.strip_prefix(MAGIC)?;
        let (f, k) = (take(&mut data)?, take(&mut data)?);
        if f != fingerprint.as_bytes() || k != key.as_bytes() {
            return None;
        }
        let ir = String::from_utf8(take(&mut data)?.to_vec()).ok()?;
        let object = take(&mut data)?.to_vec();
        data.is_empty().then_some(StoredObject { ir, object })
    }

    /// Keeps the entry `ir`, `object` for `key` under `fingerprint` (best effort: a failure
    /// to write is ignored, the next run compiles again).
    pub(crate) fn save(&self, fingerprint: &str, key: &str, ir: &str, object: &[u8]) {
        let mut out = Vec::with_capacity(
            MAGIC.len() + 32 + fingerprint.len() + key.len() + ir.len() + object.len(),
        );
        out.extend_from_slice(MAGIC);
        put(&mut out, fingerprint.as_bytes());
        put(&mut out, key.as_bytes());
        put(&mut out, ir.as_bytes());
        put(&mut out, object);
        let path = self.path(fingerprint, key);
        let tmp = path.with_extension(format!(
            "tmp{}.{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let written = std::fs::File::create(&tmp)
            .and_then(|mut f| f.write_all(&out))
            .and_then(|()| std::fs::rename(&tmp, &path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_mismatches_miss() {
        let dir = std::env::temp_dir().join(format!("lafuse-store-test-{}", std::process::id()));
        let store = ObjectStore::open(&dir).unwrap();
        let entry = StoredObject {
            ir: "define void @f()".into(),
            object: vec![0x7f, b'E', b'L', b'F', 0, 1, 2],
        };
        assert!(store.load("fp", "module").is_none());
        store.save("fp", "module", &entry.ir, &entry.object);
        let got = store.load("fp", "module").unwrap();
        assert_eq!(
            (got.ir.as_str(), got.object.as_slice()),
            ("define void @f()", &entry.object[..])
        );
        assert!(store.load("other fingerprint", "module").is_none());
        assert!(store.load("fp", "other module").is_none());
        // A truncated entry is a miss, not an error.
        let path = store.path("fp", "module");
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        assert!(store.load("fp", "module").is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

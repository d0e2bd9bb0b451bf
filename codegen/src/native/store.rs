//! The on-disk object store: compiled operators' machine code kept across processes, so that a
//! script run again (a benchmark's repetitions, a researcher's next experiment) loads its
//! operators instead of compiling them. An entry is keyed by the exact text of the verified,
//! not yet optimized module (what emission made of the plan: any change to the code generator
//! changes it) and by the code-generation fingerprint (lafuse's version, LLVM's, the host CPU
//! and its features, the pass pipeline); both are stored in the entry and compared on every
//! load, so a hash collision or a stale entry is a miss, never wrong code. Entries are written
//! to a temporary file and renamed into place, so concurrent processes never read a partial
//! one. A store that cannot be read or written only costs compilations. Opening a store bounds
//! its size: entries go least recently used first (a load marks its entry used).

use super::orc::ObjectJit;
use super::{llvm, CodegenError, Machine};
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::targets::TargetMachine;
use lafuse_compiler::hops::json::Fnv64;
use std::hash::Hasher;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

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

use crate::DEFAULT_STORE_LIMIT;

/// Age after which a writer's temporary file is taken as left by a killed process.
const STALE_TEMPORARY: Duration = Duration::from_secs(3600);

impl ObjectStore {
    /// A store in `dir`, created if missing, bounded by [`DEFAULT_STORE_LIMIT`].
    pub fn open(dir: &Path) -> std::io::Result<ObjectStore> {
        Self::open_with_limit(dir, DEFAULT_STORE_LIMIT)
    }

    /// A store in `dir`, created if missing. When its entries take more than `limit` bytes,
    /// the least recently used go until they take three quarters of it (so that the next
    /// runs add entries before pruning again). Only the store's own files are touched: its
    /// entries, and temporary files of writers killed over an hour ago.
    pub fn open_with_limit(dir: &Path, limit: u64) -> std::io::Result<ObjectStore> {
        std::fs::create_dir_all(dir)?;
        let store = ObjectStore {
            dir: dir.to_path_buf(),
        };
        store.prune(limit);
        Ok(store)
    }

    /// Best effort: a file that cannot be listed or removed (another process pruning, a
    /// permission) stays.
    fn prune(&self, limit: u64) {
        let Ok(listing) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let now = SystemTime::now();
        let mut entries: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
        let mut total = 0u64;
        for file in listing.flatten() {
            let (path, Ok(meta)) = (file.path(), file.metadata()) else {
                continue;
            };
            let name = file.file_name();
            let Some((stem, rest)) = name.to_str().and_then(|n| n.split_once('.')) else {
                continue;
            };
            if !meta.is_file() || stem.len() != 16 || !stem.bytes().all(|b| b.is_ascii_hexdigit()) {
                continue;
            }
            let used = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            if rest == "lfo" {
                total += meta.len();
                entries.push((used, meta.len(), path));
            } else if rest.starts_with("tmp")
                && now
                    .duration_since(used)
                    .is_ok_and(|age| age > STALE_TEMPORARY)
            {
                let _ = std::fs::remove_file(&path);
            }
        }
        if total <= limit {
            return;
        }
        entries.sort();
        let target = limit / 4 * 3;
        for (_, len, path) in entries {
            if total <= target {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= len;
            }
        }
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
    /// A hit marks the entry used (its modification time), which pruning goes by.
    pub(crate) fn load(&self, fingerprint: &str, key: &str) -> Option<StoredObject> {
        let path = self.path(fingerprint, key);
        let bytes = std::fs::read(&path).ok()?;
        let mut data = bytes.strip_prefix(MAGIC)?;
        let (f, k) = (take(&mut data)?, take(&mut data)?);
        if f != fingerprint.as_bytes() || k != key.as_bytes() {
            return None;
        }
        let ir = String::from_utf8(take(&mut data)?.to_vec()).ok()?;
        let object = take(&mut data)?.to_vec();
        if !data.is_empty() {
            return None;
        }
        let _ = std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(SystemTime::now()));
        Some(StoredObject { ir, object })
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

    #[test]
    fn opening_prunes_least_recently_used_entries_and_nothing_else() {
        let dir = std::env::temp_dir().join(format!("lafuse-store-prune-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = ObjectStore::open(&dir).unwrap();
        let object = vec![7u8; 1000];
        let keys: Vec<String> = (0..8).map(|k| format!("module {k}")).collect();
        let day = Duration::from_secs(86_400);
        let old = SystemTime::now() - 30 * day;
        for (k, key) in keys.iter().enumerate() {
            store.save("fp", key, "ir", &object);
            // Entry k was last used k days after `old`.
            let f = std::fs::File::options()
                .write(true)
                .open(store.path("fp", key))
                .unwrap();
            f.set_modified(old + day * k as u32).unwrap();
        }
        // Entry 0, the oldest, is used now.
        assert!(store.load("fp", &keys[0]).is_some());
        let size = std::fs::metadata(store.path("fp", &keys[0])).unwrap().len();
        let foreign = dir.join("notes.txt");
        std::fs::write(&foreign, "not an entry").unwrap();
        let stale = dir.join("0123456789abcdef.tmp99.ThreadId(1)");
        std::fs::write(&stale, "a killed writer's").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&stale)
            .unwrap()
            .set_modified(old)
            .unwrap();
        // Room for 6 entries: pruned to 3/4 of it (4.5), so the four least recently used of
        // 1..7 go and 0 (just used), 5, 6, 7 stay.
        let store = ObjectStore::open_with_limit(&dir, 6 * size).unwrap();
        let kept: Vec<bool> = keys.iter().map(|k| store.path("fp", k).exists()).collect();
        assert_eq!(kept, [true, false, false, false, false, true, true, true]);
        assert!(foreign.exists() && !stale.exists());
        // Under the limit nothing goes.
        let store = ObjectStore::open_with_limit(&dir, 6 * size).unwrap();
        assert_eq!(
            keys.iter().filter(|k| store.path("fp", k).exists()).count(),
            4
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

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
//!
//! Nothing from the store runs unchecked: an entry carries the SHA-256 of everything after it
//! (key, IR and machine code), verified before any byte is used, so a corrupted entry is a miss;
//! entries are opened without following symbolic links and used only when they are regular
//! files (a FIFO is not waited on); and a directory that another user owns, or that others may
//! write, is refused when the store is opened, since whoever can write it chooses the code
//! lafuse runs.

use super::orc::ObjectJit;
use super::{llvm, CodegenError, Machine};
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::targets::TargetMachine;
use lafuse_compiler::hops::json::Fnv64;
use sha2::{Digest, Sha256};
use std::hash::Hasher;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// First bytes of an entry file; the SHA-256 of the rest of the file follows.
const MAGIC: &[u8] = b"lafuse object store entry 2\n";

/// Bytes of an entry's digest.
const DIGEST_LEN: usize = 32;

/// Entries larger than this are not read (no operator's machine code comes near it).
const MAX_ENTRY_BYTES: u64 = 256 << 20;

/// Why a store directory was refused.
#[derive(Debug)]
pub enum StoreRefusal {
    /// It could not be created or examined.
    Io(std::io::Error),
    /// It is not a directory (a symbolic link to one counts as not).
    NotADirectory,
    /// Another user owns it.
    ForeignOwner { owner: u32 },
    /// Users other than its owner may write it (`mode`, octal).
    WritableByOthers { mode: u32 },
}

impl std::fmt::Display for StoreRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreRefusal::Io(e) => write!(f, "{e}"),
            StoreRefusal::NotADirectory => f.write_str("it is not a directory"),
            StoreRefusal::ForeignOwner { owner } => {
                write!(f, "it belongs to user {owner}, not to this one")
            }
            StoreRefusal::WritableByOthers { mode } => write!(
                f,
                "others may write it (mode {mode:o}); `chmod go-w` it or choose another"
            ),
        }
    }
}

impl std::error::Error for StoreRefusal {}

/// Reads `path` if it is a regular file, without following a symbolic link and without waiting
/// on a FIFO; `None` otherwise. Returns the open file too, for marking it used.
fn read_regular_file(path: &Path) -> Option<(std::fs::File, Vec<u8>)> {
    let mut file = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > MAX_ENTRY_BYTES {
        return None;
    }
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(meta.len() as usize).ok()?;
    file.read_to_end(&mut bytes).ok()?;
    Some((file, bytes))
}

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

/// The key of the marker saying that the store holds the machine code of entry point
/// `entry` of `plan` (the plan's full text, with every literal's bits, and the entry's name).
/// The marker is an entry of its own, empty, checked and pruned like the others: a tiered
/// backend reads it to start an operator on LLVM at once, without emitting its module (the
/// object entry's key). A marker that outlives its object (pruned) costs one compilation.
pub(crate) fn plan_marker_key(plan: &lafuse_compiler::fusion::cplan::CPlan, entry: &str) -> String {
    format!("lafuse plan marker\n{entry}\n{plan:?}")
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
    pub fn open(dir: &Path) -> Result<ObjectStore, StoreRefusal> {
        Self::open_with_limit(dir, DEFAULT_STORE_LIMIT)
    }

    /// A store in `dir`, created if missing. When its entries take more than `limit` bytes,
    /// the least recently used go until they take three quarters of it (so that the next
    /// runs add entries before pruning again). Only the store's own files are touched: its
    /// entries, and temporary files of writers killed over an hour ago.
    ///
    /// A missing directory is created private (mode 0700). An existing one is refused unless
    /// it is a real directory that this user owns and nobody else may write.
    pub fn open_with_limit(dir: &Path, limit: u64) -> Result<ObjectStore, StoreRefusal> {
        if std::fs::symlink_metadata(dir).is_err() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(StoreRefusal::Io)?;
        }
        let meta = std::fs::symlink_metadata(dir).map_err(StoreRefusal::Io)?;
        if !meta.is_dir() {
            return Err(StoreRefusal::NotADirectory);
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me {
            return Err(StoreRefusal::ForeignOwner { owner: meta.uid() });
        }
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o022 != 0 {
            return Err(StoreRefusal::WritableByOthers { mode });
        }
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
        let (file, bytes) = read_regular_file(&path)?;
        let rest = bytes.strip_prefix(MAGIC)?;
        let (sum, mut data) = (rest.get(..DIGEST_LEN)?, rest.get(DIGEST_LEN..)?);
        if Sha256::digest(data).as_slice() != sum {
            return None;
        }
        let (f, k) = (take(&mut data)?, take(&mut data)?);
        if f != fingerprint.as_bytes() || k != key.as_bytes() {
            return None;
        }
        let ir = String::from_utf8(take(&mut data)?.to_vec()).ok()?;
        let object = take(&mut data)?.to_vec();
        if !data.is_empty() {
            return None;
        }
        // Through the file that was read (its owner may set its times without writing it).
        let _ = file.set_modified(SystemTime::now());
        Some(StoredObject { ir, object })
    }

    /// Whether the store holds the marker `key` ([`plan_marker_key`]) under this process's
    /// code-generation fingerprint.
    pub(crate) fn has_marker(&self, key: &str) -> bool {
        self.load(llvm::codegen_fingerprint(), key).is_some()
    }

    /// Keeps the marker `key` ([`plan_marker_key`]), best effort.
    pub(crate) fn mark(&self, key: &str) {
        self.save(llvm::codegen_fingerprint(), key, "", &[]);
    }

    /// Keeps the entry `ir`, `object` for `key` under `fingerprint` (best effort: a failure
    /// to write is ignored, the next run compiles again).
    pub(crate) fn save(&self, fingerprint: &str, key: &str, ir: &str, object: &[u8]) {
        let mut payload =
            Vec::with_capacity(32 + fingerprint.len() + key.len() + ir.len() + object.len());
        put(&mut payload, fingerprint.as_bytes());
        put(&mut payload, key.as_bytes());
        put(&mut payload, ir.as_bytes());
        put(&mut payload, object);
        let mut out = Vec::with_capacity(MAGIC.len() + DIGEST_LEN + payload.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&Sha256::digest(&payload));
        out.extend_from_slice(&payload);
        let path = self.path(fingerprint, key);
        let tmp = path.with_extension(format!(
            "tmp{}.{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        // A new file of this user's only (never one planted under the temporary name).
        let written = std::fs::File::options()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
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

    /// A fresh private directory for one test.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("lafuse-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_byte_changed_anywhere_in_an_entry_is_a_miss() {
        let dir = scratch("flip");
        let store = ObjectStore::open(&dir).unwrap();
        store.save(
            "fp",
            "module",
            "define void @f()",
            &[0x7f, b'E', b'L', b'F', 7, 7],
        );
        let path = store.path("fp", "module");
        let good = std::fs::read(&path).unwrap();
        assert!(store.load("fp", "module").is_some());
        for at in 0..good.len() {
            for bit in [0x01u8, 0x80] {
                let mut bad = good.clone();
                bad[at] ^= bit;
                std::fs::write(&path, &bad).unwrap();
                assert!(
                    store.load("fp", "module").is_none(),
                    "byte {at} of {} changed by {bit:#x} was loaded",
                    good.len()
                );
            }
        }
        // A payload replaced together with a digest that does not match it is a miss too; the
        // intact entry loads again.
        std::fs::write(&path, &good).unwrap();
        assert!(store.load("fp", "module").is_some());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn links_fifos_and_directories_in_place_of_entries_are_misses() {
        let dir = scratch("kinds");
        let store = ObjectStore::open(&dir).unwrap();
        store.save("fp", "real", "ir", &[1, 2, 3]);
        let real = store.path("fp", "real");
        // A symbolic link to a valid entry, under another key's name.
        let linked = store.path("fp", "linked");
        std::fs::copy(&real, dir.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(dir.join("elsewhere"), &linked).unwrap();
        assert!(store.load("fp", "linked").is_none());
        // A FIFO: not waited on (this test would hang otherwise).
        let fifo = store.path("fp", "fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(store.load("fp", "fifo").is_none());
        // A directory.
        std::fs::create_dir(store.path("fp", "dir")).unwrap();
        assert!(store.load("fp", "dir").is_none());
        assert!(store.load("fp", "real").is_some());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn directories_others_may_write_or_own_are_refused() {
        let dir = scratch("perms");
        // Created private.
        ObjectStore::open(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        for open_mode in [0o777, 0o722, 0o770] {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(open_mode)).unwrap();
            match ObjectStore::open(&dir) {
                Err(StoreRefusal::WritableByOthers { mode }) => assert_eq!(mode, open_mode),
                other => panic!("mode {open_mode:o}: {other:?}"),
            }
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        ObjectStore::open(&dir).unwrap();
        // A symbolic link to a good directory is not a directory of the store's.
        let link = scratch("perms-link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(matches!(
            ObjectStore::open(&link),
            Err(StoreRefusal::NotADirectory)
        ));
        let _ = std::fs::remove_file(&link);
        // Another user's directory (only root can make one to test with).
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            let c = std::ffi::CString::new(dir.to_str().unwrap()).unwrap();
            // SAFETY: a valid NUL-terminated path.
            assert_eq!(unsafe { libc::chown(c.as_ptr(), 12345, 12345) }, 0);
            match ObjectStore::open(&dir) {
                Err(StoreRefusal::ForeignOwner { owner }) => assert_eq!(owner, 12345),
                other => panic!("{other:?}"),
            }
        }
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

//! The memory budget: how much memory this process may still take, the smaller of what the
//! machine has and what its memory cgroup allows, checked before every large allocation a
//! script or a file sizes.
//!
//! Why not rely on the allocator failing: Linux overcommits, so an allocation beyond a
//! cgroup's limit succeeds and the process is killed later, when it touches the pages, with no
//! message. Under an address-space limit (`ulimit -v`) the allocator does fail, and
//! [`crate::matrix::try_alloc_zeroed`] reports that as a resource error too. The budget
//! check turns the first case into the second: a request larger than what is left is refused
//! before a page is touched.
//!
//! Only allocations of [`CHECKED_BYTES`] or more read the budget (a few reads of `/proc` and
//! `/sys`), so ordinary operations pay nothing.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Allocations at least this large are checked against the budget.
pub const CHECKED_BYTES: usize = 64 << 20;

/// Where the budget comes from: the machine's physical memory and, where the process runs in a
/// memory cgroup with a limit, that cgroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Physical memory, bytes (`MemTotal`).
    pub physical: u64,
    /// The tightest limit of the process's memory cgroup and its ancestors, with the directory
    /// whose usage counts against it.
    pub cgroup: Option<CgroupLimit>,
}

/// A memory cgroup limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupLimit {
    pub bytes: u64,
    /// The cgroup's directory (its `memory.current` or `memory.usage_in_bytes` is the usage).
    pub dir: PathBuf,
    pub version: CgroupVersion,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

impl Limits {
    /// The budget in bytes: the smaller of physical memory and the cgroup limit.
    pub fn budget(&self) -> u64 {
        match &self.cgroup {
            Some(c) => c.bytes.min(self.physical),
            None => self.physical,
        }
    }

    /// Bytes that can still be allocated now: for a cgroup, its limit less its working set
    /// (usage without the reclaimable file cache); for the machine, `MemAvailable`. The smaller
    /// of the two; `None` where neither can be read (then nothing is refused).
    pub fn available(&self) -> Option<u64> {
        let machine = read_meminfo_kb("MemAvailable").map(|kb| kb * 1024);
        let cgroup = self.cgroup.as_ref().and_then(|c| {
            let used = c.working_set()?;
            Some(c.bytes.saturating_sub(used))
        });
        match (machine, cgroup) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

impl CgroupLimit {
    /// The cgroup's usage less its inactive file cache, which the kernel reclaims before it
    /// kills anything.
    fn working_set(&self) -> Option<u64> {
        let (usage, inactive_key) = match self.version {
            CgroupVersion::V1 => ("memory.usage_in_bytes", "total_inactive_file"),
            CgroupVersion::V2 => ("memory.current", "inactive_file"),
        };
        let usage = read_u64(&self.dir.join(usage))?;
        let inactive = std::fs::read_to_string(self.dir.join("memory.stat"))
            .ok()
            .and_then(|s| stat_value(&s, inactive_key))
            .unwrap_or(0);
        Some(usage.saturating_sub(inactive))
    }
}

/// This process's limits, read once.
pub fn limits() -> &'static Limits {
    static LIMITS: OnceLock<Limits> = OnceLock::new();
    LIMITS.get_or_init(|| Limits {
        physical: read_meminfo_kb("MemTotal")
            .map(|kb| kb * 1024)
            .unwrap_or(u64::MAX),
        cgroup: std::fs::read_to_string("/proc/self/cgroup")
            .ok()
            .and_then(|membership| cgroup_limit(Path::new("/sys/fs/cgroup"), &membership)),
    })
}

/// Why a request does not fit: the bytes asked for and the bytes left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverBudget {
    pub requested: u64,
    pub available: u64,
    pub budget: u64,
}

impl std::fmt::Display for OverBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.2} GB requested, {:.2} GB of the {:.2} GB memory budget left",
            self.requested as f64 / 1e9,
            self.available as f64 / 1e9,
            self.budget as f64 / 1e9
        )
    }
}

/// Whether `bytes` more fit in the budget now. Small requests are not checked.
pub fn check(bytes: usize) -> Result<(), OverBudget> {
    if bytes < CHECKED_BYTES {
        return Ok(());
    }
    let limits = limits();
    match limits.available() {
        Some(available) if bytes as u64 > available => Err(OverBudget {
            requested: bytes as u64,
            available,
            budget: limits.budget(),
        }),
        _ => Ok(()),
    }
}

/// The memory cgroup limit that applies to a process with `/proc/self/cgroup` text
/// `membership`, looked up under the cgroup mount `root`: the smallest limit of its cgroup
/// and every ancestor (a parent's limit binds its children), version 2 (`0::/path`, files
/// `memory.max`) or version 1 (`N:memory:/path`, files `memory.limit_in_bytes`). Inside a
/// container the path may name a directory the container does not see; the mount's own
/// root is then the process's cgroup.
pub fn cgroup_limit(root: &Path, membership: &str) -> Option<CgroupLimit> {
    let mut found: Option<CgroupLimit> = None;
    for line in membership.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let (mount, file, version) = if controllers.is_empty() {
            let Some(unified) = [root.join("unified"), root.to_path_buf()]
                .into_iter()
                .find(|m| m.join("cgroup.controllers").exists())
            else {
                continue;
            };
            (unified, "memory.max", CgroupVersion::V2)
        } else if controllers.split(',').any(|c| c == "memory") {
            (
                root.join("memory"),
                "memory.limit_in_bytes",
                CgroupVersion::V1,
            )
        } else {
            continue;
        };
        let own = mount.join(path.trim_start_matches('/'));
        let start = if own.is_dir() { own } else { mount.clone() };
        let mut dir = Some(start.as_path());
        while let Some(d) = dir {
            if !d.starts_with(&mount) {
                break;
            }
            if let Some(bytes) = read_limit(&d.join(file)) {
                if found.as_ref().is_none_or(|f| bytes < f.bytes) {
                    found = Some(CgroupLimit {
                        bytes,
                        dir: d.to_path_buf(),
                        version,
                    });
                }
            }
            dir = d.parent();
        }
    }
    found
}

/// A limit file's value; `max` and the "unlimited" values of version 1 (near `i64::MAX`,
/// rounded to pages) are no limit.
fn read_limit(file: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    let text = text.trim();
    if text == "max" {
        return None;
    }
    let bytes: u64 = text.parse().ok()?;
    (bytes < (1u64 << 62)).then_some(bytes)
}

fn read_u64(file: &Path) -> Option<u64> {
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
}

/// The value of `key` in a `memory.stat` file (`key value` lines).
fn stat_value(stat: &str, key: &str) -> Option<u64> {
    stat.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// A `/proc/meminfo` field in kB.
fn read_meminfo_kb(key: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?.strip_prefix(':')?;
        rest.trim().trim_end_matches("kB").trim().parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn tree(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("lafuse-cgroup-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn a_version_2_limit_of_the_cgroup_or_an_ancestor_is_found_the_smallest_wins() {
        let root = tree("v2");
        write(&root.join("cgroup.controllers"), "memory\n");
        write(&root.join("a/memory.max"), "1500000000\n");
        write(&root.join("a/b/memory.max"), "max\n");
        let limit = cgroup_limit(&root, "0::/a/b\n").unwrap();
        assert_eq!(limit.bytes, 1_500_000_000);
        assert_eq!(limit.dir, root.join("a"));
        assert_eq!(limit.version, CgroupVersion::V2);
        write(&root.join("a/b/memory.max"), "1000\n");
        assert_eq!(cgroup_limit(&root, "0::/a/b\n").unwrap().bytes, 1000);
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn a_version_1_memory_controller_limit_is_found_and_unlimited_is_none() {
        let root = tree("v1");
        write(
            &root.join("memory/job/memory.limit_in_bytes"),
            "1610612736\n",
        );
        write(
            &root.join("memory/memory.limit_in_bytes"),
            "9223372036854771712\n",
        );
        let membership = "5:cpu:/job\n4:memory:/job\n0::/\n";
        let limit = cgroup_limit(&root, membership).unwrap();
        assert_eq!(limit.bytes, 1_610_612_736);
        assert_eq!(limit.version, CgroupVersion::V1);
        assert!(cgroup_limit(&root, "4:memory:/\n").is_none());
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn a_cgroup_path_the_container_does_not_see_falls_back_to_the_mount_root() {
        let root = tree("ns");
        write(&root.join("memory/memory.limit_in_bytes"), "2000000000\n");
        let limit = cgroup_limit(&root, "4:memory:/host/path/elsewhere\n").unwrap();
        assert_eq!(limit.bytes, 2_000_000_000);
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn the_working_set_leaves_out_inactive_file_cache() {
        let root = tree("ws");
        write(&root.join("memory.current"), "1000000\n");
        write(
            &root.join("memory.stat"),
            "anon 600000\ninactive_file 300000\n",
        );
        let limit = CgroupLimit {
            bytes: 2_000_000,
            dir: root.clone(),
            version: CgroupVersion::V2,
        };
        assert_eq!(limit.working_set(), Some(700_000));
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn the_budget_is_the_smaller_of_physical_memory_and_the_cgroup_limit() {
        let mut l = Limits {
            physical: 24 << 30,
            cgroup: None,
        };
        assert_eq!(l.budget(), 24 << 30);
        l.cgroup = Some(CgroupLimit {
            bytes: 1 << 30,
            dir: PathBuf::from("/nonexistent"),
            version: CgroupVersion::V2,
        });
        assert_eq!(l.budget(), 1 << 30);
        assert!(check(1 << 10).is_ok(), "small requests are never refused");
    }
}

//! Single-instance locks: one process of a role per region directory.
//!
//! Two collectors serving one region directory, or two writers (translators, the software
//! responder, the INT sink) writing into the same regions, split or destroy data silently: a
//! second collector with `force` recreates files the first still serves, and two writers race
//! on the same slots and Append heads. Each long-running process therefore takes an exclusive
//! `flock(2)` on a lock file in the region directory before it opens a region, and writes its PID
//! into the file so that the process refused can name the holder.
//!
//! `flock` locks belong to the open file description: the kernel releases them when the holder
//! exits for any reason (SIGKILL included), so a stale lock file never blocks a restart. A lock
//! file that exists but is not locked is simply taken over.
//!
//! Kept by hand (one `flock` call) rather than a lock crate: the holder's PID in the file and
//! [`InstanceLock::held`] (is a live process holding it?) are what the refusals and the waits
//! for a collector starting beside a translator need, and the crates offer neither.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The role that creates regions and serves queries (`dta collector`).
pub const COLLECTOR_LOCK: &str = ".collector.lock";
/// The role that writes into regions: the translator in shared-memory mode, the software RoCE
/// responder, the INT sink. Exactly one per region directory.
pub const WRITER_LOCK: &str = ".writer.lock";

/// Why a lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another live process holds the lock.
    #[error("{what} is already in use by process {pid} (lock {path}); stop it first or use another directory")]
    Held {
        /// What was being locked, in words ("region directory dta-regions as writer").
        what: String,
        /// The holder's PID as it recorded it (0 when it had not written it yet).
        pid: u32,
        /// The lock file.
        path: PathBuf,
    },
    /// The lock file could not be opened or locked.
    #[error("cannot lock {path}: {source}")]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// An exclusive lock held for the life of this value (and released by the kernel when the
/// process exits).
#[derive(Debug)]
pub struct InstanceLock {
    _file: File,
    path: PathBuf,
}

impl InstanceLock {
    /// Take the exclusive lock `dir/name` (e.g. [`COLLECTOR_LOCK`], [`WRITER_LOCK`]), creating
    /// `dir` and the file if needed, without blocking. `what` describes the resource in the
    /// error message.
    pub fn acquire_in(dir: &Path, name: &str, what: &str) -> Result<InstanceLock, LockError> {
        std::fs::create_dir_all(dir).map_err(|source| LockError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        InstanceLock::acquire(&dir.join(name), what)
    }

    /// Take the exclusive lock on the file `path` without blocking.
    pub fn acquire(path: &Path, what: &str) -> Result<InstanceLock, LockError> {
        let io = |source| LockError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io)?;
        // SAFETY: flock on a file descriptor we own; no memory is passed.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let mut text = String::new();
                // Bounded read: a PID is a few bytes; a hostile file cannot make us read more.
                let _ = (&mut file).take(32).read_to_string(&mut text);
                let pid = text.trim().parse().unwrap_or(0);
                return Err(LockError::Held {
                    what: what.to_string(),
                    pid,
                    path: path.to_path_buf(),
                });
            }
            return Err(io(err));
        }
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
        file.flush().map_err(io)?;
        Ok(InstanceLock {
            _file: file,
            path: path.to_path_buf(),
        })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether a live process holds the lock `path` (a missing or unreadable file: no).
    pub fn held(path: &Path) -> bool {
        let Ok(file) = std::fs::File::open(path) else {
            return false;
        };
        // SAFETY: flock on a file descriptor we own; a shared lock taken here is released
        // when `file` is closed at the end of this function.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
        rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_says_whether_a_holder_is_alive() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(COLLECTOR_LOCK);
        assert!(!InstanceLock::held(&path), "no file");
        let lock = InstanceLock::acquire(&path, "test").unwrap();
        assert!(InstanceLock::held(&path));
        // Asking does not take it: the holder keeps it, and a later acquire still fails.
        assert!(InstanceLock::acquire(&path, "test").is_err());
        drop(lock);
        assert!(
            !InstanceLock::held(&path),
            "the file stays, the holder is gone"
        );
    }

    #[test]
    fn second_holder_is_refused_with_the_first_pid_then_succeeds_after_release() {
        let dir = tempfile::tempdir().unwrap();
        let first = InstanceLock::acquire_in(dir.path(), WRITER_LOCK, "test dir").unwrap();
        // A second open file description in this same process conflicts like another process.
        match InstanceLock::acquire_in(dir.path(), WRITER_LOCK, "test dir") {
            Err(LockError::Held { pid, what, .. }) => {
                assert_eq!(pid, std::process::id());
                assert_eq!(what, "test dir");
            }
            other => panic!("expected Held, got {other:?}"),
        }
        // Another role's lock in the same directory is independent.
        let _collector = InstanceLock::acquire_in(dir.path(), COLLECTOR_LOCK, "test dir").unwrap();
        drop(first);
        let again = InstanceLock::acquire_in(dir.path(), WRITER_LOCK, "test dir").unwrap();
        let text = std::fs::read_to_string(again.path()).unwrap();
        assert_eq!(text.trim(), std::process::id().to_string());
    }

    #[test]
    fn held_message_names_the_pid() {
        let dir = tempfile::tempdir().unwrap();
        let _first = InstanceLock::acquire_in(dir.path(), COLLECTOR_LOCK, "regions").unwrap();
        let err = InstanceLock::acquire_in(dir.path(), COLLECTOR_LOCK, "regions").unwrap_err();
        assert!(
            err.to_string().contains(&std::process::id().to_string()),
            "{err}"
        );
    }
}

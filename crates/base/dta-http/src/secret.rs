//! The one reader of secret files: the HTTP bearer token (`token_file`, `DTA_TOKEN_FILE`), the
//! control key (`[translator] control_key_file`, `dta report --control-key-file`) and the
//! InfluxDB token (`DTA_INFLUX_TOKEN_FILE`). A secret file is hostile input like any other
//! (docs/security.md "Secret files"):
//!
//! - it is opened without blocking (a FIFO cannot hold the start) and must be a regular file: a
//!   device (`/dev/zero`), a FIFO, a socket or a directory is refused, naming what it is;
//! - it is at most [`MAX_SECRET_FILE`] bytes, checked before anything is read, and read with that
//!   bound (a file growing meanwhile is cut there and refused);
//! - it holds UTF-8 text, trimmed of surrounding whitespace, and is not empty;
//! - a mode that lets the group or others read or write it is said once, as a warning (the
//!   secret still works: the operator may have reasons, and the warning names the fix).
//!
//! What the secret must look like (a token's characters, a key's 32 hexadecimal digits, not all
//! zero) is checked by its own type; errors name the file, never its content.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Largest secret file read, bytes: a token is at most [`crate::MAX_TOKEN_LEN`] bytes, a
/// control key 32 characters; the rest is room for whitespace.
pub const MAX_SECRET_FILE: u64 = crate::MAX_TOKEN_LEN as u64 + 64;

/// Why a secret file is refused.
#[derive(Debug, thiserror::Error)]
#[error("{what} {path}: {msg}")]
pub struct SecretError {
    /// What the secret is (`token file`, `control key file`).
    pub what: &'static str,
    pub path: PathBuf,
    pub msg: String,
}

/// What a secret file held, and what is worth a warning about it.
#[derive(Debug)]
pub struct Secret {
    /// The content, trimmed.
    pub text: String,
    /// Set when the group or others may read or write the file: the warning to say.
    pub warning: Option<String>,
}

/// Read the secret file `path` (`what` names it in messages) under the rules of the module
/// doc; a warning, if any, is logged once here and returned.
pub fn read(path: &Path, what: &'static str) -> Result<Secret, SecretError> {
    let err = |msg: String| SecretError {
        what,
        path: path.to_owned(),
        msg,
    };
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| err(e.to_string()))?;
    let m = f.metadata().map_err(|e| err(e.to_string()))?;
    let t = m.file_type();
    let kind = if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    };
    if let Some(k) = kind {
        return Err(err(format!(
            "{k}: a secret is read from a regular file only"
        )));
    }
    if m.len() > MAX_SECRET_FILE {
        return Err(err(format!(
            "{} bytes; a secret file is at most {MAX_SECRET_FILE} bytes",
            m.len()
        )));
    }
    let mut bytes = Vec::with_capacity(m.len() as usize);
    f.take(MAX_SECRET_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| err(e.to_string()))?;
    if bytes.len() as u64 > MAX_SECRET_FILE {
        return Err(err(format!(
            "grew past {MAX_SECRET_FILE} bytes while it was read"
        )));
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| err("not UTF-8 text".into()))?
        .trim()
        .to_owned();
    if text.is_empty() {
        return Err(err("empty".into()));
    }
    let warning = wide_mode(path, m.mode(), what);
    if let Some(w) = &warning {
        tracing::warn!("{w}");
    }
    Ok(Secret { text, warning })
}

/// The warning [`read`] gives a secret file whose mode lets the group or others read or write
/// it, without reading or logging anything (for a report of files already read).
pub fn mode_warning(path: &Path, what: &'static str) -> Option<String> {
    std::fs::metadata(path)
        .ok()
        .and_then(|m| wide_mode(path, m.mode(), what))
}

fn wide_mode(path: &Path, mode: u32, what: &str) -> Option<String> {
    let mode = mode & 0o777;
    (mode & 0o077 != 0).then(|| {
        format!(
            "{what} {} has mode {mode:04o}: the group or others may read it; \
             chmod 600 it (and keep it owned by the service's user)",
            path.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn write(dir: &Path, name: &str, content: &[u8], mode: u32) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, content).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    #[test]
    fn a_regular_private_file_is_read_trimmed_without_a_warning() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "k",
            b"  0123456789abcdef0123456789abcdef\n",
            0o600,
        );
        let s = read(&p, "control key file").unwrap();
        assert_eq!(s.text, "0123456789abcdef0123456789abcdef");
        assert!(s.warning.is_none());
    }

    #[test]
    fn a_wide_mode_is_a_warning_naming_the_fix() {
        let d = tempfile::tempdir().unwrap();
        let p = write(d.path(), "k", b"secret-secret-secret", 0o644);
        let w = read(&p, "token file").unwrap().warning.unwrap();
        assert!(w.contains("0644") && w.contains("chmod 600"), "{w}");
    }

    #[test]
    fn devices_fifos_directories_and_oversize_files_are_refused_before_reading() {
        let d = tempfile::tempdir().unwrap();
        let msg = |p: &Path| read(p, "control key file").unwrap_err().to_string();
        assert!(
            msg(Path::new("/dev/zero")).contains("a character device"),
            "{}",
            msg(Path::new("/dev/zero"))
        );
        assert!(msg(d.path()).contains("a directory"));
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a fresh path in our temporary directory.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // No writer: a blocking open would hang here forever.
        assert!(msg(&fifo).contains("a FIFO"), "{}", msg(&fifo));
        let big = d.path().join("big");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(2 << 30)
            .unwrap();
        let m = msg(&big);
        assert!(
            m.contains("2147483648 bytes") && m.contains("at most"),
            "{m}"
        );
        let empty = write(d.path(), "empty", b" \n", 0o600);
        assert!(msg(&empty).contains("empty"));
        let binary = write(d.path(), "bin", &[0xff, 0xfe, 0x00], 0o600);
        assert!(msg(&binary).contains("not UTF-8"));
        assert!(msg(&d.path().join("none")).contains("No such file"));
    }
}

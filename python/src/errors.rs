//! The package's exceptions and the conversions of the crates' errors.

use std::path::Path;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyOSError};
use pyo3::PyErr;

create_exception!(
    nexthop,
    Error,
    PyException,
    "Base class of the errors nexthop raises besides ValueError, TypeError and OSError."
);
create_exception!(
    nexthop,
    FormatError,
    Error,
    "A table file or FIB directory is of the wrong kind, corrupted or inconsistent."
);
create_exception!(
    nexthop,
    UpdateError,
    Error,
    "A table update was refused (the name exists, is absent, or the action table is full); the table is unchanged."
);
create_exception!(
    nexthop,
    ControlError,
    Error,
    "The controller's handshake failed (most likely another key file) or it broke the protocol."
);

/// `OSError("PATH: what")`, the CLI's form.
pub fn os_err(path: &Path, e: impl std::fmt::Display) -> PyErr {
    PyOSError::new_err(format!("{}: {e}", path.display()))
}

/// `FormatError("PATH: what")`.
pub fn format_err(path: &Path, e: impl std::fmt::Display) -> PyErr {
    FormatError::new_err(format!("{}: {e}", path.display()))
}

/// Read access; a writer that panicked left the table as it was (every
/// update validates before it writes), so a poisoned lock is still usable.
pub fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

/// Write access (see [`read`]).
pub fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

/// Write `bytes` to `path` through a temporary file and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), PyErr> {
    use std::io::Write;
    let name = path
        .file_name()
        .ok_or_else(|| os_err(path, "not a file name"))?;
    let mut tmp_name = name.to_os_string();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    let res = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|_| f.sync_all()))
        .and_then(|_| std::fs::rename(&tmp, path));
    if let Err(e) = res {
        let _ = std::fs::remove_file(&tmp);
        return Err(os_err(path, e));
    }
    Ok(())
}

//! Rust strings and paths as C strings, and the two-call idiom for C output buffers.
use crate::error::{check, Error, Result};
use ember_sys as sys;
use std::ffi::CString;
use std::path::Path;

/// A path as a NUL-terminated C string. A path with a NUL byte inside cannot be passed to C: it is an
/// error (not a panic, and not a silently shortened path).
pub(crate) fn path_to_c(path: &Path) -> Result<CString> {
    #[cfg(unix)]
    let bytes = {
        use std::os::unix::ffi::OsStrExt;
        path.as_os_str().as_bytes().to_vec()
    };
    #[cfg(not(unix))]
    let bytes = path
        .to_str()
        .ok_or_else(|| Error::invalid_argument(format!("path {} is not valid UTF-8", path.display())))?
        .as_bytes()
        .to_vec();
    CString::new(bytes)
        .map_err(|_| Error::invalid_argument(format!("path {:?} contains a NUL byte", path)))
}

pub(crate) fn str_to_c(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::invalid_argument(format!("{what} {s:?} contains a NUL byte")))
}

/// The two-call idiom: `call(buf, capacity, &mut len)` is asked for the size, then filled. `extra` is 1
/// where C writes a NUL after the data (then left out of the result).
pub(crate) fn two_call<T: Copy + Default>(
    extra: usize,
    mut call: impl FnMut(*mut T, usize, *mut usize) -> sys::ember_status,
) -> Result<Vec<T>> {
    let mut len = 0usize;
    let st = call(std::ptr::null_mut(), 0, &mut len);
    if st != sys::EMBER_ERR_BUFFER_TOO_SMALL {
        check(st)?;
    }
    // The size can only be trusted for the state at that moment; retry if it grew meanwhile.
    loop {
        let mut buf = vec![T::default(); len + extra];
        let mut need = 0usize;
        let st = call(buf.as_mut_ptr(), buf.len(), &mut need);
        if st == sys::EMBER_ERR_BUFFER_TOO_SMALL && need > len {
            len = need;
            continue;
        }
        check(st)?;
        buf.truncate(need);
        return Ok(buf);
    }
}

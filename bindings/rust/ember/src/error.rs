//! Errors: the C status and the message `ember_last_error()` gave right after the failing call.
use ember_sys as sys;
use std::ffi::CStr;
use std::fmt;

/// The C API's error statuses (`ember_status`, negative values). `Other` keeps a value this crate does
/// not know (from a newer library) instead of losing it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    InvalidArgument,
    OutOfMemory,
    Io,
    InvalidModel,
    Unsupported,
    Cancelled,
    ContextFull,
    BufferTooSmall,
    NotFound,
    TypeMismatch,
    Backend,
    InvalidState,
    CorruptData,
    /// A grammar allows no token while its text is incomplete (EMBER_1.4).
    GrammarDeadEnd,
    Internal,
    Other(i32),
}

impl Status {
    pub fn from_raw(code: sys::ember_status) -> Status {
        match code {
            sys::EMBER_ERR_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::EMBER_ERR_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::EMBER_ERR_IO => Status::Io,
            sys::EMBER_ERR_INVALID_MODEL => Status::InvalidModel,
            sys::EMBER_ERR_UNSUPPORTED => Status::Unsupported,
            sys::EMBER_ERR_CANCELLED => Status::Cancelled,
            sys::EMBER_ERR_CONTEXT_FULL => Status::ContextFull,
            sys::EMBER_ERR_BUFFER_TOO_SMALL => Status::BufferTooSmall,
            sys::EMBER_ERR_NOT_FOUND => Status::NotFound,
            sys::EMBER_ERR_TYPE_MISMATCH => Status::TypeMismatch,
            sys::EMBER_ERR_BACKEND => Status::Backend,
            sys::EMBER_ERR_INVALID_STATE => Status::InvalidState,
            sys::EMBER_ERR_CORRUPT_DATA => Status::CorruptData,
            sys::EMBER_ERR_GRAMMAR_DEAD_END => Status::GrammarDeadEnd,
            sys::EMBER_ERR_INTERNAL => Status::Internal,
            other => Status::Other(other),
        }
    }

    /// The C value (`EMBER_ERR_*`).
    pub fn code(self) -> sys::ember_status {
        match self {
            Status::InvalidArgument => sys::EMBER_ERR_INVALID_ARGUMENT,
            Status::OutOfMemory => sys::EMBER_ERR_OUT_OF_MEMORY,
            Status::Io => sys::EMBER_ERR_IO,
            Status::InvalidModel => sys::EMBER_ERR_INVALID_MODEL,
            Status::Unsupported => sys::EMBER_ERR_UNSUPPORTED,
            Status::Cancelled => sys::EMBER_ERR_CANCELLED,
            Status::ContextFull => sys::EMBER_ERR_CONTEXT_FULL,
            Status::BufferTooSmall => sys::EMBER_ERR_BUFFER_TOO_SMALL,
            Status::NotFound => sys::EMBER_ERR_NOT_FOUND,
            Status::TypeMismatch => sys::EMBER_ERR_TYPE_MISMATCH,
            Status::Backend => sys::EMBER_ERR_BACKEND,
            Status::InvalidState => sys::EMBER_ERR_INVALID_STATE,
            Status::CorruptData => sys::EMBER_ERR_CORRUPT_DATA,
            Status::GrammarDeadEnd => sys::EMBER_ERR_GRAMMAR_DEAD_END,
            Status::Internal => sys::EMBER_ERR_INTERNAL,
            Status::Other(code) => code,
        }
    }

    /// The C name, e.g. "EMBER_ERR_IO" (from `ember_status_string`).
    pub fn name(self) -> &'static str {
        // SAFETY: ember_status_string returns static storage for any value, never NULL.
        unsafe { CStr::from_ptr(sys::ember_status_string(self.code())) }.to_str().unwrap_or("unknown status")
    }
}

/// A failed call: its status and the library's message naming what went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub status: Status,
    pub message: String,
}

impl Error {
    /// The error of the C call that just returned `code` on this thread. It must be called before any
    /// other ember call on the thread: `ember_last_error()` is thread-local and the next call may
    /// replace it.
    pub(crate) fn last(code: sys::ember_status) -> Error {
        // SAFETY: ember_last_error never returns NULL; the string is valid until the next ember call on
        // this thread, and it is copied before that.
        let message = unsafe { CStr::from_ptr(sys::ember_last_error()) }.to_string_lossy().into_owned();
        Error { status: Status::from_raw(code), message }
    }

    /// An error found on the Rust side before calling the library (e.g. a NUL inside a string).
    pub(crate) fn invalid_argument(message: String) -> Error {
        Error { status: Status::InvalidArgument, message }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.status.name())
        } else {
            write!(f, "{}: {}", self.status.name(), self.message)
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// Turns a C status into Ok (non-negative: success or a non-error outcome, returned for the caller to
/// tell apart) or the error with its message.
pub(crate) fn check(code: sys::ember_status) -> Result<sys::ember_status> {
    if code < 0 {
        Err(Error::last(code))
    } else {
        Ok(code)
    }
}

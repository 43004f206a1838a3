//! Rust errors to Python exceptions: the `SapwoodError` hierarchy, one mapping function,
//! and a guard that turns panics into `InternalError` instead of pyo3's `PanicException`.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::create_exception;
use pyo3::exceptions::{
    PyBaseException, PyException, PyFileNotFoundError, PyOSError, PyRuntimeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

create_exception!(
    sapwood,
    SapwoodError,
    PyException,
    "Base class of every error raised by Sapwood."
);

/// The subclasses of `SapwoodError`. They are created at import time with `type()`
/// because most of them also derive from a builtin (`ValueError`, `OSError`, ...), so
/// `except ValueError` keeps working for code written against XGBoost or LightGBM, and
/// `create_exception!` only supports a single base.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Unknown parameter name or out-of-range value.
    Parameter,
    /// Unusable data: empty, wrong lengths, bad feature column, bad weight.
    Data,
    /// A label the objective refuses (NaN, out of range, unseen class).
    Label,
    /// Prediction data that does not match the model's columns.
    SchemaMismatch,
    /// A malformed model file or string.
    Model,
    /// A file that does not exist.
    FileNotFound,
    /// Any other failure to read or write a file.
    Io,
    /// A histogram backend or the collective failed.
    Backend,
    /// A bug in Sapwood: a panic caught at the boundary.
    Internal,
}

impl Kind {
    /// Every kind, in the order of the type table (parents before children).
    pub const ALL: [Kind; 9] = [
        Kind::Parameter,
        Kind::Data,
        Kind::Label,
        Kind::SchemaMismatch,
        Kind::Model,
        Kind::FileNotFound,
        Kind::Io,
        Kind::Backend,
        Kind::Internal,
    ];

    /// The class name in the `sapwood` package.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Parameter => "ParameterError",
            Kind::Data => "DataError",
            Kind::Label => "LabelError",
            Kind::SchemaMismatch => "SchemaMismatchError",
            Kind::Model => "ModelError",
            Kind::FileNotFound => "SapwoodFileNotFoundError",
            Kind::Io => "SapwoodIOError",
            Kind::Backend => "BackendError",
            Kind::Internal => "InternalError",
        }
    }

    fn doc(self) -> &'static str {
        match self {
            Kind::Parameter => {
                "A parameter is unknown, out of range or inconsistent (also a ValueError)."
            }
            Kind::Data => "Training or prediction data is unusable (also a ValueError).",
            Kind::Label => "A label is refused by the objective (also a ValueError).",
            Kind::SchemaMismatch => {
                "Prediction data does not match the model's features (also a ValueError)."
            }
            Kind::Model => {
                "A model file or string is not a valid Sapwood model (also a ValueError)."
            }
            Kind::FileNotFound => "A file does not exist (also a FileNotFoundError).",
            Kind::Io => "Reading or writing a file failed (also an OSError).",
            Kind::Backend => {
                "A histogram backend or the worker collective failed (also a RuntimeError)."
            }
            Kind::Internal => "A bug inside Sapwood; please report it (also a RuntimeError).",
        }
    }

    fn bases<'py>(self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyType>>> {
        let root = py.get_type::<SapwoodError>();
        Ok(match self {
            Kind::Parameter | Kind::Data | Kind::Model => {
                vec![root, py.get_type::<PyValueError>()]
            }
            Kind::Label | Kind::SchemaMismatch => vec![Kind::Data.type_object(py)?],
            Kind::FileNotFound => vec![root, py.get_type::<PyFileNotFoundError>()],
            Kind::Io => vec![root, py.get_type::<PyOSError>()],
            Kind::Backend | Kind::Internal => vec![root, py.get_type::<PyRuntimeError>()],
        })
    }

    /// The Python class of this kind, created on first use.
    pub fn type_object(self, py: Python<'_>) -> PyResult<Bound<'_, PyType>> {
        static TYPES: [PyOnceLock<Py<PyType>>; 9] = [const { PyOnceLock::new() }; 9];
        let index = Kind::ALL.iter().position(|&k| k == self).unwrap_or(0);
        let ty = TYPES[index].get_or_try_init(py, || -> PyResult<Py<PyType>> {
            let namespace = PyDict::new(py);
            namespace.set_item("__module__", "sapwood")?;
            namespace.set_item("__doc__", self.doc())?;
            if matches!(self, Kind::FileNotFound | Kind::Io) {
                // OSError's __str__ would rebuild the text from errno and filename; keep
                // the engine's message, which is the one the command line prints.
                let plain = py.get_type::<PyBaseException>().getattr("__str__")?;
                namespace.set_item("__str__", plain)?;
            }
            let bases = PyTuple::new(py, self.bases(py)?)?;
            let made = py
                .get_type::<PyType>()
                .call1((self.name(), bases, namespace))?;
            Ok(made.cast_into::<PyType>()?.unbind())
        })?;
        Ok(ty.bind(py).clone())
    }

    /// An exception of this kind carrying `message`.
    pub fn err(self, message: impl Into<String>) -> PyErr {
        let message = message.into();
        Python::attach(|py| match self.type_object(py) {
            Ok(ty) => PyErr::from_type(ty, (message,)),
            Err(e) => e,
        })
    }
}

/// Every failure of the native module, before it becomes a Python exception.
#[derive(Debug, thiserror::Error)]
pub enum NativeError {
    /// An error of the engine.
    #[error(transparent)]
    Engine(#[from] sapwood::Error),
    /// An error converting Arrow data into columns.
    #[error(transparent)]
    Table(#[from] sapwood_io::IoError),
    /// Input that is not usable (shape, dtype, a broken Arrow stream).
    #[error("{0}")]
    Input(String),
}

/// The kind of an engine error; the message is always the engine's own text, which is
/// what the command-line interface prints too.
fn engine_kind(e: &sapwood::Error) -> Kind {
    use sapwood::Error as E;
    match e {
        E::InvalidParam { .. }
        | E::UnknownParam { .. }
        | E::UnknownObjective(_)
        | E::UnknownMetric(_) => Kind::Parameter,
        E::InvalidLabel { .. } => Kind::Label,
        E::SchemaMismatch(_) => Kind::SchemaMismatch,
        E::InvalidModel(_) => Kind::Model,
        E::Io { source, .. } => io_kind(source),
        E::Collective(_) | E::Backend(_) => Kind::Backend,
        _ => Kind::Data,
    }
}

/// `FileNotFoundError` for a missing file, `OSError` for everything else.
fn io_kind(source: &std::io::Error) -> Kind {
    if source.kind() == std::io::ErrorKind::NotFound {
        Kind::FileNotFound
    } else {
        Kind::Io
    }
}

/// Builds an `OSError` subclass with the engine's message as `str(e)` and the usual
/// `errno`/`strerror`/`filename` attributes.
fn os_error(kind: Kind, message: String, path: &str, source: &std::io::Error) -> PyErr {
    let err = kind.err(message);
    Python::attach(|py| {
        let value = err.value(py);
        // Attributes are a courtesy; a failure to set one must not hide the error itself.
        let _ = value.setattr("errno", source.raw_os_error());
        let _ = value.setattr("strerror", source.to_string());
        let _ = value.setattr("filename", path);
    });
    err
}

impl From<NativeError> for PyErr {
    fn from(e: NativeError) -> PyErr {
        let message = e.to_string();
        match &e {
            NativeError::Engine(sapwood::Error::Io { path, source }) => {
                os_error(io_kind(source), message, path, source)
            }
            NativeError::Engine(inner) => engine_kind(inner).err(message),
            NativeError::Table(sapwood_io::IoError::Io { path, source }) => os_error(
                io_kind(source),
                message,
                &path.display().to_string(),
                source,
            ),
            NativeError::Table(sapwood_io::IoError::Data { source, .. }) => {
                engine_kind(source).err(message)
            }
            NativeError::Table(_) | NativeError::Input(_) => Kind::Data.err(message),
        }
    }
}

/// `?`-friendly conversion of engine and table results into `PyResult`.
pub trait OrRaise<T> {
    /// The value, or the mapped Python exception.
    fn or_raise(self) -> PyResult<T>;
}

impl<T, E: Into<NativeError>> OrRaise<T> for Result<T, E> {
    fn or_raise(self) -> PyResult<T> {
        self.map_err(|e| PyErr::from(e.into()))
    }
}

/// The message of a caught panic payload.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// Runs `f`, turning a panic into `sapwood.InternalError` so that no `PanicException`
/// (which derives from `BaseException` and escapes `except Exception`) reaches users.
pub fn guarded<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        Err(Kind::Internal.err(format!(
            "internal error (please report it): {}",
            panic_message(payload.as_ref())
        )))
    })
}

/// Adds `SapwoodError` and its subclasses to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("SapwoodError", py.get_type::<SapwoodError>())?;
    for kind in Kind::ALL {
        m.add(kind.name(), kind.type_object(py)?)?;
    }
    Ok(())
}

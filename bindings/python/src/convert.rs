//! Conversions shared by every engine wrapper: the `poll_output` values (`Transmit`, `Timeout`,
//! events) and structured values through the core's serde shapes.
//!
//! Structured values (configs, stats, params, results) cross as plain Python values made from
//! the core's own `Serialize`/`Deserialize` impls through `serde_json::Value`, so their shape is
//! the one of `tests/vectors/` and `core/schemas/`. (The `pythonize` crate needs pyo3 0.29, and
//! `serde-pyobject` 0.8 turns JSON null into `()` and panics on types it does not know, so the
//! Value ↔ Python step is the short pair of functions below.) Events become instances of the frozen dataclasses of
//! each Python module (`deskwire.oa1.Response`, ...): the serde shape of an event is externally
//! tagged (`{"response": {...}}`), the tag picks the class from `deskwire._events.REGISTRY` and
//! the fields become its keyword arguments.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::errors;

/// `poll_output`: bytes to write to the connection, framing included.
#[pyclass(module = "deskwire", frozen)]
pub struct Transmit {
    data: Py<PyBytes>,
}

#[pymethods]
impl Transmit {
    #[new]
    fn py_new(data: Py<PyBytes>) -> Self {
        Transmit { data }
    }

    /// The bytes to write.
    #[getter]
    fn data(&self, py: Python<'_>) -> Py<PyBytes> {
        self.data.clone_ref(py)
    }

    #[classattr]
    fn __match_args__() -> (&'static str,) {
        ("data",)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("Transmit(data={})", self.data.bind(py).repr()?))
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        match other.cast::<Transmit>() {
            Ok(other) => Ok(self.data.bind(py).as_bytes() == other.get().data.bind(py).as_bytes()),
            Err(_) => Ok(false),
        }
    }

    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        self.data.bind(py).hash()
    }
}

/// `poll_output`: nothing to do before `at_ms` (the host's monotonic clock, in ms) unless new
/// input arrives; then call `handle_timeout`.
#[pyclass(module = "deskwire", frozen, eq, hash)]
#[derive(PartialEq, Eq, Hash)]
pub struct Timeout {
    /// The deadline, in ms of the host's clock.
    #[pyo3(get)]
    at_ms: u64,
}

#[pymethods]
impl Timeout {
    #[new]
    fn py_new(at_ms: u64) -> Self {
        Timeout { at_ms }
    }

    #[classattr]
    fn __match_args__() -> (&'static str,) {
        ("at_ms",)
    }

    fn __repr__(&self) -> String {
        format!("Timeout(at_ms={})", self.at_ms)
    }
}

/// A `Transmit` of `bytes`.
pub fn transmit<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    Ok(Bound::new(
        py,
        Transmit {
            data: PyBytes::new(py, bytes).unbind(),
        },
    )?
    .into_any())
}

/// A `Timeout` at `at_ms`.
pub fn timeout(py: Python<'_>, at_ms: u64) -> PyResult<Bound<'_, PyAny>> {
    Ok(Bound::new(py, Timeout { at_ms })?.into_any())
}

static REGISTRY: PyOnceLock<Py<PyDict>> = PyOnceLock::new();

/// The event class registered under (`family`, `tag`) by `deskwire._events.event`.
fn event_class<'py>(py: Python<'py>, family: &str, tag: &str) -> PyResult<Bound<'py, PyAny>> {
    let registry = REGISTRY.get_or_try_init(py, || -> PyResult<_> {
        Ok(py
            .import("deskwire._events")?
            .getattr("REGISTRY")?
            .cast_into::<PyDict>()?
            .unbind())
    })?;
    let key = PyTuple::new(py, [family, tag])?;
    registry.bind(py).get_item(key)?.ok_or_else(|| {
        errors::local(
            "unknown_event",
            format!("no Python class for the {family} event {tag:?}"),
        )
    })
}

/// An event of `family` from its fields: `cls(**fields)`.
pub fn event<'py>(
    py: Python<'py>,
    family: &str,
    tag: &str,
    fields: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyAny>> {
    event_class(py, family, tag)?.call((), Some(fields))
}

/// Field names that cannot be Python identifiers.
const PYTHON_KEYWORDS: [&str; 6] = ["from", "class", "def", "import", "global", "lambda"];

/// An event of `family` from its serde shape: `{"tag": {fields}}` → `Tag(**fields)`,
/// `{"tag": value}` → `Tag(value)`, `"tag"` → `Tag()`.
pub fn serde_event<'py, T: Serialize>(
    py: Python<'py>,
    family: &str,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    let obj = to_py(py, value)?;
    if let Ok(tag) = obj.cast::<PyString>() {
        return event_class(py, family, &tag.to_cow()?)?.call0();
    }
    let dict = obj.cast::<PyDict>()?;
    let Some((tag, inner)) = dict.iter().next().filter(|_| dict.len() == 1) else {
        return Err(errors::local(
            "unknown_event",
            format!("a {family} event is not externally tagged: {obj}"),
        ));
    };
    let tag = tag.cast::<PyString>()?.to_cow()?.into_owned();
    let cls = event_class(py, family, &tag)?;
    match inner.cast::<PyDict>() {
        Ok(fields) => {
            // A field named like a Python keyword (`from`) is the dataclass's `from_` (PEP 8).
            for keyword in PYTHON_KEYWORDS {
                if let Some(value) = fields.get_item(keyword)? {
                    fields.del_item(keyword)?;
                    fields.set_item(format!("{keyword}_"), value)?;
                }
            }
            cls.call((), Some(fields))
        }
        Err(_) => cls.call1((inner,)),
    }
}

/// A plain Python value (dict, list, str, int, float, bool, None) of `value`'s serde shape.
///
/// Through `serde_json::Value`: the core embeds raw JSON (`RawJson`: params, results) that only
/// serde_json's own serializers turn into values.
pub fn to_py<'py, T: Serialize + ?Sized>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    let value =
        serde_json::to_value(value).map_err(|e| errors::local("unserializable", e.to_string()))?;
    py_of_value(py, &value)
}

/// A Python value of a JSON value.
pub fn py_of_value<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(py_of_value(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, py_of_value(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

/// Nesting deeper than this is refused (a cycle, or input meant to exhaust the stack).
const MAX_DEPTH: usize = 128;

/// A JSON value of a Python value: dict (str keys), list, tuple, str, int, float, bool, None,
/// a dataclass instance or anything with pydantic's `model_dump` (SDK objects). Anything else
/// is a `LocalError` with code `invalid_value` naming `what`.
pub fn value_of(what: &str, value: &Bound<'_, PyAny>) -> PyResult<Value> {
    value_at(what, value, 0)
}

fn value_at(what: &str, obj: &Bound<'_, PyAny>, depth: usize) -> PyResult<Value> {
    let bad = |why: String| errors::local("invalid_value", format!("{what}: {why}"));
    if depth > MAX_DEPTH {
        return Err(bad(format!("nested deeper than {MAX_DEPTH} levels")));
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(i) = obj.cast::<PyInt>() {
        if let Ok(n) = i.extract::<i64>() {
            return Ok(Value::from(n));
        }
        if let Ok(n) = i.extract::<u64>() {
            return Ok(Value::from(n));
        }
        return Err(bad(format!("the integer {i} does not fit 64 bits")));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return serde_json::Number::from_f64(f.value())
            .map(Value::Number)
            .ok_or_else(|| bad(format!("{} is not a JSON number", f.value())));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_cow()?.into_owned()));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = serde_json::Map::with_capacity(d.len());
        for (k, v) in d.iter() {
            let key = k
                .cast::<PyString>()
                .map_err(|_| bad(format!("a dict key must be a str, not {}", k.get_type())))?;
            map.insert(key.to_cow()?.into_owned(), value_at(what, &v, depth + 1)?);
        }
        return Ok(Value::Object(map));
    }
    if let Ok(l) = obj.cast::<PyList>() {
        return l.iter().map(|v| value_at(what, &v, depth + 1)).collect();
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        return t.iter().map(|v| value_at(what, &v, depth + 1)).collect();
    }
    if obj.hasattr("model_dump")? {
        let kwargs = PyDict::new(obj.py());
        kwargs.set_item("mode", "json")?;
        kwargs.set_item("exclude_unset", true)?;
        kwargs.set_item("by_alias", true)?;
        let dumped = obj.call_method("model_dump", (), Some(&kwargs))?;
        return value_at(what, &dumped, depth + 1);
    }
    if obj.hasattr("__dataclass_fields__")? && !obj.is_instance_of::<PyType>() {
        let asdict = obj.py().import("dataclasses")?.getattr("asdict")?;
        return value_at(what, &asdict.call1((obj,))?, depth + 1);
    }
    Err(bad(format!("{} is not a JSON value", obj.get_type())))
}

/// A core value from a Python value in its serde shape; a mismatch is a `LocalError` with code
/// `invalid_value` naming `what`.
pub fn from_py<T: DeserializeOwned>(what: &str, value: &Bound<'_, PyAny>) -> PyResult<T> {
    serde_json::from_value(value_of(what, value)?)
        .map_err(|e| errors::local("invalid_value", format!("{what}: {e}")))
}

/// Raw JSON of a Python value, for params, results and progress.
pub fn raw_of(what: &str, value: &Bound<'_, PyAny>) -> PyResult<deskwire::jsonrpc::RawJson> {
    deskwire::jsonrpc::RawJson::to_raw(&value_of(what, value)?)
        .map_err(|e| errors::local("invalid_value", format!("{what}: {e}")))
}

/// A JSON text of a Python value (dict, list, ...) for the core's raw-JSON APIs.
pub fn json_of(what: &str, value: &Bound<'_, PyAny>) -> PyResult<String> {
    Ok(value_of(what, value)?.to_string())
}

/// A Python value of a JSON text the core produced or accepted.
pub fn py_of_json<'py>(py: Python<'py>, json: &str) -> PyResult<Bound<'py, PyAny>> {
    let v: Value =
        serde_json::from_str(json).map_err(|e| errors::protocol("not_json", format!("{e}")))?;
    py_of_value(py, &v)
}

/// A text argument given as `str`, or as `bytes` holding UTF-8 (what a subprocess writes),
/// borrowed either way. Bytes are checked when read ([`Utf8Arg::as_str`]), once.
pub enum Utf8Arg {
    Str(pyo3::pybacked::PyBackedStr),
    Bytes(pyo3::pybacked::PyBackedBytes),
}

impl Utf8Arg {
    /// The text; bytes that are not UTF-8 raise `LocalError` `invalid_value` naming `what`.
    pub fn as_str(&self, what: &str) -> PyResult<&str> {
        match self {
            Utf8Arg::Str(text) => Ok(text),
            Utf8Arg::Bytes(bytes) => deskwire::oa1::as_text(bytes).map_err(|e| {
                errors::local(
                    "invalid_value",
                    format!("{what}: the bytes are not UTF-8 ({e})"),
                )
            }),
        }
    }
}

impl FromPyObject<'_, '_> for Utf8Arg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, '_, PyAny>) -> PyResult<Self> {
        if obj.is_instance_of::<PyBytes>() {
            return Ok(Utf8Arg::Bytes(obj.extract()?));
        }
        match obj.extract() {
            Ok(text) => Ok(Utf8Arg::Str(text)),
            Err(_) => Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "expected str or UTF-8 bytes, not {}",
                obj.get_type().name()?
            ))),
        }
    }
}

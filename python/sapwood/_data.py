"""Turning user data (numpy, pandas, polars, pyarrow, lists) into native datasets.

Numeric columns are handed to the native module as float32 numpy arrays, which it reads
in place when they are contiguous (a Fortran-ordered float32 matrix is never copied).
scipy.sparse matrices travel as CSC arrays; the engine fills each column from them,
with NaN (missing) at the absent entries.
Categorical columns become uint32 codes plus level names; the engine matches levels by
name, so training and prediction data may list their levels in any order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

import numpy as np
import numpy.typing as npt

from . import _sapwood
from ._sapwood import DataError, NativeData, ParameterError, SchemaMismatchError

#: The code of a missing categorical value.
MISSING_CODE = 0xFFFFFFFF

#: How categorical features are chosen: "auto" (pandas ``category``, strings, Arrow
#: dictionaries) or a list of column names or positions.
CategoricalSpec = Union[str, Sequence[Union[str, int]], None]


def is_pandas_frame(data: object) -> bool:
    """Whether ``data`` is a pandas DataFrame (checked without importing pandas)."""
    return type(data).__module__.startswith("pandas") and hasattr(data, "dtypes")


def is_arrow_like(data: object) -> bool:
    """Whether ``data`` exports Arrow data through the PyCapsule interface (pyarrow
    Tables and RecordBatches, polars DataFrames, ...)."""
    t = type(data)
    return hasattr(t, "__arrow_c_stream__") or hasattr(t, "__arrow_c_array__")


def is_frame(data: object) -> bool:
    """Whether ``data`` carries its own column names."""
    return is_pandas_frame(data) or is_arrow_like(data)


def level_name(value: object) -> str:
    """The level name of a category value. Integral numbers are written without a
    fraction (``3`` and ``3.0`` are both ``"3"``) so that int codes in one frame and
    float codes in another name the same level."""
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        f = float(value)
        return str(int(f)) if f.is_integer() else repr(f)
    return str(value)


def _is_missing(value: object) -> bool:
    if value is None:
        return True
    try:
        unequal = value != value  # True for NaN
    except (TypeError, ValueError):
        return False
    # pandas.NA compares to NA, neither True nor False: it is missing too
    return bool(unequal) if isinstance(unequal, (bool, np.bool_)) else True


def encode_categories(values: npt.ArrayLike) -> tuple[npt.NDArray[np.uint32], list[str]]:
    """Codes (``MISSING_CODE`` for missing) and sorted level names of raw values."""
    arr = np.asarray(values)
    if arr.dtype.kind in "fc":
        missing = np.isnan(arr)
    elif arr.dtype.kind == "O":
        missing = np.fromiter((_is_missing(v) for v in arr), dtype=bool, count=arr.size)
    else:
        missing = np.zeros(arr.shape, dtype=bool)
    present = arr[~missing]
    names = np.array([level_name(v) for v in present], dtype=object)
    levels, inverse = np.unique(names.astype(str), return_inverse=True) if names.size else (
        np.array([], dtype=str),
        np.array([], dtype=np.intp),
    )
    codes = np.full(arr.shape, MISSING_CODE, dtype=np.uint32)
    codes[~missing] = inverse.astype(np.uint32)
    return codes, [str(level) for level in levels]


def _categorical_names(
    spec: CategoricalSpec, names: list[str]
) -> tuple[bool, set[str]]:
    """Whether detection is automatic, and the names forced to be categorical."""
    if spec is None:
        return False, set()
    if isinstance(spec, str):
        if spec != "auto":
            raise ParameterError(
                f"invalid parameter `categorical_features`: `{spec}` is not \"auto\" "
                "or a list of column names or positions"
            )
        return True, set()
    forced: set[str] = set()
    for item in spec:
        if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            if not 0 <= int(item) < len(names):
                raise ParameterError(
                    f"invalid parameter `categorical_features`: position {item} is out "
                    f"of range for {len(names)} columns"
                )
            forced.add(names[int(item)])
        elif isinstance(item, str):
            if item not in names:
                raise ParameterError(
                    f"invalid parameter `categorical_features`: no column `{item}`"
                )
            forced.add(item)
        else:
            raise ParameterError(
                f"invalid parameter `categorical_features`: {item!r} is not a column "
                "name or position"
            )
    return True, forced


def _label(label: Any) -> Union[npt.NDArray[np.float32], list[Any], None]:
    """Numeric labels as float32; strings and other objects as a list of class labels."""
    if label is None:
        return None
    if type(label).__module__.startswith("pandas") and hasattr(label, "dtype"):
        # nullable numbers become NaN, which the engine refuses naming the row
        if label.dtype.kind in "biuf" or str(label.dtype) in _NULLABLE_NUMERIC:
            label = label.to_numpy(dtype=np.float32, na_value=np.nan)
    arr = np.asarray(label)
    if arr.ndim == 2 and 1 in arr.shape:
        arr = arr.ravel()
    if arr.ndim != 1:
        raise DataError(f"the label must be one-dimensional, got shape {arr.shape}")
    if arr.dtype.kind in "biuf":
        return np.ascontiguousarray(arr, dtype=np.float32)
    items: list[Any] = arr.tolist()
    for row, item in enumerate(items):
        if _is_missing(item):
            raise _sapwood.LabelError(f"label at row {row} is missing: labels must be present")
    return items


_NULLABLE_NUMERIC = {
    "Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64",
    "Float32", "Float64", "boolean",
}


def _weight(weight: Any) -> Optional[npt.NDArray[np.float32]]:
    if weight is None:
        return None
    arr = np.asarray(weight, dtype=np.float32)
    if arr.ndim != 1:
        raise DataError(f"the weight must be one-dimensional, got shape {arr.shape}")
    return np.ascontiguousarray(arr)


def _default_names(n: int) -> list[str]:
    # XGBoost's names for unnamed columns
    return [f"f{i}" for i in range(n)]


def _check_names(feature_names: Optional[Sequence[str]], n: int) -> Optional[list[str]]:
    if feature_names is None:
        return None
    names = [str(n_) for n_ in feature_names]
    if len(names) != n:
        raise DataError(f"{len(names)} feature names for {n} columns")
    return names


def _matrix(
    arr: npt.NDArray[Any],
    names: list[str],
    categorical: set[str],
    label: Any,
    weight: Optional[npt.NDArray[np.float32]],
) -> NativeData:
    if arr.ndim != 2:
        raise DataError(f"expected 2-D data, got an array of shape {arr.shape}")
    if arr.dtype.kind == "c":
        raise DataError("complex data is not supported")
    if not categorical:
        if arr.dtype not in (np.float32, np.float64):
            try:
                arr = arr.astype(np.float32)
            except (TypeError, ValueError) as e:
                raise DataError(f"the data is not numeric: {e}") from None
        return NativeData.from_matrix(arr, names, label=label, weight=weight)
    columns: list[tuple[str, npt.NDArray[Any], Optional[list[str]]]] = []
    for j, name in enumerate(names):
        col = arr[:, j]
        if name in categorical:
            codes, levels = encode_categories(col)
            columns.append((name, codes, levels))
        else:
            columns.append((name, _numeric(col, name), None))
    return NativeData.from_columns(columns, label=label, weight=weight)


def _numeric(values: Any, name: str) -> npt.NDArray[Any]:
    arr = np.asarray(values)
    if arr.dtype in (np.float32, np.float64):
        return arr
    try:
        return arr.astype(np.float32)
    except (TypeError, ValueError):
        raise DataError(
            f"feature `{name}`: values of dtype {arr.dtype} are not numbers; "
            "mark the column categorical"
        ) from None


def _pandas(
    frame: Any,
    names: Optional[list[str]],
    spec: CategoricalSpec,
    label: Any,
    weight: Optional[npt.NDArray[np.float32]],
) -> NativeData:
    import pandas as pd

    original = [str(c) for c in frame.columns]
    auto, forced = _categorical_names(spec, original)
    columns: list[tuple[str, npt.NDArray[Any], Optional[list[str]]]] = []
    for j, (source, out) in enumerate(zip(original, names or original)):
        col = frame.iloc[:, j]
        dtype = col.dtype
        if isinstance(dtype, pd.CategoricalDtype):
            if source in forced or auto:
                codes = col.cat.codes.to_numpy()
                u32 = np.where(codes < 0, MISSING_CODE, codes).astype(np.uint32)
                levels = [level_name(c) for c in dtype.categories]
                columns.append((out, u32, levels))
                continue
            raise DataError(f"feature `{source}`: category columns need categorical_features")
        if source in forced:
            codes, levels = encode_categories(col.to_numpy(dtype=object, na_value=np.nan))
            columns.append((out, codes, levels))
        elif dtype == np.float32 or dtype == np.float64:
            # no copy: a float32 column of a frame backed by one float32 block is a view
            columns.append((out, col.to_numpy(), None))
        elif dtype.kind in "biu" or str(dtype) in _NULLABLE_NUMERIC:
            columns.append((out, col.to_numpy(dtype=np.float32, na_value=np.nan), None))
        elif dtype.kind in "OSU" or isinstance(dtype, pd.StringDtype):
            if not auto:
                raise DataError(
                    f"feature `{source}` holds strings; mark it categorical or pass "
                    "categorical_features=\"auto\""
                )
            codes, levels = encode_categories(col.to_numpy(dtype=object, na_value=np.nan))
            columns.append((out, codes, levels))
        else:
            raise DataError(f"feature `{source}`: dtype {dtype} is not supported")
    return NativeData.from_columns(columns, label=label, weight=weight)


def _arrow(
    data: Any,
    names: Optional[Sequence[str]],
    spec: CategoricalSpec,
    label: Any,
    weight: Optional[npt.NDArray[np.float32]],
) -> NativeData:
    """Arrow data (pyarrow, polars, ...) through the Arrow PyCapsule stream interface,
    converted by the engine's Arrow reader (dictionary and string columns are
    categorical)."""
    if not hasattr(type(data), "__arrow_c_stream__"):
        import pyarrow as pa  # only objects exporting single arrays need wrapping

        data = pa.table(data)
    columns = [str(c) for c in (data.column_names if hasattr(data, "column_names") else data.columns)]
    _, forced = _categorical_names(spec, columns)
    return NativeData.from_arrow(
        data,
        categorical=sorted(forced),
        names=_check_names(names, len(columns)),
        label=label,
        weight=weight,
    )


def is_scipy_sparse(data: object) -> bool:
    """Whether ``data`` is a scipy.sparse matrix or array (checked without importing
    scipy)."""
    return type(data).__module__.startswith("scipy.sparse") and hasattr(data, "tocsc")


def _sparse(
    data: Any,
    names: Optional[Sequence[str]],
    spec: CategoricalSpec,
    label: Any,
    weight: Optional[npt.NDArray[np.float32]],
) -> NativeData:
    """A scipy.sparse matrix, any format: absent entries are missing and stored zeros
    are values, as in XGBoost. The matrix is converted to CSC (sparse to sparse) and the
    engine writes each column from it, so the dense matrix is never built."""
    if len(data.shape) != 2:
        raise DataError(f"expected 2-D data, got a sparse array of shape {data.shape}")
    n_rows, n_cols = (int(d) for d in data.shape)
    column_names = _check_names(names, n_cols) or _default_names(n_cols)
    _, forced = _categorical_names(spec, column_names)
    if forced:
        # category codes of a sparse matrix would make absent entries ambiguous (level 0
        # or missing?); one-hot encoded input needs no categorical features anyway
        raise ParameterError(
            "invalid parameter `categorical_features`: sparse input has no categorical "
            f"features, got {sorted(forced)}; pass a dense array or a DataFrame"
        )
    if data.dtype.kind not in "biuf":
        raise DataError(f"the sparse matrix is not numeric: dtype {data.dtype}")
    csc = data.tocsc()
    if not csc.has_canonical_format:
        # duplicate entries add up, as scipy's own dense conversion does
        csc = csc.copy()
        csc.sum_duplicates()
    return NativeData.from_csc(
        np.ascontiguousarray(csc.indptr, dtype=np.int64),
        np.ascontiguousarray(csc.indices, dtype=np.int64),
        np.ascontiguousarray(csc.data, dtype=np.float32),
        n_rows,
        column_names,
        label=label,
        weight=weight,
    )


def replace_missing(data: Any, missing: Optional[float]) -> Any:
    """``data`` with every numeric value equal to ``missing`` made missing (NaN or null),
    as XGBoost's ``missing=`` does; categorical and text columns are left alone. ``None``
    or NaN change nothing (NaN is always missing)."""
    if missing is None:
        return data
    try:
        sentinel = float(missing)
    except (TypeError, ValueError):
        raise ParameterError(f"invalid parameter `missing`: `{missing}` is not a number") from None
    if np.isnan(sentinel):
        return data
    if isinstance(data, NativeData):
        raise ParameterError(
            "invalid parameter `missing`: it applies to input data, not to a NativeData"
        )
    if is_pandas_frame(data):
        out = data.copy()
        for c in out.columns:
            col = out[c]
            if col.dtype.kind in "iuf" or str(col.dtype) in _NULLABLE_NUMERIC - {"boolean"}:
                hit = (col == sentinel).fillna(False).to_numpy(dtype=bool)
                if hit.any():
                    if col.dtype.kind in "iu":
                        col = col.astype(np.float64)
                    out[c] = col.mask(hit)
        return out
    if is_scipy_sparse(data):
        out = data.copy().astype(np.float64) if data.dtype.kind != "f" else data.copy()
        if hasattr(out, "data") and out.format in ("csr", "csc", "coo", "bsr"):
            out.data[out.data == sentinel] = np.nan
            return out
        out = out.tocsr()
        out.data[out.data == sentinel] = np.nan
        return out
    if type(data).__module__.startswith("polars"):
        import polars as pl

        numeric = [c for c, t in zip(data.columns, data.dtypes) if t.is_numeric()]
        return data.with_columns(
            [pl.when(pl.col(c) == sentinel).then(None).otherwise(pl.col(c)).alias(c) for c in numeric]
        )
    if is_arrow_like(data):
        import pyarrow as pa
        import pyarrow.compute as pc

        table = data if isinstance(data, (pa.Table, pa.RecordBatch)) else pa.table(data)
        columns = []
        for col in table.columns:
            if pa.types.is_integer(col.type) or pa.types.is_floating(col.type):
                hit = pc.equal(col, pa.scalar(sentinel).cast(col.type, safe=False))
                col = pc.if_else(hit, pa.nulls(len(col), col.type), col)
            columns.append(col)
        return type(table).from_arrays(columns, names=table.column_names)
    arr = np.asarray(data)
    if arr.dtype.kind in "biuf":
        arr = arr.astype(np.float64) if arr.dtype.kind != "f" else arr.copy()
        arr[arr == sentinel] = np.nan
        return arr
    if arr.dtype.kind == "O" and arr.ndim == 2:
        out = arr.copy()
        for j in range(out.shape[1]):
            col = out[:, j]
            hit = np.array(
                [isinstance(v, (int, float, np.number)) and not isinstance(v, bool) and v == sentinel for v in col],
                dtype=bool,
            )
            col[hit] = np.nan
        return out
    return data


def _kind_name(type_name: str) -> str:
    """`number`, `bool`, `strings` (text, whose levels exports keep as text) or `text`
    (categories whose levels may be integers) for an Arrow or polars type's name."""
    t = type_name.lower()
    if t in ("bool", "boolean"):
        return "bool"
    if t in ("string", "utf8", "large_string", "large_utf8", "string_view", "categorical",
             "enum", "object") or t.startswith(("categorical", "enum")):
        return "strings"
    if t.startswith("dictionary"):
        values = t.partition("values=")[2].split(",")[0].strip()
        return "strings" if _kind_name(values) == "strings" else "text"
    return "number"


def input_types(data: Any) -> Optional[list[str]]:
    """What each column of ``data`` holds, in column order (``number``, ``bool``,
    ``strings`` for text and categories of text, ``text`` for other categories), as the
    model records it; None when that cannot be told (a native dataset). Exports write the
    levels of ``strings`` as text even where they look like integers."""
    if isinstance(data, NativeData):
        return None
    if is_pandas_frame(data):
        import pandas as pd

        out = []
        for dtype in data.dtypes:
            if dtype.kind == "b" or str(dtype) == "boolean":
                out.append("bool")
            elif isinstance(dtype, pd.CategoricalDtype):
                levels = dtype.categories
                text = (
                    levels.dtype.kind in "SU"
                    or isinstance(levels.dtype, pd.StringDtype)
                    or (levels.dtype.kind == "O" and all(isinstance(v, str) for v in levels))
                )
                out.append("strings" if text else "text")
            elif dtype.kind in "OSU" or isinstance(dtype, pd.StringDtype):
                out.append("strings")
            else:
                out.append("number")
        return out
    if is_arrow_like(data):
        schema = getattr(data, "schema", None)
        if schema is None:
            return None
        try:
            if isinstance(schema, Mapping):  # polars: name -> dtype
                return [_kind_name(str(t)) for t in schema.values()]
            return [_kind_name(str(f.type)) for f in schema]
        except (TypeError, AttributeError):
            return None
    if is_scipy_sparse(data):
        return ["number"] * int(data.shape[1])
    arr = np.asarray(data)
    if arr.ndim != 2:
        return None
    kind = "bool" if arr.dtype.kind == "b" else "strings" if arr.dtype.kind in "OSU" else "number"
    return [kind] * int(arr.shape[1])


def check_input_types(
    trained: Optional[Sequence[str]], names: Sequence[str], given: Optional[Sequence[str]]
) -> None:
    """Refuses booleans where the model was trained on numbers, or numbers where it was
    trained on booleans: read as 0 and 1 they would be predicted without a word, wrongly."""
    if trained is None or given is None or len(given) != len(names):
        return
    for name, t, g in zip(names, trained, given):
        if {t, g} == {"number", "bool"}:
            held = {"number": "numbers", "bool": "booleans"}
            raise SchemaMismatchError(
                f"data does not match the model: column `{name}` holds {held[g]}, but the "
                f"model was trained on {held[t]}: cast the column to the training type"
            )


def to_native(
    data: Any,
    *,
    label: Any = None,
    weight: Any = None,
    categorical_features: CategoricalSpec = "auto",
    feature_names: Optional[Sequence[str]] = None,
) -> NativeData:
    """A native dataset from any supported input."""
    y = _label(label)
    w = _weight(weight)
    if isinstance(data, NativeData):
        return data
    if is_arrow_like(data) and not is_pandas_frame(data):
        return _arrow(data, feature_names, categorical_features, y, w)
    if is_pandas_frame(data):
        names = _check_names(feature_names, data.shape[1])
        return _pandas(data, names, categorical_features, y, w)
    if is_scipy_sparse(data):
        return _sparse(data, feature_names, categorical_features, y, w)
    arr = np.asarray(data)
    if arr.dtype.kind in "OSU" and arr.ndim == 2:
        import pandas as pd

        frame = pd.DataFrame(arr, columns=_check_names(feature_names, arr.shape[1]))
        return _pandas(frame, None, categorical_features, y, w)
    if arr.ndim != 2:
        raise DataError(f"expected 2-D data, got an array of shape {arr.shape}")
    names = _check_names(feature_names, arr.shape[1]) or _default_names(arr.shape[1])
    _, forced = _categorical_names(categorical_features, names)
    return _matrix(arr, names, forced, y, w)

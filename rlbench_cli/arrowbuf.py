"""Arrow arrays built from buffers, without pandas.

pyarrow's conversions of numpy arrays and of Python lists (``pa.array``, ``pa.table`` of a dict) import pandas
first when it is installed, to check whether the input is a pandas object: 0.8 s of a process's first call,
and far more in a worker starved of CPU. A run's first metric flush (``sink``) and ``fetch --scores`` build
their columns here instead, zero-copy from the numpy buffers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["numbers", "strings", "repeated_text", "optional_strings", "optional_int32"]

_NUMERIC = ("int32", "int64", "float64")


def numbers(values: Any) -> Any:
    """A 1-D numpy int32 / int64 / float64 array as an Arrow array of the same type (zero-copy when
    contiguous)."""
    import numpy as np
    import pyarrow as pa

    if str(values.dtype) not in _NUMERIC or values.ndim != 1:
        raise TypeError(f"numbers: a 1-D int32, int64 or float64 array, not {values.dtype} {values.shape}")
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])


def strings(texts: Sequence[str]) -> Any:
    """An Arrow string array of ``texts`` (no nulls)."""
    import numpy as np
    import pyarrow as pa

    encoded = [t.encode("utf-8") for t in texts]
    offsets = np.zeros(len(encoded) + 1, np.int32)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(encoded), [None, pa.py_buffer(offsets),
                                                             pa.py_buffer(b"".join(encoded))])  # fmt: skip


def repeated_text(text: str, k: int) -> Any:
    """An Arrow string array of ``k`` copies of ``text``."""
    import numpy as np
    import pyarrow as pa

    data = text.encode("utf-8")
    offsets = np.arange(k + 1, dtype=np.int32) * len(data)
    return pa.Array.from_buffers(pa.string(), k, [None, pa.py_buffer(offsets), pa.py_buffer(data * k)])


def _validity(missing: Sequence[bool]) -> tuple[Any, int]:
    """(Arrow validity bitmap or None, null count) of a null mask."""
    import numpy as np
    import pyarrow as pa

    mask = np.asarray(missing, dtype=bool)
    nulls = int(mask.sum())
    return (pa.py_buffer(np.packbits(~mask, bitorder="little")) if nulls else None), nulls


def optional_strings(texts: Sequence[str | None]) -> Any:
    """An Arrow string array of ``texts``, None as null."""
    import numpy as np
    import pyarrow as pa

    encoded = [b"" if t is None else t.encode("utf-8") for t in texts]
    offsets = np.zeros(len(encoded) + 1, np.int32)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    validity, nulls = _validity([t is None for t in texts])
    buffers = [validity, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    return pa.Array.from_buffers(pa.string(), len(encoded), buffers, null_count=nulls)


def optional_int32(values: Sequence[int | None]) -> Any:
    """An Arrow int32 array of ``values``, None as null."""
    import numpy as np
    import pyarrow as pa

    data = np.array([0 if v is None else v for v in values], dtype=np.int32)
    validity, nulls = _validity([v is None for v in values])
    return pa.Array.from_buffers(pa.int32(), len(data), [validity, pa.py_buffer(data)], null_count=nulls)

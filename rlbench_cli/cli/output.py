"""Writing a result table (a pyarrow Table) as an aligned text table, CSV, JSON or Parquet; shared by
``rlbench fetch`` and ``rlbench sql``. Every CSV is plain: a header row and data rows, nothing else, so
``pandas.read_csv(path)`` reads it with no arguments."""

from __future__ import annotations

import datetime as _dt
import decimal
import io
import json
import math
import sys
from enum import Enum
from pathlib import Path
from typing import Any

import typer

from ..errors import UsageError

__all__ = ["OutFormat", "write_table", "cell"]


class OutFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


def _json_value(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, (_dt.datetime, _dt.date, _dt.time, _dt.timedelta)):
        return str(v)
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, dict):
        return {str(k): _json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    return v


_UNIX_2001 = 978_307_200.0  # smaller wall times are seconds from a run's start (some imports): numbers


def cell(v: Any, column: str = "") -> str:
    """One value as the text table shows it (floats with 6 significant digits; a ``wall_time`` that is a
    Unix time, as a UTC date and time to the millisecond, where 6 digits would not tell two apart)."""
    if isinstance(v, float):
        if column == "wall_time" and v >= _UNIX_2001:
            return _dt.datetime.fromtimestamp(v, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        return f"{v:.6g}"
    return "" if v is None else str(v)


def _plain_for_csv(table: Any) -> Any:
    """Nested columns (lists, structs, maps) as JSON text: CSV holds only flat values."""
    import pyarrow as pa

    for i, f in enumerate(table.schema):
        if pa.types.is_nested(f.type):
            text = [None if v is None else json.dumps(_json_value(v)) for v in table.column(i).to_pylist()]
            table = table.set_column(i, f.name, pa.array(text, pa.string()))
    return table


def write_table(table: Any, fmt: OutFormat, output: Path | None) -> None:
    """Writes ``table`` to ``output`` (stdout when None; Parquet needs a file) and says so on stderr."""
    if fmt is OutFormat.parquet:
        if output is None:
            raise UsageError("--format parquet writes a binary file: add --output FILE.parquet")
        import pyarrow.parquet as pq

        pq.write_table(table, output)
        typer.echo(f"wrote {table.num_rows} rows to {output}", err=True)
        return
    if fmt is OutFormat.csv:
        import pyarrow.csv as pacsv

        buf = io.BytesIO()
        pacsv.write_csv(_plain_for_csv(table), buf)
        data = buf.getvalue()
        if output is not None:
            output.write_bytes(data)
        else:
            sys.stdout.write(data.decode())
            sys.stdout.flush()
        return
    rows = table.to_pylist()
    if fmt is OutFormat.json:
        text = json.dumps([{k: _json_value(v) for k, v in r.items()} for r in rows], default=str)
    else:
        cols = table.column_names
        shown = [{c: cell(r[c], c) for c in cols} for r in rows]
        widths = {c: max([len(c)] + [len(r[c]) for r in shown]) for c in cols}
        lines = ["  ".join(c.ljust(widths[c]) for c in cols).rstrip()]
        lines += ["  ".join(r[c].ljust(widths[c]) for c in cols).rstrip() for r in shown]
        text = "\n".join(lines)
    if output is not None:
        output.write_text(text + "\n")
    else:
        typer.echo(text)

"""Read scalars from TensorBoard event files without TensorFlow or the tensorboard package.

An event file is a sequence of records: length (uint64 LE), CRC of the length (uint32), data, CRC of the
data (uint32). Each record's data is an ``Event`` protocol buffer: wall_time (field 1, double), step (2,
int64), summary (5) holding repeated values (1), each with a tag (1) and a simple_value (2, float) or a
tensor (8, TensorProto: float_val 5 / double_val 6 / int_val 7 / int64_val 10 / packed tensor_content 4 with
dtype 1). Only what scalars need is decoded; other records are skipped. ``EventTail`` reads files
incrementally (a record cut off at the end of a file still being written is read on the next call).
"""

from __future__ import annotations

import struct
from pathlib import Path

__all__ = ["EventTail", "read_scalars", "find_event_files", "read_from", "read_complete", "EventFileError"]

Scalar = tuple[int, str, float, float]  # step, tag, value, wall_time


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def _fields(buf: bytes):  # noqa: ANN202 - yields (field number, wire type, value)
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(buf, i)
        elif wire == 1:
            v, i = buf[i : i + 8], i + 8
        elif wire == 2:
            ln, i = _varint(buf, i)
            v, i = buf[i : i + ln], i + ln
        elif wire == 5:
            v, i = buf[i : i + 4], i + 4
        else:  # groups (3, 4) are not used by TensorBoard
            return
        yield field, wire, v


_DTYPES = {1: "<f", 2: "<d", 3: "<i", 9: "<q", 19: "<e"}  # DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_HALF


def _tensor_value(buf: bytes) -> float | None:
    dtype = None
    for field, wire, v in _fields(buf):
        if field == 1 and wire == 0:
            dtype = v
        elif field == 4 and dtype in _DTYPES:  # tensor_content, packed little-endian
            size = struct.calcsize(_DTYPES[dtype])
            if len(v) >= size:
                return float(struct.unpack(_DTYPES[dtype], v[:size])[0])
        elif field == 5:
            return float(struct.unpack("<f", v[:4])[0]) if wire == 2 else float(struct.unpack("<f", v)[0])
        elif field == 6:
            return float(struct.unpack("<d", v[:8])[0]) if wire == 2 else float(struct.unpack("<d", v)[0])
        elif field in (7, 10) and wire == 0:
            return float(v)
    return None


def _event_scalars(data: bytes) -> list[Scalar]:
    wall, step, out = 0.0, 0, []
    values: list[tuple[str, float]] = []
    for field, wire, v in _fields(data):
        if field == 1 and wire == 1:
            wall = struct.unpack("<d", v)[0]
        elif field == 2 and wire == 0:
            step = v if v < 2**63 else v - 2**64
        elif field == 5 and wire == 2:
            for f2, w2, val in _fields(v):
                if f2 != 1 or w2 != 2:
                    continue
                tag, x = None, None
                for f3, w3, item in _fields(val):
                    if f3 == 1 and w3 == 2:
                        tag = item.decode("utf-8", "replace")
                    elif f3 == 2 and w3 == 5:
                        x = struct.unpack("<f", item)[0]
                    elif f3 == 8 and w3 == 2:
                        x = _tensor_value(item)
                if tag is not None and x is not None:
                    values.append((tag, float(x)))
    out.extend((step, tag, x, wall) for tag, x in values)
    return out


def read_from(path: Path, offset: int) -> bytes:
    """The bytes of ``path`` from ``offset`` on; empty while the file does not exist yet."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read()
    except FileNotFoundError:
        return b""


class EventTail:
    """Reads new scalars from one event file each time it is called."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.offset = 0

    def read(self) -> list[Scalar]:
        buf = read_from(self.path, self.offset)
        out: list[Scalar] = []
        i = 0
        while i + 12 <= len(buf):
            (length,) = struct.unpack("<Q", buf[i : i + 8])
            end = i + 12 + length + 4
            if end > len(buf):
                break  # a record still being written
            out.extend(_event_scalars(buf[i + 12 : i + 12 + length]))
            i = end
        self.offset += i
        return out


def find_event_files(root: str | Path) -> list[Path]:
    return sorted(p for p in Path(root).rglob("events.out.tfevents.*") if p.is_file())


def read_scalars(path: str | Path) -> list[Scalar]:
    """Every scalar of one event file (or of every event file under a folder)."""
    p = Path(path)
    files = find_event_files(p) if p.is_dir() else [p]
    return [s for f in files for s in EventTail(f).read()]


class EventFileError(ValueError):
    """An event file that is not one, or is cut off: the message says where (a byte offset)."""


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def masked_crc32c(data: bytes) -> int:
    """TensorBoard's record checksum: CRC-32C of ``data``, rotated right by 15 bits plus a constant."""
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC32C[(crc ^ b) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _event_texts(data: bytes) -> list[tuple[str, str]]:
    """``(tag, text)`` of the text summaries of one Event (``add_text``: a DT_STRING tensor, string_val 8)."""
    out = []
    for field, wire, v in _fields(data):
        if field != 5 or wire != 2:
            continue
        for f2, w2, val in _fields(v):
            if f2 != 1 or w2 != 2:
                continue
            tag, text = None, None
            for f3, w3, item in _fields(val):
                if f3 == 1 and w3 == 2:
                    tag = item.decode("utf-8", "replace")
                elif f3 == 8 and w3 == 2:
                    for f4, w4, x in _fields(item):
                        if f4 == 8 and w4 == 2:
                            text = x.decode("utf-8", "replace")
            if tag is not None and text is not None:
                out.append((tag, text))
    return out


def read_complete(path: str | Path, texts: list[tuple[str, str]] | None = None) -> list[Scalar]:
    """Every scalar of one event file that must be whole: unlike ``EventTail``, a record cut off at the end,
    or a record header whose checksum does not match (not an event file), is an error, not "later".
    ``texts``, when given, receives the ``(tag, text)`` of every text summary (``add_text``).

    Raises:
        EventFileError: what is wrong and at which byte; ``OSError`` when the file cannot be read.
    """
    buf = Path(path).read_bytes()
    if not buf:
        raise EventFileError("empty file (0 bytes), not an event file")
    out: list[Scalar] = []
    i = 0
    while i < len(buf):
        if i + 12 > len(buf):
            raise EventFileError(
                f"cut off mid-record at byte {i} ({len(buf) - i} byte(s) of a record header)"
            )
        header = buf[i : i + 8]
        (length,) = struct.unpack("<Q", header)
        (crc,) = struct.unpack("<I", buf[i + 8 : i + 12])
        if crc != masked_crc32c(header):
            raise EventFileError(
                f"not a TensorBoard event file (record header checksum mismatch at byte {i})"
            )
        end = i + 12 + length + 4
        if end > len(buf):
            raise EventFileError(
                f"cut off mid-record at byte {i} (the record needs {length + 16} bytes, {len(buf) - i} left)"
            )
        try:
            out.extend(_event_scalars(buf[i + 12 : i + 12 + length]))
            if texts is not None:
                texts.extend(_event_texts(buf[i + 12 : i + 12 + length]))
        except (IndexError, struct.error):
            raise EventFileError(f"damaged record at byte {i} (not a TensorBoard Event)") from None
        i = end
    return out

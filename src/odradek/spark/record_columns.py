"""The records of a fetch response's batches (v2), straight into the Spark source's Arrow columns.

Through librdkafka a read task got one Python object per record, and then took each record's fields out of it
one call at a time, about 2 CPU-s per million records. Here a batch's records are found by one walk over their
length prefixes (the only part that must go record by record: each length says where the next record starts),
and every other field is read for all of the batch's records at once, with numpy; Arrow gathers keys and values
into binary arrays, without a Python object per record.

Records with headers, when the query asks for them, go through `decode_batch` one by one.

read_committed drops what Kafka's Java consumer drops: control batches (transaction markers), and the batches
of aborted transactions, which the fetch response lists as (producer id, first offset); an abort marker ends
the producer's aborted transaction. Malformed batches raise KafkaError(CORRUPT_MESSAGE).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa

from odradek.protocol import compression as codecs
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import (
    ABORT_MARKER,
    BATCH_HEADER_SIZE,
    LOG_APPEND_TIME,
    BatchInfo,
    decode_batch,
    read_batch_info,
    read_marker,
)

_MAX_VARINT_BYTES = 10


class Columns(NamedTuple):
    """The records of one batch kept for the range: Spark's timestamp types are 0 create, 1 log append."""

    keys: pa.Array
    values: pa.Array
    offsets: np.ndarray
    timestamps_ms: np.ndarray
    timestamp_type: int
    headers: list | None  # per record: a list of (key, value), or None when it has none; None when not asked


def complete_batches(buf) -> list[BatchInfo]:
    """The batches wholly inside `buf`: a fetch response may end with part of one."""
    infos = []
    pos, size = 0, len(buf)
    while size - pos >= BATCH_HEADER_SIZE:
        info = read_batch_info(buf, pos)
        if info.size < BATCH_HEADER_SIZE:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"record batch of {info.size} bytes at byte {pos}")
        if info.end > size:
            break
        infos.append(info)
        pos = info.end
    return infos


class AbortedTransactions:
    """Which transactional batches of one fetch response belong to aborted transactions (read_committed)."""

    def __init__(self, aborted: list[dict] | None):
        # (first offset, producer id), latest first: taken from the end as the batches pass them
        self._waiting = sorted(((a["first_offset"], a["producer_id"]) for a in aborted or ()), reverse=True)
        self._aborting: set[int] = set()

    def skips(self, buf, info: BatchInfo) -> bool:
        """Whether the batch is left out; batches must come in offset order."""
        if info.has_producer_id:
            while self._waiting and self._waiting[-1][0] <= info.last_offset:
                self._aborting.add(self._waiting.pop()[1])
            if info.is_control:
                marker = read_marker(buf, info)
                if marker is not None and marker[0] == ABORT_MARKER:
                    self._aborting.discard(info.producer_id)
            elif info.is_transactional and info.producer_id in self._aborting:
                return True
        return info.is_control


def read_columns(buf, start: int, end: int, aborted: AbortedTransactions | None,
                 include_headers: bool) -> tuple[list[Columns], int]:
    """The records with offsets in [start, end) of the complete batches in `buf`, and the offset to fetch
    next (`start` if `buf` holds no complete batch)."""
    out = []
    position = start
    for info in complete_batches(buf):
        if info.base_offset >= end:  # offsets up to `end` hold no record (compacted away): the range is read
            return out, max(position, end)
        position = max(position, info.next_offset)
        # every batch passes the aborted transactions' bookkeeping, in order, even one left out for another reason
        if aborted is not None and aborted.skips(buf, info):
            continue
        if info.is_control or info.last_offset < start or not info.record_count:  # compaction leaves empty ones
            continue
        columns = (_decode_with_headers(buf, info) if include_headers else _decode(buf, info))
        if columns.offsets[0] < start or columns.offsets[-1] >= end:
            columns = _between(columns, start, end)
        if len(columns.offsets):
            out.append(columns)
    return out, position


def _between(columns: Columns, start: int, end: int) -> Columns:
    keep = (columns.offsets >= start) & (columns.offsets < end)
    indices = pa.array(np.flatnonzero(keep))
    headers = None if columns.headers is None else [h for h, k in zip(columns.headers, keep, strict=True) if k]
    return Columns(columns.keys.take(indices), columns.values.take(indices), columns.offsets[keep],
                   columns.timestamps_ms[keep], columns.timestamp_type, headers)


def _records_section(buf, info: BatchInfo):
    body = memoryview(buf)[info.position + BATCH_HEADER_SIZE:info.end]
    return body if info.compression == codecs.NONE else codecs.decompress(info.compression, body)


def _timestamps(info: BatchInfo, deltas: np.ndarray) -> tuple[np.ndarray, int]:
    if info.timestamp_type == LOG_APPEND_TIME:
        return np.full(len(deltas), info.max_timestamp, np.int64), 1
    return info.base_timestamp + deltas, 0


def _decode(buf, info: BatchInfo) -> Columns:
    data = _records_section(buf, info)
    starts, ends = _record_bounds(data, info.record_count)
    raw = np.frombuffer(data, np.uint8)
    position = starts + 1  # the record's attributes byte: unused
    timestamp_deltas, position = _varints(raw, position)
    offset_deltas, position = _varints(raw, position)
    key_lengths, position = _varints(raw, position)
    key_starts = position
    position = position + np.maximum(key_lengths, 0)
    value_lengths, position = _varints(raw, position)
    value_starts = position
    if (value_starts + np.maximum(value_lengths, 0) > ends).any() or (key_lengths < -1).any() \
            or (value_lengths < -1).any():
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"a record of the batch at offset {info.base_offset} "
                                                    f"overruns its length")
    timestamps, timestamp_type = _timestamps(info, timestamp_deltas)
    buffer = pa.py_buffer(data)
    return Columns(_binary(buffer, key_starts, key_lengths), _binary(buffer, value_starts, value_lengths),
                   info.base_offset + offset_deltas, timestamps, timestamp_type, None)


def _record_bounds(data, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Where each record's body starts and ends: the walk over the zigzag varint lengths, the one loop in
    Python per record (lists, not numpy arrays, take its positions: item assignment in numpy costs more)."""
    heads, starts = [0] * count, [0] * count  # where each record's length, and its body, begin
    position = 0
    try:
        for i in range(count):
            heads[i] = position
            byte = data[position]
            if byte < 0x80:  # a one-byte length: a record under 64 bytes
                value = byte
                position += 1
            elif (second := data[position + 1]) < 0x80:  # two bytes: under 8 KiB
                value = (byte & 0x7F) | second << 7
                position += 2
            else:
                value, shift = byte & 0x7F, 7
                position += 1
                while True:
                    byte = data[position]
                    value |= (byte & 0x7F) << shift
                    position += 1
                    if byte < 0x80:
                        break
                    shift += 7
                    if shift > 63:
                        raise IndexError
            starts[i] = position
            position += (value >> 1) ^ -(value & 1)
    except IndexError:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "truncated or malformed record length") from None
    ends = np.array(heads[1:] + [position], np.int64)  # a record ends where the next one's length begins
    body_starts = np.array(starts, np.int64)
    if position != len(data) or (ends < body_starts).any():  # a negative length walks back
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"the lengths of the batch's {count} records do not fill its "
                                                    f"{len(data)} bytes")
    return body_starts, ends


def _varints(data: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The zigzag varints at `positions`, all at once, and the positions after them."""
    value = np.zeros(len(positions), np.int64)
    length = np.zeros(len(positions), np.int64)
    going = np.ones(len(positions), bool)
    for shift in range(0, 7 * _MAX_VARINT_BYTES, 7):
        byte = data[np.minimum(positions + length, len(data) - 1)].astype(np.int64)  # past the end: caught after
        value |= np.where(going, (byte & 0x7F) << shift, 0)
        length += going
        going &= byte >= 0x80
        if not going.any():
            break
    else:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "a record varint runs past 10 bytes")
    return (value >> 1) ^ -(value & 1), positions + length


def _binary(data: pa.Buffer, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """An Arrow binary array of data[start:start + length] per record; length -1 is null. The fields are seen
    first as every other element of one array over `data` (the others are the bytes between them), which
    Arrow then gathers in one `take`."""
    n = len(starts)
    nulls = lengths < 0
    bounds = np.empty(2 * n, np.int32)
    bounds[0::2] = starts
    bounds[1::2] = starts + np.where(nulls, 0, lengths)
    spans = pa.Array.from_buffers(pa.binary(), 2 * n - 1, [None, pa.py_buffer(bounds), data])
    fields = spans.take(pa.array(np.arange(0, 2 * n - 1, 2)))
    if not nulls.any():
        return fields
    return pa.Array.from_buffers(pa.binary(), n, [pa.py_buffer(np.packbits(~nulls, bitorder="little")),
                                                  *fields.buffers()[1:]], null_count=int(nulls.sum()))


def _decode_with_headers(buf, info: BatchInfo) -> Columns:
    records = decode_batch(buf, info)
    timestamps = np.fromiter((r.timestamp for r in records), np.int64, len(records))
    return Columns(pa.array([None if r.key is None else bytes(r.key) for r in records], pa.binary()),
                   pa.array([None if r.value is None else bytes(r.value) for r in records], pa.binary()),
                   np.fromiter((r.offset for r in records), np.int64, len(records)), timestamps,
                   1 if info.timestamp_type == LOG_APPEND_TIME else 0,
                   [[(k, None if v is None else bytes(v)) for k, v in r.headers] or None for r in records])

"""The sink's Arrow columns straight into Kafka record batches (v2): the write-side twin of record_columns.py.

Through librdkafka a task handed over one Python object per field of every record, and librdkafka copied each
into its own message before batching them again. Here every record of an Arrow batch is encoded at once: the
varints of its length, timestamp delta, offset delta and key and value lengths with numpy, then one Arrow kernel
joins them with the keys, values and headers into the records' bytes (headers are joined the same way first,
header by header, then row by row). Keys are placed with Kafka's default partitioner, murmur2, computed for the
whole column at once.

Sans-I/O: spark/produce.py sends what this builds.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from odradek.protocol.records import BATCH_HEADER_SIZE, frame_batch, increment_sequence

_M = np.uint32(0x5BD1E995)
_SEED = 0x9747B28C
_EMPTY = pa.scalar(b"", pa.binary())
_NO_HEADERS = pa.scalar(b"\x00", pa.binary())  # a record's header count, zero, as a varint


class Batch(NamedTuple):
    """One record batch ready to send: `count` records from `base_sequence` on."""

    data: bytes
    count: int
    base_sequence: int


def as_binary(column: pa.Array) -> pa.Array:
    """A string or binary column as binary (the same bytes: a string's are UTF-8)."""
    if pa.types.is_large_string(column.type) or pa.types.is_large_binary(column.type):
        return column.cast(pa.large_binary())
    return column.cast(pa.binary()) if not pa.types.is_binary(column.type) else column


def _spans(column: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bytes, start offsets, lengths) of a binary column's values; a null's length is 0."""
    offsets_buffer, data_buffer = column.buffers()[1:3]
    offset_type = np.int64 if pa.types.is_large_binary(column.type) else np.int32
    offsets = np.frombuffer(offsets_buffer, offset_type, len(column) + 1, column.offset * offset_type().itemsize)
    data = np.frombuffer(data_buffer, np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    starts = offsets[:-1].astype(np.int64)
    return data, starts, offsets[1:].astype(np.int64) - starts


def murmur2(keys: pa.Array) -> np.ndarray:
    """Kafka's murmur2 (Utils.murmur2) of every key of a binary column, as uint32."""
    data, starts, lengths = _spans(keys)
    data = np.concatenate([data, np.zeros(4, np.uint8)])  # reads past a short last key stay in bounds
    h = np.uint32(_SEED) ^ lengths.astype(np.uint32)
    blocks = lengths // 4
    for block in range(int(blocks.max(initial=0))):
        rows = np.nonzero(blocks > block)[0]
        at = starts[rows] + 4 * block
        k = (data[at].astype(np.uint32) | data[at + 1].astype(np.uint32) << 8
             | data[at + 2].astype(np.uint32) << 16 | data[at + 3].astype(np.uint32) << 24)
        k *= _M
        k ^= k >> 24
        k *= _M
        h[rows] = (h[rows] * _M) ^ k
    tail = lengths % 4
    at = starts + blocks * 4
    for extra, shift in ((3, 16), (2, 8)):
        rows = np.nonzero(tail >= extra)[0]
        h[rows] ^= data[at[rows] + extra - 1].astype(np.uint32) << shift
    rows = np.nonzero(tail >= 1)[0]
    h[rows] = (h[rows] ^ data[at[rows]].astype(np.uint32)) * _M
    h ^= h >> 13
    h *= _M
    h ^= h >> 15
    return h


def key_partitions(keys: pa.Array, partitions: int) -> np.ndarray:
    """The partition Kafka's default partitioner gives each key (murmur2, made positive, modulo the count);
    -1 for a null key."""
    placed = ((murmur2(keys) & np.uint32(0x7FFFFFFF)) % np.uint32(partitions)).astype(np.int32)
    if keys.null_count:
        placed[np.asarray(keys.is_null())] = -1
    return placed


def _varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints of int64 values: a (n, width) byte matrix, each row's bytes first, and each row's length."""
    zigzag = (values.astype(np.int64) << 1 ^ values.astype(np.int64) >> 63).view(np.uint64)
    lengths = np.ones(len(values), np.int64)
    for bits in range(7, 64, 7):
        lengths += zigzag >= np.uint64(1 << bits)
    width = int(lengths.max(initial=1))
    shifts = np.arange(width, dtype=np.uint64) * np.uint64(7)
    groups = (zigzag[:, None] >> shifts) & np.uint64(0x7F)
    more = np.arange(width) < (lengths[:, None] - 1)
    return (groups | more * np.uint64(0x80)).astype(np.uint8), lengths


def _packed(fields: list[tuple[np.ndarray, np.ndarray]]) -> pa.Array:
    """Per row, the bytes of each field in turn (a field: a varint matrix and its rows' lengths), as a binary
    column."""
    matrix = np.concatenate([m for m, _ in fields], axis=1)
    used = np.concatenate([np.arange(m.shape[1]) < lengths[:, None] for m, lengths in fields], axis=1)
    sizes = sum(lengths for _, lengths in fields)
    offsets = np.zeros(len(sizes) + 1, np.int32)
    np.cumsum(sizes, out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), len(sizes), [None, pa.py_buffer(offsets),
                                                            pa.py_buffer(matrix[used])])


def _length_fields(column: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A binary column's length fields as a record writes them (-1 for null), and its values' lengths."""
    lengths = _spans(column)[2]
    return (np.where(np.asarray(column.is_null()), -1, lengths) if column.null_count else lengths), lengths


def encode_headers(headers: pa.Array) -> pa.Array:
    """Per row of a list<struct<key: string, value: binary>> column (Spark's `headers`), the record's header
    part: the count, then each header's key and value with their lengths (a null list: no headers)."""
    counts = np.asarray(pc.fill_null(pc.list_value_length(headers), 0), np.int64)
    entries = pc.list_flatten(headers)
    if entries.null_count:
        raise ValueError("a null header in the headers column")
    names, header_values = (as_binary(field) for field in entries.flatten())
    if names.null_count:
        raise ValueError("a header with a null key in the headers column")
    name_fields, _ = _length_fields(names)
    value_fields, _ = _length_fields(header_values)
    pieces = pc.binary_join_element_wise(_packed([_varints(name_fields)]), names,
                                         _packed([_varints(value_fields)]), header_values, _EMPTY,
                                         null_handling="replace", null_replacement=b"")
    offsets = np.zeros(len(counts) + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    joined = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), pieces), _EMPTY)
    return pc.binary_join_element_wise(_packed([_varints(counts)]), joined, _EMPTY)


def encode_records(keys: pa.Array | None, values: pa.Array, headers: pa.Array | None, timestamp_deltas: np.ndarray,
                   offset_deltas: np.ndarray) -> pa.Array:
    """Each row as one whole record of a v2 batch (length varint included): a binary column. `headers`: each
    row's header part (encode_headers); None for none."""
    n = len(values)
    key_fields, key_lengths = _length_fields(keys) if keys is not None else (np.full(n, -1), 0)
    value_fields, value_lengths = _length_fields(values)
    header_lengths = _spans(headers)[2] if headers is not None else 1
    stamp, stamp_lengths = _varints(timestamp_deltas)
    delta, delta_lengths = _varints(offset_deltas)
    key_field, key_field_lengths = _varints(key_fields)
    value_field, value_field_lengths = _varints(value_fields)
    # attributes (1) + timestamp delta + offset delta + key length + key + value length + value + headers
    body = (1 + stamp_lengths + delta_lengths + key_field_lengths + key_lengths + value_field_lengths
            + value_lengths + header_lengths)
    length, length_lengths = _varints(body)
    attributes = (np.zeros((n, 1), np.uint8), np.ones(n, np.int64))
    before_key = _packed([(length, length_lengths), attributes, (stamp, stamp_lengths), (delta, delta_lengths),
                          (key_field, key_field_lengths)])
    before_value = _packed([(value_field, value_field_lengths)])
    return pc.binary_join_element_wise(before_key, keys if keys is not None else _EMPTY, before_value, values,
                                       headers if headers is not None else _NO_HEADERS, _EMPTY,
                                       null_handling="replace", null_replacement=b"")


def build_batches(keys: pa.Array | None, values: pa.Array, headers: pa.Array | None, timestamps_ms: np.ndarray, *,
                  producer_id: int, producer_epoch: int, base_sequence: int, codec: int,
                  max_batch_bytes: int) -> list[Batch]:
    """Rows of one partition as record batches (CreateTime) of at most `max_batch_bytes` before compression
    (a batch holds at least one record), their sequences counting on from `base_sequence` (-1: no producer
    id, no sequences). `headers`: Spark's headers column, or None."""
    n = len(values)
    headers = encode_headers(headers) if headers is not None else None
    # Where to cut, from an upper bound of each record's size: its key, value and headers, the attributes,
    # and the longest varints of its five numbers.
    bound = (_spans(values)[2] + (_spans(keys)[2] if keys is not None else 0)
             + (_spans(headers)[2] if headers is not None else 1) + 1 + 5 + 10 + 5 + 5 + 5)
    ends = np.cumsum(bound)
    out = []
    start = 0
    while start < n:
        before = int(ends[start - 1]) if start else 0
        end = max(start + 1, int(np.searchsorted(ends, before + max_batch_bytes - BATCH_HEADER_SIZE, "right")))
        stamps = timestamps_ms[start:end]
        records = encode_records(keys.slice(start, end - start) if keys is not None else None,
                                 values.slice(start, end - start),
                                 headers.slice(start, end - start) if headers is not None else None,
                                 stamps - stamps[0], np.arange(end - start, dtype=np.int64))
        offsets = np.frombuffer(records.buffers()[1], np.int32, len(records) + 1)
        body = memoryview(records.buffers()[2])[:int(offsets[-1])]
        sequence = increment_sequence(base_sequence, start) if base_sequence >= 0 else -1
        data = frame_batch(body, end - start, base_timestamp=int(stamps[0]), max_timestamp=int(stamps.max()),
                           compression=codec, producer_id=producer_id, producer_epoch=producer_epoch,
                           base_sequence=sequence)
        out.append(Batch(data, end - start, sequence))
        start = end
    return out


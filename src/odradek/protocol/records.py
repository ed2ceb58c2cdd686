"""Kafka record batch v2 (magic 2): validation, in-place offset assignment, decoding and building.

Batches stay bytes. The produce path only reads the 61-byte header and checks the CRC32C
(`validate_batches`), then patches offsets in place (`assign_offsets`); records are decoded only by
features that need them (`decode_batch`, `decode_batches`).

Batch header (big-endian)::

    0  baseOffset int64          27 baseTimestamp int64
    8  batchLength int32         35 maxTimestamp int64
    12 partitionLeaderEpoch int32 43 producerId int64
    16 magic int8                51 producerEpoch int16
    17 crc uint32 (CRC32C of 21..end)  53 baseSequence int32
    21 attributes int16          57 recordsCount int32
    23 lastOffsetDelta int32     61 records (compressed as a whole if attributes say so)
"""

import struct
import time
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from crc32c import crc32c

from odradek.protocol import compression as codecs
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.types import MalformedMessage, read_varlong, write_varlong

BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted by batchLength
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
PARTITION_LEADER_EPOCH_OFFSET = 12
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD
CURRENT_MAGIC = 2

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_TIMESTAMP = -1
INT32_MAX = 2**31 - 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT64 = struct.Struct(">q")
assert _HEADER.size == BATCH_HEADER_SIZE


class BatchInfo(NamedTuple):
    """One batch inside a buffer: where it is and its header fields."""

    position: int
    size: int  # whole batch, batchLength + 12
    base_offset: int
    partition_leader_epoch: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def end(self) -> int:
        return self.position + self.size

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def has_delete_horizon(self) -> bool:
        """baseTimestamp is the compaction delete horizon (set by the log cleaner, KIP-534)."""
        return bool(self.attributes & DELETE_HORIZON_FLAG)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence of the batch's last record; sequences wrap from Int32.MAX to 0."""
        if self.base_sequence < 0:
            return self.base_sequence
        return increment_sequence(self.base_sequence, self.last_offset_delta)


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def increment_sequence(sequence: int, increment: int) -> int:
    """`sequence + increment` wrapping past Int32.MAX to 0, like Kafka's DefaultRecordBatch."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def _view(buf) -> memoryview:
    view = memoryview(buf)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def _corrupt(message: str) -> KafkaError:
    return KafkaError(ErrorCode.CORRUPT_MESSAGE, message)


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_RECORD, message)


def validate_batches(buf, *, max_batch_size: int | None = None, from_coordinator: bool = False) -> list[BatchInfo]:
    """Check a produce request's records: complete v2 batches with valid CRCs and client-legal headers.

    Header checks and CRC only; records are not decoded. Errors, as Kafka answers them:
    CORRUPT_MESSAGE for broken framing (truncated, batchLength too small, unknown magic) or a CRC
    mismatch; INVALID_RECORD for no batch at all, magic 0/1, a non-positive record count, a
    lastOffsetDelta that disagrees with the count, a control batch, or a producer id without a
    sequence; MESSAGE_TOO_LARGE for a batch over `max_batch_size`; UNSUPPORTED_COMPRESSION_TYPE
    for codec bits 5-7.

    Kafka (produce v3+) also requires exactly one batch per partition; that check is the
    caller's (`len(infos) != 1` -> INVALID_RECORD) so that this function serves other paths too.
    A coordinator's own transactional writes (`from_coordinator`) carry a producer id but no sequence.
    """
    view = _view(buf)
    end = len(view)
    if end == 0:
        raise _invalid("produce request must have at least one record batch")
    infos: list[BatchInfo] = []
    pos = 0
    unpack_header = _HEADER.unpack_from
    while pos < end:
        if end - pos < MAGIC_OFFSET + 1:
            raise _corrupt(f"truncated record batch at byte {pos}")
        (batch_length,) = _INT32.unpack_from(view, pos + 8)
        magic = view[pos + MAGIC_OFFSET]
        if magic > 127:
            magic -= 256
        if batch_length < 14:  # smaller than any record format (Kafka's LegacyRecord.RECORD_OVERHEAD_V0)
            raise _corrupt(f"record batch at byte {pos} has illegal length {batch_length}")
        if not 0 <= magic <= CURRENT_MAGIC:
            raise _corrupt(f"invalid magic {magic} in record batch at byte {pos}")
        if magic != CURRENT_MAGIC:
            raise _invalid(f"produce requests may only contain record batches with magic 2, not {magic}")
        if batch_length < MIN_BATCH_LENGTH:
            raise _corrupt(f"record batch at byte {pos} has illegal length {batch_length}")
        size = batch_length + LOG_OVERHEAD
        if size > end - pos:
            raise _corrupt(
                f"truncated record batch at byte {pos}: {size} bytes declared, {end - pos} present"
            )
        if max_batch_size is not None and size > max_batch_size:
            raise KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"record batch of {size} bytes exceeds the maximum of {max_batch_size}",
            )
        fields = unpack_header(view, pos)
        if crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size]) != fields[4]:
            raise _corrupt(f"record batch at byte {pos} is corrupt (CRC mismatch)")
        info = BatchInfo(pos, size, fields[0], fields[2], *fields[5:])
        count = info.record_count
        if count <= 0:
            raise _invalid(f"invalid record count {count}")
        if info.last_offset_delta != count - 1:
            raise _invalid(f"lastOffsetDelta {info.last_offset_delta} does not match record count {count}")
        if info.attributes & CONTROL_FLAG:
            raise _invalid("clients may not write control records")
        if info.producer_id >= 0 and info.base_sequence < 0 and not from_coordinator:
            raise _invalid(f"invalid sequence {info.base_sequence} for producer id {info.producer_id}")
        if info.attributes & COMPRESSION_MASK > codecs.ZSTD:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                f"unknown compression codec {info.attributes & COMPRESSION_MASK}",
            )
        infos.append(info)
        pos += size
    return infos


def scan_valid_prefix(buf, start: int = 0) -> tuple[list[BatchInfo], int]:
    """Walk batches from `start` for log recovery.

    Stops at the first incomplete batch, magic other than 2, batchLength below the header size, or
    CRC mismatch; returns the good batches and the byte position where valid data ends.
    """
    view = _view(buf)
    end = len(view)
    infos: list[BatchInfo] = []
    pos = start
    unpack_header = _HEADER.unpack_from
    while end - pos >= BATCH_HEADER_SIZE:
        fields = unpack_header(view, pos)
        batch_length = fields[1]
        if fields[3] != CURRENT_MAGIC or batch_length < MIN_BATCH_LENGTH:
            break
        size = batch_length + LOG_OVERHEAD
        if size > end - pos or crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size]) != fields[4]:
            break
        infos.append(BatchInfo(pos, size, fields[0], fields[2], *fields[5:]))
        pos += size
    return infos, pos


def read_batch_info(buf, position: int = 0) -> BatchInfo:
    """Header of the batch at `position`, without checking its CRC or that it is complete."""
    view = _view(buf)
    if len(view) - position < BATCH_HEADER_SIZE:
        raise _corrupt(f"truncated record batch header at byte {position}")
    fields = _HEADER.unpack_from(view, position)
    if fields[3] != CURRENT_MAGIC:
        raise _corrupt(f"unsupported magic {fields[3]} at byte {position}")
    return BatchInfo(position, fields[1] + LOG_OVERHEAD, fields[0], fields[2], *fields[5:])


def assign_offsets(
    buf,
    infos: Iterable[BatchInfo],
    base_offset: int,
    *,
    log_append_time_ms: int | None = None,
    partition_leader_epoch: int | None = None,
) -> int:
    """Patch each batch's baseOffset in place, consecutively from `base_offset`; return the next offset.

    With `log_append_time_ms`, mark the batch LogAppendTime and set maxTimestamp to it (baseTimestamp
    and record deltas are kept, as Kafka's DefaultRecordBatch.setMaxTimestamp does) and recompute the
    CRC. baseOffset and partitionLeaderEpoch lie outside the CRC.
    """
    view = _view(buf)
    if view.readonly:
        raise TypeError("assign_offsets needs a writable buffer")
    offset = base_offset
    for info in infos:
        pos = info.position
        _INT64.pack_into(view, pos, offset)
        if partition_leader_epoch is not None:
            _INT32.pack_into(view, pos + PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)
        if log_append_time_ms is not None:
            attributes = info.attributes | TIMESTAMP_TYPE_MASK
            if attributes != info.attributes or info.max_timestamp != log_append_time_ms:
                _INT16.pack_into(view, pos + ATTRIBUTES_OFFSET, attributes)
                _INT64.pack_into(view, pos + MAX_TIMESTAMP_OFFSET, log_append_time_ms)
                crc = crc32c(view[pos + ATTRIBUTES_OFFSET : pos + info.size])
                _UINT32.pack_into(view, pos + CRC_OFFSET, crc)
        offset += info.last_offset_delta + 1
    return offset


# ---------------------------------------------------------------------------------------------------
# Decoding


def stamp_leader_epoch(buf: bytearray, infos: list[BatchInfo], leader_epoch: int) -> None:
    """Set the partitionLeaderEpoch of these batches of `buf` (outside the CRC: nothing else changes)."""
    for info in infos:
        _INT32.pack_into(buf, info.position + PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)


def decode_batch(buf, info: BatchInfo) -> list[Record]:
    """Decode (and decompress) the records of one batch. Malformed records raise CORRUPT_MESSAGE."""
    view = _view(buf)
    body = view[info.position + BATCH_HEADER_SIZE : info.position + info.size]
    data = codecs.decompress(info.compression, body)
    log_append_time = info.max_timestamp if info.timestamp_type == LOG_APPEND_TIME else None
    records: list[Record] = []
    pos = 0
    end = len(data)
    base_offset = info.base_offset
    base_timestamp = info.base_timestamp
    read = read_varlong  # record varints and varlongs share the zigzag form
    try:
        for _ in range(info.record_count):
            length, pos = read(data, pos)
            record_end = pos + length
            if length < 0 or record_end > end:
                raise _corrupt(f"record length {length} overruns the batch")
            pos += 1  # record attributes: unused
            timestamp_delta, pos = read(data, pos)
            offset_delta, pos = read(data, pos)
            key_length, pos = read(data, pos)
            if key_length < 0:
                key = None
            else:
                key = data[pos : pos + key_length]
                pos += key_length
            value_length, pos = read(data, pos)
            if value_length < 0:
                value = None
            else:
                value = data[pos : pos + value_length]
                pos += value_length
            header_count, pos = read(data, pos)
            if header_count < 0:
                raise _corrupt(f"invalid header count {header_count}")
            headers: list[tuple[str, bytes | None]] = []
            for _ in range(header_count):
                header_key_length, pos = read(data, pos)
                if header_key_length < 0:
                    raise _corrupt("null header key")
                header_key = data[pos : pos + header_key_length].decode()
                pos += header_key_length
                header_value_length, pos = read(data, pos)
                if header_value_length < 0:
                    header_value = None
                else:
                    header_value = data[pos : pos + header_value_length]
                    pos += header_value_length
                headers.append((header_key, header_value))
            if pos != record_end:
                raise _corrupt(f"record declared {length} bytes but its fields do not fill them exactly")
            timestamp = log_append_time if log_append_time is not None else base_timestamp + timestamp_delta
            records.append(Record(base_offset + offset_delta, timestamp, key, value, headers))
    except (IndexError, MalformedMessage):
        raise _corrupt("truncated or malformed record") from None
    except UnicodeDecodeError:
        raise _corrupt("record header key is not UTF-8") from None
    if pos != end:
        raise _corrupt(f"{end - pos} bytes left after the batch's {info.record_count} records")
    return records


def decode_batches(buf) -> Iterator[tuple[BatchInfo, list[Record]]]:
    """Decode every batch in `buf` (a log segment or a fetch response's records).

    A truncated batch at the end ends the iteration, as a consumer treats a partial batch in a fetch
    response; a CRC mismatch or broken framing before that raises CORRUPT_MESSAGE.
    """
    view = _view(buf)
    end = len(view)
    pos = 0
    while end - pos >= BATCH_HEADER_SIZE:
        info = read_batch_info(view, pos)
        if info.size < BATCH_HEADER_SIZE:
            raise _corrupt(f"record batch at byte {pos} has illegal length {info.size - LOG_OVERHEAD}")
        if info.size > end - pos:
            return
        (crc,) = _UINT32.unpack_from(view, pos + CRC_OFFSET)
        if crc32c(view[pos + ATTRIBUTES_OFFSET : pos + info.size]) != crc:
            raise _corrupt(f"record batch at byte {pos} is corrupt (CRC mismatch)")
        yield info, decode_batch(view, info)
        pos += info.size


# ---------------------------------------------------------------------------------------------------
# Building


def _record_parts(record: Any) -> tuple[Any, Any, Any, int | None]:
    """(key, value, headers, timestamp or None) from a Record, a (key, value, headers) or a (key, value)."""
    if isinstance(record, Record):
        return record.key, record.value, record.headers, record.timestamp
    if isinstance(record, tuple) and len(record) in (2, 3):
        return record[0], record[1], record[2] if len(record) == 3 else (), None
    return record.key, record.value, getattr(record, "headers", ()) or (), getattr(record, "timestamp", None)


def _as_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


def build_batch(
    records: list,
    *,
    base_offset: int = 0,
    compression: int = 0,
    timestamp_ms: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
    timestamps: list[int] | None = None,
) -> bytes:
    """Build one v2 batch with CreateTime timestamps.

    `records` holds `(key, value, headers)` or `(key, value)` tuples, or Record-like objects (whose
    own timestamps are used). Keys, values and header values may be bytes, str or None; headers are
    `(str, bytes | None)` pairs. Timestamps: `timestamps[i]` if given, else the record's own, else
    `timestamp_ms`, else the current time. Offset deltas are list positions (a Record's offset is
    ignored); the first record's timestamp is the base timestamp.
    """
    if timestamp_ms is None:
        timestamp_ms = int(time.time() * 1000)
    parts = [_record_parts(record) for record in records]
    stamps = [
        timestamps[i] if timestamps is not None else (own if own is not None else timestamp_ms)
        for i, (_, _, _, own) in enumerate(parts)
    ]
    base_timestamp = stamps[0] if stamps else timestamp_ms
    max_timestamp = max(stamps) if stamps else timestamp_ms

    body = bytearray()
    record = bytearray()
    for delta, ((key, value, headers, _), stamp) in enumerate(zip(parts, stamps, strict=True)):
        record.clear()
        record.append(0)  # attributes
        record += write_varlong(stamp - base_timestamp)
        record += write_varlong(delta)
        for field in (_as_bytes(key), _as_bytes(value)):
            if field is None:
                record += write_varlong(-1)
            else:
                record += write_varlong(len(field))
                record += field
        record += write_varlong(len(headers))
        for header_key, header_value in headers:
            encoded_key = header_key.encode() if isinstance(header_key, str) else bytes(header_key)
            record += write_varlong(len(encoded_key))
            record += encoded_key
            encoded_value = _as_bytes(header_value)
            if encoded_value is None:
                record += write_varlong(-1)
            else:
                record += write_varlong(len(encoded_value))
                record += encoded_value
        body += write_varlong(len(record))
        body += record
    return frame_batch(body, len(parts), base_timestamp=base_timestamp, max_timestamp=max_timestamp,
                       base_offset=base_offset, compression=compression, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=base_sequence, is_transactional=is_transactional,
                       is_control=is_control, partition_leader_epoch=partition_leader_epoch)


def frame_batch(
    body,
    count: int,
    *,
    base_timestamp: int,
    max_timestamp: int,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A v2 batch (CreateTime) of `count` encoded records (`body`, bytes-like): compressed, with its header
    and CRC."""
    payload = _compress(compression, body)
    attributes = compression & COMPRESSION_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG
    if is_control:
        attributes |= CONTROL_FLAG
    batch = bytearray(BATCH_HEADER_SIZE)
    batch += payload
    header = (base_offset, len(batch) - LOG_OVERHEAD, partition_leader_epoch, CURRENT_MAGIC, 0, attributes)
    header += (count - 1, base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence)
    _HEADER.pack_into(batch, 0, *header, count)
    _UINT32.pack_into(batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    return bytes(batch)


ABORT_MARKER = 0
COMMIT_MARKER = 1
_CONTROL_KEY = struct.Struct(">hh")  # version 0, type (0 abort, 1 commit)
_MARKER_VALUE = struct.Struct(">hi")  # version 0, coordinator epoch


def build_marker_batch(
    commit: bool, *, producer_id: int, producer_epoch: int, coordinator_epoch: int, timestamp_ms: int,
    base_offset: int = 0, partition_leader_epoch: int = -1,
) -> bytes:
    """A transaction marker: one control record ending the producer's transaction in a partition."""
    key = _CONTROL_KEY.pack(0, COMMIT_MARKER if commit else ABORT_MARKER)
    value = _MARKER_VALUE.pack(0, coordinator_epoch)
    return build_batch([(key, value, [])], base_offset=base_offset, timestamp_ms=timestamp_ms,
                       producer_id=producer_id, producer_epoch=producer_epoch, is_transactional=True,
                       is_control=True, partition_leader_epoch=partition_leader_epoch)


def read_marker(buf, info: BatchInfo) -> tuple[int, int] | None:
    """(type, coordinator epoch) of a control batch's transaction marker; None for other control records."""
    return marker_of(decode_batch(buf, info)[0])


def marker_of(record: Record) -> tuple[int, int] | None:
    """(type, coordinator epoch) if the control record is a transaction marker."""
    if record.key is None or len(record.key) < _CONTROL_KEY.size:
        return None
    _, marker_type = _CONTROL_KEY.unpack_from(record.key)
    if marker_type not in (ABORT_MARKER, COMMIT_MARKER):
        return None
    coordinator_epoch = -1
    if record.value is not None and len(record.value) >= _MARKER_VALUE.size:
        coordinator_epoch = _MARKER_VALUE.unpack_from(record.value)[1]
    return marker_type, coordinator_epoch


def _compress(codec: int, body) -> bytes | bytearray:
    if codec == codecs.NONE:
        return body
    return codecs.compress(codec, body)

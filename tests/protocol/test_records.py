"""Record batch v2: validation on the produce path, recovery scans, offset assignment, decoding, building,
and agreement with kafka-python's own batch reader and builder."""

import struct
import types

import cramjam
import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record import default_records as kp

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import (
    BATCH_HEADER_SIZE,
    CONTROL_FLAG,
    CREATE_TIME,
    LOG_APPEND_TIME,
    BatchInfo,
    Record,
    assign_offsets,
    build_batch,
    decode_batch,
    decode_batches,
    read_batch_info,
    scan_valid_prefix,
    validate_batches,
)

CODECS = [0, 1, 2, 3, 4]

keys_or_values = st.one_of(st.none(), st.binary(max_size=64))
headers = st.lists(st.tuples(st.text(max_size=8), keys_or_values), max_size=3)
records_strategy = st.lists(st.tuples(keys_or_values, keys_or_values, headers), min_size=1, max_size=12)


def error_code(buf, **kwargs) -> ErrorCode:
    with pytest.raises(KafkaError) as err:
        validate_batches(buf, **kwargs)
    return err.value.code


def patched(batch: bytes, offset: int, fmt: str, value: int, *, fix_crc: bool = True) -> bytes:
    """`batch` with one header field overwritten (and its CRC made valid again)."""
    buf = bytearray(batch)
    struct.pack_into(fmt, buf, offset, value)
    if fix_crc:
        struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


def simple_batch(n: int = 3, **kwargs) -> bytes:
    return build_batch([(b"k%d" % i, b"value-%d" % i, []) for i in range(n)], timestamp_ms=1_000, **kwargs)


# -- build / validate / decode ---------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(records=records_strategy, codec=st.sampled_from(CODECS), base_ts=st.integers(0, 2**41))
def test_build_validate_decode_round_trip(records, codec, base_ts):
    stamps = [base_ts + (i * 7919) % 50 - 20 for i in range(len(records))]  # not monotonic on purpose
    batch = build_batch(
        records, compression=codec, timestamps=stamps, producer_id=9, producer_epoch=2, base_sequence=40
    )
    (info,) = validate_batches(batch)
    assert info == BatchInfo(
        0, len(batch), 0, -1, codec, len(records) - 1, stamps[0], max(stamps), 9, 2, 40, len(records)
    )
    assert info.compression == codec and info.timestamp_type == CREATE_TIME
    assert info.last_sequence == 40 + len(records) - 1
    decoded = decode_batch(batch, info)
    assert decoded == [Record(i, stamps[i], k, v, list(h)) for i, (k, v, h) in enumerate(records)]


@pytest.mark.parametrize("codec", CODECS)
def test_decode_batches_walks_a_buffer_of_mixed_codec_batches(codec):
    buf = simple_batch(2, compression=codec) + simple_batch(3, base_offset=2) + simple_batch(1, base_offset=5)
    decoded = list(decode_batches(buf))
    assert [info.base_offset for info, _ in decoded] == [0, 2, 5]
    assert [r.offset for _, records in decoded for r in records] == [0, 1, 2, 3, 4, 5]


def test_decode_batches_stops_at_a_truncated_tail_like_a_consumer():
    buf = simple_batch(2) + simple_batch(3)
    assert len(list(decode_batches(buf[:-1]))) == 1


def test_build_batch_accepts_records_and_str_and_flags():
    records = [Record(0, 5, "key", "value", [("h", "v")]), Record(1, 9, None, None, [])]
    batch = build_batch(records, is_transactional=True, producer_id=3, producer_epoch=0, base_sequence=0)
    info = read_batch_info(batch)
    assert info.is_transactional and not info.is_control
    assert (info.base_timestamp, info.max_timestamp) == (5, 9)
    assert decode_batch(batch, info) == [
        Record(0, 5, b"key", b"value", [("h", b"v")]),
        Record(1, 9, None, None, []),
    ]
    control = build_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05", [])], is_control=True)
    assert read_batch_info(control).is_control


def test_validate_batches_reports_positions_of_several_batches():
    first, second = simple_batch(2), simple_batch(4, compression=1)
    infos = validate_batches(first + second)
    assert [(i.position, i.size, i.record_count) for i in infos] == [
        (0, len(first), 2),
        (len(first), len(second), 4),
    ]


# -- produce-path errors ---------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(data=st.data(), codec=st.sampled_from(CODECS))
def test_any_flipped_byte_after_the_crc_field_is_corrupt_message(data, codec):
    batch = bytearray(simple_batch(4, compression=codec))
    index = data.draw(st.integers(17, len(batch) - 1))
    batch[index] ^= data.draw(st.integers(1, 255))
    assert error_code(batch) == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("codec", CODECS)
def test_every_truncation_is_corrupt_message(codec):
    batch = simple_batch(3, compression=codec)
    for cut in range(1, len(batch)):
        assert error_code(batch[:cut]) == ErrorCode.CORRUPT_MESSAGE, cut
        assert error_code(batch + batch[:cut]) == ErrorCode.CORRUPT_MESSAGE, cut


def test_empty_records_are_invalid_record():
    assert error_code(b"") == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("magic", [0, 1])
def test_old_magic_is_invalid_record(magic):
    legacy = bytearray(simple_batch())
    legacy[16] = magic
    assert error_code(bytes(legacy)) == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("magic", [3, 0x7F, 0xFF])
def test_unknown_magic_is_corrupt_message(magic):
    batch = bytearray(simple_batch())
    batch[16] = magic
    assert error_code(bytes(batch)) == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("length", [-1, 0, 13, 14, 48])
def test_batch_length_below_the_header_is_corrupt_message(length):
    assert error_code(patched(simple_batch(), 8, ">i", length, fix_crc=False)) == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize(
    "offset, fmt, value",
    [
        (57, ">i", -1),  # recordsCount < 0
        (57, ">i", 0),  # no records
        (57, ">i", 2),  # count disagrees with lastOffsetDelta (2 for 3 records)
        (23, ">i", 5),  # lastOffsetDelta disagrees with count
        (21, ">h", CONTROL_FLAG),  # control batch from a client
        (43, ">q", 77),  # producer id without a sequence
    ],
)
def test_client_illegal_headers_are_invalid_record(offset, fmt, value):
    assert error_code(patched(simple_batch(3), offset, fmt, value)) == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec_bits_are_unsupported_compression_type(codec):
    assert error_code(patched(simple_batch(), 21, ">h", codec)) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def test_batch_over_max_batch_size_is_message_too_large():
    batch = simple_batch(5)
    assert validate_batches(batch, max_batch_size=len(batch))
    assert error_code(batch, max_batch_size=len(batch) - 1) == ErrorCode.MESSAGE_TOO_LARGE


def test_validate_reads_memoryview_slices_without_copying_the_request():
    request = b"prefix" + simple_batch(2) + b"suffix"
    view = memoryview(request)[6:-6]
    (info,) = validate_batches(view)
    assert decode_batch(view, info)[1].value == b"value-1"


# -- recovery scan ---------------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_scan_valid_prefix_stops_at_the_end_of_the_last_good_batch(data):
    sizes = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=5))
    batches = [simple_batch(n, compression=data.draw(st.sampled_from(CODECS))) for n in sizes]
    buf = b"".join(batches)
    ends = [sum(len(b) for b in batches[: i + 1]) for i in range(len(batches))]
    infos, end = scan_valid_prefix(buf)
    assert end == len(buf) and len(infos) == len(batches)

    cut = data.draw(st.integers(0, len(buf)))
    infos, end = scan_valid_prefix(buf[:cut])
    assert end == max([0] + [e for e in ends if e <= cut])
    assert len(infos) == sum(1 for e in ends if e <= cut)

    victim = data.draw(st.integers(0, len(batches) - 1))
    start = ends[victim] - len(batches[victim])
    index = data.draw(st.integers(start + 8, ends[victim] - 1))  # baseOffset is outside the CRC
    corrupted = bytearray(buf)
    corrupted[index] ^= data.draw(st.integers(1, 255))
    infos, end = scan_valid_prefix(corrupted)
    leader_epoch_only = start + 12 <= index < start + 16  # partitionLeaderEpoch is outside the CRC too
    assert end == (len(buf) if leader_epoch_only else start)
    assert len(infos) == (len(batches) if leader_epoch_only else victim)


def test_scan_valid_prefix_from_a_start_position_and_on_garbage():
    first, second = simple_batch(1), simple_batch(2)
    infos, end = scan_valid_prefix(first + second, start=len(first))
    assert [i.position for i in infos] == [len(first)] and end == len(first) + len(second)
    assert scan_valid_prefix(b"\x00" * 200) == ([], 0)
    assert scan_valid_prefix(first + b"\x00" * 100) == (validate_batches(first), len(first))


# -- offset assignment -----------------------------------------------------------------------------


def test_assign_offsets_patches_consecutive_offsets_and_keeps_crcs_valid():
    buf = bytearray(simple_batch(3) + simple_batch(2, compression=4) + simple_batch(1))
    infos = validate_batches(buf)
    assert assign_offsets(buf, infos, 1000, partition_leader_epoch=7) == 1006
    patched_infos = validate_batches(buf)
    assert [i.base_offset for i in patched_infos] == [1000, 1003, 1005]
    assert {i.partition_leader_epoch for i in patched_infos} == {7}
    assert [r.offset for _, records in decode_batches(buf) for r in records] == list(range(1000, 1006))
    assert [i.max_timestamp for i in patched_infos] == [i.max_timestamp for i in infos]


@pytest.mark.parametrize("codec", CODECS)
def test_log_append_time_sets_type_and_max_timestamp_and_recomputes_crc(codec):
    buf = bytearray(build_batch([(None, b"a", []), (None, b"b", [])], compression=codec, timestamps=[10, 20]))
    view = memoryview(buf)
    assign_offsets(view, validate_batches(view), 50, log_append_time_ms=99_999)
    (info,) = validate_batches(buf)  # CRC still valid
    assert info.timestamp_type == LOG_APPEND_TIME
    assert (info.base_timestamp, info.max_timestamp) == (10, 99_999)
    assert [(r.offset, r.timestamp) for r in decode_batch(buf, info)] == [(50, 99_999), (51, 99_999)]
    batch = kp.DefaultRecordBatch(bytes(buf))
    assert batch.validate_crc() and batch.timestamp_type == 1


def test_assign_offsets_needs_a_writable_buffer():
    batch = simple_batch()
    with pytest.raises(TypeError):
        assign_offsets(batch, validate_batches(batch), 0)


# -- kafka-python interoperability -----------------------------------------------------------------


@pytest.fixture
def kafka_python_codecs(monkeypatch):
    """kafka-python with its optional codec libraries stood in for by cramjam.

    kafka-python's own xerial snappy framing and its batch encoder/decoder still run; only the raw
    snappy block, lz4 frame and zstd frame primitives come from cramjam.
    """
    import kafka.codec as codec

    fake_snappy = types.SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(data)),
        decompress=lambda data: bytes(cramjam.snappy.decompress_raw(data)),
    )
    monkeypatch.setattr(codec, "snappy", fake_snappy)
    monkeypatch.setattr(codec, "lz4", object())
    monkeypatch.setattr(codec, "zstd", object())

    def lz4_encode(data):
        compressor = cramjam.lz4.Compressor(block_linked=False)
        compressor.compress(bytes(data))
        return bytes(compressor.finish())

    monkeypatch.setattr(kp, "lz4_encode", lz4_encode)
    monkeypatch.setattr(kp, "lz4_decode", lambda data: bytes(cramjam.lz4.decompress(data)))
    monkeypatch.setattr(kp, "zstd_encode", lambda data: bytes(cramjam.zstd.compress(data)))
    monkeypatch.setattr(kp, "zstd_decode", lambda data: bytes(cramjam.zstd.decompress(data)))


KP_RECORDS = [
    (None, b"v" * 300, []),
    (b"key-1", None, [("trace", b"abc"), ("empty", None)]),
    (b"key-2", b"x" * 2000, [("h", b"")]),
    (b"", b"", []),
]


@pytest.mark.parametrize("codec", CODECS)
def test_reads_batches_built_by_kafka_python(kafka_python_codecs, codec):
    builder = kp.DefaultRecordBatchBuilder(2, codec, False, 4242, 3, 17, 1 << 20)
    for i, (key, value, hdrs) in enumerate(KP_RECORDS):
        builder.append(i, 1_700_000_000_000 + i, key, value, hdrs)
    batch = bytes(builder.build())
    (info,) = validate_batches(batch)
    assert (info.compression, info.producer_id, info.producer_epoch, info.base_sequence) == (
        codec,
        4242,
        3,
        17,
    )
    assert info.record_count == len(KP_RECORDS) and info.last_sequence == 17 + len(KP_RECORDS) - 1
    expected = [Record(i, 1_700_000_000_000 + i, k, v, h) for i, (k, v, h) in enumerate(KP_RECORDS)]
    assert decode_batch(batch, info) == expected


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_what_build_batch_writes(kafka_python_codecs, codec):
    buf = bytearray(
        build_batch(
            KP_RECORDS,
            compression=codec,
            timestamps=[5, 3, 8, 8],
            producer_id=1,
            producer_epoch=0,
            base_sequence=0,
        )
    )
    assign_offsets(buf, validate_batches(buf), 314)
    batch = kp.DefaultRecordBatch(bytes(buf))
    assert batch.validate_crc()
    assert (batch.compression_type, batch.base_offset, batch.max_timestamp) == (codec, 314, 8)
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch]
    assert got == [
        (314 + i, t, k, v, h) for i, ((k, v, h), t) in enumerate(zip(KP_RECORDS, [5, 3, 8, 8], strict=True))
    ]


def test_uncompressed_build_batch_is_byte_identical_to_kafka_python():
    builder = kp.DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    for i, (key, value, hdrs) in enumerate(KP_RECORDS):
        builder.append(i, 1_000 + i, key, value, hdrs)
    expected = bytes(builder.build())
    ours = build_batch(
        KP_RECORDS, timestamps=[1_000 + i for i in range(len(KP_RECORDS))], partition_leader_epoch=0
    )
    assert ours == expected
    assert len(ours) > BATCH_HEADER_SIZE

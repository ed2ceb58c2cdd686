"""record_columns against the record-by-record decoder of the broker (decode_batch), on seeded random logs:
keys and values of every length class (null, empty, one-byte varint lengths, two-byte, three-byte), headers,
every codec, log-append time, ranges that start and end inside batches, transactions committed and aborted,
a response that ends inside a batch, and malformed batches."""

import random
import struct

import pytest

from odradek.protocol import compression as codecs
from odradek.protocol.errors import KafkaError
from odradek.protocol.records import build_batch, build_marker_batch, decode_batch, read_batch_info
from odradek.spark.record_columns import AbortedTransactions, complete_batches, read_columns

CODECS = [codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD]


def random_bytes(rng: random.Random) -> bytes | None:
    size = rng.choice([None, 0, 1, 10, 63, 64, 100, 200, 8191, 8192, 20_000])
    return None if size is None else rng.randbytes(size)


def random_log(rng: random.Random, with_headers: bool) -> tuple[bytes, list[dict], dict[int, tuple]]:
    """Batches at consecutive offsets, some transactional, some aborted; the aborted-transactions list a
    read_committed fetch would carry; and the record each offset read_committed must return."""
    log, aborted, expected = bytearray(), [], {}
    offset = 0
    open_transactions: dict[int, list[int]] = {}  # producer id -> offsets of its open transaction
    for _ in range(rng.randrange(5, 25)):
        producer = rng.choice([-1, 7, 8])
        if producer >= 0 and producer in open_transactions and rng.random() < 0.4:
            commit = rng.random() < 0.5
            log += build_marker_batch(commit, producer_id=producer, producer_epoch=0, coordinator_epoch=0,
                                      timestamp_ms=1_700_000_000_000, base_offset=offset)
            offsets = open_transactions.pop(producer)
            if not commit:
                for o in offsets:
                    expected.pop(o)
            offset += 1
            continue
        records = [(random_bytes(rng), random_bytes(rng),
                    [(f"h{i}", random_bytes(rng)) for i in range(rng.randrange(3))] if with_headers else [])
                   for _ in range(rng.randrange(1, 40))]
        stamps = [1_700_000_000_000 + rng.randrange(-5000, 5000) for _ in records]
        batch = build_batch(records, base_offset=offset, compression=rng.choice(CODECS), timestamps=stamps,
                            producer_id=producer, producer_epoch=0 if producer >= 0 else -1,
                            base_sequence=0 if producer >= 0 else -1, is_transactional=producer >= 0)
        if producer >= 0 and producer not in open_transactions:
            open_transactions[producer] = []
            aborted.append({"producer_id": producer, "first_offset": offset})  # pruned below if it commits
        if rng.random() < 0.2:  # log-append time: the broker's stamp, maxTimestamp, for every record
            batch = bytearray(batch)
            batch[22] |= 0x08
            batch = bytes(batch)
        for i, record in enumerate(decode_batch(batch, read_batch_info(batch))):
            expected[offset + i] = record
            if producer >= 0:
                open_transactions[producer].append(offset + i)
        log += batch
        offset += len(records)
    for offsets in open_transactions.values():  # still open at the end: not aborted, not returned
        for o in offsets:
            expected.pop(o)
    aborted_offsets = {o for o in range(offset)} - set(expected)
    aborted = [a for a in aborted if a["first_offset"] in aborted_offsets]
    return bytes(log), aborted, expected


def columns_as_records(columns, with_headers: bool) -> dict[int, tuple]:
    out = {}
    for c in columns:
        for i, offset in enumerate(c.offsets.tolist()):
            out[offset] = (c.keys[i].as_py(), c.values[i].as_py(), int(c.timestamps_ms[i]), c.timestamp_type,
                           c.headers[i] if with_headers else None)
    return out


def expected_records(expected: dict, log: bytes, with_headers: bool) -> dict[int, tuple]:
    log_append = {}
    for info in complete_batches(log):
        for o in range(info.base_offset, info.next_offset):
            log_append[o] = info.timestamp_type == 1
    return {o: (None if r.key is None else bytes(r.key), None if r.value is None else bytes(r.value), r.timestamp,
                1 if log_append[o] else 0,
                ([(k, None if v is None else bytes(v)) for k, v in r.headers] or None) if with_headers else None)
            for o, r in expected.items()}


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("with_headers", [False, True], ids=["columns", "with-headers"])
def test_a_random_log_reads_as_the_record_decoder_reads_it(seed, with_headers):
    rng = random.Random(seed)
    log, aborted, expected = random_log(rng, with_headers)
    last = max(info.last_offset for info in complete_batches(log))
    want = expected_records(expected, log, with_headers)
    start, end = sorted(rng.sample(range(last + 2), 2))
    for lo, hi in [(0, last + 1), (start, end)]:
        columns, next_offset = read_columns(log, lo, hi, AbortedTransactions(aborted), with_headers)
        assert columns_as_records(columns, with_headers) == {o: r for o, r in want.items() if lo <= o < hi}
        assert next_offset >= min(hi, last + 1)


def test_read_uncommitted_returns_aborted_records_and_never_markers():
    rng = random.Random(7)
    log, aborted, expected = random_log(rng, False)
    columns, _ = read_columns(log, 0, 10**9, None, False)
    got = columns_as_records(columns, False)
    assert set(expected) <= set(got)
    markers = {info.base_offset for info in complete_batches(log) if info.is_control}
    assert not markers & set(got)
    data_offsets = {o for info in complete_batches(log) if not info.is_control
                    for o in range(info.base_offset, info.next_offset)}
    assert set(got) == data_offsets


def test_a_response_ending_inside_a_batch_reads_the_whole_batches_and_resumes_at_the_cut():
    first = build_batch([(b"k", b"v" * 100)] * 5, base_offset=0)
    second = build_batch([(b"k", b"w" * 100)] * 5, base_offset=5)
    columns, next_offset = read_columns(first + second[:70], 0, 100, None, False)
    assert [c.offsets.tolist() for c in columns] == [[0, 1, 2, 3, 4]] and next_offset == 5
    assert read_columns(second[:30], 5, 100, None, False) == ([], 5)


def test_a_batch_the_range_ends_inside_gives_the_next_offset_after_the_batch():
    batch = build_batch([(None, str(i).encode()) for i in range(10)], base_offset=100)
    columns, next_offset = read_columns(batch, 103, 106, None, False)
    assert columns[0].offsets.tolist() == [103, 104, 105] and columns[0].keys.null_count == 3
    assert [v.as_py() for v in columns[0].values] == [b"3", b"4", b"5"] and next_offset == 110


def test_a_range_whose_last_offsets_hold_no_record_is_read_once_a_later_batch_shows():
    # offsets 10 to 14 were compacted away: the answer to a fetch at 10 starts at 20
    later = build_batch([(b"k", b"v")] * 3, base_offset=20)
    assert read_columns(later, 10, 15, None, False) == ([], 15)


@pytest.mark.parametrize("damage", ["record length past the end", "key length past the record",
                                    "bytes left over", "varint of 11 bytes"])
def test_a_malformed_batch_is_corrupt_message(damage):
    batch = bytearray(build_batch([(b"key", b"value"), (b"k2", b"v2")], base_offset=0))
    body = 61
    if damage == "record length past the end":
        batch[body] = 0x7E  # zigzag 63: past the section's end
    elif damage == "key length past the record":
        batch[body + 4] = 0x7E  # the first record's key length: 63 bytes
    elif damage == "bytes left over":
        batch += b"\x00\x00"
        struct.pack_into(">i", batch, 8, len(batch) - 12)
    else:
        batch[body + 2:body + 2] = b"\xff" * 11  # the first record's timestamp delta never ends
        batch[body] = (batch[body] >> 1) + 11 << 1
        struct.pack_into(">i", batch, 8, len(batch) - 12)
    with pytest.raises(KafkaError) as failure:
        read_columns(bytes(batch), 0, 100, None, False)
    assert failure.value.code.name == "CORRUPT_MESSAGE"

"""record_batches against the broker's own record decoder and batch validation (decode_batches,
validate_batches), on seeded random rows: keys, values and headers of every length class (null, empty, one- to
three-byte varint lengths), timestamps before and after the first row's, every codec, batches cut by size,
sequences that wrap; and the vectorized murmur2 against Java's values and the scalar one."""

import random

import numpy as np
import pyarrow as pa
import pytest

from odradek.protocol import compression as codecs
from odradek.protocol.records import BATCH_HEADER_SIZE, decode_batches, validate_batches
from odradek.spark.record_batches import as_binary, build_batches, key_partitions, murmur2
from odradek.sql import partitioning

CODECS = [codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD]
INT32_MAX = 2**31 - 1


def random_bytes(rng: random.Random) -> bytes | None:
    size = rng.choice([None, 0, 1, 2, 3, 4, 5, 7, 63, 64, 100, 8191, 8192, 20_000])
    return None if size is None else rng.randbytes(size)


HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def random_headers(rng: random.Random) -> list | None:
    """Spark's headers of one row: None (no list), or (key, value) pairs, keys of any length, null values."""
    if rng.random() < 0.2:
        return None
    return [("".join(rng.choice("hé-x") for _ in range(rng.choice([0, 1, 5, 200]))), random_bytes(rng))
            for _ in range(rng.choice([0, 1, 2, 5]))]


def random_rows(rng: random.Random, n: int) -> tuple[list, list, list, np.ndarray]:
    keys = [random_bytes(rng) for _ in range(n)]
    values = [random_bytes(rng) for _ in range(n)]
    headers = [random_headers(rng) for _ in range(n)]
    stamps = np.array([1_700_000_000_000 + rng.randrange(-10**6, 10**6) for _ in range(n)], np.int64)
    return keys, values, headers, stamps


def headers_column(headers: list) -> pa.Array:
    return pa.array([None if h is None else [{"key": k, "value": v} for k, v in h] for h in headers], HEADERS)


def decoded(batches) -> list[tuple]:
    buf = b"".join(b.data for b in batches)
    validate_batches(buf)  # sizes, magic, CRC32C: what the broker checks before it appends
    return [(r.key, r.value, [(k, v) for k, v in r.headers], r.timestamp)
            for _, records in decode_batches(buf) for r in records]


@pytest.mark.parametrize("seed", range(20))
def test_random_rows_decode_to_themselves_in_batches_under_the_size_limit(seed):
    rng = random.Random(seed)
    keys, values, headers, stamps = random_rows(rng, rng.randrange(1, 400))
    with_headers = seed % 2 == 0
    codec = rng.choice(CODECS)
    limit = rng.choice([1, 30_000, 100_000, 1_000_000])
    sequence = rng.choice([0, 17, INT32_MAX - 5])
    batches = build_batches(pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
                            headers_column(headers) if with_headers else None, stamps, producer_id=42,
                            producer_epoch=3, base_sequence=sequence, codec=codec, max_batch_bytes=limit)
    expected_headers = [[(k, v) for k, v in h or []] if with_headers else [] for h in headers]
    assert decoded(batches) == list(zip(keys, values, expected_headers, stamps.tolist(), strict=True))
    for batch in batches:
        assert batch.count == 1 or len(batch.data) - BATCH_HEADER_SIZE <= limit or codec != codecs.NONE
    # sequences count on from the first, wrapping past Int32.MAX to 0 as Kafka's do
    expected, at = [], sequence
    for batch in batches:
        expected.append(at)
        at = at + batch.count if at + batch.count <= INT32_MAX else at + batch.count - INT32_MAX - 1
    assert [b.base_sequence for b in batches] == expected
    infos = [info for info, _ in decode_batches(b"".join(b.data for b in batches))]
    assert {(i.producer_id, i.producer_epoch) for i in infos} == {(42, 3)}
    assert [i.base_sequence for i in infos] == expected
    assert [i.compression for i in infos] == [codec] * len(batches)


def test_without_a_producer_id_batches_carry_no_sequence():
    batches = build_batches(None, pa.array([b"a", b"b"]), None, np.array([5, 3], np.int64), producer_id=-1,
                            producer_epoch=-1, base_sequence=-1, codec=codecs.NONE, max_batch_bytes=1_000_000)
    (info, records), = decode_batches(batches[0].data)
    assert (info.producer_id, info.base_sequence, batches[0].base_sequence) == (-1, -1, -1)
    assert [(r.key, r.value, r.timestamp) for r in records] == [(None, b"a", 5), (None, b"b", 3)]
    assert (info.base_timestamp, info.max_timestamp) == (5, 5)


def test_string_columns_and_sliced_columns_encode_their_own_bytes():
    keys = pa.array(["ключ", None, "k", "", "last"]).slice(1)
    values = as_binary(pa.array(["x", "значение", None, "y", "z"]).slice(1))
    headers = headers_column([[("a", b"1")], [("б", None)], None, [], [("c", b"")]]).slice(1)
    got = decoded(build_batches(as_binary(keys), values, headers, np.zeros(4, np.int64), producer_id=1,
                                producer_epoch=0, base_sequence=0, codec=codecs.NONE, max_batch_bytes=1_000_000))
    assert got == [(None, "значение".encode(), [("б", None)], 0), (b"k", None, [], 0), (b"", b"y", [], 0),
                   (b"last", b"z", [("c", b"")], 0)]


@pytest.mark.parametrize(("headers", "error"), [
    ([[("ok", b"1"), None]], "a null header"), ([[(None, b"1")]], "a header with a null key")])
def test_a_header_kafka_cannot_carry_is_an_error(headers, error):
    column = pa.array([[None if h is None else {"key": h[0], "value": h[1]} for h in row] for row in headers],
                      HEADERS)
    with pytest.raises(ValueError, match=error):
        build_batches(None, pa.array([b"v"]), column, np.zeros(1, np.int64), producer_id=-1, producer_epoch=-1,
                      base_sequence=-1, codec=codecs.NONE, max_batch_bytes=1_000_000)


def test_murmur2_matches_kafkas_java_implementation():
    # Values of org.apache.kafka.common.utils.Utils.murmur2 (signed ints in Java), from Kafka's UtilsTest
    cases = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
             b"a-little-bit-longer-string": -1486304829,
             b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971, b"abc": 479470107}
    assert murmur2(pa.array(list(cases), pa.binary())).tolist() == [v & 0xFFFFFFFF for v in cases.values()]


@pytest.mark.parametrize("seed", range(5))
def test_key_partitions_agree_with_the_scalar_partitioner_and_leave_null_keys_unplaced(seed):
    rng = random.Random(seed)
    keys = [random_bytes(rng) for _ in range(500)]
    count = rng.randrange(1, 50)
    placed = key_partitions(pa.array(keys, pa.binary()), count).tolist()
    assert placed == [-1 if k is None else partitioning.partition_for(k, count) for k in keys]

"""Codecs: round trips, the wire forms other Kafka clients write, and errors for bad input."""

import gzip
import os
import shutil
import struct
import subprocess

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol import compression
from odradek.protocol.compression import (
    CODEC_BY_NAME,
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    XERIAL_MAGIC,
    ZSTD,
    codec_for_topic,
    compress,
    decompress,
)
from odradek.protocol.errors import ErrorCode, KafkaError

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
COMPRESSED = [GZIP, SNAPPY, LZ4, ZSTD]
BIG = os.urandom(1000) * 300  # 300 KB, compressible, spans several snappy chunks and lz4 blocks


@settings(max_examples=40, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=5000))
def test_round_trip_of_every_codec(codec, data):
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_of_large_input_and_memoryview(codec):
    compressed = compress(codec, memoryview(BIG))
    assert decompress(codec, memoryview(compressed)) == BIG
    assert decompress(codec, bytearray(compress(codec, bytearray(BIG)))) == BIG


def test_codec_names_and_topic_compression_types():
    assert CODEC_BY_NAME == {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
    assert codec_for_topic("producer") is None
    assert codec_for_topic("uncompressed") == NONE
    assert codec_for_topic("zstd") == ZSTD
    with pytest.raises(KafkaError) as err:
        codec_for_topic("brotli")
    assert err.value.code == ErrorCode.INVALID_CONFIG


def test_snappy_is_written_in_xerial_framing_with_32k_chunks():
    out = compress(SNAPPY, BIG)
    assert out[:8] == XERIAL_MAGIC
    assert struct.unpack(">ii", out[8:16]) == (1, 1)
    pos, chunks = 16, 0
    while pos < len(out):
        (size,) = struct.unpack_from(">i", out, pos)
        chunk = bytes(cramjam.snappy.decompress_raw(out[pos + 4 : pos + 4 + size]))
        assert len(chunk) <= 32 * 1024
        pos += 4 + size
        chunks += 1
    assert pos == len(out) and chunks == -(-len(BIG) // (32 * 1024))


def test_snappy_reads_raw_blocks_as_librdkafka_may_send():
    assert decompress(SNAPPY, bytes(cramjam.snappy.compress_raw(BIG))) == BIG
    assert decompress(SNAPPY, bytes(cramjam.snappy.compress_raw(b"tiny"))) == b"tiny"


def test_lz4_frames_have_independent_blocks_for_the_java_reader():
    out = compress(LZ4, BIG)
    assert out[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    flg = out[4]
    assert flg >> 6 == 1  # frame version 01
    assert flg & 0x20  # block independence: Java's Lz4BlockInputStream decodes each block alone


def test_lz4_reads_frames_with_linked_blocks_and_content_checksum():
    assert decompress(LZ4, bytes(cramjam.lz4.compress(BIG))) == BIG


def test_zstd_reads_streamed_frames_without_content_size():
    compressor = cramjam.zstd.Compressor()
    compressor.compress(BIG)
    frame = bytes(compressor.finish())
    assert frame[4] & 0xC0 == 0  # frame header descriptor: no content size field
    assert decompress(ZSTD, frame) == BIG


def test_concatenated_gzip_members_and_zstd_frames():
    assert decompress(GZIP, gzip.compress(b"abc") + gzip.compress(b"def")) == b"abcdef"
    frames = bytes(cramjam.zstd.compress(b"abc")) + bytes(cramjam.zstd.compress(b"def"))
    assert decompress(ZSTD, frames) == b"abcdef"


@pytest.mark.parametrize("codec", COMPRESSED)
@pytest.mark.parametrize("kind", ["empty", "garbage", "truncated"])
def test_undecodable_input_is_corrupt_message(codec, kind):
    data = {"empty": b"", "garbage": b"not compressed at all" * 3, "truncated": compress(codec, BIG)[:-7]}[
        kind
    ]
    with pytest.raises(KafkaError) as err:
        decompress(codec, data)
    assert err.value.code == ErrorCode.CORRUPT_MESSAGE


def test_truncated_xerial_chunk_is_corrupt_message():
    out = compress(SNAPPY, BIG)
    with pytest.raises(KafkaError) as err:
        decompress(SNAPPY, out[:18])
    assert err.value.code == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_unknown_codec_is_unsupported_compression_type(codec):
    for operation in (compression.compress, compression.decompress):
        with pytest.raises(KafkaError) as err:
            operation(codec, b"data")
        assert err.value.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def _run(args: list[str], data: bytes) -> bytes:
    return subprocess.run(args, input=data, stdout=subprocess.PIPE, check=True).stdout


@pytest.mark.skipif(shutil.which("lz4") is None, reason="lz4 command-line tool not installed")
def test_lz4_interoperates_with_the_reference_lz4_tool():
    # the reference tool's defaults differ from ours: 4 MB blocks, content checksum; add content size too
    for flags in ([], ["--content-size"], ["-BD"], ["-B4", "--no-frame-crc"]):
        assert decompress(LZ4, _run(["lz4", "-c", *flags], BIG)) == BIG
    assert _run(["lz4", "-d", "-c"], compress(LZ4, BIG)) == BIG


@pytest.mark.skipif(shutil.which("zstd") is None, reason="zstd command-line tool not installed")
def test_zstd_interoperates_with_the_reference_zstd_tool():
    streamed = _run(["zstd", "-c", "-q"], BIG)  # from stdin: a streamed frame, no content size
    assert decompress(ZSTD, streamed) == BIG
    assert _run(["zstd", "-d", "-c", "-q"], compress(ZSTD, BIG)) == BIG


def test_gzip_interoperates_with_the_standard_library():
    assert decompress(GZIP, gzip.compress(BIG)) == BIG
    assert gzip.decompress(compress(GZIP, BIG)) == BIG

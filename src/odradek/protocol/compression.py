"""Record batch compression codecs (gzip, snappy, lz4, zstd) as Kafka clients write and read them, via cramjam.

Wire details that matter for interoperability:

* gzip: a plain gzip stream (Java's GZIPOutputStream); several concatenated members are accepted.
* snappy: the Java client writes xerial snappy-java framing (``\\x82SNAPPY\\x00``, two int32 versions, then
  chunks of ``[int32 length][raw snappy block]``); librdkafka reads and writes it too, and may also send a
  bare raw snappy block. ``decompress`` takes both; ``compress`` writes the xerial form, which every client
  reads.
* lz4: the LZ4 *frame* format. Java's reader decompresses every block on its own, so ``compress`` writes
  independent blocks (no linked blocks). Any valid frame is accepted on read.
* zstd: frames, possibly streamed without a content size (Java's ZstdOutputStream), possibly several.
"""

import struct

import cramjam

from odradek.protocol.errors import ErrorCode, KafkaError

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_BY_NAME: dict[str, int] = {"none": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
NAME_BY_CODEC: dict[int, str] = {codec: name for name, codec in CODEC_BY_NAME.items()}

# Topic/broker `compression.type` values: "producer" keeps what the producer sent (None here).
TOPIC_COMPRESSION_TYPES: dict[str, int | None] = {
    "producer": None,
    "uncompressed": NONE,
    "gzip": GZIP,
    "snappy": SNAPPY,
    "lz4": LZ4,
    "zstd": ZSTD,
}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, minimum compatible version 1
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default chunk size
_INT32 = struct.Struct(">i")


def codec_for_topic(compression_type: str) -> int | None:
    """Codec id for a topic's `compression.type`, or None for "producer" (keep the batch as sent)."""
    try:
        return TOPIC_COMPRESSION_TYPES[compression_type.lower()]
    except KeyError:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"unknown compression.type {compression_type!r}") from None


def compress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Compress `data` the way Kafka's Java producer would for `codec`."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        compressor = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        compressor.compress(data if isinstance(data, bytes) else bytes(data))  # takes bytes only
        return bytes(compressor.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Decompress a batch's records section; undecodable input raises KafkaError(CORRUPT_MESSAGE)."""
    if codec == NONE:
        return bytes(data)
    if codec not in NAME_BY_CODEC:
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression codec {codec}")
    try:
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            return _snappy_decompress(data)
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        return bytes(cramjam.zstd.decompress(data))
    except KafkaError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError, ValueError, ...
        raise KafkaError(
            ErrorCode.CORRUPT_MESSAGE, f"cannot decompress {NAME_BY_CODEC[codec]} data: {exc}"
        ) from None


def _xerial_compress(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data).cast("B")
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data).cast("B")
    if len(view) < 16 or view[:8] != XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    pos, end = 16, len(view)
    out = []
    while pos < end:
        if end - pos < 4:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "truncated xerial snappy chunk header")
        (size,) = _INT32.unpack_from(view, pos)
        pos += 4
        if size < 0 or size > end - pos:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "truncated xerial snappy chunk")
        out.append(bytes(cramjam.snappy.decompress_raw(view[pos : pos + size])))
        pos += size
    return b"".join(out)

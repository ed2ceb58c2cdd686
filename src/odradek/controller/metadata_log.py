"""The durable metadata log: an append-only file of metadata records, fsynced before an operation is acknowledged.

Each entry is framed as [length u32][crc32c u32][record as JSON]. On open, entries are replayed until the
first torn or corrupt one, and the file is truncated there: a write that was never acknowledged is dropped.
"""

from __future__ import annotations

import json
import os
import struct

import crc32c

_FRAME = struct.Struct(">II")
LOG_FILE = "metadata.log"


class MetadataLog:
    def __init__(self, directory: str):
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, LOG_FILE)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)

    def replay(self) -> list[dict]:
        """Every intact record in order; a torn or corrupt tail is truncated away."""
        data = b""
        with open(self.path, "rb") as f:
            data = f.read()
        records, position = [], 0
        while position + _FRAME.size <= len(data):
            length, checksum = _FRAME.unpack_from(data, position)
            body = data[position + _FRAME.size:position + _FRAME.size + length]
            if len(body) != length or crc32c.crc32c(body) != checksum:
                break
            try:
                records.append(json.loads(body))
            except ValueError:
                break
            position += _FRAME.size + length
        if position != len(data):
            os.ftruncate(self._fd, position)
            os.fsync(self._fd)
        os.lseek(self._fd, position, os.SEEK_SET)
        return records

    def append(self, records: list[dict]) -> None:
        """Write and fsync a group of records: they become visible together or not at all after a crash."""
        chunks = []
        for record in records:
            body = json.dumps(record, separators=(",", ":"), sort_keys=True).encode()
            chunks.append(_FRAME.pack(len(body), crc32c.crc32c(body)) + body)
        os.write(self._fd, b"".join(chunks))
        os.fsync(self._fd)

    def close(self) -> None:
        os.close(self._fd)

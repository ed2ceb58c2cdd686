"""FileRegion: a byte range of an open file, written to a socket with os.sendfile instead of copied."""

from typing import NamedTuple


class FileRegion(NamedTuple):
    """`fd` stays valid while the file object that owns it is open, even after the file is unlinked."""

    fd: int
    position: int
    size: int

"""CrashFS: an injected file layer that kills the storage code at a chosen file operation.

`CrashFS.install(monkeypatch)` replaces the `os` module seen by the storage modules (STORAGE_MODULES)
with a proxy. Reads pass straight through; the mutating calls go through the layer. The storage code
writes only through `os` (its builtin `open()` calls are all reads), so every change it makes to a
file is seen here.

Fault model:

* Operations: every call to `os.open` with O_CREAT or O_TRUNC, `os.write`, `os.ftruncate`, `os.fsync`,
  `os.fdatasync`, `os.rename`, `os.replace` and `os.unlink` is one operation. Only operations made
  while the layer is armed are counted (a test arms the phase it wants to crash in).
* The crash: when the armed count reaches `crash_at`, the call raises `Crash` instead of doing anything,
  so the process dies exactly there (mid-roll, between two renames of a swap, before a checkpoint's
  rename...). `Crash` is a BaseException, so no `except Exception` or `except OSError` of the code under
  test can swallow it, and after it every mutating call raises `Crash` again: cleanup code that runs
  while the exception unwinds (`finally`, `except BaseException`) changes nothing on disk, as after a
  real kill -9.
* `reboot()` then closes every descriptor opened through the layer (the dead process's descriptors,
  among them the flock on `<log dir>/.lock`) and applies the crash model to the files:
  - PROCESS_CRASH: files stay as they are (the page cache survives a kill -9);
  - POWER_LOSS: each file reverts to its content at its last fsync/fdatasync, or, if it was never
    synced through the layer, to its content when the layer was installed (empty for a file created
    since). With `torn_tails`, a file whose content only grew since its last sync keeps a random
    prefix of the unsynced bytes (a partly written tail, possibly cutting a batch or index entry),
    half of the time followed by zeros up to its new size (the size was written, not all the data).
    Synced images are keyed by inode (st_dev, st_ino), so they follow renames; a file created anew
    drops any image left by an earlier file with the same inode.

The layer makes no real fsync (durability is what it models), so storage code under it runs faster.

Limitations: directory entries (create, rename, unlink) are durable at once, as if every directory
operation were followed by a directory fsync, so a power loss never undoes a rename or resurrects an
unlinked file; a single write is never torn except through `torn_tails` at power loss; and
operations made through other modules (`shutil.rmtree` of deleted partition dirs, `os.makedirs`) are
neither counted nor crashed.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from random import Random

from odradek.storage import checkpoint, cleaner, log, log_manager, offset_index, segment

STORAGE_MODULES = (checkpoint, cleaner, log, log_manager, offset_index, segment)
PROCESS_CRASH = "process_crash"
POWER_LOSS = "power_loss"


class Crash(BaseException):
    """The process died at an injected crash point."""


class CrashFS:
    """Counts the storage code's file operations, crashes at `crash_at`, and models what survives."""

    def __init__(self, *, model: str = PROCESS_CRASH, crash_at: int | None = None, torn_tails: Random | None = None):
        if model not in (PROCESS_CRASH, POWER_LOSS):
            raise ValueError(f"unknown crash model {model!r}")
        self.model = model
        self.crash_at = crash_at
        self.torn_tails = torn_tails
        self.armed = False
        self.operations = 0  # armed operations performed (or attempted, for the crashing one)
        self.crashed = False
        self.crash_point = ""  # the operation the process died at, for failure messages
        self._open_fds: dict[int, str] = {}
        self._synced: dict[tuple[int, int], bytes] = {}
        self._proxy = _OsProxy(self)

    def install(self, monkeypatch) -> None:
        for module in STORAGE_MODULES:
            monkeypatch.setattr(module, "os", self._proxy)

    def reboot(self, roots: Iterable[str]) -> None:
        """After a Crash: close the dead process's descriptors and apply the crash model under `roots`."""
        for fd in list(self._open_fds):
            os.close(fd)
        self._open_fds.clear()
        if self.model == POWER_LOSS:
            for root in roots:
                for directory, _, names in os.walk(root):
                    for name in names:
                        self._lose_unsynced(os.path.join(directory, name))

    # ---- the layer's side of each call

    def _operation(self, description: str) -> None:
        if self.crashed:
            raise Crash(f"already dead; not doing {description}")
        if not self.armed:
            return
        if self.operations == self.crash_at:
            self.crashed = True
            self.crash_point = f"operation {self.operations}: {description}"
            raise Crash(self.crash_point)
        self.operations += 1

    def _remember(self, key: tuple[int, int], read_content) -> None:
        """A file first changed through the layer was durable as it was (it predates the layer)."""
        if key not in self._synced:
            self._synced[key] = read_content()

    def _remember_fd(self, fd: int) -> None:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode):
            self._remember((st.st_dev, st.st_ino), lambda: _content_of_fd(fd))

    def open(self, path, flags: int, mode: int = 0o777, *, dir_fd=None) -> int:
        if dir_fd is not None:
            raise NotImplementedError("CrashFS does not model dir_fd")
        mutating = flags & (os.O_CREAT | os.O_TRUNC)
        existed = os.path.exists(path)
        if mutating:
            self._operation(f"open {_short(path)} flags={flags:#o}")
            if existed and flags & os.O_TRUNC:
                st = os.stat(path)
                if stat.S_ISREG(st.st_mode):
                    self._remember((st.st_dev, st.st_ino), lambda: _content_of_path(path))
        fd = os.open(path, flags, mode)
        self._open_fds[fd] = str(path)
        if mutating and not existed:
            st = os.fstat(fd)
            self._synced[(st.st_dev, st.st_ino)] = b""  # a new file: nothing of it is durable yet
        return fd

    def write(self, fd: int, data) -> int:
        self._operation(f"write {len(data)} bytes to {self._name(fd)}")
        self._remember_fd(fd)
        return os.write(fd, data)

    def ftruncate(self, fd: int, length: int) -> None:
        self._operation(f"ftruncate {self._name(fd)} to {length}")
        self._remember_fd(fd)
        os.ftruncate(fd, length)

    def fsync(self, fd: int) -> None:
        # No real fsync: durability is what this layer says it is, and real fsyncs would only slow tests.
        self._operation(f"fsync {self._name(fd)}")
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode):
            self._synced[(st.st_dev, st.st_ino)] = _content_of_fd(fd)

    def fdatasync(self, fd: int) -> None:
        self.fsync(fd)

    def rename(self, src, dst, **kwargs) -> None:
        self._operation(f"rename {_short(src)} -> {_short(dst)}")
        os.rename(src, dst, **kwargs)

    def replace(self, src, dst, **kwargs) -> None:
        self._operation(f"replace {_short(src)} -> {_short(dst)}")
        os.replace(src, dst, **kwargs)

    def unlink(self, path, **kwargs) -> None:
        self._operation(f"unlink {_short(path)}")
        os.unlink(path, **kwargs)

    def dup(self, fd: int) -> int:
        new_fd = os.dup(fd)
        self._open_fds[new_fd] = self._open_fds.get(fd, "?")
        return new_fd

    def close(self, fd: int) -> None:
        self._open_fds.pop(fd, None)
        os.close(fd)

    # ---- power loss

    def _lose_unsynced(self, path: str) -> None:
        st = os.stat(path)
        synced = self._synced.get((st.st_dev, st.st_ino))
        if synced is None:
            return  # never changed through the layer
        current = _content_of_path(path)
        if current == synced:
            return
        survivor = synced
        if self.torn_tails is not None and len(current) > len(synced) and current.startswith(synced):
            survivor = current[:len(synced) + self.torn_tails.randrange(len(current) - len(synced) + 1)]
            if self.torn_tails.random() < 0.5:
                # the file's new size reached the disk but not all of its data: the rest reads as zeros
                survivor += bytes(len(current) - len(survivor))
        with open(path, "r+b") as f:  # same inode: descriptors and names stay as they were
            f.truncate(0)
            f.write(survivor)

    def _name(self, fd: int) -> str:
        return _short(self._open_fds.get(fd, f"fd {fd}"))


class _OsProxy:
    """What the storage modules see as `os`: the layer's calls, and the real module for everything else."""

    _INTERCEPTED = ("open", "write", "ftruncate", "fsync", "fdatasync", "rename", "replace", "unlink", "dup", "close")

    def __init__(self, fs: CrashFS):
        for name in self._INTERCEPTED:
            setattr(self, name, getattr(fs, name))

    def __getattr__(self, name: str):
        return getattr(os, name)


def _content_of_fd(fd: int) -> bytes:
    # through /proc, because the descriptor itself may be write-only
    return _content_of_path(f"/proc/self/fd/{fd}")


def _content_of_path(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _short(path) -> str:
    """The last two components of a path: enough to tell files apart in a failure message."""
    head, name = os.path.split(str(path))
    return os.path.join(os.path.basename(head), name)

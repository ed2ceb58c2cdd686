"""LeaderEpochFileCache: which leader epoch wrote which offsets of one partition log (Kafka's
`leader-epoch-checkpoint`).

Entries are (epoch, start offset), strictly increasing in both: the leader of `epoch` wrote the batches
from its start offset up to the next entry's start offset, or to the log end for the latest entry.
Replicas compare these through OffsetForLeaderEpoch to find where their logs diverge (KIP-101, KIP-279).

The file is Kafka's text format: a version line `0`, the entry count, then `epoch startOffset` lines.
Every change is written at once and atomically (checkpoint.write_atomic), as Kafka does on each new epoch.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import os
from collections.abc import Iterable
from typing import NamedTuple

from odradek.storage import checkpoint

log = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CHECKPOINT_VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


def parse_checkpoint(text: str) -> list[EpochEntry]:
    """The entries of a leader-epoch-checkpoint file's text; raises CheckpointError if malformed."""
    lines = text.splitlines()
    try:
        if int(lines[0]) != CHECKPOINT_VERSION:
            raise checkpoint.CheckpointError(f"unsupported version {lines[0]!r}")
        count = int(lines[1])
        entries = []
        for line in lines[2:]:
            epoch, start_offset = line.split()
            entries.append(EpochEntry(int(epoch), int(start_offset)))
    except (IndexError, ValueError) as exc:
        if isinstance(exc, checkpoint.CheckpointError):
            raise
        raise checkpoint.CheckpointError(f"malformed leader epoch checkpoint: {exc}") from None
    if len(entries) != count:
        raise checkpoint.CheckpointError(f"expected {count} entries, found {len(entries)}")
    if entries and (entries[0].epoch < 0 or entries[0].start_offset < 0):
        raise checkpoint.CheckpointError(f"negative entry {entries[0]}")
    for previous, entry in itertools.pairwise(entries):
        if entry.epoch <= previous.epoch or entry.start_offset <= previous.start_offset:
            raise checkpoint.CheckpointError(f"entry {entry} does not follow {previous}")
    return entries


def format_checkpoint(entries: Iterable[tuple[int, int]]) -> bytes:
    entries = list(entries)
    lines = [str(CHECKPOINT_VERSION), str(len(entries)), *(f"{epoch} {start}" for epoch, start in entries)]
    return ("\n".join(lines) + "\n").encode()


class LeaderEpochFileCache:
    """The leader epochs of one partition log, kept in `<partition dir>/leader-epoch-checkpoint`."""

    def __init__(self, directory: str):
        self.path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT)
        self._entries: list[EpochEntry] = []
        # what the file holds: None if it is malformed, so that even an empty cache gets written over it
        self._on_disk: list[EpochEntry] | None = []

    def load(self) -> bool:
        """Read the file; False (and no entries) if it is missing or malformed: the owner then rebuilds the
        entries from its batches with recover()."""
        self._entries = []
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            self._on_disk = []
            return False
        try:
            self._entries = parse_checkpoint(data.decode("utf-8"))
        except (UnicodeDecodeError, checkpoint.CheckpointError) as exc:
            log.warning("ignoring %s (rebuilt from the log): %s", self.path, exc)
            self._on_disk = None
            return False
        self._on_disk = list(self._entries)
        return True

    # ---- reading

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        """The latest epoch, or UNDEFINED_EPOCH (-1) if the cache is empty."""
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch of the entry covering `offset`; UNDEFINED_EPOCH if it lies before the first entry."""
        index = bisect.bisect_right(self._entries, offset, key=lambda entry: entry.start_offset)
        return self._entries[index - 1].epoch if index else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch, as Kafka's LeaderEpochFileCache.endOffsetFor: (epoch, end offset) for the
        largest epoch <= `requested_epoch`, its end being the next epoch's start offset, or the log end
        for the latest epoch. (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET) for an undefined or unknown newer
        epoch or an empty cache. An epoch older than every entry gets (requested epoch, first start
        offset): its data was removed from the log, and a follower must not keep anything past it.
        """
        entries = self._entries
        if requested_epoch == UNDEFINED_EPOCH or not entries or requested_epoch > entries[-1].epoch:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == entries[-1].epoch:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(entries, requested_epoch, key=lambda entry: entry.epoch)
        if higher == 0:
            return requested_epoch, entries[0].start_offset
        return entries[higher - 1].epoch, entries[higher].start_offset

    # ---- changing (each change is written before it returns)

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset` (Kafka's assign): nothing changes for the latest
        epoch at or after its start; otherwise every entry with an epoch >= `epoch` or a start offset
        >= `start_offset` goes first, so entries stay strictly increasing."""
        if self._assign(epoch, start_offset):
            self._flush()

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        entries = self._entries
        if entries and entries[-1].epoch == epoch and entries[-1].start_offset <= start_offset:
            return False
        removed = []
        while entries and (entries[-1].epoch >= epoch or entries[-1].start_offset >= start_offset):
            removed.append(entries.pop())
        if len(removed) > 1 or (removed and removed[0].start_offset != start_offset):
            # an entry at the same start offset is a leader that wrote nothing in its epoch: expected
            log.warning("%s: new epoch entry (%d, %d) removed conflicting entries %s", self.path, epoch,
                        start_offset, removed[::-1])
        entries.append(EpochEntry(epoch, start_offset))
        return True

    def truncate_from_end(self, offset: int) -> None:
        """Drop the entries starting at or after `offset` (the log was truncated to `offset`)."""
        if self._truncate_from_end(offset):
            self._flush()

    def _truncate_from_end(self, offset: int) -> bool:
        keep = bisect.bisect_left(self._entries, offset, key=lambda entry: entry.start_offset)
        if keep == len(self._entries):
            return False
        del self._entries[keep:]
        return True

    def truncate_from_start(self, offset: int) -> None:
        """The log now starts at `offset`: entries before it go, and the one covering it starts there."""
        if self._truncate_from_start(offset):
            self._flush()

    def _truncate_from_start(self, offset: int) -> bool:
        covering = bisect.bisect_right(self._entries, offset, key=lambda entry: entry.start_offset) - 1
        if covering < 0 or (covering == 0 and self._entries[0].start_offset == offset):
            return False
        self._entries[:covering + 1] = [EpochEntry(self._entries[covering].epoch, offset)]
        return True

    def clear_and_flush(self) -> None:
        self._entries = []
        self._flush()

    def recover(self, from_offset: int, batch_epochs: Iterable[tuple[int, int]], log_start_offset: int,
                log_end_offset: int) -> None:
        """Reconcile the entries with a log just opened: those from `from_offset` on are replaced by the
        epochs of the batches there (`(partitionLeaderEpoch, baseOffset)` in log order), then the entries
        are cut to the log's range, as truncate_from_end and truncate_from_start do. The file is written once, if anything changed.

        The file may be behind the log (a crash after a batch's write, before the checkpoint's) or ahead
        of it (a torn tail cut by recovery, unflushed batches lost with the machine).
        """
        self._truncate_from_end(from_offset)
        for epoch, start_offset in batch_epochs:
            # only newer epochs, as Kafka's segment recovery: batches without an epoch (-1) are skipped
            if epoch > self.latest_epoch:
                self._assign(epoch, start_offset)
        self._truncate_from_end(log_end_offset)
        self._truncate_from_start(log_start_offset)
        if self._entries != self._on_disk:
            self._flush()

    def _flush(self) -> None:
        checkpoint.write_atomic(self.path, format_checkpoint(self._entries))
        self._on_disk = list(self._entries)

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({self.path}, {self._entries})"

"""Mirror fetchers: on each node, one task per mirror partition it leads pulls the source partition's log.

The task asks the source cluster (through the link's bootstrap servers, with the link's TLS and SASL
settings) which node leads the partition, then sends it consumer Fetch requests (read_uncommitted, so aborted
transactions and their markers come too) from the mirror's log end, and hands each answer to
`ReplicaManager.append_mirrored`: the batches land at the source's offsets, unchanged. The destination's own
followers replicate the mirror partition from here as any partition. When the source no longer holds the
next offset (its retention passed it), the mirror starts over at the source's log start.

A source partition can also lose records the mirror already holds (an unclean leader election there: the new
leader lacks the old one's tail, and writes new records at those offsets). So whenever the task learns a
source leader epoch it has not checked against (at its start, and at every leader change on the source, which
fences its fetches), it first checks that the mirror's log is a prefix of the source's: the source holds the
mirror's last batch, byte for byte but the leader epoch field. If not, it finds the first batch the source
does not hold (links/divergence.py), truncates the mirror there as a diverged follower truncates, and
appends nothing more until every replica of the mirror partition has fetched from at or below that offset
(ReplicaManager.truncate_mirror_to says why).
"""

from __future__ import annotations

import asyncio
import logging
import time

from odradek.broker.replica_manager import MirrorDiverged
from odradek.links.definition import LINKS_TOPIC, LinkDefinition
from odradek.links.divergence import DivergenceSearch, same_batch
from odradek.network.client import ClientSecurity, UnknownNodeError
from odradek.network.remote_cluster import RemoteCluster
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import read_batch_info, scan_valid_prefix

log = logging.getLogger(__name__)

RECONCILE_INTERVAL_S = 0.5
BACKOFF_S = 1.0
UNDECIDED_BACKOFF_S = 0.2  # the source does not show the batch asked about yet: ask again after this
STALL_CHECK_S = 0.1  # after a truncation: how often to look whether every replica has fetched below it
LINKS_END_TIMEOUT_S = 5.0  # before a truncation: for the links' end offset, and for this node to read up to it


class SourceCluster(RemoteCluster):
    """A link's view of its source cluster, with the link's TLS and SASL settings."""

    def __init__(self, link: LinkDefinition, security: ClientSecurity | None):
        super().__init__(f"odradek-link-{link.name}", link.source_bootstrap, security)
        self.link = link


class MirrorFetchers:
    """Runs a mirror task for every active mirror partition this node leads, and only for those."""

    def __init__(self, node, reader, security_of):
        self.node = node
        self.reader = reader  # a LinkStateReader
        self.security_of = security_of  # LinkDefinition -> ClientSecurity | None (raises ValueError if unusable)
        self.sources: dict[str, SourceCluster] = {}
        self.tasks: dict[tuple[str, int], asyncio.Task] = {}
        # per mirror partition fed here: (link, records behind the source's high watermark, monotonic time it
        # last held everything the source had)
        self.lag: dict[tuple[str, int], tuple[str, int, float]] = {}
        # per mirror partition: (link, how often this node truncated it because its source lost records the
        # mirror held, records dropped in all); kept while the node runs, whoever leads the partition now
        self.truncations: dict[tuple[str, int], tuple[str, int, int]] = {}

    async def run(self) -> None:
        try:
            while True:
                self._reconcile()
                await asyncio.sleep(RECONCILE_INTERVAL_S)
        finally:
            for task in self.tasks.values():
                task.cancel()
            for source in self.sources.values():
                source.close()

    def _reconcile(self) -> None:
        if not self.reader.ready.is_set():  # until it has read every link record: a mirror may be promoted
            return
        with self.reader.lock:
            active = self.reader.state.active_mirrors()
        wanted: dict[tuple[str, int], LinkDefinition] = {}
        for mirror, link in active:
            topic = self.node.image.topics.get(mirror.topic)
            for index in topic.partitions if topic is not None else ():
                partition = self.node.replicas.partitions.get((mirror.topic, index))
                if partition is not None and partition.is_leader:
                    wanted[(mirror.topic, index)] = link
        links = {link.name: link for link in wanted.values()}
        for name, source in list(self.sources.items()):
            if links.get(name) != source.link:  # gone, or redefined: new connections with the new settings
                source.close()
                del self.sources[name]
        for key, task in list(self.tasks.items()):
            if task.done() or key not in wanted or wanted[key].name not in self.sources:
                task.cancel()
                del self.tasks[key]
                self.lag.pop(key, None)
        for key, link in wanted.items():
            if link.name not in self.sources:
                try:
                    self.sources[link.name] = SourceCluster(link, self.security_of(link))
                except ValueError as exc:
                    log.warning("Cluster link %s cannot connect to its source: %s", link.name, exc)
                    continue
            if key not in self.tasks:
                self.tasks[key] = asyncio.get_running_loop().create_task(
                    self._mirror(self.sources[link.name], *key))

    async def _mirror(self, source: SourceCluster, topic: str, index: int) -> None:
        replicas = self.node.replicas
        leader = epoch = None
        checked_epoch = None  # the source leader epoch the mirror's log was last found a prefix of the source's in
        while True:
            try:
                if leader is None:
                    leader, epoch, _ = await source.leader_of(topic, index)
                if checked_epoch != epoch:
                    if not await self._check_prefix(source, leader, epoch, topic, index):
                        await asyncio.sleep(UNDECIDED_BACKOFF_S)
                        continue
                    checked_epoch = epoch
                if not replicas.mirror_replicas_truncated(topic, index):
                    await replicas.wait_for_data([(topic, index)], STALL_CHECK_S)
                    continue
                log_end = replicas.partition(topic, index).log.log_end_offset
                data = await source.fetch(leader, topic, index, log_end, epoch)
                error = ErrorCode(data["error_code"])
                if error == ErrorCode.NONE:
                    with self.reader.lock:  # promoted while the fetch was out: nothing more is appended
                        if self.reader.state.read_only(topic) is None:
                            return
                    appended = replicas.append_mirrored(topic, index, data["records"], data["log_start_offset"])
                    self._record_lag(source.link.name, topic, index, max(0, data["high_watermark"] - appended))
                    if appended > log_end or not data["records"]:
                        continue
                    log.warning("Mirror %s-%d: the source's answer at offset %d holds nothing to append",
                                topic, index, log_end)
                else:
                    if error == ErrorCode.OFFSET_OUT_OF_RANGE:
                        earliest = await source.earliest_offset(leader, topic, index, epoch)
                        if log_end < earliest:
                            log.info("Mirror %s-%d starts over at the source's log start %d", topic, index,
                                     earliest)
                            replicas.restart_mirror_at(topic, index, earliest)
                            continue
                        checked_epoch = None  # the source's log ends below the mirror's: check it again
                    log.info("Mirror %s-%d: the source answered %s", topic, index, error.name)
            except MirrorDiverged as exc:  # the source's batches do not line up with the mirror's: check again
                log.info("Mirror %s-%d: %s", topic, index, exc)
                checked_epoch = None
            except (ConnectionError, TimeoutError, UnknownNodeError) as exc:
                log.debug("Mirror %s-%d: the source is unreachable: %s", topic, index, exc)
            except KafkaError as exc:
                if exc.code == ErrorCode.NOT_LEADER_OR_FOLLOWER and not self._leads(topic, index):
                    return  # this node no longer leads the mirror partition
                log.info("Mirror %s-%d: %s", topic, index, exc)
            except Exception:  # an answer it cannot use (an error code it does not know): it tries again
                log.exception("Mirror %s-%d failed", topic, index)
            leader = None  # ask the source's metadata again
            await asyncio.sleep(BACKOFF_S)

    async def _check_prefix(self, source: SourceCluster, leader: int, epoch: int, topic: str, index: int) -> bool:
        """Make the mirror's log a prefix of the source partition's as its leader `leader` holds it in `epoch`:
        check that the source holds the mirror's last batch, and if not, find the first batch it does not hold
        and truncate the mirror there. False when the source cannot tell yet (it does not show a batch asked
        about, but its log reaches past it: its high watermark is behind): ask again later."""
        replicas = self.node.replicas
        partition = replicas.partition(topic, index)
        leading = (partition.log, partition.leader_epoch)
        search = DivergenceSearch(partition.log.log_start_offset, partition.log.log_end_offset)
        while (offset := search.next_offset()) is not None:
            batch = replicas.mirror_batch_at(topic, index, offset)
            info = read_batch_info(batch) if batch is not None else None
            if info is None or info.base_offset >= search.limit:
                search.no_batch_from(offset)
                continue
            held = await self._source_holds(source, leader, epoch, topic, index, batch, info.base_offset,
                                            info.next_offset)
            if held is None:
                log.debug("Mirror %s-%d: the source's leader %d does not show offset %d yet (epoch %d)", topic,
                          index, leader, info.base_offset, epoch)
                return False
            search.record(info.base_offset, info.next_offset, held)
        partition = replicas.partition(topic, index)
        log_ = partition.log
        if (log_, partition.leader_epoch, log_.log_start_offset, log_.log_end_offset) != (
                *leading, search.start, search.end):
            return False  # the log moved meanwhile (its retention, a leadership lost and won back): search again
        if search.diverged:
            # A promoted mirror is an ordinary topic whose records are its own: truncate only on a view of the
            # links that is known to be current (this node's reader may lag), or not yet.
            if not await self._links_read_to_end():
                return False
            with self.reader.lock:
                link = self.reader.state.read_only(topic)
            if link is None:
                return True
            dropped = replicas.truncate_mirror_to(topic, index, search.divergence)
            _, count, total = self.truncations.get((topic, index), (link, 0, 0))
            self.truncations[(topic, index)] = (link, count + 1, total + dropped)
            log.warning("Mirror %s-%d of cluster link %s: the source partition (leader %d, epoch %d) no longer "
                        "holds the mirror's records from offset %d on (an unclean leader election there): "
                        "truncated the mirror to offset %d, dropping %d records (offsets %d to %d); appending "
                        "again once every replica has truncated too", topic, index, link, leader, epoch,
                        search.divergence, search.divergence, dropped, search.divergence, search.end - 1)
        elif search.end > search.start:
            log.debug("Mirror %s-%d: the source (leader %d, epoch %d) holds the mirror's log up to %d after %d "
                      "question(s)", topic, index, leader, epoch, search.end, search.probes)
        return True

    async def _links_read_to_end(self) -> bool:
        """Whether this node has applied `__cluster_links` up to its end as of now (waiting a little for it)."""
        try:
            end = await asyncio.to_thread(self.reader.end_offset, LINKS_END_TIMEOUT_S)
        except Exception as exc:  # the topic does not answer: no decision on a view that may be old
            log.info("Cannot tell how far %s goes: %s", LINKS_TOPIC, exc)
            return False
        deadline = time.monotonic() + LINKS_END_TIMEOUT_S
        while self.reader.applied_position < end:
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    async def _source_holds(self, source: SourceCluster, leader: int, epoch: int, topic: str, index: int,
                            batch: bytes, base_offset: int, next_offset: int) -> bool | None:
        """Whether the source holds the mirror's `batch` [base_offset, next_offset); None if it cannot tell
        yet. Raises KafkaError for an answer that needs the source's metadata again (its leader changed)."""
        data = await source.fetch(leader, topic, index, base_offset, epoch, max_bytes=1, wait_ms=0)
        error = ErrorCode(data["error_code"])
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            earliest = await source.earliest_offset(leader, topic, index, epoch)
            if next_offset <= earliest:
                # wholly below the source's log start (its retention): nothing to compare with, and what is gone
                # there cannot differ from the rest, so it counts as held
                return True
            if base_offset >= earliest:
                return False  # past the source's log end
            # the source's log starts inside the batch: what it holds from there on must be this batch
            data = await source.fetch(leader, topic, index, earliest, epoch, max_bytes=1, wait_ms=0)
            error = ErrorCode(data["error_code"])
            if error == ErrorCode.OFFSET_OUT_OF_RANGE:
                return False
        if error != ErrorCode.NONE:
            raise KafkaError(error, f"fetch at offset {base_offset} from source node {leader}")
        records = memoryview(data["records"] or b"")
        infos, _ = scan_valid_prefix(records)
        if infos:  # the source's batch holding base_offset, or the first after it
            compacted = self.node.replicas.partition(topic, index).log.config.compact
            if compacted and infos[0].base_offset >= next_offset:
                return True  # the source's cleaner removed the whole batch
            return same_batch(batch, records[infos[0].position:infos[0].end], compacted=compacted)
        # the source shows nothing there: its high watermark is at or below base_offset. Its log ends before
        # the batch does (its end is out of range), or it may yet show the batch.
        data = await source.fetch(leader, topic, index, next_offset, epoch, max_bytes=1, wait_ms=0)
        error = ErrorCode(data["error_code"])
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            return False
        if error != ErrorCode.NONE:
            raise KafkaError(error, f"fetch at offset {next_offset} from source node {leader}")
        return None

    def _record_lag(self, link: str, topic: str, index: int, records: int) -> None:
        now = time.monotonic()
        caught_up = now if records == 0 else self.lag.get((topic, index), (link, 0, now))[2]
        self.lag[(topic, index)] = (link, records, caught_up)

    def lag_seconds(self, topic: str, index: int) -> float:
        """How long the mirror partition has been behind the source (0 while it is caught up)."""
        _, records, caught_up = self.lag[(topic, index)]
        return 0.0 if records == 0 else time.monotonic() - caught_up

    def _leads(self, topic: str, index: int) -> bool:
        partition = self.node.replicas.partitions.get((topic, index))
        return partition is not None and partition.is_leader

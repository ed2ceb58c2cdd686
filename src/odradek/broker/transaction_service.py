"""TransactionService: runs the sans-I/O transaction coordinator inside the node.

The coordinator of a transactional id is the leader of its `__transaction_state` partition; its epoch is
that partition's leader epoch, carried in every marker so partitions can fence a deposed coordinator. Each
transit the core prepares is written to the partition and only adopted once every in-sync replica has it.
After a Prepare state is durable, markers go to the leaders of the transaction's partitions (WriteTxnMarkers,
or a direct append when this node leads the partition), retried until written, and then the Complete state
is written. A node that comes to lead a partition replays it and finishes the markers of transactions it
finds prepared; a timer aborts transactions older than their timeout.
"""

from __future__ import annotations

import asyncio
import logging

from odradek.broker.handlers.transactions import write_markers
from odradek.broker.replica_manager import now_ms
from odradek.coordinator.transactions import (
    EndMarkers,
    Fence,
    NeedProducerId,
    TransactionCoordinator,
    Transit,
    encode_key,
    encode_value,
)
from odradek.network.client import NodeClients
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import build_batch

log = logging.getLogger(__name__)

TRANSACTION_TOPIC = "__transaction_state"
ADD_PARTITIONS_TO_TXN = 24
WRITE_TXN_MARKERS = 27
VERIFY_TIMEOUT_S = 5.0
# What a producer (Produce v10 and older) gets for the coordinator's verification answers (Kafka's
# AddPartitionsToTxnManager and ReplicaManager): passing trouble is retriable NOT_ENOUGH_REPLICAS.
PRODUCE_VERIFY_ERRORS = {
    ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.TRANSACTION_ABORTABLE: ErrorCode.INVALID_TXN_STATE,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: ErrorCode.INVALID_TXN_STATE,
    ErrorCode.NETWORK_EXCEPTION: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_COORDINATOR: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.CONCURRENT_TRANSACTIONS: ErrorCode.NOT_ENOUGH_REPLICAS,
}
# What a TxnOffsetCommit gets for them (Kafka's AddPartitionsToTxnManager, then its group coordinator's
# operation error mapping); TRANSACTION_ABORTABLE only from version 4, INVALID_TXN_STATE before.
TXN_OFFSET_COMMIT_VERIFY_ERRORS = {
    ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: ErrorCode.INVALID_TXN_STATE,
    ErrorCode.NETWORK_EXCEPTION: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
}
TXN_OFFSET_COMMIT_ABORTABLE_VERSION = 4
WRITE_TIMEOUT_S = 5.0
MARKER_RETRY_S = 0.1
MARKER_REQUEST_TIMEOUT_S = 30.0


class TransactionService:
    def __init__(self, node):
        self.node = node
        config = node.config
        self.core = TransactionCoordinator(num_partitions=config["transaction.state.log.num.partitions"],
                                           max_timeout_ms=config["transaction.max.timeout.ms"])
        self._loaded: set[int] = set()
        self.clients = NodeClients(f"odradek-txn-markers-{node.node_id}", security=node.inter_broker_security)
        self._tasks: set[asyncio.Task] = set()
        self._timers: list[asyncio.Task] = []

    # ---- lifecycle

    def start(self) -> None:
        topic = self.node.image.topics.get(TRANSACTION_TOPIC)
        if topic is not None:
            for index in sorted(topic.partitions):
                self.on_leadership(index)
        self._timers = [asyncio.create_task(self._abort_timed_out()), asyncio.create_task(self._remove_expired())]

    def stop(self) -> None:
        for timer in self._timers:
            timer.cancel()
        for task in list(self._tasks):
            task.cancel()
        self.clients.close()

    def leads(self, index: int) -> bool:
        partition = self.node.replicas.partitions.get((TRANSACTION_TOPIC, index))
        return partition is not None and partition.is_leader and not self.node.log_manager.is_offline(
            TRANSACTION_TOPIC, index)

    def coordinator_epoch(self, index: int) -> int:
        return self.node.replicas.partitions[(TRANSACTION_TOPIC, index)].leader_epoch

    def on_leadership(self, index: int) -> None:
        """Load a partition's transactional ids when this node comes to lead it; drop them when it does not."""
        if self.leads(index):
            if index not in self._loaded:
                self._loaded.add(index)
                for markers in self.core.load(index, self._read_partition(index)):
                    self._spawn(self._finish(markers, index))
        elif index in self._loaded:
            self._loaded.discard(index)
            self.core.unload(index)

    def _read_partition(self, index: int):
        partition_log = self.node.log_manager.get(TRANSACTION_TOPIC, index)
        if partition_log is None:
            return
        for _, batch in partition_log.replay():
            yield from ((bytes(r.key), None if r.value is None else bytes(r.value)) for r in batch if r.key is not None)

    async def ensure_topic(self) -> bool:
        """Create `__transaction_state` when a producer first looks for its coordinator, as Kafka does."""
        if TRANSACTION_TOPIC in self.node.image.topics:
            return True
        config = self.node.config
        replication = min(config["transaction.state.log.replication.factor"], len(self.node.image.live_brokers))
        configs = {"cleanup.policy": "compact", "compression.type": "producer",
                   "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
                   "min.insync.replicas": str(min(config["transaction.state.log.min.isr"], replication))}
        response = await self.node.controller_channel.request(19, 7, {"topics": [{
            "name": TRANSACTION_TOPIC, "num_partitions": self.core.num_partitions, "replication_factor": replication,
            "assignments": [], "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
            "timeout_ms": 30000, "validate_only": False})
        error = response["topics"][0]["error_code"]
        if error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            log.error("Cannot create %s: %s", TRANSACTION_TOPIC, response["topics"][0]["error_message"])
            return False
        return TRANSACTION_TOPIC in self.node.image.topics

    # ---- requests

    def check_coordinator(self, transactional_id: str) -> int:
        index = self.core.partition_for(transactional_id)
        if TRANSACTION_TOPIC not in self.node.image.topics or not self.leads(index):
            raise KafkaError(ErrorCode.NOT_COORDINATOR, f"this node is not the coordinator of {transactional_id!r}")
        if index not in self._loaded:
            raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, f"{transactional_id!r} is being loaded")
        return index

    async def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int,
                               producer_epoch: int) -> tuple[int, int]:
        self.core.check_timeout(timeout_ms)  # before the coordinator, as Kafka answers it
        index = self.check_coordinator(transactional_id)
        new_producer_id = None
        while True:
            result = self.core.prepare_init(transactional_id, timeout_ms, producer_id, producer_epoch, now_ms(),
                                            new_producer_id)
            if not isinstance(result, NeedProducerId):
                break
            new_producer_id = await self.node.producer_ids.next_id()
            self.check_coordinator(transactional_id)
        if isinstance(result, Fence):
            markers = await self._write(result.abort, index)
            self._spawn(self._finish(markers, index))
            raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS,
                             f"aborting the open transaction of {transactional_id!r} of an older producer")
        await self._write(result, index)
        return result.producer_id, result.producer_epoch

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: set[tuple[str, int]]) -> None:
        index = self.check_coordinator(transactional_id)
        transit = self.core.prepare_add_partitions(transactional_id, producer_id, producer_epoch, partitions,
                                                   now_ms())
        if transit is not None:
            await self._write(transit, index)

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """A partition leader's check, before a producer's first transactional write to the partitions, that
        they are in its ongoing transaction; errors as a producer should see them."""
        errors = await self._verify_at_coordinator(transactional_id, producer_id, producer_epoch, partitions)
        return {p: PRODUCE_VERIFY_ERRORS.get(error, error) for p, error in errors.items()}

    async def verify_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             offsets_partition: tuple[str, int], version: int) -> ErrorCode:
        """The group coordinator's check, before a producer's first TxnOffsetCommit to a group's offsets
        partition, that AddOffsetsToTxn put that partition in its ongoing transaction; the error as the
        committer should see it."""
        errors = await self._verify_at_coordinator(transactional_id, producer_id, producer_epoch,
                                                   [offsets_partition])
        error = errors.get(offsets_partition, ErrorCode.NONE)
        if error == ErrorCode.TRANSACTION_ABORTABLE and version < TXN_OFFSET_COMMIT_ABORTABLE_VERSION:
            return ErrorCode.INVALID_TXN_STATE
        error = TXN_OFFSET_COMMIT_VERIFY_ERRORS.get(error, error)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and version < 2:  # older clients do not retry it
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return error

    async def _verify_at_coordinator(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                     partitions: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        image = self.node.image
        topic = image.topics.get(TRANSACTION_TOPIC)
        coordinator = topic.partitions.get(self.core.partition_for(transactional_id)) if topic else None
        if coordinator is None or coordinator.leader < 0:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if coordinator.leader == self.node.node_id:
            return self.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
        by_topic: dict[str, list[int]] = {}
        for name, index in partitions:
            by_topic.setdefault(name, []).append(index)
        request = {"transactions": [{
            "transactional_id": transactional_id, "producer_id": producer_id, "producer_epoch": producer_epoch,
            "verify_only": True, "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()]}]}
        try:
            if not self._locate(coordinator.leader):
                return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            response = await self.clients.request(coordinator.leader, ADD_PARTITIONS_TO_TXN, 4, request,
                                                  VERIFY_TIMEOUT_S)
        except (TimeoutError, OSError, KafkaError):
            return dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)
        errors = dict.fromkeys(partitions, ErrorCode(response["error_code"]) if response["error_code"] else
                               ErrorCode.UNKNOWN_SERVER_ERROR)
        for txn in response["results_by_transaction"]:
            for result in txn["topic_results"]:
                for p in result["results_by_partition"]:
                    errors[(result["name"], p["partition_index"])] = ErrorCode(p["partition_error_code"])
        return errors

    def _locate(self, node_id: int) -> bool:
        endpoint = self.node.inter_broker_endpoint(node_id)
        if endpoint is None:
            return False
        self.clients.set_endpoint(node_id, *endpoint)
        return True

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        try:
            self.check_coordinator(transactional_id)
        except KafkaError as exc:
            return dict.fromkeys(partitions, exc.code)
        return self.core.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> None:
        index = self.check_coordinator(transactional_id)
        transit = self.core.prepare_end(transactional_id, producer_id, producer_epoch, commit, now_ms())
        if transit is None:
            return
        markers = await self._write(transit, index)
        self._spawn(self._finish(markers, index))

    # ---- writing state and markers

    async def _write(self, transit: Transit, index: int) -> EndMarkers | None:
        """Write a transit to the id's partition; once replicated it is adopted (and its markers returned)."""
        self.core.begin(transit)
        try:
            ok = await self._append(index, [(encode_key(transit.transactional_id), encode_value(transit))])
        except BaseException:
            self.core.abandon(transit)
            raise
        if not ok or not self.leads(index):
            self.core.abandon(transit)
            raise KafkaError(ErrorCode.NOT_COORDINATOR, f"could not write the state of {transit.transactional_id!r}")
        return self.core.complete(transit)

    async def _append(self, index: int, records: list[tuple[bytes, bytes | None]]) -> bool:
        batch = bytearray(build_batch([(key, value, []) for key, value in records]))
        result = self.node.replicas.append(TRANSACTION_TOPIC, index, memoryview(batch), -1)
        if result.error != ErrorCode.NONE:
            log.warning("Writing transaction state to %s-%d failed: %s %s", TRANSACTION_TOPIC, index,
                        result.error.name, result.message or "")
            return False
        error = await self.node.replicas.wait_for_replication(TRANSACTION_TOPIC, index, result.last_offset,
                                                              result.leader_epoch, WRITE_TIMEOUT_S)
        return error == ErrorCode.NONE

    def _spawn(self, coroutine) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _finish(self, markers: EndMarkers | None, index: int) -> None:
        """Write the markers of a prepared transaction until every partition has one, then complete it."""
        if markers is None:
            return
        remaining = set(markers.partitions)
        try:
            while remaining and self.leads(index) and index in self._loaded:
                remaining = await self._send_markers(markers, remaining, self.coordinator_epoch(index))
                if remaining:
                    await asyncio.sleep(MARKER_RETRY_S)
            if remaining:
                return  # no longer the coordinator: the next one finishes from the Prepare state it loads
            transit = self.core.prepare_complete(markers.transactional_id, now_ms())
            if transit is not None:
                await self._write(transit, index)
        except KafkaError as exc:
            log.info("Completing the transaction of %r stopped: %s", markers.transactional_id, exc)
        except Exception:
            log.exception("Completing the transaction of %r failed", markers.transactional_id)

    async def _send_markers(self, markers: EndMarkers, partitions: set[tuple[str, int]],
                            coordinator_epoch: int) -> set[tuple[str, int]]:
        """One round of marker writes; returns the partitions still without their marker."""
        image = self.node.image
        by_leader: dict[int, list[tuple[str, int]]] = {}
        remaining = set()
        for topic, index in partitions:
            partition = image.topics.get(topic).partitions.get(index) if topic in image.topics else None
            if partition is None:
                continue  # the topic is gone: nothing to mark
            if partition.leader < 0:
                remaining.add((topic, index))
            else:
                by_leader.setdefault(partition.leader, []).append((topic, index))
        results = await asyncio.gather(*(self._markers_to(leader, markers, group, coordinator_epoch)
                                         for leader, group in by_leader.items()))
        for failed in results:
            remaining |= failed
        return remaining

    async def _markers_to(self, leader: int, markers: EndMarkers, partitions: list[tuple[str, int]],
                          coordinator_epoch: int) -> set[tuple[str, int]]:
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        request = {"markers": [{
            "producer_id": markers.producer_id, "producer_epoch": markers.producer_epoch,
            "transaction_result": markers.commit, "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": topic, "partition_indexes": indexes} for topic, indexes in by_topic.items()]}]}
        try:
            if leader == self.node.node_id:
                response = await write_markers(self.node, request)
            else:
                if not self._locate(leader):
                    return set(partitions)
                response = await self.clients.request(leader, WRITE_TXN_MARKERS, 1, request, MARKER_REQUEST_TIMEOUT_S)
        except (TimeoutError, OSError, KafkaError) as exc:
            log.debug("Markers to node %d failed: %s", leader, exc)
            return set(partitions)
        failed = set()
        for topic in response["markers"][0]["topics"]:
            for p in topic["partitions"]:
                error = p["error_code"]
                if error in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                    continue
                if error in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED):
                    # the partition has seen a newer producer epoch or coordinator: this marker is moot
                    log.warning("Marker for %s-%d of %r refused: %s", topic["name"], p["partition_index"],
                                markers.transactional_id, ErrorCode(error).name)
                    continue
                failed.add((topic["name"], p["partition_index"]))
        return failed

    async def _abort_timed_out(self) -> None:
        interval = self.node.config["transaction.abort.timed.out.transaction.cleanup.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            due = [t for t in self.core.timed_out(now_ms()) if self.leads(self.core.partition_for(t.transactional_id))]
            for transit in due:
                self.core.begin(transit)  # busy from now: no request slips in before its abort is written
            for transit in due:
                index = self.core.partition_for(transit.transactional_id)
                log.info("Aborting the transaction of %r: older than its timeout of %d ms",
                         transit.transactional_id, transit.timeout_ms)
                try:
                    markers = await self._write(transit, index)
                except KafkaError as exc:
                    log.info("Aborting the timed-out transaction of %r failed: %s", transit.transactional_id, exc)
                    continue
                self._spawn(self._finish(markers, index))

    async def _remove_expired(self) -> None:
        """Forget transactional ids unused for `transactional.id.expiration.ms`: a tombstone each."""
        config = self.node.config
        interval = config["transaction.remove.expired.transaction.cleanup.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            due = [t for t in self.core.expired(now_ms(), config["transactional.id.expiration.ms"])
                   if self.leads(self.core.partition_for(t.transactional_id))]
            for transit in due:
                self.core.begin(transit)
            for transit in due:
                index = self.core.partition_for(transit.transactional_id)
                if await self._append(index, [(encode_key(transit.transactional_id), None)]):
                    self.core.remove(transit)
                    log.info("Removed transactional id %r: unused for %d ms", transit.transactional_id,
                             config["transactional.id.expiration.ms"])
                else:
                    self.core.abandon(transit)

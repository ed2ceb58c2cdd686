"""The cluster as the console reaches it: a Kafka client like any other, one per logged-in identity.

confluent-kafka (librdkafka) does the work: the admin client for topics, configs, groups, offsets, ACLs and
users; a producer for the produce form; a few consumers that never join a group for the message browser.
Their blocking calls run on a small thread pool and admin futures are awaited without blocking, because the
console may share its event loop with a node. For the APIs librdkafka has no call for (DescribeQuorum,
DescribeLogDirs, ListPartitionReassignments, ListTransactions, DescribeTransactions, DescribeProducers, and
DescribeConfigs asked of each broker at once) the
console sends the requests itself over Odradek's protocol client (`network.client.NodeConnection`, the
CLI's too), logged in with the same credentials. Clients are made on first use, so a console nobody opens
costs the cluster nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

from odradek.console.messages import Record, Window
from odradek.console.sampler import Sampler
from odradek.console.settings import ConsoleSettings

CLIENT_ID = "odradek-console"
BROWSE_GROUP = "odradek-console-browser"  # librdkafka wants a group id; the browser's consumers never join it
IDLE_CONSUMERS = 2
READ_POLL_S = 0.1
# A browse consumer's fetch at the end of a partition waits this long on the broker, and a read that follows
# on the same consumer waits for it to come back first: short, for pages that read, not tail, the log.
BROWSE_FETCH_WAIT_MS = 10
API_VERSIONS, METADATA, DESCRIBE_LOG_DIRS, LIST_REASSIGNMENTS, DESCRIBE_QUORUM = 18, 3, 35, 46, 55
FIND_COORDINATOR, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 10, 61, 65, 66
TRANSACTION_KEY_TYPE = 1
LIST_OFFSETS, LATEST, EARLIEST = 2, -1, -2
DESCRIBE_ACLS = 29
DESCRIBE_CONFIGS, BROKER_RESOURCE = 32, 4

TopicPartitionKey = tuple[str, int]


class ConsoleError(Exception):
    """Something the person should read: what failed and the cluster's reason, in one line; `code` is Kafka's
    error name when the cluster gave one."""

    def __init__(self, text: str, code: str | None = None):
        super().__init__(text)
        self.code = code


def kafka_reason(exc: BaseException) -> str:
    """The human part of a librdkafka error (no 'KafkaError{...}' wrapping), or the exception's text."""
    err = exc.args[0] if exc.args else None
    if hasattr(err, "str") and callable(err.str):
        return err.str().rstrip(".")
    return str(exc) or type(exc).__name__


def error_name(code: int) -> str:
    from odradek.protocol.errors import ErrorCode

    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def error_code(exc: BaseException) -> int | None:
    err = exc.args[0] if exc.args else None
    return err.code() if hasattr(err, "code") and callable(err.code) else None


@dataclass(frozen=True)
class LogDirInfo:
    broker: int
    path: str
    error: str | None
    total_bytes: int
    usable_bytes: int
    size: int  # bytes of the replicas in it


class RawCluster:
    """Requests librdkafka has no call for, sent over NodeConnection with the client's TLS and SASL; versions
    are negotiated with ApiVersions once per broker."""

    def __init__(self, bootstrap: str, properties: Mapping[str, str], timeout_s: float):
        from odradek.cli.connection import client_security
        from odradek.cli.main import CliError

        try:
            self.security = client_security(properties)
        except CliError as exc:
            raise ConsoleError(str(exc)) from None
        self.client_id = properties.get("client.id") or CLIENT_ID
        self.bootstrap = [_address(s) for s in bootstrap.split(",") if s.strip()]
        self.timeout_s = timeout_s
        self._connections: dict = {}
        self._versions: dict[tuple[str, int], dict[int, tuple[int, int]]] = {}
        self.brokers: dict[int, tuple[str, int]] = {}

    def _connection(self, address: tuple[str, int]):
        from odradek.network.client import NodeConnection

        connection = self._connections.get(address)
        if connection is None:
            connection = self._connections[address] = NodeConnection(
                *address, client_id=self.client_id, connect_timeout_s=self.timeout_s, security=self.security)
        return connection

    async def _send(self, address: tuple[str, int], key: int, version: int, body: dict) -> dict:
        try:
            return await self._connection(address).request(key, version, body, self.timeout_s)
        except ConnectionError as exc:
            raise ConsoleError(str(exc)) from None
        except OSError as exc:  # TimeoutError
            raise ConsoleError(f"{address[0]}:{address[1]} did not answer: {exc}") from None

    async def request(self, address: tuple[str, int], key: int, body: dict) -> dict:
        """`body` sent with the highest version both sides know."""
        from odradek.protocol.messages import API_BY_KEY

        versions = self._versions.get(address)
        if versions is None:
            answer = await self._send(address, API_VERSIONS, 3, {"client_software_name": "odradek-console",
                                                                  "client_software_version": "1"})
            versions = self._versions[address] = {a["api_key"]: (a["min_version"], a["max_version"])
                                                  for a in answer["api_keys"]}
        api = API_BY_KEY[key]
        ours = api.valid_versions
        theirs = versions.get(key)
        if theirs is None or theirs[1] < ours[0] or theirs[0] > ours[1]:
            raise ConsoleError(f"{address[0]}:{address[1]} does not support {api.name} "
                               f"(versions {ours[0]}–{ours[1]})")
        return await self._send(address, key, min(ours[1], theirs[1]), body)

    async def metadata(self, topics: list[str] | None = None) -> dict:
        """Metadata from the first bootstrap server that answers; `brokers` then holds every broker's address."""
        body = {"topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
        failure = None
        for address in self.bootstrap:
            try:
                response = await self.request(address, METADATA, body)
            except ConsoleError as exc:
                if "authentication" in str(exc) or "SASL" in str(exc):
                    raise
                failure = exc
                continue
            self.brokers = {b["node_id"]: (b["host"], b["port"]) for b in response["brokers"]}
            return response
        raise ConsoleError(f"cannot reach {', '.join(f'{h}:{p}' for h, p in self.bootstrap)}: {failure}")

    async def any_broker(self) -> tuple[str, int]:
        if not self.brokers:
            await self.metadata([])
        return next(iter(sorted(self.brokers.items())))[1]

    async def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit():
        raise ConsoleError(f"expected HOST:PORT, got {text.strip()!r}")
    return host.strip("[]"), int(port)


class ClusterClient:
    """One identity's clients of the cluster (the console's own, or a logged-in user's)."""

    def __init__(self, settings: ConsoleSettings, properties: Mapping[str, str], executor: Executor,
                 user: str | None = None):
        self.settings = settings
        self.properties = dict(properties)
        self.executor = executor
        self.user = user
        self.timeout_s = settings.timeout_s
        self.raw = RawCluster(settings.bootstrap, self.properties, settings.timeout_s)
        self.sampler = Sampler(self, settings.sample_interval_s)
        self._admin = None
        self._producer = None
        self._consumers: list = []
        self._metadata = None
        self._metadata_at = 0.0
        self._metadata_lock = asyncio.Lock()
        self._leaders_lock = asyncio.Lock()
        self._leader_map: dict[TopicPartitionKey, int] = {}
        self._leader_topics: set[str] = set()
        self._leaders_at = 0.0
        self.last_client_error: str | None = None

    # -----------------------------------------------------------------------------------------------
    # Plumbing

    def _config(self, extra: Mapping[str, object] | None = None) -> dict:
        config: dict = {
            "bootstrap.servers": self.settings.bootstrap,
            "client.id": CLIENT_ID,
            "socket.connection.setup.timeout.ms": max(1000, int(self.timeout_s * 1000)),
            "log.connection.close": False,
            "log_level": 0,
            "error_cb": self._client_error,
        }
        config.update(self.properties)
        config.update(extra or {})
        return config

    def _client_error(self, err) -> None:
        self.last_client_error = kafka_reason(Exception(err))

    async def _thread(self, function, *args):
        return await asyncio.get_running_loop().run_in_executor(self.executor, function, *args)

    async def run_blocking(self, function, *args):
        """`function` on the console's worker threads (a scan that reads records through `read_blocking`)."""
        return await self._thread(function, *args)

    async def _result(self, future, action: str):
        from confluent_kafka import KafkaException

        try:
            return await asyncio.wrap_future(future)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            code = err.name() if hasattr(err, "name") and callable(err.name) else None
            raise ConsoleError(f"{action}: {kafka_reason(exc)}", code) from None

    def admin(self):
        if self._admin is None:
            from confluent_kafka import KafkaException
            from confluent_kafka.admin import AdminClient

            try:
                self._admin = AdminClient(self._config())
            except (KafkaException, ValueError, TypeError) as exc:
                raise ConsoleError(f"invalid client configuration: {kafka_reason(exc)}") from None
        return self._admin

    async def close(self) -> None:
        await self.sampler.stop()
        await self.raw.close()
        consumers, self._consumers = self._consumers, []
        producer, self._producer = self._producer, None
        self._admin = None

        def close_clients():
            for consumer in consumers:
                consumer.close()
            if producer is not None:
                producer.flush(1)

        if consumers or producer is not None:
            await self._thread(close_clients)

    # -----------------------------------------------------------------------------------------------
    # Cluster and topics

    async def metadata(self, max_age_s: float = 2.0):
        """Every topic's metadata (librdkafka's ClusterMetadata), at most `max_age_s` old."""
        from confluent_kafka import KafkaException

        async with self._metadata_lock:
            if self._metadata is not None and time.monotonic() - self._metadata_at <= max_age_s:
                return self._metadata
            admin = self.admin()
            try:
                metadata = await self._thread(lambda: admin.list_topics(timeout=self.timeout_s))
            except KafkaException as exc:
                reason = kafka_reason(exc)
                if self.last_client_error and "timed out" in reason.lower():
                    reason = f"{reason} ({self.last_client_error})"
                raise ConsoleError(f"cannot fetch the cluster's metadata: {reason}") from None
            self._metadata, self._metadata_at = metadata, time.monotonic()
            return metadata

    def forget_metadata(self) -> None:
        self._metadata = None

    async def describe_cluster(self):
        return await self._result(self.admin().describe_cluster(request_timeout=self.timeout_s),
                                  "cannot describe the cluster")

    async def offsets(self, partitions: Sequence[TopicPartitionKey], spec: str | int) -> dict[TopicPartitionKey, int | None]:
        """Per partition: 'earliest' (log start), 'latest' (high watermark) or the first offset at or after a
        timestamp (None when no record is that new, or the partition did not answer).

        One ListOffsets per leader, sent by the console itself: librdkafka's list_offsets keeps a future per
        partition and takes seconds for 10,000 partitions where the request takes a tenth of one."""
        if not partitions:
            return {}
        timestamp = LATEST if spec == "latest" else EARLIEST if spec == "earliest" else int(spec)
        leaders = await self._leaders({t for t, _ in partitions})
        by_leader: dict[int, dict[str, list[int]]] = {}
        found: dict[TopicPartitionKey, int | None] = {tp: None for tp in partitions}
        for topic, partition in partitions:
            leader = leaders.get((topic, partition), -1)
            if leader >= 0:
                by_leader.setdefault(leader, {}).setdefault(topic, []).append(partition)

        async def ask(leader: int, topics: dict[str, list[int]]) -> None:
            address = self.raw.brokers.get(leader)
            if address is None:
                return
            body = {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": t, "partitions": [{"partition_index": p, "timestamp": timestamp} for p in ps]}
                for t, ps in topics.items()]}
            try:
                response = await self.raw.request(address, LIST_OFFSETS, body)
            except ConsoleError:
                return
            stale = False
            for t in response["topics"]:
                for p in t["partitions"]:
                    if p["error_code"]:
                        stale = True
                    elif p["offset"] >= 0:
                        found[(t["name"], p["partition_index"])] = p["offset"]
            if stale:
                self._leaders_at = 0.0  # a leader moved, maybe: ask Metadata again next time

        await asyncio.gather(*(ask(leader, topics) for leader, topics in by_leader.items()))
        return found

    async def _leaders(self, topics: set[str]) -> dict[TopicPartitionKey, int]:
        """Each partition's leader, from a Metadata at most 2 s old (with every topic asked about)."""
        async with self._leaders_lock:
            if time.monotonic() - self._leaders_at > 2.0 or not topics <= self._leader_topics:
                asked = sorted(topics | (self._leader_topics if len(self._leader_topics) < 1000 else set()))
                response = await self.raw.metadata(asked)
                self._leader_map = {(t["name"], p["partition_index"]): p["leader_id"]
                                    for t in response["topics"] if not t["error_code"] for p in t["partitions"]}
                self._leader_topics = set(asked)
                self._leaders_at = time.monotonic()
            return self._leader_map

    async def watermarks(self, partitions: Sequence[TopicPartitionKey]) -> dict[TopicPartitionKey, tuple[int, int] | None]:
        low, high = await asyncio.gather(self.offsets(partitions, "earliest"), self.offsets(partitions, "latest"))
        return {tp: (low[tp], high[tp]) if low.get(tp) is not None and high.get(tp) is not None else None
                for tp in partitions}

    async def create_topic(self, name: str, partitions: int | None, replication_factor: int | None,
                           configs: Mapping[str, str]) -> None:
        from confluent_kafka.admin import NewTopic

        topic = NewTopic(name, num_partitions=partitions or -1, replication_factor=replication_factor or -1,
                         config=dict(configs))
        futures = self.admin().create_topics([topic], request_timeout=self.timeout_s,
                                             operation_timeout=self.timeout_s)
        await self._result(futures[name], f"cannot create topic '{name}'")
        await self._until_listed(name, True)

    async def delete_topic(self, name: str) -> None:
        futures = self.admin().delete_topics([name], request_timeout=self.timeout_s, operation_timeout=self.timeout_s)
        await self._result(futures[name], f"cannot delete topic '{name}'")
        await self._until_listed(name, False)

    async def _until_listed(self, name: str, listed: bool) -> None:
        """Until Metadata lists the topic (or no longer does): a broker learns of a change from the metadata
        log a moment after the controller made it, and the page that comes next should show it."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            metadata = await self.metadata(max_age_s=0)
            topic = metadata.topics.get(name)
            if (topic is not None and topic.error is None) == listed or time.monotonic() > deadline:
                return
            await asyncio.sleep(0.1)

    async def add_partitions(self, name: str, total: int) -> None:
        from confluent_kafka.admin import NewPartitions

        futures = self.admin().create_partitions([NewPartitions(name, total)], request_timeout=self.timeout_s,
                                                 operation_timeout=self.timeout_s)
        await self._result(futures[name], f"cannot add partitions to '{name}'")
        self.forget_metadata()

    async def topic_configs(self, name: str) -> list:
        """The topic's ConfigEntry objects, sorted by name."""
        from confluent_kafka.admin import ConfigResource, ResourceType

        resource = ConfigResource(ResourceType.TOPIC, name)
        futures = self.admin().describe_configs([resource], request_timeout=self.timeout_s)
        entries = await self._result(next(iter(futures.values())), f"cannot describe the configs of '{name}'")
        return sorted(entries.values(), key=lambda e: e.name)

    async def alter_topic_configs(self, name: str, set_: Mapping[str, str], delete: Iterable[str]) -> None:
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in set_.items()]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        futures = self.admin().incremental_alter_configs([resource], request_timeout=self.timeout_s)
        await self._result(next(iter(futures.values())), f"cannot change the configs of '{name}'")

    async def log_dirs(self, topics: Mapping[str, Iterable[int]] | None) -> tuple[dict[TopicPartitionKey, int], list[LogDirInfo], list[str]]:
        """DescribeLogDirs of every broker: (size per partition, the largest replica's; the log dirs; errors).
        `topics` limits it to those partitions; None: every partition."""
        await self.raw.metadata([])
        body = {"topics": None if topics is None else [{"topic": t, "partitions": list(ps)} for t, ps in topics.items()]}
        sizes: dict[TopicPartitionKey, int] = {}
        dirs: list[LogDirInfo] = []
        errors: list[str] = []

        async def ask(broker: int, address: tuple[str, int]) -> None:
            try:
                response = await self.raw.request(address, DESCRIBE_LOG_DIRS, body)
            except ConsoleError as exc:
                errors.append(f"broker {broker}: {exc}")
                return
            if response.get("error_code"):
                errors.append(f"broker {broker}: {error_name(response['error_code'])}")
                return
            for result in response["results"]:
                total = 0
                for topic in result["topics"]:
                    for p in topic["partitions"]:
                        if p["is_future_key"]:
                            continue
                        key = (topic["name"], p["partition_index"])
                        sizes[key] = max(sizes.get(key, 0), p["partition_size"])
                        total += p["partition_size"]
                dirs.append(LogDirInfo(broker, result["log_dir"],
                                       error_name(result["error_code"]) if result["error_code"] else None,
                                       result.get("total_bytes", -1), result.get("usable_bytes", -1), total))

        await asyncio.gather(*(ask(b, a) for b, a in sorted(self.raw.brokers.items())))
        return sizes, sorted(dirs, key=lambda d: (d.broker, d.path)), errors

    async def metrics_listeners(self) -> tuple[dict[int, tuple[str, str]], dict[int, str]]:
        """Per broker: (its host as clients reach it, its `metrics.listener` setting, "" when it has none),
        asked of each broker with DescribeConfigs; and the brokers that could not say, with why."""
        await self.raw.metadata([])
        found: dict[int, tuple[str, str]] = {}
        errors: dict[int, str] = {}

        async def ask(broker: int, address: tuple[str, int]) -> None:
            body = {"resources": [{"resource_type": BROKER_RESOURCE, "resource_name": str(broker),
                                   "configuration_keys": ["metrics.listener"]}],
                    "include_synonyms": False, "include_documentation": False}
            try:
                response = await self.raw.request(address, DESCRIBE_CONFIGS, body)
            except ConsoleError as exc:
                errors[broker] = str(exc)
                return
            result = response["results"][0]
            if result["error_code"]:
                errors[broker] = error_name(result["error_code"])
                return
            value = next((c["value"] for c in result["configs"] if c["name"] == "metrics.listener"), None)
            found[broker] = (address[0], value or "")

        await asyncio.gather(*(ask(b, a) for b, a in sorted(self.raw.brokers.items())))
        return found, errors

    async def quorum(self) -> dict:
        body = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
        response = await self.raw.request(await self.raw.any_broker(), DESCRIBE_QUORUM, body)
        partitions = [p for t in response["topics"] for p in t["partitions"]]
        code = response["error_code"] or (partitions[0]["error_code"] if partitions else -1)
        if code:
            raise ConsoleError(f"cannot describe the metadata quorum: {error_name(code)}")
        return partitions[0]

    async def reassignments(self) -> list[dict]:
        response = await self.raw.request(await self.raw.any_broker(), LIST_REASSIGNMENTS,
                                          {"timeout_ms": int(self.timeout_s * 1000), "topics": None})
        if response["error_code"]:
            raise ConsoleError(f"cannot list reassignments: {error_name(response['error_code'])}"
                               + (f" ({response['error_message']})" if response.get("error_message") else ""))
        return [{"topic": t["name"], **p} for t in response["topics"] for p in t["partitions"]]

    # -----------------------------------------------------------------------------------------------
    # Records

    async def produce(self, topic: str, key: bytes | None, value: bytes | None,
                      headers: Sequence[tuple[str, bytes]], partition: int | None) -> tuple[int, int]:
        """Write one record (acks=all); its (partition, offset)."""
        from confluent_kafka import KafkaException, Producer

        if self._producer is None:
            try:
                # murmur2_random: a key's partition is the one Java producers give it (librdkafka's default
                # hashes with CRC32).
                self._producer = Producer(self._config({"acks": "all", "linger.ms": 0, "partitioner": "murmur2_random",
                                                        "message.timeout.ms": int(self.timeout_s * 1000)}))
            except (KafkaException, ValueError, TypeError) as exc:
                raise ConsoleError(f"invalid client configuration: {kafka_reason(exc)}") from None
        producer = self._producer
        outcome: dict = {}

        def delivered(err, msg) -> None:
            outcome["error"] = err
            outcome["where"] = (msg.partition(), msg.offset()) if err is None else None

        def send() -> None:
            options = {"key": key, "value": value, "on_delivery": delivered}
            if headers:
                options["headers"] = list(headers)
            if partition is not None:
                options["partition"] = partition
            try:
                producer.produce(topic, **options)
            except (KafkaException, BufferError, ValueError, TypeError) as exc:
                outcome["error"] = exc
                return
            deadline = time.monotonic() + self.timeout_s + 1
            while "error" not in outcome and time.monotonic() < deadline:
                producer.flush(0.2)

        await self._thread(send)
        error = outcome.get("error", TimeoutError("no acknowledgement in time"))
        if error is not None:
            reason = kafka_reason(error if isinstance(error, BaseException) else Exception(error))
            raise ConsoleError(f"cannot produce to '{topic}': {reason}")
        return outcome["where"]

    def _browse_consumer(self):
        from confluent_kafka import Consumer

        if self._consumers:
            return self._consumers.pop()
        return Consumer(self._config({
            "group.id": BROWSE_GROUP, "enable.auto.commit": False, "enable.auto.offset.store": False,
            "enable.partition.eof": True, "auto.offset.reset": "earliest", "isolation.level": "read_uncommitted",
            "fetch.wait.max.ms": BROWSE_FETCH_WAIT_MS, "fetch.max.bytes": 8 << 20, "max.partition.fetch.bytes": 1 << 20,
            "queued.min.messages": 1000, "queued.max.messages.kbytes": 16384,
            # a fetch that filled the queue past queued.min.messages holds off the partition's next fetch for
            # this long (1 s by default), and that stays with the partition into the next read's assignment
            "fetch.queue.backoff.ms": 0,
        }))

    async def read(self, topic: str, windows: Mapping[int, Window]) -> dict[int, list[Record]]:
        """Every record of the offset windows of `topic`'s partitions (offset order); ConsoleError for a
        partition it cannot read in time."""
        return await self._thread(self.read_blocking, topic, dict(windows))

    def read_blocking(self, topic: str, windows: dict[int, Window]) -> dict[int, list[Record]]:
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        out: dict[int, list[Record]] = {p: [] for p in windows}
        pending = {p: w for p, w in windows.items() if w.end > w.start}
        if not pending:
            return out
        try:
            consumer = self._browse_consumer()
        except (KafkaException, ValueError, TypeError) as exc:
            raise ConsoleError(f"invalid client configuration: {kafka_reason(exc)}") from None
        healthy = True
        try:
            consumer.assign([TopicPartition(topic, p, w.start) for p, w in pending.items()])
            deadline = time.monotonic() + self.timeout_s
            next_offsets = {p: w.start for p, w in pending.items()}
            while pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ConsoleError(f"reading {topic} timed out: partitions "
                                       f"{', '.join(map(str, sorted(pending)))} did not answer within "
                                       f"{self.timeout_s:g}s")
                # consume() returns once it has num_messages or at its timeout: ask for no more than the
                # windows can still hold, so the last records of a page come back as soon as they arrive; a
                # short timeout bounds the wait where offsets hold no record (transaction markers, compacted
                # keys) and the end of the partition has to be reported.
                expected = sum(w.end - next_offsets[p] for p, w in pending.items())
                for message in consumer.consume(num_messages=max(1, min(1000, expected)),
                                                timeout=min(left, READ_POLL_S)):
                    p = message.partition()
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            pending.pop(p, None)
                            continue
                        raise ConsoleError(f"cannot read {topic}-{p}: {kafka_reason(Exception(error))}")
                    window = pending.get(p)
                    if window is None:
                        continue
                    offset = message.offset()
                    next_offsets[p] = offset + 1
                    if offset >= window.end:
                        pending.pop(p)
                        continue
                    if offset >= window.start:
                        _, ts = message.timestamp()
                        out[p].append(Record(p, offset, ts, message.key(), message.value(),
                                             tuple((k, v) for k, v in (message.headers() or ()))))
                    if offset >= window.end - 1:
                        pending.pop(p)
        except BaseException:
            healthy = False
            raise
        finally:
            if healthy:
                consumer.unassign()
                if len(self._consumers) < IDLE_CONSUMERS:
                    self._consumers.append(consumer)
                else:
                    consumer.close()
            else:
                consumer.close()
        return out

    # -----------------------------------------------------------------------------------------------
    # Consumer groups

    async def groups(self) -> list:
        """Every group's ConsumerGroupListing (group_id, state, type)."""
        future = self.admin().list_consumer_groups(request_timeout=self.timeout_s)
        result = await self._result(future, "cannot list consumer groups")
        if result.errors and not result.valid:
            raise ConsoleError(f"cannot list consumer groups: {kafka_reason(Exception(result.errors[0]))}")
        return sorted(result.valid or (), key=lambda g: g.group_id)

    async def describe_group(self, group: str):
        """The group's ConsumerGroupDescription; None when the coordinator does not know it."""
        from confluent_kafka import KafkaError, KafkaException

        futures = self.admin().describe_consumer_groups([group], request_timeout=self.timeout_s)
        try:
            return await asyncio.wrap_future(futures[group])
        except KafkaException as exc:
            if error_code(exc) == KafkaError.GROUP_ID_NOT_FOUND:
                return None
            raise ConsoleError(f"cannot describe group '{group}': {kafka_reason(exc)}") from None

    async def committed(self, group: str) -> dict[TopicPartitionKey, int]:
        from confluent_kafka import ConsumerGroupTopicPartitions

        futures = self.admin().list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                           request_timeout=self.timeout_s)
        result = await self._result(futures[group], f"cannot fetch the committed offsets of '{group}'")
        return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions or ()
                if tp.error is None and tp.offset >= 0}

    async def commit_offsets(self, group: str, offsets: Mapping[TopicPartitionKey, int]) -> None:
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o) for (t, p), o in offsets.items()])
        futures = self.admin().alter_consumer_group_offsets([request], request_timeout=self.timeout_s)
        result = await self._result(futures[group], f"cannot reset the offsets of '{group}'")
        failed = [tp for tp in result.topic_partitions or () if tp.error is not None]
        if failed:
            raise ConsoleError(f"cannot reset the offsets of '{group}': " + "; ".join(
                f"{tp.topic}-{tp.partition}: {kafka_reason(Exception(tp.error))}" for tp in failed))

    async def delete_group(self, group: str) -> None:
        futures = self.admin().delete_consumer_groups([group], request_timeout=self.timeout_s)
        await self._result(futures[group], f"cannot delete group '{group}'")
        self.sampler.forget_group(group)

    # -----------------------------------------------------------------------------------------------
    # Transactions

    async def transactions(self) -> tuple[list[dict], list[str]]:
        """Every coordinator's transactions (ListTransactions), described (DescribeTransactions); and errors."""
        await self.raw.metadata([])
        rows: list[dict] = []
        errors: list[str] = []

        async def ask(broker: int, address: tuple[str, int]) -> None:
            try:
                listed = await self.raw.request(address, LIST_TRANSACTIONS, {"state_filters": [],
                                                                             "producer_id_filters": []})
                if listed["error_code"]:
                    errors.append(f"broker {broker}: {error_name(listed['error_code'])}")
                    return
                ids = [t["transactional_id"] for t in listed["transaction_states"]]
                described = {}
                if ids:
                    answer = await self.raw.request(address, DESCRIBE_TRANSACTIONS, {"transactional_ids": ids})
                    described = {s["transactional_id"]: s for s in answer["transaction_states"]}
            except ConsoleError as exc:
                errors.append(f"broker {broker}: {exc}")
                return
            for t in listed["transaction_states"]:
                d = described.get(t["transactional_id"], {})
                rows.append({"transactional_id": t["transactional_id"], "coordinator": broker,
                             "producer_id": t["producer_id"], "state": t["transaction_state"],
                             "epoch": d.get("producer_epoch"), "timeout_ms": d.get("transaction_timeout_ms"),
                             "start_ms": d.get("transaction_start_time_ms", -1),
                             "partitions": [f"{x['topic']}-{p}" for x in d.get("topics", ()) for p in x["partitions"]],
                             "error": error_name(d["error_code"]) if d.get("error_code") else None})

        await asyncio.gather(*(ask(b, a) for b, a in sorted(self.raw.brokers.items())))
        return sorted(rows, key=lambda r: r["transactional_id"]), errors

    async def producers(self, topic: str, partition: int) -> list[dict]:
        """The producers the partition's leader knows (DescribeProducers)."""
        metadata = await self.raw.metadata([topic])
        found = [t for t in metadata["topics"] if t["name"] == topic]
        if not found or found[0]["error_code"]:
            raise ConsoleError(f"unknown topic '{topic}'" if not found else
                               f"cannot describe '{topic}': {error_name(found[0]['error_code'])}")
        leaders = {p["partition_index"]: p["leader_id"] for p in found[0]["partitions"]}
        if partition not in leaders:
            raise ConsoleError(f"'{topic}' has no partition {partition}")
        address = self.raw.brokers.get(leaders[partition])
        if address is None:
            raise ConsoleError(f"{topic}-{partition} has no leader")
        response = await self.raw.request(address, DESCRIBE_PRODUCERS,
                                          {"topics": [{"name": topic, "partition_indexes": [partition]}]})
        answer = response["topics"][0]["partitions"][0]
        if answer["error_code"]:
            raise ConsoleError(f"cannot describe the producers of {topic}-{partition}: "
                               f"{error_name(answer['error_code'])}")
        return list(answer["active_producers"])

    # -----------------------------------------------------------------------------------------------
    # ACLs and users

    async def acls(self) -> list:
        """Every ACL binding; ConsoleError (SECURITY_DISABLED...) when the cluster has no authorizer."""
        from confluent_kafka.admin import (
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        query = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                 AclPermissionType.ANY)
        bindings = await self._result(self.admin().describe_acls(query, request_timeout=self.timeout_s),
                                      "cannot list ACLs")
        if not bindings:  # librdkafka answers [] for SECURITY_DISABLED too: ask the cluster whether it has ACLs
            response = await self.raw.request(await self.raw.any_broker(), DESCRIBE_ACLS, {
                "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})
            if response["error_code"]:
                name = error_name(response["error_code"])
                raise ConsoleError(f"cannot list ACLs: {response.get('error_message') or name}", name)
        return sorted(bindings, key=lambda b: (b.restype.name, b.name, b.principal, b.operation.name, b.host))

    async def create_acl(self, binding) -> None:
        futures = self.admin().create_acls([binding], request_timeout=self.timeout_s)
        await self._result(futures[binding], "cannot create the ACL")

    async def delete_acls(self, binding_filter) -> int:
        futures = self.admin().delete_acls([binding_filter], request_timeout=self.timeout_s)
        deleted = await self._result(futures[binding_filter], "cannot delete the ACL")
        return len(deleted or ())

    async def scram_users(self) -> dict:
        from confluent_kafka import KafkaError, KafkaException

        future = self.admin().describe_user_scram_credentials(request_timeout=self.timeout_s)
        try:
            return await asyncio.wrap_future(future)
        except KafkaException as exc:
            if error_code(exc) == KafkaError.RESOURCE_NOT_FOUND:
                return {}
            raise ConsoleError(f"cannot list SCRAM users: {kafka_reason(exc)}") from None

    async def alter_scram(self, alteration, action: str) -> None:
        try:
            futures = self.admin().alter_user_scram_credentials([alteration], request_timeout=self.timeout_s)
        except (ValueError, TypeError) as exc:
            raise ConsoleError(f"{action}: {exc}") from None
        await self._result(futures[alteration.user], action)

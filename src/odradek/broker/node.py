"""The node process: formats storage, joins the metadata quorum, opens partition logs, serves the Kafka protocol.

A node holds both roles (KRaft's combined mode): a controller (a voter of the metadata quorum, serving its
controller listener) and a broker (partition logs, replication, client listeners). Committed metadata
records are applied to the image and reach the broker side through `_on_records`. Alone (no
controller.quorum.voters) the node is a quorum of one.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
import sys
import time
import uuid

from odradek.broker.authorization import ApiAuthorization
from odradek.broker.controller_channel import ControllerChannel
from odradek.broker.dispatcher import FETCH_API_KEY, Dispatcher, Route
from odradek.broker.fetch_session import FetchSessionCache
from odradek.broker.group_service import OFFSETS_TOPIC, GroupService
from odradek.broker.handlers.acls import handle_create_acls, handle_delete_acls, handle_describe_acls
from odradek.broker.handlers.api_versions import handle_api_versions
from odradek.broker.handlers.broker_lifecycle import (
    handle_allocate_producer_ids,
    handle_alter_partition,
    handle_broker_heartbeat,
    handle_broker_registration,
)
from odradek.broker.handlers.client_quotas import handle_alter_client_quotas, handle_describe_client_quotas
from odradek.broker.handlers.cluster import handle_describe_cluster, handle_unregister_broker
from odradek.broker.handlers.configs import (
    handle_alter_configs,
    handle_describe_configs,
    handle_incremental_alter_configs,
    handle_list_client_metrics_resources,
)
from odradek.broker.handlers.delegation_tokens import (
    handle_create_delegation_token,
    handle_describe_delegation_token,
    handle_expire_delegation_token,
    handle_renew_delegation_token,
)
from odradek.broker.handlers.delete_records import handle_delete_records
from odradek.broker.handlers.elect_leaders import handle_elect_leaders
from odradek.broker.handlers.features import handle_update_features
from odradek.broker.handlers.fetch import handle_fetch
from odradek.broker.handlers.groups import (
    handle_consumer_group_describe,
    handle_consumer_group_heartbeat,
    handle_delete_groups,
    handle_describe_groups,
    handle_find_coordinator,
    handle_heartbeat,
    handle_join_group,
    handle_leave_group,
    handle_list_groups,
    handle_offset_commit,
    handle_offset_delete,
    handle_offset_fetch,
    handle_sync_group,
    handle_txn_offset_commit,
)
from odradek.broker.handlers.leader_epoch import handle_offset_for_leader_epoch
from odradek.broker.handlers.list_offsets import handle_list_offsets
from odradek.broker.handlers.log_dirs import handle_alter_replica_log_dirs, handle_describe_log_dirs
from odradek.broker.handlers.metadata import handle_describe_topic_partitions, handle_metadata
from odradek.broker.handlers.produce import handle_produce
from odradek.broker.handlers.producer_ids import handle_init_producer_id
from odradek.broker.handlers.quorum import (
    handle_begin_quorum_epoch,
    handle_describe_quorum,
    handle_end_quorum_epoch,
    handle_fetch_snapshot,
    handle_metadata_fetch,
    handle_vote,
)
from odradek.broker.handlers.reassignments import (
    handle_alter_partition_reassignments,
    handle_list_partition_reassignments,
)
from odradek.broker.handlers.sasl import handle_sasl_authenticate, handle_sasl_handshake
from odradek.broker.handlers.scram_credentials import (
    handle_alter_user_scram_credentials,
    handle_describe_user_scram_credentials,
)
from odradek.broker.handlers.topics import (
    handle_create_partitions,
    handle_create_topics,
    handle_delete_topics,
)
from odradek.broker.handlers.transactions import (
    handle_add_offsets_to_txn,
    handle_add_partitions_to_txn,
    handle_describe_producers,
    handle_describe_transactions,
    handle_end_txn,
    handle_list_transactions,
    handle_write_txn_markers,
)
from odradek.broker.lifecycle import BrokerLifecycle
from odradek.broker.log_dir_mover import LogDirMover
from odradek.broker.producer_ids import ProducerIdBlocks
from odradek.broker.quota_enforcement import QuotaEnforcement
from odradek.broker.replica_manager import ReplicaManager, now_ms
from odradek.broker.transaction_service import TRANSACTION_TOPIC, TransactionService
from odradek.config import BrokerConfig, ConfigError, unprefixed
from odradek.controller import acls, scram_credentials
from odradek.controller.controller import Controller
from odradek.controller.metadata_image import TOPIC_RESOURCE, MetadataImage, TopicImage
from odradek.links.service import ClusterLinks
from odradek.network.server import ConnectionLimits, KafkaServer
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.raft.core import RaftConfig
from odradek.raft.driver import QuorumDriver
from odradek.replication.fetcher import ReplicaFetchers
from odradek.security.client_login import CONTROLLER_MECHANISM, INTER_BROKER_MECHANISM, client_security
from odradek.security.listener import ListenerSecurity
from odradek.security.scram import ScramCredential, ScramMechanism
from odradek.storage.checkpoint import write_atomic
from odradek.storage.cleaner import CleanerConfig, LogCleaner
from odradek.storage.log_config import LogConfig
from odradek.storage.log_manager import LogManager
from odradek.uuid_text import uuid_from_text, uuid_to_text

log = logging.getLogger("odradek")

METADATA_DIR = "__cluster_metadata-0"
META_PROPERTIES = "meta.properties"
MAINTENANCE_INTERVAL_S = 0.5
CONTROLLER_CHECK_INTERVAL_S = 0.25

# (api key, min version, max version, handler). Ranges follow Kafka 4.0.
ROUTES = (
    (0, 3, 11, handle_produce),  # not v12: it adds partitions to transactions implicitly (KIP-890 part 2)
    (1, 4, 17, handle_fetch),
    (2, 1, 10, handle_list_offsets),
    (3, 0, 13, handle_metadata),
    (8, 2, 9, handle_offset_commit),
    (9, 1, 9, handle_offset_fetch),
    (10, 0, 6, handle_find_coordinator),
    (11, 2, 9, handle_join_group),
    (12, 0, 4, handle_heartbeat),
    (13, 0, 5, handle_leave_group),
    (14, 0, 5, handle_sync_group),
    (15, 0, 6, handle_describe_groups),
    (16, 0, 5, handle_list_groups),
    (17, 0, 1, handle_sasl_handshake),
    (18, 0, 4, handle_api_versions),
    (19, 2, 7, handle_create_topics),
    (20, 1, 6, handle_delete_topics),
    (21, 0, 2, handle_delete_records),
    (22, 0, 5, handle_init_producer_id),
    (23, 2, 4, handle_offset_for_leader_epoch),
    (24, 0, 5, handle_add_partitions_to_txn),
    (25, 0, 4, handle_add_offsets_to_txn),
    (26, 0, 4, handle_end_txn),  # not v5: no transaction version 2 (an epoch bump per transaction)
    (27, 1, 1, handle_write_txn_markers),
    (28, 0, 4, handle_txn_offset_commit),
    (29, 1, 3, handle_describe_acls),
    (30, 1, 3, handle_create_acls),
    (31, 1, 3, handle_delete_acls),
    (32, 1, 4, handle_describe_configs),
    (33, 0, 2, handle_alter_configs),
    (34, 1, 2, handle_alter_replica_log_dirs),
    (35, 1, 4, handle_describe_log_dirs),
    (36, 0, 2, handle_sasl_authenticate),
    (37, 0, 3, handle_create_partitions),
    (38, 1, 3, handle_create_delegation_token),
    (39, 1, 2, handle_renew_delegation_token),
    (40, 1, 2, handle_expire_delegation_token),
    (41, 1, 3, handle_describe_delegation_token),
    (42, 0, 2, handle_delete_groups),
    (43, 0, 2, handle_elect_leaders),
    (44, 0, 1, handle_incremental_alter_configs),
    (45, 0, 0, handle_alter_partition_reassignments),
    (46, 0, 0, handle_list_partition_reassignments),
    (47, 0, 0, handle_offset_delete),
    (48, 0, 1, handle_describe_client_quotas),
    (49, 0, 1, handle_alter_client_quotas),
    (50, 0, 0, handle_describe_user_scram_credentials),
    (51, 0, 0, handle_alter_user_scram_credentials),
    (55, 0, 2, handle_describe_quorum),
    (57, 0, 2, handle_update_features),
    (60, 0, 2, handle_describe_cluster),
    (61, 0, 0, handle_describe_producers),
    (64, 0, 0, handle_unregister_broker),
    (65, 0, 0, handle_describe_transactions),
    (66, 0, 1, handle_list_transactions),
    (68, 0, 1, handle_consumer_group_heartbeat),
    (69, 0, 1, handle_consumer_group_describe),
    (74, 0, 0, handle_list_client_metrics_resources),
    (75, 0, 0, handle_describe_topic_partitions),
)
# The controller listener: the quorum's RPCs, the brokers' requests to the active controller, the admin
# requests other nodes forward to it, and what tools ask with --bootstrap-controller.
CONTROLLER_ROUTES = (
    (1, 12, 17, handle_metadata_fetch),
    (17, 0, 1, handle_sasl_handshake),
    (18, 0, 4, handle_api_versions),
    (19, 2, 7, handle_create_topics),
    (20, 1, 6, handle_delete_topics),
    (29, 1, 3, handle_describe_acls),
    (30, 1, 3, handle_create_acls),
    (31, 1, 3, handle_delete_acls),
    (32, 1, 4, handle_describe_configs),
    (33, 0, 2, handle_alter_configs),
    (36, 0, 2, handle_sasl_authenticate),
    (37, 0, 3, handle_create_partitions),
    (38, 1, 3, handle_create_delegation_token),
    (39, 1, 2, handle_renew_delegation_token),
    (40, 1, 2, handle_expire_delegation_token),
    (41, 1, 3, handle_describe_delegation_token),
    (43, 0, 2, handle_elect_leaders),
    (44, 0, 1, handle_incremental_alter_configs),
    (45, 0, 0, handle_alter_partition_reassignments),
    (46, 0, 0, handle_list_partition_reassignments),
    (49, 0, 1, handle_alter_client_quotas),
    (50, 0, 0, handle_describe_user_scram_credentials),
    (51, 0, 0, handle_alter_user_scram_credentials),
    (52, 0, 2, handle_vote),
    (53, 0, 0, handle_begin_quorum_epoch),
    (54, 0, 0, handle_end_quorum_epoch),
    (55, 0, 2, handle_describe_quorum),
    (56, 2, 3, handle_alter_partition),
    (57, 0, 2, handle_update_features),
    (59, 0, 0, handle_fetch_snapshot),
    (60, 0, 2, handle_describe_cluster),
    (62, 0, 4, handle_broker_registration),
    (63, 0, 1, handle_broker_heartbeat),
    (64, 0, 0, handle_unregister_broker),
    (67, 0, 0, handle_allocate_producer_ids),
)
# librdkafka refuses to produce unless Produce v0-2 are listed (KAFKA-18659); they are still rejected if used.
ADVERTISED_MIN = {0: 0}


def new_cluster_id() -> str:
    return uuid_to_text(uuid.uuid4().bytes)


def read_meta_properties(directory: str) -> dict[str, str] | None:
    path = os.path.join(directory, META_PROPERTIES)
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None
    props = {}
    for line in lines:
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    return props


def format_storage(config: BrokerConfig, cluster_id: str | None = None) -> str:
    """Check or write meta.properties in every log dir; returns the cluster id.

    A lone node formats itself on first start. A node of a multi-node quorum must be formatted beforehand with
    the cluster's id (`odradek storage format`), as Kafka's nodes are, so that all of them agree on it.
    """
    found = {}
    for directory in config.log_dirs:
        os.makedirs(directory, exist_ok=True)
        props = read_meta_properties(directory)
        if props is not None:
            found[directory] = props
    cluster_ids = {props.get("cluster.id") for props in found.values()}
    if cluster_id is not None:
        cluster_ids.add(cluster_id)
    if len(cluster_ids) > 1:
        raise ConfigError(f"log dirs belong to different clusters: {sorted(filter(None, cluster_ids))}")
    for directory, props in found.items():
        if props.get("node.id") != str(config.node_id):
            raise ConfigError(f"{directory} belongs to node {props.get('node.id')}, but node.id is {config.node_id}")
    if not cluster_ids and len(config.quorum_voters) > 1:
        raise ConfigError(f"{config.log_dirs[0]} is not formatted: run `odradek storage format --cluster-id ID` with "
                          "the same id on every node of the cluster (`odradek storage random-uuid` makes one)")
    legacy = os.path.join(config.log_dirs[0], METADATA_DIR, "metadata.log")
    if os.path.exists(legacy):
        raise ConfigError(f"{legacy} was written by an Odradek before the metadata quorum; this version cannot "
                          "read it")
    cluster_id = cluster_ids.pop() if cluster_ids else new_cluster_id()
    for directory in config.log_dirs:
        if directory not in found:
            text = (f"#\n#{time.strftime('%a %b %d %H:%M:%S %Z %Y')}\nnode.id={config.node_id}\nversion=1\n"
                    f"cluster.id={cluster_id}\ndirectory.id={new_cluster_id()}\n")
            write_atomic(os.path.join(directory, META_PROPERTIES), text.encode())
            log.info("Formatted %s for cluster %s", directory, cluster_id)
    return cluster_id


class Node:
    def __init__(self, config: BrokerConfig):
        self.config = config
        for name in config.unknown:
            log.warning("Ignoring unknown setting %s", name)
        self.listener_security = {listener.name: ListenerSecurity(config, listener.name, self._scram_credential)
                                  for listener in config.listeners + config.controller_listeners}
        # how this node reaches the others: their controller listener, and the brokers' inter-broker listener
        self.controller_security = (client_security(config, config.controller_listener_name, CONTROLLER_MECHANISM)
                                    if config.quorum_voters else None)  # a lone node is its own quorum
        self.inter_broker_security = client_security(config, config.inter_broker_listener, INTER_BROKER_MECHANISM)
        self.node_id = config.node_id
        self.cluster_id = format_storage(config)
        self.log_manager = LogManager(config.log_dirs, default_config=LogConfig.from_properties(config.topic_defaults()),
                                      retention_check_interval_ms=config["log.retention.check.interval.ms"],
                                      initial_task_delay_ms=config["log.initial.task.delay.ms"])
        self.log_manager.on_dir_failure = self._on_log_dir_failure
        self.metadata_dir = os.path.abspath(config.log_dirs[0])
        self.is_broker = "broker" in config.process_roles
        self.is_controller = "controller" in config.process_roles
        self.halted = asyncio.Event()  # set when the node cannot go on: _serve then stops it with status 1
        self.fetch_sessions = FetchSessionCache()
        self.groups: GroupService | None = None
        self.transactions: TransactionService | None = None
        self.image = MetadataImage()
        # the ACL authorizer (None: every request is allowed), in step with the committed ACL records
        self.authorizer = acls.new_authorizer(config)
        self.quorum = QuorumDriver(
            self.node_id, config.quorum_voters, os.path.join(self.metadata_dir, METADATA_DIR), self.cluster_id,
            RaftConfig(fetch_timeout_ms=config["controller.quorum.fetch.timeout.ms"],
                       election_timeout_ms=config["controller.quorum.election.timeout.ms"],
                       election_backoff_max_ms=config["controller.quorum.election.backoff.max.ms"],
                       fetch_interval_ms=100, begin_retry_ms=200, max_fetch_entries=256, pre_vote=True),
            fetch_max_wait_ms=min(500, config["controller.quorum.fetch.timeout.ms"] // 4),
            on_commit=self._on_commit, on_snapshot=self._on_snapshot, snapshot_state=self.image.snapshot_records,
            snapshot_bytes=config["metadata.log.max.record.bytes.between.snapshots"],
            security=self.controller_security)
        self.controller = Controller(config, self.image, self.quorum)
        self.controller_channel = ControllerChannel(self)
        self.lifecycle = BrokerLifecycle(self)
        self.producer_ids = ProducerIdBlocks(self)
        self.replicas = ReplicaManager(self)
        self.fetchers = ReplicaFetchers(self)
        self.log_dir_mover = LogDirMover(self)
        self.quota_enforcement = QuotaEnforcement(self)
        self.links = ClusterLinks(self)  # mirror topics of cluster links (links/), idle until a link exists
        # the partition balancer's load samples of this node, published to __balancer_samples (balancer/sampler.py)
        self.sampler = None
        if config["balancer.sampling.enable"] and self.is_broker:
            from odradek.balancer.sampler import LoadSampler

            self.sampler = LoadSampler(self)
        # the partition balancer's service: active on the broker leading __balancer_execution (balancer/service.py)
        self.balancer = None
        if self.is_broker:
            from odradek.balancer.service import BalancerService

            self.balancer = BalancerService(self)
        # metrics.listener: the HTTP port (metrics/http.py), and request timings taken by the network servers
        self.metrics_server = None
        self.request_metrics = None
        if config["metrics.listener"]:
            from odradek.metrics.http import MetricsServer
            from odradek.metrics.requests import RequestMetrics

            self.metrics_server = MetricsServer(self)
            self.request_metrics = RequestMetrics()
        # schema.registry.listener: Confluent Schema Registry's API, a client of this node (registry/server.py)
        self.registry_server = None
        if config["schema.registry.listener"]:
            from odradek.registry.server import RegistryServer

            self.registry_server = RegistryServer(self)
        self.dispatcher = Dispatcher([
            Route(key, low, high, functools.partial(handler, self), ADVERTISED_MIN.get(key))
            for key, low, high, handler in ROUTES], quotas=self.quota_enforcement,
            authorization=ApiAuthorization(self))
        self.dispatcher.response_observers[FETCH_API_KEY] = self.replicas.topic_stats.fetch_response  # bytes out
        self.controller_dispatcher = Dispatcher([
            Route(key, low, high, functools.partial(handler, self)) for key, low, high, handler in CONTROLLER_ROUTES],
            authorization=ApiAuthorization(self, controller_side=True))
        self.servers: list[KafkaServer] = []
        self.controller_servers: list[KafkaServer] = []
        self.cleaner: LogCleaner | None = None
        self._cleaning: asyncio.Task | None = None
        self._tasks: list[asyncio.Task] = []
        self._started = False

    # start-up and shutdown

    async def start(self) -> None:
        started = time.monotonic()
        if self.metrics_server is not None:  # first: a port in use stops the node before anything else started
            await self.metrics_server.start()
        if self.registry_server is not None:
            self.registry_server.bind()
        self.quorum.start()
        for listener in self.config.controller_listeners:
            security = self.listener_security[listener.name]
            server = KafkaServer(listener.host or "0.0.0.0", listener.port, self.controller_dispatcher,
                                 max_request_size=self.config["socket.request.max.bytes"], listener=listener.name,
                                 max_idle_ms=self.config["connections.max.idle.ms"],
                                 ssl_context=security.ssl_context, secure=security.secure,
                                 request_metrics=self.request_metrics)
            await server.start()
            self.controller_servers.append(server)
        if self.is_controller:
            self._tasks.append(asyncio.create_task(self._run_controller()))
        await self._catch_up_metadata()
        self.cluster_id = self.image.cluster_id or self.cluster_id
        if self.is_broker:
            await self._start_broker()
        if self.registry_server is not None:
            await self.registry_server.start()
        addresses = ", ".join(f"{s.listener}://{s.host}:{s.port}" for s in self.controller_servers + self.servers)
        image = self.image
        log.info("Odradek node %d (%s) of cluster %s started in %.2fs: %d topics, %d partitions, listening on %s",
                 self.node_id, ",".join(sorted(self.config.process_roles)), self.cluster_id,
                 time.monotonic() - started, len(image.topics), sum(len(t.partitions) for t in image.topics.values()),
                 addresses)

    def _scram_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return scram_credentials.credential_of(self.image, user, mechanism)

    async def _start_broker(self) -> None:
        self.log_manager.load(self._log_config_of, now_ms())
        self._reconcile_logs()
        self._started = True
        self.quota_enforcement.reload()
        await self.lifecycle.start()
        self.groups = GroupService(self)
        self.groups.start()
        self.transactions = TransactionService(self)
        self.transactions.start()
        dynamic = self.controller.dynamic
        limits = ConnectionLimits(lambda: (dynamic["max.connections"], dynamic["max.connections.per.ip"],
                                           dynamic.current.max_connections_per_ip_overrides()))
        for listener in self.config.listeners:
            security = self.listener_security[listener.name]
            server = KafkaServer(listener.host or "0.0.0.0", listener.port, self.dispatcher,
                                 max_request_size=self.config["socket.request.max.bytes"], listener=listener.name,
                                 limits=limits, max_idle_ms=self.config["connections.max.idle.ms"],
                                 ssl_context=security.ssl_context, secure=security.secure,
                                 admit_rate=self.quota_enforcement.admit_connection,
                                 request_metrics=self.request_metrics)
            await server.start()
            self.servers.append(server)
        self._tasks.append(asyncio.create_task(self._maintain()))
        self._tasks.append(asyncio.create_task(self.links.run()))
        if self.sampler is not None:
            self._tasks.append(asyncio.create_task(self.sampler.run()))
        if self.balancer is not None:
            self._tasks.append(asyncio.create_task(self.balancer.run()))
        if self.config["log.cleaner.enable"]:
            self.cleaner = LogCleaner(self.log_manager, self._cleaner_config())
            self._cleaning = asyncio.create_task(self.cleaner.run(now_ms))

    def _cleaner_config(self) -> CleanerConfig:
        config = self.controller.dynamic
        return CleanerConfig(dedupe_buffer_size=config["log.cleaner.dedupe.buffer.size"],
                             load_factor=config["log.cleaner.io.buffer.load.factor"],
                             backoff_ms=config["log.cleaner.backoff.ms"])

    async def _catch_up_metadata(self) -> None:
        """Wait until a leader is known and everything committed before this start is applied here."""
        waited = time.monotonic()
        while not (self.quorum.leader_id >= 0 and self.quorum.core.high_watermark > 0
                   and self.quorum.applied >= self.quorum.core.high_watermark):
            if time.monotonic() - waited > 10:
                log.info("Waiting for the metadata quorum (voters %s)", sorted(self.config.quorum_voters) or [self.node_id])
                waited = time.monotonic()
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        if self.metrics_server is not None:  # first: no scrape reads what is being closed
            await self.metrics_server.stop()
        if self.registry_server is not None:
            await self.registry_server.stop()
        await self.lifecycle.shut_down()  # controlled shutdown: leaderships move before we go
        for task in self._tasks:
            task.cancel()
        self.links.close()
        if self.sampler is not None:
            self.sampler.close()
        if self.balancer is not None:
            await asyncio.to_thread(self.balancer.close)
        if self._cleaning is not None:
            self.cleaner.stop()  # a cleaning under way in its thread gives up at its next batch
            self._cleaning.cancel()
            try:
                await self._cleaning
            except asyncio.CancelledError:
                pass
        await self.fetchers.stop()
        self.log_dir_mover.stop()
        for server in self.servers:
            await server.close()
        if self.groups is not None:
            self.groups.stop()
        if self.transactions is not None:
            self.transactions.stop()
        self.controller_channel.close()
        await self.quorum.stop()
        for server in self.controller_servers:
            await server.close()
        self.log_manager.close()
        log.info("Odradek node %d stopped cleanly", self.node_id)

    async def _run_controller(self) -> None:
        """While this node is the active controller: name the cluster, fence brokers whose session expired."""
        was_active = False
        balance_interval_s = self.config["leader.imbalance.check.interval.seconds"]
        balanced_at = time.monotonic()
        while True:
            await asyncio.sleep(CONTROLLER_CHECK_INTERVAL_S)
            try:
                active = self.controller.is_active
                if active and not was_active:
                    log.info("Node %d is the active controller (epoch %d)", self.node_id, self.quorum.epoch)
                    await self.controller.activate(self.cluster_id)
                    balanced_at = time.monotonic()
                elif active:
                    fenced = await self.controller.fence_silent_brokers()
                    if fenced:
                        log.warning("Fenced broker(s) %s: no heartbeat within broker.session.timeout.ms", fenced)
                    if self.config["auto.leader.rebalance.enable"] \
                            and time.monotonic() - balanced_at >= balance_interval_s:
                        balanced_at = time.monotonic()
                        await self._balance_leaders()
                was_active = active
            except KafkaError as exc:
                log.info("Controller step failed: %s", exc)
                was_active = False
            except Exception:
                log.exception("controller step failed")

    async def _balance_leaders(self) -> None:
        """Hand leadership back to the preferred replicas that can take it (Kafka 4.0: any imbalance counts)."""
        partitions = self.controller.imbalanced_partitions()
        if partitions:
            results = await self.controller.elect_leaders(False, partitions)
            moved = sum(1 for error, _ in results.values() if error == ErrorCode.NONE)
            log.info("Leader balance: %d partition(s) back to their preferred replicas", moved)

    async def _maintain(self) -> None:
        while True:
            await asyncio.sleep(MAINTENANCE_INTERVAL_S)
            try:
                self.log_manager.maintain(now_ms())
                self.replicas.maintain_isr()
            except Exception:
                log.exception("log maintenance failed")

    def _log_config_of(self, topic_name: str) -> LogConfig:
        topic = self.image.topics.get(topic_name)
        return self.controller.log_config(topic) if topic else self.log_manager.default_config

    def _reconcile_logs(self) -> None:
        """Make the partition logs on disk match the metadata image (a crash can fall between the two)."""
        image = self.image
        for existing in list(self.log_manager.logs()):
            topic = image.topics.get(existing.topic)
            if topic is None or existing.partition not in topic.partitions \
                    or self.node_id not in topic.partitions[existing.partition].replicas:
                log.info("Deleting %s-%d: it is no longer a replica here", existing.topic, existing.partition)
                self.log_manager.delete(existing.topic, existing.partition)
        existing_only = bool(self.log_manager.offline_dirs)
        for topic in image.topics.values():
            for index in topic.partitions:
                self._host(topic, index, existing_only=existing_only)

    def _on_log_dir_failure(self, log_dir: str, partitions: list[tuple[str, int]]) -> None:
        self.replicas.on_dir_failure(partitions)
        if log_dir == self.metadata_dir:
            reason = f"the metadata log's dir {log_dir} failed"
        elif not self.log_manager.online_dirs():
            reason = "every log dir failed"
        else:
            return
        log.critical("Stopping the node: %s", reason)  # as Kafka halts: nothing left to serve safely
        self.halted.set()

    def _host(self, topic: TopicImage, index: int, *, existing_only: bool = False) -> None:
        """Serve a partition of this node as its leader or a follower; with existing_only (start-up while a log
        dir is offline), a log not found is taken to be in the offline dir instead of being created empty elsewhere."""
        partition = topic.partitions[index]
        if self.node_id not in partition.replicas:
            if self.log_manager.get(topic.name, index) is not None:  # reassigned away
                self.replicas.unhost(topic.name, index)
                self.log_manager.delete(topic.name, index)
            return
        if self.log_manager.is_offline(topic.name, index):
            return
        log_ = self.log_manager.get(topic.name, index)
        if log_ is None and existing_only:
            self.log_manager.mark_unavailable(topic.name, index)
            return
        if log_ is None:
            try:
                log_ = self.log_manager.create(topic.name, index, self.controller.log_config(topic), topic.topic_id)
            except KafkaError as exc:
                log.error("Cannot host %s-%d: %s", topic.name, index, exc)
                return
        log_.producer_id_expiration_ms = self.controller.dynamic["producer.id.expiration.ms"]
        self.replicas.host(topic.name, index, log_, partition)

    # metadata changes

    def _on_commit(self, offset: int, records: list[dict]) -> None:
        """A committed entry of the metadata log: applied to the image, then acted on by the broker side."""
        for record in records:
            self.image.apply(record, offset)
        if self.authorizer is not None:
            acls.replay(self.authorizer, records)
        if self._started and self.is_broker:
            self._on_records(records)

    def _on_snapshot(self, end_offset: int, records: list[dict]) -> None:
        """The leader's snapshot replaced our log (we were too far behind): the image becomes it, and the
        broker side takes the partitions and roles it describes."""
        self.image.load_snapshot(records)
        if self.authorizer is not None:
            acls.load(self.authorizer, self.image)
        if self._started and self.is_broker:
            self.quota_enforcement.reload()
            self._reconcile_logs()
            if self.groups is not None and OFFSETS_TOPIC in self.image.topics:
                for index in self.image.topics[OFFSETS_TOPIC].partitions:
                    self.groups.on_leadership(index)
            if self.transactions is not None and TRANSACTION_TOPIC in self.image.topics:
                for index in self.image.topics[TRANSACTION_TOPIC].partitions:
                    self.transactions.on_leadership(index)

    def _on_records(self, records: list[dict]) -> None:
        image = self.image
        for record in records:
            kind = record["type"]
            if kind in ("PartitionRecord", "PartitionChangeRecord"):
                topic = image.topics_by_id.get(uuid_from_text(record["topic_id"]))
                if topic is not None:
                    self._host(topic, record["partition"])
                    if self.groups is not None and topic.name == OFFSETS_TOPIC:
                        self.groups.on_leadership(record["partition"])
                    if self.transactions is not None and topic.name == TRANSACTION_TOPIC:
                        self.transactions.on_leadership(record["partition"])
            elif kind == "RemoveTopicRecord":
                for existing in [lg for lg in self.log_manager.logs() if lg.topic == record["name"]]:
                    self.replicas.unhost(existing.topic, existing.partition)
                    self.log_manager.delete(existing.topic, existing.partition)
            elif kind == "ConfigRecord":
                self._apply_configs(record)
        if any(record["type"] == "ClientQuotaRecord" for record in records):
            self.quota_enforcement.reload()

    def _apply_configs(self, record: dict) -> None:
        image = self.image
        if record["resource_type"] == TOPIC_RESOURCE:
            topics = [image.topics[record["resource_name"]]] if record["resource_name"] in image.topics else []
        else:  # a dynamic broker config: what reads it at run time picks the change up here
            topics = list(image.topics.values())
            if unprefixed(record["name"]).startswith("ssl."):
                self._reload_certificates()
            if self.cleaner is not None:
                self.cleaner.config = self._cleaner_config()
            for partition_log in self.log_manager.logs():
                partition_log.producer_id_expiration_ms = self.controller.dynamic["producer.id.expiration.ms"]
        for topic in topics:
            config = self.controller.log_config(topic)
            for index in topic.partitions:
                partition_log = self.log_manager.get(topic.name, index)
                if partition_log is not None:
                    partition_log.update_config(config)

    def _reload_certificates(self) -> None:
        """A changed keystore or truststore setting (a renewed certificate): new connections of TLS listeners
        use it; those open keep theirs. A keystore that cannot be loaded leaves the listener as it was."""
        current = self.controller.dynamic.current
        for server in self.servers + self.controller_servers:
            security = self.listener_security[server.listener]
            if server.ssl_context is None:
                continue
            try:
                server.ssl_context = security.reload_tls(current)
            except ConfigError as exc:
                log.error("Listener %s keeps its certificate: the new TLS settings do not load: %s", server.listener,
                          exc)
                continue
            log.info("Listener %s reloaded its TLS keystore and truststore", server.listener)

    # used by handlers

    async def auto_create_topic(self, name: str) -> TopicImage | None:
        try:
            await self.controller_channel.create_topic(name)
        except KafkaError as exc:
            log.info("Auto-creation of topic %s failed: %s", name, exc)
        return self.image.topics.get(name)

    def broker_endpoints(self, listener_name: str, key: str, include_fenced: bool = False) -> list[dict]:
        """The live (or all) brokers as Metadata and DescribeCluster list them, at their `listener_name` endpoints."""
        endpoints = []
        for broker_id in sorted(self.image.brokers) if include_fenced else self.image.live_brokers:
            broker = self.image.brokers[broker_id]
            host, port = broker.endpoints.get(listener_name) or next(iter(broker.endpoints.values()))
            endpoints.append({key: broker_id, "host": host, "port": port, "rack": broker.rack,
                              "is_fenced": broker.fenced})
        return endpoints

    def controller_endpoints(self) -> list[dict]:
        """The metadata quorum's voters at their controller listeners, as DescribeCluster lists controllers."""
        voters = self.config.quorum_voters
        if not voters and self.config.controller_listeners:  # a lone node: the quorum is itself
            listener = self.config.controller_listeners[0]
            voters = {self.node_id: (listener.host or "localhost", listener.port)}
        return [{"broker_id": node_id, "host": host, "port": port, "rack": None, "is_fenced": False}
                for node_id, (host, port) in sorted(voters.items())]

    def inter_broker_endpoint(self, node_id: int) -> tuple[str, int] | None:
        """Where other brokers reach broker `node_id` (its inter-broker listener), if it is known."""
        broker = self.image.brokers.get(node_id)
        return broker.endpoints.get(self.config.inter_broker_listener) if broker else None

    @property
    def controller_id(self) -> int:
        """What Metadata names as the controller: clients send admin requests there (any node forwards them)."""
        leader = self.quorum.leader_id
        return leader if leader in self.image.live_brokers else self.node_id


def configure_logging() -> None:
    logging.basicConfig(level=os.environ.get("ODRADEK_LOG_LEVEL", "INFO"), stream=sys.stderr,
                        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)")


async def _serve(config: BrokerConfig) -> int:
    node = Node(config)
    await node.start()
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    waits = [asyncio.ensure_future(stopping.wait()), asyncio.ensure_future(node.halted.wait())]
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for wait in waits:
        wait.cancel()
    await node.stop()
    return 1 if node.halted.is_set() else 0


def raise_open_file_limit() -> None:
    """Each partition keeps its segment files open, so use every file descriptor the system allows."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def run_server(config_file: str | None, overrides: list[str]) -> int:
    configure_logging()
    raise_open_file_limit()
    try:
        config = BrokerConfig.load(config_file, overrides)
        import uvloop

        return uvloop.run(_serve(config))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

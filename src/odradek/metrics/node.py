"""NodeMetrics: everything a node's /metrics serves, most of it computed at scrape time from the node's state.

Counted as things happen (cheaply, on the paths the data already takes): BrokerTopicStats (the replica
manager and the dispatcher), the replica manager's ISR changes, RequestMetrics (the network server, only while metrics.listener is set), the
Raft commit latency (the quorum driver). Read when scraped: the replica manager's partitions, the metadata
image, the quorum, the coordinators, the logs, the process and its log dirs. docs/monitoring.md maps every
name to Kafka's MBean.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable

from odradek.coordinator.classic_group import GroupState
from odradek.coordinator.transactions import TxnState
from odradek.metrics.lag import LAG_PREFIX, ConsumerLag
from odradek.metrics.process import LoopIdle, WindowedStat, disk_families, process_families
from odradek.metrics.registry import MetricFamily, Registry, counter_family, gauge_family

BROKER_RUNNING, BROKER_STARTING = 3, 1  # Kafka's BrokerState values
# Kafka's GroupMetadataManager gauges of classic groups by state
CLASSIC_STATE_GAUGES = (
    ("numgroupspreparingrebalance", GroupState.PREPARING_REBALANCE, "preparing a rebalance"),
    ("numgroupscompletingrebalance", GroupState.COMPLETING_REBALANCE, "completing a rebalance"),
    ("numgroupsstable", GroupState.STABLE, "stable"),
    ("numgroupsdead", GroupState.DEAD, "dead"),
    ("numgroupsempty", GroupState.EMPTY, "empty"),
)
CONSUMER_GROUP_STATES = ("Empty", "Assigning", "Reconciling", "Stable", "Dead")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class NodeMetrics:
    def __init__(self, node):
        self.node = node
        self.registry = Registry()
        self.start_time_s = time.time()
        self.loop_idle = LoopIdle()
        self.raft_commit_latency = WindowedStat()
        node.quorum.on_commit_latency = self.raft_commit_latency.record
        self.lag = ConsumerLag(node, now_ms)
        registry = self.registry
        registry.add_collector(self._broker_topic)
        if node.request_metrics is not None:
            registry.add_collector(node.request_metrics.collect)
        registry.add_collector(self._network)
        registry.add_collector(self._replica_manager)
        registry.add_collector(self._logs)
        registry.add_collector(self._controller)
        registry.add_collector(self._raft)
        registry.add_collector(self._group_coordinator)
        registry.add_collector(self._transaction_coordinator)
        registry.add_collector(self.lag.collect)
        registry.add_collector(self._cluster_links)
        registry.add_collector(self._balancer)
        registry.add_collector(lambda: process_families(self.start_time_s))
        registry.add_collector(lambda: disk_families(node.log_manager.log_dirs, set(node.log_manager.offline_dirs)))

    def close(self) -> None:
        self.lag.close()
        if self.node.quorum.on_commit_latency == self.raft_commit_latency.record:
            self.node.quorum.on_commit_latency = None

    async def scrape(self, names: Collection[str] | None = None) -> str:
        """The /metrics body: remote end offsets for consumer lag first, then everything else at once; with
        `names`, only those families (and no remote offsets unless a lag family is named)."""
        if names is None or any(name.startswith(LAG_PREFIX) for name in names):
            await self.lag.prepare()
        return self.registry.render(names)

    # collectors

    def _broker_topic(self) -> Iterable[MetricFamily]:
        stats = self.node.replicas.topic_stats
        stats.prune(self.node.image.topics)
        return stats.collect()

    def _network(self) -> Iterable[MetricFamily]:
        node = self.node
        idle = self.loop_idle.ratio()
        how = " A node's request handling and network I/O share one event loop thread: its idle share of " \
              "the last minute (1 - loop thread CPU time / wall time)."
        for name in ("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
                     "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent"):
            yield gauge_family(name, "Share of time the request handlers are idle, 0 to 1." + how).add((), idle)
        for name in ("kafka_network_socketserver_networkprocessoravgidle_percent",
                     "kafka_network_socketserver_networkprocessoravgidlepercent"):
            yield gauge_family(name, "Share of time the network processors are idle, 0 to 1." + how).add((), idle)
        connections = gauge_family("kafka_server_socket_server_metrics_connection_count", "Open client "
                                   "connections, by listener.", ("listener",))
        for server in node.servers + node.controller_servers:
            connections.add((server.listener,), server.connection_count)
        yield connections
        yield gauge_family("kafka_server_kafkaserver_brokerstate", "Kafka's BrokerState: 3 running, 1 starting.").add(
            (), BROKER_RUNNING if node.servers or not node.is_broker else BROKER_STARTING)

    def _cluster_links(self) -> Iterable[MetricFamily]:
        fetchers = self.node.links.fetchers
        if fetchers is None:
            return
        labels = ("link", "topic", "partition")
        records = gauge_family("odradek_cluster_link_mirror_lag_records", "Records a mirror partition this node "
                               "leads is behind its source partition's high watermark.", labels)
        seconds = gauge_family("odradek_cluster_link_mirror_lag_seconds", "How long a mirror partition this "
                               "node leads has been behind its source (0 while caught up).", labels)
        for (topic, index), (link, behind, _) in sorted(fetchers.lag.items()):
            records.add((link, topic, str(index)), behind)
            seconds.add((link, topic, str(index)), fetchers.lag_seconds(topic, index))
        yield records
        yield seconds
        truncations = counter_family("odradek_cluster_link_mirror_truncations_total", "Times this node truncated a "
                                     "mirror partition to where its source diverged (an unclean election there).",
                                     labels)
        dropped = counter_family("odradek_cluster_link_mirror_truncated_records_total", "Records those truncations "
                                 "dropped from the mirror partition.", labels)
        for (topic, index), (link, count, records_dropped) in sorted(fetchers.truncations.items()):
            truncations.add((link, topic, str(index)), count)
            dropped.add((link, topic, str(index)), records_dropped)
        yield truncations
        yield dropped

    def _balancer(self) -> Iterable[MetricFamily]:
        service = getattr(self.node, "balancer", None)
        if service is None:
            return
        prefix = "odradek_balancer_"
        yield gauge_family(prefix + "active", "1 on the node running the partition balancer (it leads "
                           "__balancer_execution), else 0.").add((), int(service.active))
        yield gauge_family(prefix + "mode", "The balancer mode configured on this node (label mode), value 1.",
                           ("mode",)).add((service.mode,), 1)
        progress = service.progress
        moves = gauge_family(prefix + "execution_moves", "Replica moves of the last execution this node ran, by "
                             "state (total: all of them).", ("state",))
        moved = gauge_family(prefix + "execution_bytes", "Bytes of the replica moves of the last execution this "
                             "node ran: done, and total.", ("state",))
        leadership = gauge_family(prefix + "execution_leadership_changes", "Leadership changes of the last "
                                  "execution this node ran, by state (total: all of them).", ("state",))
        if progress is not None:
            moves.add(("done",), progress.moves_done).add(("in_flight",), progress.moves_in_flight).add(
                ("failed",), progress.moves_failed).add(("total",), progress.moves_total)
            moved.add(("done",), progress.bytes_done).add(("total",), progress.bytes_total)
            leadership.add(("done",), progress.leadership_done).add(("failed",), progress.leadership_failed).add(
                ("total",), progress.leadership_total)
        yield moves
        yield moved
        yield leadership
        yield counter_family(prefix + "requests_total", "Operators' requests (rebalance, add, remove, demote, "
                             "stop, resume) this node's balancer handled.").add((), service.requests_handled)
        yield counter_family(prefix + "requests_refused_total", "Of those, the requests it refused.").add(
            (), service.requests_refused)
        yield counter_family(prefix + "automatic_actions_total", "Executions this node's balancer started by "
                             "itself (self-healing, new nodes, full disks).").add((), service.automatic_actions)

    def _replica_manager(self) -> Iterable[MetricFamily]:
        node = self.node
        partitions = node.replicas.partitions
        log_manager = node.log_manager
        topics = node.image.topics
        leaders = under_replicated = under_min_isr = at_min_isr = reassigning = offline = 0
        for (topic, index), partition in partitions.items():
            if log_manager.is_offline(topic, index):
                offline += 1
                continue
            if not partition.is_leader:
                continue
            leaders += 1
            image = topics.get(topic)
            image_partition = image.partitions.get(index) if image is not None else None
            adding = len(image_partition.adding_replicas) if image_partition is not None else 0
            if image_partition is not None and (image_partition.adding_replicas or image_partition.removing_replicas):
                reassigning += 1
            isr = len(partition.isr)
            if len(partition.replicas) - adding > isr:
                under_replicated += 1
            min_isr = partition.log.config.min_insync_replicas
            if isr < min_isr:
                under_min_isr += 1
            elif isr == min_isr:
                at_min_isr += 1
        prefix = "kafka_server_replicamanager_"
        yield gauge_family(prefix + "partitioncount", "Partitions with a replica on this node.").add(
            (), len(partitions))
        yield gauge_family(prefix + "leadercount", "Partitions this node leads.").add((), leaders)
        yield gauge_family(prefix + "underreplicatedpartitions", "Partitions this node leads whose in-sync "
                           "replicas are fewer than their replicas.").add((), under_replicated)
        yield gauge_family(prefix + "underminisrpartitioncount", "Partitions this node leads with fewer in-sync "
                           "replicas than min.insync.replicas (acks=all writes fail).").add((), under_min_isr)
        yield gauge_family(prefix + "atminisrpartitioncount", "Partitions this node leads with exactly "
                           "min.insync.replicas in-sync replicas.").add((), at_min_isr)
        yield gauge_family(prefix + "offlinereplicacount", "Replicas on this node in an offline log dir.").add(
            (), offline)
        yield gauge_family(prefix + "reassigningpartitions", "Partitions this node leads that are being "
                           "reassigned.").add((), reassigning)
        replicas = node.replicas
        yield counter_family(prefix + "isrshrinks_total", "In-sync replica sets this node as a leader shrank "
                             "(an AlterPartition the controller accepted; IsrShrinksPerSec).").add(
            (), replicas.isr_shrinks)
        yield counter_family(prefix + "isrexpands_total", "In-sync replica sets this node as a leader expanded "
                             "(an AlterPartition the controller accepted; IsrExpandsPerSec).").add(
            (), replicas.isr_expands)
        yield counter_family(prefix + "failedisrupdates_total", "AlterPartition requests of this node as a leader "
                             "that the controller refused or did not answer (FailedIsrUpdatesPerSec).").add(
            (), replicas.failed_isr_updates)

    def _logs(self) -> Iterable[MetricFamily]:
        labels = ("topic", "partition")
        size = gauge_family("kafka_log_log_size", "Bytes of a partition's log on this node.", labels)
        end = gauge_family("kafka_log_log_logendoffset", "Log end offset of a partition's replica on this node.",
                           labels)
        start = gauge_family("kafka_log_log_logstartoffset", "Log start offset of a partition's replica on this "
                             "node.", labels)
        segments = gauge_family("kafka_log_log_numlogsegments", "Segments of a partition's log on this node.",
                                labels)
        current = gauge_family("kafka_topic_partition_current_offset", "High watermark of a partition this "
                               "node leads (kafka_exporter's name).", labels)
        oldest = gauge_family("kafka_topic_partition_oldest_offset", "Log start offset of a partition this node "
                              "leads (kafka_exporter's name).", labels)
        partitions = self.node.replicas.partitions
        for partition_log in sorted(self.node.log_manager.logs(), key=lambda lg: (lg.topic, lg.partition)):
            key = (partition_log.topic, partition_log.partition)
            size.add(key, partition_log.size_in_bytes())
            end.add(key, partition_log.log_end_offset)
            start.add(key, partition_log.log_start_offset)
            segments.add(key, len(partition_log.segments))
            partition = partitions.get(key)
            if partition is not None and partition.is_leader and partition.log is partition_log:
                current.add(key, partition_log.high_watermark)
                oldest.add(key, partition_log.log_start_offset)
        return [size, end, start, segments, current, oldest]

    def _controller(self) -> Iterable[MetricFamily]:
        """As in Kafka, the cluster-wide gauges come from the active controller only (0 elsewhere), so that
        their sum over the nodes is the cluster's."""
        node = self.node
        image = node.image
        active = node.is_controller and node.controller.is_active
        offline = imbalance = partitions = 0
        if active:
            for topic in image.topics.values():
                for partition in topic.partitions.values():
                    partitions += 1
                    if partition.leader < 0:
                        offline += 1
                    elif partition.replicas and partition.leader != partition.replicas[0]:
                        imbalance += 1
        fenced = sum(1 for b in image.brokers.values() if b.fenced) if active else 0
        live = len(image.live_brokers) if active else 0
        prefix = "kafka_controller_kafkacontroller_"
        yield gauge_family(prefix + "activecontrollercount", "1 on the active controller, else 0: the sum over "
                           "the cluster must be 1.").add((), int(active))
        yield gauge_family(prefix + "offlinepartitionscount", "Partitions without a leader (active controller "
                           "only).").add((), offline)
        yield gauge_family(prefix + "preferredreplicaimbalancecount", "Partitions not led by their preferred "
                           "replica (active controller only).").add((), imbalance)
        yield gauge_family(prefix + "globaltopiccount", "Topics in the cluster (active controller only).").add(
            (), len(image.topics) if active else 0)
        yield gauge_family(prefix + "globalpartitioncount", "Partitions in the cluster (active controller "
                           "only).").add((), partitions)
        yield gauge_family(prefix + "activebrokercount", "Registered, unfenced brokers (active controller "
                           "only).").add((), live)
        yield gauge_family(prefix + "fencedbrokercount", "Registered, fenced brokers (active controller "
                           "only).").add((), fenced)

    def _raft(self) -> Iterable[MetricFamily]:
        quorum = self.node.quorum
        core = quorum.core
        prefix = "kafka_server_raftmetrics_"
        state = "observer" if core.is_observer else core.role.value
        yield gauge_family(prefix + "current_state", "This node's role in the metadata quorum (label state), "
                           "value 1.", ("state",)).add((state,), 1)
        yield gauge_family(prefix + "current_leader", "Node id of the metadata quorum's leader, -1 if "
                           "unknown.").add((), quorum.leader_id)
        yield gauge_family(prefix + "current_epoch", "The metadata quorum's epoch as this node knows it.").add(
            (), quorum.epoch)
        yield gauge_family(prefix + "current_vote", "Node this node voted for in the current epoch, -1 if "
                           "none.").add((), core.voted_for)
        yield gauge_family(prefix + "high_watermark", "The metadata log's high watermark (committed "
                           "entries).").add((), core.high_watermark)
        yield gauge_family(prefix + "log_end_offset", "The metadata log's end offset on this node.").add(
            (), quorum.log.end_offset)
        yield gauge_family(prefix + "applied_offset", "Metadata log entries applied to this node's image "
                           "(Odradek's).").add((), quorum.applied)
        average, maximum = self.raft_commit_latency.avg_max()
        yield gauge_family(prefix + "commit_latency_avg", "Average milliseconds from proposing a metadata "
                           "change to its being committed and applied, last 30 s (active controller).").add(
            (), average)
        yield gauge_family(prefix + "commit_latency_max", "Longest such commit, last 30 s, in "
                           "milliseconds.").add((), maximum)

    def _group_coordinator(self) -> Iterable[MetricFamily]:
        service = self.node.groups
        classic: dict[GroupState, int] = dict.fromkeys(GroupState, 0)
        consumer = dict.fromkeys(CONSUMER_GROUP_STATES, 0)
        offsets = 0
        if service is not None:
            core = service.core
            unloaded = core.unloaded_partitions

            def owned(group_id: str) -> bool:
                return core.partition_for(group_id) not in unloaded

            for group_id, group in core.groups.items():
                if owned(group_id) and group_id not in core.consumer_groups:
                    classic[group.state] += 1
            for group_id, group in core.consumer_groups.items():
                if owned(group_id):
                    consumer[group.state] = consumer.get(group.state, 0) + 1
            offsets = sum(len(parts) for group_id, topics in core.offsets.items() if owned(group_id)
                          for parts in topics.values())
        prefix = "kafka_coordinator_group_groupmetadatamanager_"
        total_classic = sum(count for state, count in classic.items() if state != GroupState.DEAD)
        total_consumer = sum(count for state, count in consumer.items() if state != "Dead")
        yield gauge_family(prefix + "numgroups", "Groups this node coordinates (classic and consumer).").add(
            (), total_classic + total_consumer)
        for name, state, text in CLASSIC_STATE_GAUGES:
            yield gauge_family(prefix + name, f"Classic groups this node coordinates that are {text}.").add(
                (), classic[state])
        yield gauge_family(prefix + "numoffsets", "Committed offsets of the groups this node coordinates.").add(
            (), offsets)
        yield gauge_family("kafka_server_group_coordinator_metrics_group_count", "Groups this node coordinates, "
                           "by protocol (KIP-848).", ("protocol",)).add(("classic",), total_classic).add(
            ("consumer",), total_consumer)
        family = gauge_family("kafka_server_group_coordinator_metrics_consumer_group_count", "Consumer "
                              "(KIP-848) groups this node coordinates, by state.", ("state",))
        for state, count in consumer.items():
            family.add((state.lower(),), count)
        yield family

    def _transaction_coordinator(self) -> Iterable[MetricFamily]:
        service = self.node.transactions
        counts = {state.display: 0 for state in TxnState}
        if service is not None:
            for txn in service.core.txns.values():
                counts[txn.state.display] += 1
        family = gauge_family("odradek_transaction_coordinator_transactions", "Transactional ids this node "
                              "coordinates, by transaction state.", ("state",))
        for state, count in counts.items():
            family.add((state,), count)
        yield family

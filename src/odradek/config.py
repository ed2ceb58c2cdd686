"""Node configuration: Kafka's broker config names, types and defaults, parsed from a properties file and overrides."""

from __future__ import annotations

import functools
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

LONG_MAX = 9223372036854775807
# Kafka's config providers (config_providers.py): config.providers and config.providers.<name>.* are read when
# the configuration is loaded, as in Kafka's AbstractConfig, not settings of their own.
CONFIG_PROVIDERS = "config.providers"


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the key."""


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: str  # boolean, string, int, short, long, double, list, password (Kafka's ConfigType names)
    default: object
    doc: str
    topic_name: str | None = None  # the per-topic config this broker setting is the default of
    read_only: bool = True  # True: needs a restart; False: changeable at run time (dynamic)
    dynamic_only: bool = False  # Kafka knows it only as a dynamic config: DescribeConfigs lists it once it is set


# Kafka's broker settings that Odradek knows, with Kafka's defaults and dynamic (run-time) ones as Kafka has
# them. Topic settings default to their broker synonym. A few exist only so that a Kafka configuration and
# Kafka's tools work unchanged; their descriptions say so.
BROKER_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef("node.id", "int", 1, "This node's id, unique in the cluster."),
    ConfigDef("broker.id", "int", -1, "Kafka's older name of node.id: set to node.id when not given, and must equal it when given."),
    ConfigDef("process.roles", "list", "broker,controller", "broker, controller, or both (a lone node is both; a controller is a voter of the metadata quorum, a broker only follows it)."),
    ConfigDef("controller.quorum.voters", "list", None, "The controller quorum as id@host:port entries (the voters' CONTROLLER listeners); unset: this node alone is the quorum."),
    ConfigDef("controller.quorum.bootstrap.servers", "list", None, "Dynamic quorums (KIP-853); not supported yet: set controller.quorum.voters."),
    ConfigDef("controller.listener.names", "list", "CONTROLLER", "Listeners that serve the controller quorum, not clients."),
    ConfigDef("inter.broker.listener.name", "string", None, "Listener brokers use to reach each other; defaults to the first client listener."),
    ConfigDef("controller.quorum.election.timeout.ms", "int", 1000, "How long a candidate waits for votes before a new election."),
    ConfigDef("controller.quorum.election.backoff.max.ms", "int", 1000, "Largest random delay before a new election."),
    ConfigDef("controller.quorum.fetch.timeout.ms", "int", 2000, "A voter that has not heard from the leader this long starts an election."),
    ConfigDef("metadata.log.max.record.bytes.between.snapshots", "long", 20971520, "Bytes of metadata records applied after which a node snapshots its metadata image and drops the log before it."),
    ConfigDef("broker.heartbeat.interval.ms", "int", 2000, "How often a broker heartbeats to the active controller."),
    ConfigDef("broker.session.timeout.ms", "int", 9000, "A broker that has not heartbeated this long is fenced and loses its leaderships."),
    ConfigDef("auto.leader.rebalance.enable", "boolean", True, "Move leadership back to preferred replicas (the first of each partition) when brokers lead too few of them."),
    ConfigDef("leader.imbalance.check.interval.seconds", "long", 300, "How often the active controller checks the leader balance."),
    ConfigDef("replica.lag.time.max.ms", "long", 30000, "A follower that has not caught up with the leader this long leaves the in-sync replica set."),
    ConfigDef("replica.fetch.wait.max.ms", "int", 500, "Longest a follower's fetch waits at the leader for new records."),
    ConfigDef("replica.fetch.max.bytes", "int", 1048576, "Bytes a follower fetches per partition per request."),
    ConfigDef("replica.fetch.response.max.bytes", "int", 10485760, "Bytes a follower fetches per request."),
    ConfigDef("replica.fetch.backoff.ms", "int", 1000, "How long a follower waits after a failed fetch."),
    ConfigDef("listeners", "list", "PLAINTEXT://:9092", "Addresses to listen on, as LISTENER://host:port; an empty host binds all interfaces."),
    ConfigDef("listener.security.protocol.map", "string", "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT", "Security protocol of each listener name, as NAME:PROTOCOL entries (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); a controller listener not named here is PLAINTEXT."),
    # TLS and SASL settings; each may be given for one listener as listener.name.<listener>.<setting>; the
    # keystore and truststore may change at run time (a renewed certificate, for new connections)
    ConfigDef("ssl.keystore.type", "string", "PEM", "Format of the node's key and certificate: PEM (the only one Odradek reads).", read_only=False),
    ConfigDef("ssl.keystore.location", "string", None, "PEM file holding the private key and the certificate chain.", read_only=False),
    ConfigDef("ssl.keystore.certificate.chain", "password", None, "The certificate chain as PEM text, instead of ssl.keystore.location.", read_only=False),
    ConfigDef("ssl.keystore.key", "password", None, "The private key as PEM text, instead of ssl.keystore.location.", read_only=False),
    ConfigDef("ssl.keystore.password", "password", None, "Kafka's keystore password; for a PEM keystore it is not used (the key is protected by ssl.key.password).", read_only=False),
    ConfigDef("ssl.key.password", "password", None, "Password of an encrypted private key.", read_only=False),
    ConfigDef("ssl.truststore.type", "string", "PEM", "Format of the trusted certificates: PEM.", read_only=False),
    ConfigDef("ssl.truststore.location", "string", None, "PEM file of the certificate authorities trusted for client certificates (and, between nodes, for server certificates).", read_only=False),
    ConfigDef("ssl.truststore.certificates", "password", None, "The trusted certificates as PEM text, instead of ssl.truststore.location.", read_only=False),
    ConfigDef("ssl.truststore.password", "password", None, "Kafka's truststore password; not used for PEM.", read_only=False),
    ConfigDef("ssl.enabled.protocols", "list", "TLSv1.2,TLSv1.3", "TLS versions accepted."),
    ConfigDef("ssl.protocol", "string", "TLSv1.3", "Kafka's preferred TLS version; Odradek negotiates the highest of ssl.enabled.protocols."),
    ConfigDef("ssl.cipher.suites", "list", "", "TLS 1.2 cipher suites allowed, by IANA (Kafka's) or OpenSSL name; empty: OpenSSL's defaults."),
    ConfigDef("ssl.client.auth", "string", "none", "Client certificates: required, requested (verified when given) or none."),
    ConfigDef("ssl.principal.mapping.rules", "string", "DEFAULT", "How the subject of a client certificate becomes a user name: RULE:pattern/replacement/[LU] entries, then DEFAULT (the whole distinguished name)."),
    ConfigDef("ssl.endpoint.identification.algorithm", "string", "https", "Between nodes: https checks the server certificate's host name; empty turns the check off."),
    ConfigDef("sasl.enabled.mechanisms", "list", "GSSAPI", "SASL mechanisms a SASL listener offers: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (GSSAPI is Kafka's default and is not supported)."),
    ConfigDef("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI", "SASL mechanism brokers use with each other on a SASL inter-broker listener."),
    ConfigDef("sasl.mechanism.controller.protocol", "string", "GSSAPI", "SASL mechanism used on a SASL controller listener."),
    ConfigDef("sasl.jaas.config", "password", None, "JAAS login module configuration; per listener and mechanism as listener.name.<listener>.<mechanism>.sasl.jaas.config (PlainLoginModule's user_<name>=\"<password>\" options are the PLAIN users; username and password are what this node logs in with)."),
    ConfigDef("sasl.server.callback.handler.class", "class", None, "Per listener and mechanism as listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class: org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler validates signed JWTs (the sasl.oauthbearer.* settings); unset, OAUTHBEARER takes Kafka's unsecured JWTs (development only). Other classes are not supported; one given for PLAIN or SCRAM stops the node at startup (those mechanisms check the JAAS users and the metadata log's credentials only)."),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.url", "string", None, "OAUTHBEARER with signed JWTs: the JWKS (JSON Web Key Set) of the identity provider, as an https:, http: or file: URL; read at startup and every sasl.oauthbearer.jwks.endpoint.refresh.ms, and sooner when a token names a key id it lacks."),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.refresh.ms", "long", 3600000, "How often the JWKS is read again."),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "long", 100, "First wait before reading the JWKS again after a failure; doubled after each, up to sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms."),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "long", 10000, "Longest wait between attempts to read the JWKS."),
    ConfigDef("sasl.oauthbearer.expected.issuer", "string", None, "OAUTHBEARER: the iss claim a signed JWT must have; unset: any issuer."),
    ConfigDef("sasl.oauthbearer.expected.audience", "list", None, "OAUTHBEARER: audiences a signed JWT's aud claim must name one of; unset: a JWT with an aud claim is refused (as Kafka's jose4j does)."),
    ConfigDef("sasl.oauthbearer.sub.claim.name", "string", "sub", "OAUTHBEARER: the claim of a signed JWT that names its principal."),
    ConfigDef("sasl.oauthbearer.scope.claim.name", "string", "scope", "OAUTHBEARER: the claim of a signed JWT that holds its scope."),
    ConfigDef("sasl.oauthbearer.clock.skew.seconds", "int", 30, "OAUTHBEARER: seconds of clock difference allowed when checking a signed JWT's exp and nbf."),
    ConfigDef("authorizer.class.name", "string", "", "The ACL authorizer: org.apache.kafka.metadata.authorizer.StandardAuthorizer (Kafka's name; any non-empty value turns Odradek's on); empty: every request is allowed and the ACL APIs answer SECURITY_DISABLED."),
    ConfigDef("super.users", "list", "", "Principals allowed everything whatever the ACLs say, as User:name entries separated by ;"),
    ConfigDef("allow.everyone.if.no.acl.found", "boolean", False, "With an authorizer: whether a resource no ACL matches is open to everyone."),
    ConfigDef("connection.failed.authentication.delay.ms", "int", 100, "How long a failed authentication waits before it is answered and the connection closed."),
    ConfigDef("connections.max.reauth.ms", "long", 0, "Longest a SASL session lasts before the client must re-authenticate (KIP-368); 0: for ever."),
    ConfigDef("advertised.listeners", "list", None, "Addresses given to clients; defaults to listeners (empty host: this machine's name)."),
    ConfigDef("log.dirs", "list", None, "Directories holding partition logs; defaults to log.dir."),
    ConfigDef("log.dir", "string", "/tmp/kafka-logs", "Log directory used when log.dirs is not set."),
    ConfigDef("broker.rack", "string", None, "Rack (failure domain) of this node."),
    ConfigDef("num.partitions", "int", 1, "Partitions of an auto-created topic, or of a created topic that names none."),
    ConfigDef("default.replication.factor", "short", 1, "Replication factor of auto-created topics and of created topics that name none."),
    ConfigDef("auto.create.topics.enable", "boolean", True, "Create a topic when a client asks for its metadata or produces to it."),
    ConfigDef("delete.topic.enable", "boolean", True, "Allow topics to be deleted."),
    ConfigDef("message.max.bytes", "int", 1048588, "Largest record batch accepted, after compression.", "max.message.bytes", False),
    ConfigDef("socket.request.max.bytes", "int", 104857600, "Largest request frame accepted; larger frames close the connection before any allocation."),
    ConfigDef("fetch.max.bytes", "int", 57671680, "Upper bound on the bytes of one fetch response."),
    ConfigDef("log.segment.bytes", "int", 1073741824, "Size at which a segment is rolled.", "segment.bytes", False),
    ConfigDef("log.roll.ms", "long", None, "Age at which a segment is rolled; defaults to log.roll.hours.", "segment.ms", False),
    ConfigDef("log.roll.hours", "int", 168, "Age in hours at which a segment is rolled."),
    ConfigDef("log.roll.jitter.ms", "long", None, "Random jitter subtracted from the roll age; defaults to log.roll.jitter.hours.", "segment.jitter.ms", False),
    ConfigDef("log.roll.jitter.hours", "int", 0, "Roll jitter in hours."),
    ConfigDef("log.index.interval.bytes", "int", 4096, "Bytes of log between two offset index entries.", "index.interval.bytes", False),
    ConfigDef("log.index.size.max.bytes", "int", 10485760, "Largest offset index size; a full index rolls the segment.", "segment.index.bytes", False),
    ConfigDef("log.retention.ms", "long", None, "How long segments are kept; defaults to log.retention.minutes.", "retention.ms", False),
    ConfigDef("log.retention.minutes", "int", None, "Retention in minutes; defaults to log.retention.hours."),
    ConfigDef("log.retention.hours", "int", 168, "Retention in hours."),
    ConfigDef("log.retention.bytes", "long", -1, "Size of a partition past which old segments are deleted; -1: no limit.", "retention.bytes", False),
    ConfigDef("log.retention.check.interval.ms", "long", 300000, "How often retention is applied."),
    ConfigDef("log.initial.task.delay.ms", "long", 30000, "Delay after start before the first retention check."),
    ConfigDef("producer.id.expiration.ms", "int", 86400000, "Idempotent producer state is dropped after this long without writes.", read_only=False),
    ConfigDef("log.segment.delete.delay.ms", "long", 60000, "Delay before a deleted segment's files are removed.", "file.delete.delay.ms", False),
    ConfigDef("log.cleanup.policy", "list", "delete", "delete, compact, or both.", "cleanup.policy", False),
    ConfigDef("log.cleaner.delete.retention.ms", "long", 86400000, "How long tombstones are kept on compacted topics.", "delete.retention.ms", False),
    ConfigDef("log.cleaner.min.compaction.lag.ms", "long", 0, "Minimum age of a record before it can be compacted.", "min.compaction.lag.ms", False),
    ConfigDef("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, "Maximum time a record stays ineligible for compaction.", "max.compaction.lag.ms", False),
    ConfigDef("log.cleaner.min.cleanable.ratio", "double", 0.5, "Dirty ratio above which a log is compacted.", "min.cleanable.dirty.ratio", False),
    ConfigDef("log.cleaner.enable", "boolean", True, "Run the log cleaner, which compacts topics with cleanup.policy=compact."),
    ConfigDef("log.cleaner.dedupe.buffer.size", "long", 134217728, "Memory for the cleaner's offset map (24 bytes a key): more keys than fit are compacted over several cleanings.", read_only=False),
    ConfigDef("log.cleaner.io.buffer.load.factor", "double", 0.9, "How full the cleaner's offset map may get.", read_only=False),
    ConfigDef("log.cleaner.backoff.ms", "long", 15000, "How long the cleaner sleeps when no log needs cleaning.", read_only=False),
    ConfigDef("log.cleaner.threads", "int", 1, "Kafka's cleaner thread count; Odradek's node cleans with one thread whatever the value.", read_only=False),
    ConfigDef("log.cleaner.io.buffer.size", "int", 524288, "Kafka's cleaner read/write buffer size; Odradek's cleaner sizes its own buffers.", read_only=False),
    ConfigDef("log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308, "Kafka's cleaner I/O limit; not applied by Odradek.", read_only=False),
    ConfigDef("log.flush.interval.messages", "long", LONG_MAX, "Records appended before an fsync; the default leaves flushing to the OS.", "flush.messages", False),
    ConfigDef("log.flush.interval.ms", "long", None, "Age of unflushed data before an fsync; defaults to log.flush.scheduler.interval.ms.", "flush.ms", False),
    ConfigDef("log.flush.scheduler.interval.ms", "long", LONG_MAX, "Default of log.flush.interval.ms (unlimited: flushing is left to the OS)."),
    ConfigDef("log.preallocate", "boolean", False, "Preallocate segment files.", "preallocate", False),
    ConfigDef("log.message.timestamp.type", "string", "CreateTime", "CreateTime or LogAppendTime.", "message.timestamp.type", False),
    ConfigDef("log.message.timestamp.before.max.ms", "long", LONG_MAX, "How far in the past a record timestamp may be.", "message.timestamp.before.max.ms", False),
    ConfigDef("log.message.timestamp.after.max.ms", "long", 3600000, "How far in the future a record timestamp may be.", "message.timestamp.after.max.ms", False),
    ConfigDef("compression.type", "string", "producer", "Compression of stored batches: producer (as sent), uncompressed, gzip, snappy, lz4, zstd.", "compression.type", False),
    ConfigDef("compression.gzip.level", "int", -1, "gzip level when the node compresses (compression.type=gzip).", "compression.gzip.level", False),
    ConfigDef("compression.lz4.level", "int", 9, "lz4 level when the node compresses (compression.type=lz4).", "compression.lz4.level", False),
    ConfigDef("compression.zstd.level", "int", 3, "zstd level when the node compresses (compression.type=zstd).", "compression.zstd.level", False),
    ConfigDef("log.local.retention.ms", "long", -2, "Tiered storage's local retention; Odradek has no tiered storage, so it is only described.", "local.retention.ms", False),
    ConfigDef("log.local.retention.bytes", "long", -2, "Tiered storage's local retention; Odradek has no tiered storage, so it is only described.", "local.retention.bytes", False),
    ConfigDef("offsets.topic.num.partitions", "int", 50, "Partitions of __consumer_offsets, created when first needed."),
    ConfigDef("offsets.topic.replication.factor", "short", 3, "Replication factor of __consumer_offsets (at most the number of nodes)."),
    ConfigDef("offsets.topic.segment.bytes", "int", 104857600, "segment.bytes of __consumer_offsets."),
    ConfigDef("offsets.retention.minutes", "int", 10080, "Committed offsets of an empty group expire after this long."),
    ConfigDef("offsets.retention.check.interval.ms", "long", 600000, "How often expired offsets are removed."),
    ConfigDef("offset.metadata.max.bytes", "int", 4096, "Largest metadata string of a committed offset."),
    ConfigDef("transaction.state.log.num.partitions", "int", 50, "Partitions of __transaction_state, created when first needed."),
    ConfigDef("transaction.state.log.replication.factor", "short", 3, "Replication factor of __transaction_state (at most the number of nodes)."),
    ConfigDef("transaction.state.log.min.isr", "int", 2, "min.insync.replicas of __transaction_state (at most its replication factor)."),
    ConfigDef("transaction.state.log.segment.bytes", "int", 104857600, "segment.bytes of __transaction_state."),
    ConfigDef("transaction.max.timeout.ms", "int", 900000, "Largest transaction.timeout.ms a producer may ask for."),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000, "How often transactions older than their timeout are aborted."),
    ConfigDef("transactional.id.expiration.ms", "int", 604800000, "A transactional id without a transaction for this long is forgotten (its producer must init again)."),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000, "How often expired transactional ids are removed."),
    ConfigDef("group.initial.rebalance.delay.ms", "int", 3000, "How long a new group waits for more members before its first rebalance."),
    ConfigDef("group.min.session.timeout.ms", "int", 6000, "Smallest session timeout a consumer may ask for."),
    ConfigDef("group.max.session.timeout.ms", "int", 1800000, "Largest session timeout a consumer may ask for."),
    ConfigDef("group.max.size", "int", 2147483647, "Most members a consumer group may have."),
    ConfigDef("group.consumer.session.timeout.ms", "int", 45000, "Session timeout of members of KIP-848 consumer groups."),
    ConfigDef("group.consumer.heartbeat.interval.ms", "int", 5000, "Heartbeat interval given to members of KIP-848 consumer groups."),
    ConfigDef("group.consumer.assignors", "list", "uniform,range", "Server-side assignors of KIP-848 groups; the first is the default."),
    ConfigDef("min.insync.replicas", "int", 1, "In-sync replicas needed for an acks=all write.", "min.insync.replicas", False),
    ConfigDef("unclean.leader.election.enable", "boolean", False, "Allow an out-of-sync replica to become leader.", "unclean.leader.election.enable", False),
    ConfigDef("leader.replication.throttled.rate", "long", LONG_MAX, "Bytes/s this node sends to followers of the partitions listed in their topic's leader.replication.throttled.replicas.", read_only=False, dynamic_only=True),
    ConfigDef("follower.replication.throttled.rate", "long", LONG_MAX, "Bytes/s this node fetches as a follower of the partitions listed in their topic's follower.replication.throttled.replicas.", read_only=False, dynamic_only=True),
    ConfigDef("replica.alter.log.dirs.io.max.bytes.per.second", "long", LONG_MAX, "Bytes/s at which AlterReplicaLogDirs copies a partition to another log dir.", read_only=False, dynamic_only=True),
    ConfigDef("max.connections", "int", 2147483647, "Client connections this node accepts on its client listeners; more are closed at once.", read_only=False),
    ConfigDef("max.connections.per.ip", "int", 2147483647, "Client connections this node accepts from one address; more are closed at once.", read_only=False),
    ConfigDef("max.connections.per.ip.overrides", "string", "", "Per-address exceptions to max.connections.per.ip, as host:count entries (a host name stands for its address).", read_only=False),
    ConfigDef("max.connection.creation.rate", "int", 2147483647, "New connections per second this node accepts on its client listeners; a connection past it waits before it is accepted (not on the inter-broker listener while there are others). An address's own limit is the connection_creation_rate client quota.", read_only=False),
    ConfigDef("quota.window.num", "int", 11, "Samples (windows) over which client byte rates, request time and connection rates are measured."),
    ConfigDef("quota.window.size.seconds", "int", 1, "Length of one sample of client quotas."),
    ConfigDef("controller.quota.window.num", "int", 11, "Samples over which controller mutation rates (controller_mutation_rate) are measured."),
    ConfigDef("controller.quota.window.size.seconds", "int", 1, "Length of one sample of controller mutation quotas."),
    ConfigDef("connections.max.idle.ms", "long", 600000,
              "A client connection with no request (and no answer written) for this long is closed, and a request "
              "that reaches it as it closes is not handled; -1: never."),
    ConfigDef("num.network.threads", "int", 3, "Kafka's network thread count; a node is one asyncio thread, so it is only described.", read_only=False),
    ConfigDef("num.io.threads", "int", 8, "Kafka's request handler thread count; a node is one asyncio thread, so it is only described.", read_only=False),
    ConfigDef("background.threads", "int", 10, "Kafka's background thread count; a node is one asyncio thread, so it is only described.", read_only=False),
    ConfigDef("num.replica.fetchers", "int", 1, "Kafka's fetcher threads per source broker; Odradek runs one fetcher task per leader.", read_only=False),
    ConfigDef("num.recovery.threads.per.data.dir", "int", 2, "Kafka's log recovery thread count; Odradek recovers logs one at a time.", read_only=False),
    ConfigDef("socket.send.buffer.bytes", "int", 102400, "Kafka's socket send buffer size; Odradek leaves buffer sizes to the OS."),
    ConfigDef("socket.receive.buffer.bytes", "int", 102400, "Kafka's socket receive buffer size; Odradek leaves buffer sizes to the OS."),
    ConfigDef("metrics.listener", "string", "", "Odradek's HTTP port, as http://host:port: Prometheus metrics at /metrics (Kafka's JMX exporter names, docs/monitoring.md) and the web console at /. An empty host binds all interfaces; port 0 takes a free port, named in the log. Empty: no HTTP port."),
    ConfigDef("schema.registry.listener", "string", "", "The schema registry's HTTP port, as http://host:port: Confluent Schema Registry's REST API (docs/schema-registry.md), stored in schema.registry.topic. Every node that has one answers reads; writes go to the node that leads the topic's partition. Port 0 takes a free port, named in the log. Empty: no registry on this node."),
    ConfigDef("schema.registry.topic", "string", "_schemas", "The compacted one-partition topic that holds the schema registry's schemas, configs and modes, in Confluent's record format (Confluent's kafkastore.topic)."),
    ConfigDef("schema.registry.topic.replication.factor", "int", 3, "Replicas of schema.registry.topic when the registry creates it, at most the number of nodes then in the cluster (Confluent's kafkastore.topic.replication.factor)."),
    ConfigDef("balancer.mode", "string", "continuous", "What the partition balancer does by itself (docs/balancer.md): off (only what operators ask for), node_add (a node that holds no replica gets its share), continuous (also: the replicas of a node unavailable longer than balancer.node.unavailable.timeout.ms are rebuilt on the others, and a log dir above balancer.disk.max.ratio sheds partitions; with fewer than 3 nodes it acts as node_add). The balancer runs on the node leading partition 0 of __balancer_execution; every broker should have the same balancer settings."),
    ConfigDef("balancer.node.unavailable.timeout.ms", "long", 900000, "How long a node may be unavailable (fenced) before the balancer, in continuous mode, rebuilds its replicas on the other nodes so that every partition is back to its replication factor."),
    ConfigDef("balancer.check.interval.ms", "long", 5000, "How often the balancer reads the load samples and its requests, steps the execution under way and, in node_add and continuous modes, checks whether to act by itself."),
    ConfigDef("balancer.max.moves.per.node", "int", 5, "Replica moves in flight that add or remove a replica on one node (Cruise Control's num.concurrent.partition.movements.per.broker)."),
    ConfigDef("balancer.max.moves.total", "int", 10, "Replica moves in flight in the whole cluster (Cruise Control's max.num.cluster.partition.movements)."),
    ConfigDef("balancer.throttle.bytes.per.s", "long", 0, "The replication throttle the balancer sets on the nodes and topics its moves involve while they run (leader.replication.throttled.rate and follower.replication.throttled.rate, with the throttled replica lists), removed when they finish; 0: no throttle."),
    ConfigDef("balancer.disk.max.ratio", "double", 0.85, "DiskCapacityGoal: no log dir may hold more than this share of its capacity; in continuous mode a fuller one sheds partitions."),
    ConfigDef("balancer.network.inbound.max.ratio", "double", 0.80, "NetworkInboundCapacityGoal: a node's network in stays below this share of its capacity."),
    ConfigDef("balancer.network.outbound.max.ratio", "double", 0.80, "NetworkOutboundCapacityGoal: a node's network out stays below this share of its capacity."),
    ConfigDef("balancer.replica.count.balance.threshold", "double", 1.10, "ReplicaDistributionGoal: a node's replica count within [share x (2 - t), share x t]."),
    ConfigDef("balancer.leader.replica.count.balance.threshold", "double", 1.10, "LeaderReplicaDistributionGoal: a node's leader count within [share x (2 - t), share x t]."),
    ConfigDef("balancer.disk.balance.threshold", "double", 1.10, "DiskUsageDistributionGoal: a node's disk use, relative to capacity, within [share x (2 - t), share x t]."),
    ConfigDef("balancer.network.inbound.balance.threshold", "double", 1.10, "NetworkInboundUsageDistributionGoal and LeaderBytesInDistributionGoal: network in within [share x (2 - t), share x t]."),
    ConfigDef("balancer.network.outbound.balance.threshold", "double", 1.10, "NetworkOutboundUsageDistributionGoal: network out within [share x (2 - t), share x t]."),
    ConfigDef("balancer.topic.replica.count.balance.threshold", "double", 3.00, "TopicReplicaDistributionGoal: each topic's replicas per node within [share x (2 - t), share x t], the gap to the share kept between the min and max gaps."),
    ConfigDef("balancer.topic.replica.count.balance.min.gap", "int", 2, "TopicReplicaDistributionGoal: the bounds are at least this many replicas from a topic's share."),
    ConfigDef("balancer.topic.replica.count.balance.max.gap", "int", 40, "TopicReplicaDistributionGoal: the bounds are at most this many replicas from a topic's share."),
    ConfigDef("balancer.sampling.enable", "boolean", True, "Sample this node's load for the partition balancer: every balancer.sample.interval.ms, its log dirs (capacity and use) and, per partition it hosts, the size on disk and (where it leads) the bytes and requests produced and fetched since the previous sample, published to the internal topic __balancer_samples (docs/balancer.md)."),
    ConfigDef("balancer.sample.interval.ms", "long", 60000, "How often a node samples its load for the partition balancer (balancer.sampling.enable)."),
    ConfigDef("balancer.window.ms", "long", 3600000, "The window over which the partition balancer averages the sampled rates of a partition, so that a burst does not move data; __balancer_samples keeps twice this."),
)

BROKER_CONFIG_BY_NAME = {c.name: c for c in BROKER_CONFIGS}
BALANCER_MODES = ("off", "node_add", "continuous")

PER_IP_ZERO_NEEDS_OVERRIDES = ("max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides "
                               "property is set.")

# The ranges Kafka's validators allow for its numeric broker settings: (at least, at most or None).
RANGES: dict[str, tuple[int, int | None]] = {
    "background.threads": (1, None),
    "balancer.check.interval.ms": (1, None),
    "balancer.max.moves.per.node": (1, None),
    "balancer.max.moves.total": (1, None),
    "balancer.node.unavailable.timeout.ms": (1000, None),
    "balancer.sample.interval.ms": (1, None),
    "balancer.throttle.bytes.per.s": (0, None),
    "balancer.window.ms": (1, None),
    "compression.lz4.level": (1, 17),
    "compression.zstd.level": (-131072, 22),
    "controller.quota.window.num": (1, None),
    "controller.quota.window.size.seconds": (1, None),
    "fetch.max.bytes": (1024, None),
    "group.consumer.heartbeat.interval.ms": (1, None),
    "group.consumer.session.timeout.ms": (1, None),
    "group.max.size": (1, None),
    "leader.imbalance.check.interval.seconds": (1, None),
    "log.cleaner.backoff.ms": (0, None),
    "log.cleaner.delete.retention.ms": (0, None),
    "log.cleaner.io.buffer.size": (0, None),
    "log.cleaner.max.compaction.lag.ms": (1, None),
    "log.cleaner.min.cleanable.ratio": (0, 1),
    "log.cleaner.min.compaction.lag.ms": (0, None),
    "log.cleaner.threads": (0, None),
    "log.flush.interval.messages": (1, None),
    "log.index.interval.bytes": (0, None),
    "log.index.size.max.bytes": (4, None),
    "log.initial.task.delay.ms": (0, None),
    "log.local.retention.bytes": (-2, None),
    "log.local.retention.ms": (-2, None),
    "log.message.timestamp.after.max.ms": (0, None),
    "log.message.timestamp.before.max.ms": (0, None),
    "log.retention.check.interval.ms": (1, None),
    "log.roll.hours": (1, None),
    "log.roll.jitter.hours": (0, None),
    "log.segment.bytes": (1048576, None),
    "log.segment.delete.delay.ms": (0, None),
    "max.connection.creation.rate": (0, None),
    "max.connections": (0, None),
    "max.connections.per.ip": (0, None),
    "message.max.bytes": (0, None),
    "metadata.log.max.record.bytes.between.snapshots": (1, None),
    "min.insync.replicas": (1, None),
    "node.id": (0, None),
    "num.io.threads": (1, None),
    "num.network.threads": (1, None),
    "num.partitions": (1, None),
    "num.recovery.threads.per.data.dir": (1, None),
    "offsets.retention.check.interval.ms": (1, None),
    "offsets.retention.minutes": (1, None),
    "offsets.topic.num.partitions": (1, None),
    "offsets.topic.replication.factor": (1, None),
    "offsets.topic.segment.bytes": (1, None),
    "producer.id.expiration.ms": (1, None),
    "quota.window.num": (1, None),
    "quota.window.size.seconds": (1, None),
    "replica.fetch.backoff.ms": (0, None),
    "replica.fetch.max.bytes": (0, None),
    "replica.fetch.response.max.bytes": (0, None),
    "socket.request.max.bytes": (1, None),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (1, None),
    "transaction.max.timeout.ms": (1, None),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (1, None),
    "transaction.state.log.min.isr": (1, None),
    "transaction.state.log.num.partitions": (1, None),
    "transaction.state.log.replication.factor": (1, None),
    "transaction.state.log.segment.bytes": (1, None),
    "transactional.id.expiration.ms": (1, None),
}

# Broker settings that stand for one another, in precedence order (Kafka's DynamicBrokerConfig synonyms).
_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)


def broker_synonyms(name: str) -> tuple[str, ...]:
    """`name` and the settings it falls back to, or that fall back to each other, in Kafka's order."""
    if name == "log.flush.interval.ms":  # the scheduler interval is its default, not the other way round
        return name, "log.flush.scheduler.interval.ms"
    return next((group for group in _SYNONYM_GROUPS if name in group), (name,))



TOPIC_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9._-]+$")
TOPIC_NAME_MAX_LENGTH = 249


def parse_properties(text: str) -> dict[str, str]:
    """Java-style .properties: key=value or key: value, # and ! comments, backslash line continuation."""
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        match = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if match:
            props[match.group(1)] = match.group(2)
        else:
            props[line] = ""
    return props


def parse_overrides(overrides: Iterable[str]) -> dict[str, str]:
    props = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects key=value, got {item!r}")
        props[key.strip()] = value.strip()
    return props


_INTEGER_RANGES = {"short": 2**15, "int": 2**31, "long": 2**63}


def convert(definition: ConfigDef, value: str) -> object:
    """A setting's text as its type; a ConfigError in Kafka's words when it is not one."""
    kind = definition.type

    def invalid(why: str) -> ConfigError:
        return ConfigError(f"Invalid value {value} for configuration {definition.name}: {why}")

    text = value.strip()
    if kind == "boolean":
        if text.lower() not in ("true", "false"):
            raise invalid("Expected value to be either true or false")
        return text.lower() == "true"
    if kind in _INTEGER_RANGES:
        try:
            number = int(text)
        except ValueError:
            raise invalid(f"Not a number of type {kind.upper()}") from None
        if not -_INTEGER_RANGES[kind] <= number < _INTEGER_RANGES[kind]:
            raise invalid(f"Not a number of type {kind.upper()}")
        return _in_range(definition.name, number, invalid)
    if kind == "double":
        try:
            number = float(text)
        except ValueError:
            raise invalid("Not a number of type DOUBLE") from None
        return _in_range(definition.name, number, invalid)
    return value


def _in_range(name: str, number, invalid):
    low, high = RANGES.get(name, (None, None))
    if low is not None and number < low:
        raise invalid(f"Value must be at least {low}")
    if high is not None and number > high:
        raise invalid(f"Value must be no more than {high}")
    return number


@functools.lru_cache(maxsize=16)
def parse_connection_overrides(text: str) -> dict[str, int]:
    overrides = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise ConfigError(f"Error parsing configuration property 'max.connections.per.ip.overrides': expected "
                              f"host:count, got {item!r}")
        try:
            address = socket.getaddrinfo(host.strip("[]"), None)[0][4][0]
        except OSError:
            raise ConfigError(f"max.connections.per.ip.overrides contains invalid addresses : {host}") from None
        overrides[address] = int(count)
    return overrides


LISTENER_PREFIX = "listener.name."
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}  # Kafka's SecurityProtocol ids


def unprefixed(name: str) -> str:
    """listener.name.<listener>.[<mechanism>.]<setting> -> <setting> (the setting names start with ssl. or sasl.)."""
    if not name.startswith(LISTENER_PREFIX):
        return name
    rest = name[len(LISTENER_PREFIX):]
    for marker in (".ssl.", ".sasl.", ".connections."):
        at = rest.find(marker)
        if at >= 0:
            return rest[at + 1:]
    return name


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int


def parse_metrics_listener(value: str, name: str = "metrics.listener", example_port: str = "9644") -> tuple[str, int]:
    """An HTTP listener's http://host:port (a path of / or /metrics is allowed) -> (host, port); "" is all hosts."""
    from urllib.parse import urlsplit

    expected = f"{name}: expected http://host:port (as http://127.0.0.1:{example_port}), got {value!r}"
    try:
        url = urlsplit(value.strip())
        port = url.port
    except ValueError:
        raise ConfigError(expected) from None
    if url.scheme != "http" or port is None or url.path not in ("", "/", "/metrics") or url.query \
            or url.fragment or url.username is not None:
        raise ConfigError(expected)
    return url.hostname or "", port


def parse_listeners(value: str) -> list[Listener]:
    listeners = []
    for item in filter(None, (part.strip() for part in value.split(","))):
        match = re.match(r"^([A-Za-z0-9_]+)://\[?([^\]]*?)\]?:(\d+)$", item)
        if not match:
            raise ConfigError(f"listeners: cannot parse {item!r}, expected NAME://host:port")
        listeners.append(Listener(match.group(1).upper(), match.group(2), int(match.group(3))))
    return listeners


class BrokerConfig:
    """The node's static configuration: explicit settings over Kafka's defaults."""

    def __init__(self, props: Mapping[str, str] | None = None):
        self.explicit: dict[str, str] = dict(props or {})
        # As Kafka does, broker.id is given the value of node.id (or the other way round) when only one is set.
        for given, missing in (("node.id", "broker.id"), ("broker.id", "node.id")):
            if given in self.explicit and missing not in self.explicit:
                self.explicit[missing] = self.explicit[given]
        self.values: dict[str, object] = {}
        for definition in BROKER_CONFIGS:
            raw = self.explicit.get(definition.name)
            self.values[definition.name] = definition.default if raw is None else convert(definition, raw)
        self.unknown = sorted(name for name in self.explicit
                              if name not in BROKER_CONFIG_BY_NAME and unprefixed(name) not in BROKER_CONFIG_BY_NAME
                              and name != CONFIG_PROVIDERS and not name.startswith(CONFIG_PROVIDERS + "."))
        self._validate()

    @classmethod
    def load(cls, config_file: str | None, overrides: Iterable[str] = ()) -> BrokerConfig:
        props: dict[str, str] = {}
        if config_file:
            try:
                props.update(parse_properties(Path(config_file).read_text()))
            except OSError as exc:
                raise ConfigError(f"cannot read config file {config_file}: {exc.strerror}") from None
        props.update(parse_overrides(overrides))
        from odradek.config_providers import resolve_config_providers  # it builds on this module

        return cls(resolve_config_providers(props))

    def __getitem__(self, name: str):
        return self.values[name]

    def _validate(self) -> None:
        if self["broker.id"] != -1 and self["broker.id"] != self["node.id"]:
            raise ConfigError(f"broker.id {self['broker.id']} must equal node.id {self['node.id']}")
        self.security_protocols()
        for name, raw in self.explicit.items():  # per-listener overrides are checked as their setting is
            if name.startswith(LISTENER_PREFIX) and unprefixed(name) in BROKER_CONFIG_BY_NAME:
                convert(BROKER_CONFIG_BY_NAME[unprefixed(name)], raw)
        if self["max.connections.per.ip"] == 0 and not self["max.connections.per.ip.overrides"]:
            raise ConfigError(PER_IP_ZERO_NEEDS_OVERRIDES)
        self.max_connections_per_ip_overrides()
        roles = self.process_roles
        if not roles or not roles <= {"broker", "controller"}:
            raise ConfigError(f"process.roles: expected broker, controller or both, got {self['process.roles']!r}")
        if "broker" in roles and not self.listeners:
            raise ConfigError("listeners: a broker needs at least one client listener")
        if self["controller.quorum.bootstrap.servers"]:
            raise ConfigError("controller.quorum.bootstrap.servers: dynamic quorums are not supported yet; list the "
                              "voters in controller.quorum.voters")
        voters = self.quorum_voters
        if roles != {"broker", "controller"} and not voters:
            raise ConfigError("controller.quorum.voters: a node with only one role needs the controllers' addresses")
        if voters:
            if ("controller" in roles) != (self.node_id in voters):
                raise ConfigError(f"controller.quorum.voters: node.id {self.node_id} must be a voter exactly when "
                                  "process.roles includes controller")
            if "controller" in roles and not self.controller_listeners:
                raise ConfigError(f"listeners: a controller listener ({self['controller.listener.names']}) is "
                                  "required with controller.quorum.voters")
        name = self["inter.broker.listener.name"]
        if name and all(listener.name != name.upper() for listener in self.listeners):
            raise ConfigError(f"inter.broker.listener.name: no listener is named {name}")
        if self["metrics.listener"]:
            parse_metrics_listener(self["metrics.listener"])
        if self["schema.registry.listener"]:
            parse_metrics_listener(self["schema.registry.listener"], "schema.registry.listener", "8081")
        self._validate_balancer()
        for name in ("default.replication.factor", "message.max.bytes"):
            if self[name] <= 0:
                raise ConfigError(f"{name} must be positive, got {self[name]}")

    def _validate_balancer(self) -> None:
        if self["balancer.mode"] not in BALANCER_MODES:
            raise ConfigError(f"balancer.mode: expected one of {', '.join(BALANCER_MODES)}, got {self['balancer.mode']!r}")
        from odradek.balancer.goals import SETTING_NAMES, BalancerSettings
        from odradek.balancer.model import BalancerError

        try:
            BalancerSettings.from_properties({name: str(self[name]) for name in SETTING_NAMES.values()})
        except BalancerError as exc:
            raise ConfigError(str(exc)) from None

    def security_protocols(self) -> dict[str, str]:
        """Listener name -> security protocol, of this node's listeners; a ConfigError for a listener without one."""
        return {listener.name: self.security_protocol_of(listener.name) for listener in parse_listeners(self["listeners"])}

    def security_protocol_of(self, listener: str) -> str:
        """The security protocol of a listener name, this node's or another node's (a broker reaches the
        controllers' listener): from listener.security.protocol.map."""
        mapping = {}
        for item in filter(None, (part.strip() for part in self["listener.security.protocol.map"].split(","))):
            name, sep, protocol = item.partition(":")
            if not sep or not name.strip() or not protocol.strip():
                raise ConfigError(f"listener.security.protocol.map: cannot parse {item!r}, expected NAME:PROTOCOL")
            mapping[name.strip().upper()] = protocol.strip().upper()
        protocol = mapping.get(listener)
        if protocol is None and "listener.security.protocol.map" not in self.explicit \
                and listener in self._controller_listener_names():
            protocol = "PLAINTEXT"  # Kafka's rule for an unmapped controller listener
        if protocol is None:
            raise ConfigError(f"No security protocol defined for listener {listener}")
        if protocol not in SECURITY_PROTOCOL_IDS:
            raise ConfigError(f"listener.security.protocol.map: unknown security protocol {protocol}")
        return protocol

    def listener_setting(self, listener: str, name: str, mechanism: str | None = None):
        """A TLS or SASL setting as one listener sees it: listener.name.<listener>.[<mechanism>.]<name> when
        given (Kafka's per-listener override), else the node-wide setting."""
        prefix = f"{LISTENER_PREFIX}{listener.lower()}."
        keys = ([f"{prefix}{mechanism.lower()}.{name}"] if mechanism else []) + [prefix + name]
        for key in keys:
            if key in self.explicit:
                return convert(BROKER_CONFIG_BY_NAME[name], self.explicit[key])
        return self[name]

    def max_connections_per_ip_overrides(self) -> dict[str, int]:
        """max.connections.per.ip.overrides as address -> count (host names resolved, as Kafka does)."""
        return parse_connection_overrides(self["max.connections.per.ip.overrides"])

    @property
    def process_roles(self) -> set[str]:
        return {role.strip() for role in self["process.roles"].split(",") if role.strip()}

    @property
    def node_id(self) -> int:
        return self["node.id"]

    @property
    def listeners(self) -> list[Listener]:
        """The client listeners (the controller listeners excluded)."""
        names = self._controller_listener_names()
        return [listener for listener in parse_listeners(self["listeners"]) if listener.name not in names]

    @property
    def controller_listeners(self) -> list[Listener]:
        names = self._controller_listener_names()
        return [listener for listener in parse_listeners(self["listeners"]) if listener.name in names]

    def _controller_listener_names(self) -> set[str]:
        return {name.strip().upper() for name in self["controller.listener.names"].split(",") if name.strip()}

    @property
    def controller_listener_name(self) -> str:
        """The listener name of the controllers' quorum endpoints: the first of controller.listener.names."""
        return next((name.strip().upper() for name in self["controller.listener.names"].split(",") if name.strip()),
                    "CONTROLLER")

    @property
    def inter_broker_listener(self) -> str:
        return (self["inter.broker.listener.name"] or (self.listeners[0].name if self.listeners else "")).upper()

    @property
    def quorum_voters(self) -> dict[int, tuple[str, int]]:
        """node id -> (host, port) of each voter's controller listener; empty when this node is the whole quorum."""
        voters = {}
        for item in filter(None, (part.strip() for part in (self["controller.quorum.voters"] or "").split(","))):
            match = re.match(r"^(\d+)@\[?([^\]]+?)\]?:(\d+)$", item)
            if not match:
                raise ConfigError(f"controller.quorum.voters: cannot parse {item!r}, expected id@host:port")
            voters[int(match.group(1))] = (match.group(2), int(match.group(3)))
        return voters

    @property
    def advertised_listeners(self) -> list[Listener]:
        if self["advertised.listeners"]:
            return parse_listeners(self["advertised.listeners"])
        return [Listener(listener.name, listener.host if listener.host not in ("", "0.0.0.0") else socket.getfqdn(), listener.port)
                for listener in self.listeners]

    @property
    def log_dirs(self) -> list[str]:
        value = self["log.dirs"] or self["log.dir"]
        return [part.strip() for part in value.split(",") if part.strip()]

    def topic_defaults(self) -> dict[str, str]:
        """The broker-level defaults of every topic config, keyed by topic config name."""
        defaults = {}
        for definition in BROKER_CONFIGS:
            if definition.topic_name and self.values[definition.name] is not None:
                defaults[definition.topic_name] = _to_text(self.values[definition.name])
        defaults["retention.ms"] = str(self.retention_ms)
        defaults["segment.ms"] = str(self.roll_ms)
        defaults["segment.jitter.ms"] = str(self.roll_jitter_ms)
        if self.values["log.flush.interval.ms"] is None:
            defaults["flush.ms"] = str(self["log.flush.scheduler.interval.ms"])
        return defaults

    @property
    def retention_ms(self) -> int:
        if self["log.retention.ms"] is not None:
            return self["log.retention.ms"]
        if self["log.retention.minutes"] is not None:
            return self["log.retention.minutes"] * 60_000
        return self["log.retention.hours"] * 3_600_000

    @property
    def roll_ms(self) -> int:
        if self["log.roll.ms"] is not None:
            return self["log.roll.ms"]
        return self["log.roll.hours"] * 3_600_000

    @property
    def roll_jitter_ms(self) -> int:
        if self["log.roll.jitter.ms"] is not None:
            return self["log.roll.jitter.ms"]
        return self["log.roll.jitter.hours"] * 3_600_000


def _to_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def validate_topic_name(name: str) -> str | None:
    """None if `name` is a legal topic name, else why not (Kafka's rules, in its words)."""
    if not name:
        return "the empty string is not allowed"
    if name in (".", ".."):
        return f"'{name}' is not allowed"
    if len(name) > TOPIC_NAME_MAX_LENGTH:
        return f"the length of '{name}' is longer than the max allowed length {TOPIC_NAME_MAX_LENGTH}"
    if not TOPIC_NAME_PATTERN.match(name):
        return f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None

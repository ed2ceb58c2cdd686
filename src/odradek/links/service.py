"""A node's part in cluster links (mirror.py feeds mirror partitions, sync.py keeps mirror topics in step).

Nothing runs until the cluster has a `__cluster_links` topic (the first `odradek links create` makes it): then
the node reads it, feeds the mirror partitions it leads, and, while it leads the topic's partition, syncs the
links' topics. The produce path asks `write_refusal` whether a topic takes writes: not an active mirror, and
not while the node has yet to read which topics are mirrors (after a restart).

The node's own clients of its cluster (the reader, the sync's admin client and producers) connect to its
inter-broker listener and log in as the node logs in to other brokers (security/internal_client.py): under an
authorizer they act as the broker's principal, as Kafka's brokers do, and the links work on a cluster whose
listeners all ask for SASL.
"""

from __future__ import annotations

import asyncio
import logging
import threading

from odradek.links.definition import INTERNAL_PREFIX, LINKS_TOPIC, LinkDefinition
from odradek.links.mirror import MirrorFetchers
from odradek.network.client import ClientSecurity
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

WATCH_INTERVAL_S = 0.5
SYNC_INTERVAL_S = 2.0


class ClusterLinks:
    def __init__(self, node):
        self.node = node
        self.reader = None  # a LinkStateReader, once the cluster has links
        self.fetchers: MirrorFetchers | None = None
        self._tasks: list[asyncio.Task] = []

    def read_only(self, topic: str) -> str | None:
        """The link whose active mirror `topic` is, or None (also before any link exists)."""
        reader = self.reader
        if reader is None:
            return None
        with reader.lock:
            return reader.state.read_only(topic)

    def reserves(self, topic: str) -> bool:
        """Whether auto-creation must leave the name `topic` to a link (see LinkState.reserved_by); also while
        this node has yet to read the links."""
        reader = self.reader
        if reader is None or not reader.ready.is_set():
            return LINKS_TOPIC in self.node.image.topics and not topic.startswith(INTERNAL_PREFIX)
        with reader.lock:
            return reader.state.reserved_by(topic) is not None

    def write_refusal(self, topic: str) -> tuple[ErrorCode, str] | None:
        """Why a producer may not write to `topic` now (an error code and message), or None when it may. Until
        this node has read the whole `__cluster_links` topic it cannot tell a mirror from any other topic: the
        refusal is then retriable, so producers wait instead of writing into a mirror."""
        reader = self.reader
        if reader is None or not reader.ready.is_set():
            if LINKS_TOPIC not in self.node.image.topics or topic.startswith(INTERNAL_PREFIX):
                return None
            return (ErrorCode.LEADER_NOT_AVAILABLE, f"Node {self.node.node_id} is still reading the cluster links "
                    "(which topics are read-only mirrors)")
        link = self.read_only(topic)
        if link is None:
            return None
        return (ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"Topic {topic} is a mirror of cluster link {link}: read-only until it is promoted")

    async def run(self) -> None:
        try:
            await self._run()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Cluster links stopped on this node")

    async def _run(self) -> None:
        while LINKS_TOPIC not in self.node.image.topics:
            await asyncio.sleep(WATCH_INTERVAL_S)
        # here, not at the top: a node without links never loads the client library
        from odradek.links.store import LinkStateReader
        from odradek.links.sync import TopicSync
        from odradek.security.internal_client import internal_client_properties

        # the node's own clients: its inter-broker listener, logged in as the node (the broker's principal)
        bootstrap, properties = internal_client_properties(self.node.config)
        self.reader = LinkStateReader(bootstrap, properties, self.node.node_id)
        self.reader.start()
        self.fetchers = MirrorFetchers(self.node, self.reader, _source_security)
        self._tasks.append(asyncio.get_running_loop().create_task(self.fetchers.run()))
        sync = TopicSync(self.reader, {"bootstrap.servers": bootstrap, **properties})
        while True:
            await asyncio.sleep(SYNC_INTERVAL_S)
            partition = self.node.replicas.partitions.get((LINKS_TOPIC, 0))
            if partition is not None and partition.is_leader and self.reader.ready.is_set():
                try:
                    await _in_daemon_thread(sync.sync_once)
                except Exception:
                    log.exception("Cluster link topic sync failed")

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self.reader is not None:
            self.reader.close()


def _in_daemon_thread(function) -> asyncio.Future:
    """Run a blocking function on a thread of its own that never holds up the node's exit (a sync pass can
    wait tens of seconds on a source that does not answer)."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(outcome, value) -> None:
        if not future.done():
            (future.set_result if outcome else future.set_exception)(value)

    def run() -> None:
        try:
            result = (True, function())
        except Exception as exc:
            result = (False, exc)
        try:
            loop.call_soon_threadsafe(settle, *result)
        except RuntimeError:  # the node's loop has closed: nobody waits any more
            pass

    threading.Thread(target=run, name="cluster-links-sync", daemon=True).start()
    return future


def _source_security(link: LinkDefinition) -> ClientSecurity | None:
    """The TLS and SASL settings of the link's source config (librdkafka's names); ValueError if unusable."""
    from odradek.security.client_properties import client_security

    return client_security(link.source_config)

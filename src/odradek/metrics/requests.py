"""RequestMetrics: Kafka's per-request-type time histograms (kafka.network:type=RequestMetrics) for one event loop.

Kafka's request goes from a network thread through a queue to a handler thread, may wait in purgatory, and
goes back through a response queue to the network thread. A node does all of that on one event loop, so the
components are defined by the moments the server sees (docs/monitoring.md):

- received: the read that completed the request's frame returned;
- started: the dispatcher is called on it (after the requests before it on the connection, a quota's mute,
  and the deferred acks=all answers a non-produce request waits for);
- local done: the dispatcher returned (decoding, the handler's synchronous part, encoding an immediate answer);
- ready: the answer exists (an acks=all produce's replication, a long-poll fetch, a forwarded or coordinator
  request, any handler's asynchronous part);
- sent: the write (or sendfile) that carried the last of it returned.

requestqueuetimems = started - received, localtimems = local done - started, remotetimems = ready - local
done, responsesendtimems = sent - ready, totaltimems = sent - received (their sum). Fetches are named
FetchConsumer or FetchFollower as in Kafka; a request without a response (acks=0) ends when it is ready.
"""

from __future__ import annotations

import struct
import time
from bisect import bisect_left
from collections.abc import Iterable

from odradek.metrics.registry import Counter, Histogram, MetricFamily
from odradek.protocol.headers import parse_request_header
from odradek.protocol.messages import API_BY_KEY
from odradek.protocol.types import INT32

FETCH_API_KEY = 1
LAST_FETCH_VERSION_WITH_REPLICA_ID = 14  # from v15 a follower says who it is in a tagged field (ReplicaState)
PREFIX = "kafka_network_requestmetrics_"
COMPONENTS = (
    ("totaltimems", "Milliseconds from a request's last byte read to its response's last byte written."),
    ("requestqueuetimems", "Milliseconds a request waited, read, before the dispatcher took it (requests before "
                           "it on its connection, a quota's mute, deferred answers it must follow)."),
    ("localtimems", "Milliseconds of the dispatcher's synchronous work on a request: decoding, the handler until "
                    "it first waits, encoding an immediate answer."),
    ("remotetimems", "Milliseconds from the end of the synchronous work until the answer was ready: waiting for "
                     "replication (acks=all), a long-poll fetch, the controller, a coordinator's write."),
    ("responsesendtimems", "Milliseconds from the answer being ready until its last byte was written to the "
                           "socket (including answers before it on the connection)."),
)
_KEY_VERSION = struct.Struct(">hh")

now = time.perf_counter


def request_name(frame, api_key: int, api_version: int) -> str:
    """Kafka's RequestMetrics name: the API's name, FetchConsumer or FetchFollower for Fetch."""
    if api_key == FETCH_API_KEY:
        if api_version <= LAST_FETCH_VERSION_WITH_REPLICA_ID:
            try:
                body = parse_request_header(frame).body_offset
                (replica_id,) = INT32.unpack_from(frame, body)
            except (ValueError, struct.error):
                return "FetchConsumer"
            return "FetchFollower" if replica_id >= 0 else "FetchConsumer"
        return "FetchConsumer"  # Odradek's followers fetch with v12; newer fetches are consumers'
    api = API_BY_KEY.get(api_key)
    return api.name if api is not None else f"Unknown{api_key}"


class RequestMetrics:
    """Timings handed over by the network server: `begin` when a frame is dispatched, `local_done` when the
    dispatcher returns, `ready` when an awaited answer exists, `sent` when responses are written."""

    def __init__(self):
        self.histograms = [Histogram(PREFIX + name, text, ("request",)) for name, text in COMPONENTS]
        self.bounds = self.histograms[0].bounds  # the same for all five
        self.requests = Counter(PREFIX + "requests_total", "Requests handled, by request type and version "
                                                           "(RequestsPerSec).", ("request", "version"))
        # (api key, version), or (1, version, fetch name) -> (requests counter child, the five histogram children)
        self._children: dict[tuple, tuple] = {}

    def begin(self, frame, received: float) -> list | None:
        """A frame goes to the dispatcher: its timing record [children, received, started, local done, ready];
        None for an API or version no node declares (a client's junk must not grow the label set)."""
        key = _KEY_VERSION.unpack_from(frame)  # (api key, version): what names every request but a Fetch
        children = self._children.get(key)
        if children is None:
            children = self._children_of(frame, *key)
            if children is None:
                return None
        started = now()
        return [children, received, started, started, started]

    def _children_of(self, frame, api_key: int, api_version: int) -> tuple | None:
        api = API_BY_KEY.get(api_key)
        if api is None or not api.valid_versions[0] <= api_version <= api.valid_versions[1]:
            return None
        name = request_name(frame, api_key, api_version)
        key = (api_key, api_version) if api_key != FETCH_API_KEY else (api_key, api_version, name)
        children = self._children.get(key)
        if children is None:
            children = self._children[key] = (self.requests.labels(name, api_version),
                                              tuple(h.labels(name) for h in self.histograms))
        return children

    @staticmethod
    def local_done(timing: list) -> None:
        timing[3] = timing[4] = now()

    @staticmethod
    def ready(timing: list) -> None:
        timing[4] = now()

    def sent(self, timings: Iterable[list], at: float | None = None) -> None:
        """These requests' responses have been written (or, for requests without one, are done)."""
        sent = now() if at is None else at
        bounds = self.bounds
        for (requests, (total, queue, local, remote, send)), received, started, local_done, ready in timings:
            requests.value += 1
            # Histogram.observe, unrolled: this runs for every request
            value = (sent - received) * 1000
            total.counts[bisect_left(bounds, value)] += 1
            total.sum += value
            value = (started - received) * 1000
            queue.counts[bisect_left(bounds, value)] += 1
            queue.sum += value
            value = (local_done - started) * 1000
            local.counts[bisect_left(bounds, value)] += 1
            local.sum += value
            value = (ready - local_done) * 1000
            remote.counts[bisect_left(bounds, value)] += 1
            remote.sum += value
            value = (sent - ready) * 1000
            send.counts[bisect_left(bounds, value)] += 1
            send.sum += value

    def finish_without_response(self, timing: list) -> None:
        self.sent((timing,), timing[4])

    def collect(self) -> Iterable[MetricFamily]:
        yield self.requests.collect()
        for histogram in self.histograms:
            yield histogram.collect()

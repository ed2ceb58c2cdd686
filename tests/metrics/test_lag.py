"""Consumer lag's record timestamps: the first data record at or after a committed offset, read from a local
replica or asked of the partition's leader."""

import asyncio
from types import SimpleNamespace

from odradek.metrics import lag
from odradek.metrics.lag import ConsumerLag, batch_timestamp, first_record_timestamp
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import API_BY_KEY
from odradek.protocol.records import build_batch, build_marker_batch, read_batch_info
from odradek.storage.log import PartitionLog
from odradek.storage.log_config import LogConfig

NOW = 1_700_000_000_000


def append(log, timestamps, **batch):
    records = [(b"k", b"v%d" % i) for i in range(len(timestamps))]
    info = log.append_as_leader(memoryview(build_batch(records, timestamps=timestamps, **batch)), now_ms=NOW)
    log.high_watermark = log.log_end_offset
    return info.first_offset


def test_timestamp_of_the_record_at_the_committed_offset(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), LogConfig(), now_ms=NOW)
    append(log, [NOW - 300, NOW - 200, NOW - 100])  # offsets 0-2
    append(log, [NOW - 50])  # offset 3
    assert first_record_timestamp(log, 0, log.high_watermark) == NOW - 300
    assert first_record_timestamp(log, 2, log.high_watermark) == NOW - 100  # inside a batch
    assert first_record_timestamp(log, 3, log.high_watermark) == NOW - 50
    assert first_record_timestamp(log, 4, log.high_watermark) is None  # caught up
    assert first_record_timestamp(log, 1, 1) is None  # nothing below the end


def test_transaction_markers_are_skipped(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), LogConfig(), now_ms=NOW)
    append(log, [NOW - 90], producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
    marker = log.append_marker(True, producer_id=7, producer_epoch=0, coordinator_epoch=0, now_ms=NOW - 80)
    append(log, [NOW - 10])
    log.high_watermark = log.log_end_offset
    assert first_record_timestamp(log, marker.first_offset, log.high_watermark) == NOW - 10


def test_log_append_time_topics_use_the_append_time(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), LogConfig(message_timestamp_type="LogAppendTime"), now_ms=NOW)
    append(log, [5, 6])
    assert first_record_timestamp(log, 1, log.high_watermark) == NOW


# Record timestamps asked of a partition's leader (no replica on the coordinator)

def batches(*specs) -> list[bytes]:
    """Consecutive batches from offset 0: each spec a list of timestamps, or "marker"."""
    out, offset = [], 0
    for spec in specs:
        if spec == "marker":
            out.append(build_marker_batch(True, producer_id=7, producer_epoch=0, coordinator_epoch=0,
                                          timestamp_ms=NOW, base_offset=offset))
            offset += 1
        else:
            out.append(build_batch([(b"k", b"v")] * len(spec), timestamps=spec, base_offset=offset))
            offset += len(spec)
    return out


def test_batch_timestamp_reads_a_fetch_answers_batches():
    data = b"".join(batches([NOW - 30, NOW - 20], "marker", [NOW - 10]))
    assert batch_timestamp(data, 0) == (NOW - 30, 2)
    assert batch_timestamp(data, 1) == (NOW - 20, 2)  # inside the batch
    assert batch_timestamp(data, 2) == (NOW - 10, 4)  # the marker is skipped
    assert batch_timestamp(data, 4) == (None, 4)
    assert batch_timestamp(data[:-5], 3) == (None, 3)  # a partial last batch is not read
    assert batch_timestamp(b"".join(batches([NOW], "marker")), 1) == (None, 2)


class Leader:
    """A partition's leader as ConsumerLag sees it over the wire: Fetch v12 and ListOffsets v7 are encoded and
    decoded with the node's codec, answered from `data` (its batches from offset `start`), or never answered."""

    def __init__(self, data: list[bytes], start: int = 0, silent: bool = False):
        self.batches = data
        self.start, self.silent = start, silent
        self.fetches: list[dict] = []

    async def request(self, leader, api_key, version, body, timeout_s):
        api = API_BY_KEY[api_key]
        request = api.decode_request(version, api.encode_request(version, body))
        if self.silent:
            await asyncio.Event().wait()
        if api_key == lag.FETCH:
            self.fetches.append(request)
            response = self.fetch(request)
        else:
            topic = request["topics"][0]
            response = {"topics": [{"name": topic["name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": 0, "timestamp": -1, "leader_epoch": 0,
                 "offset": self.start if p["timestamp"] == lag.EARLIEST_TIMESTAMP else self.end}
                for p in topic["partitions"]]}]}
        return api.decode_response(version, b"".join(api.encode_response(version, response)))

    @property
    def end(self) -> int:
        return read_batch_info(self.batches[-1]).next_offset

    def fetch(self, request: dict) -> dict:
        topic = request["topics"][0]
        wanted = topic["partitions"][0]
        offset, error, records = wanted["fetch_offset"], 0, b""
        if offset < self.start:
            error = ErrorCode.OFFSET_OUT_OF_RANGE
        else:
            chosen = [b for b in self.batches if read_batch_info(b).last_offset >= offset]
            for batch in chosen:  # whole batches within max_bytes, but the first whatever its size
                if records and len(records) + len(batch) > request["max_bytes"]:
                    break
                records += batch
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [{
            "topic": topic["topic"], "partitions": [{
                "partition_index": wanted["partition"], "error_code": error, "high_watermark": self.end,
                "last_stable_offset": self.end, "log_start_offset": self.start, "aborted_transactions": None,
                "preferred_read_replica": -1, "records": records}]}]}


def remote_lag(leaders: dict[int, Leader]) -> ConsumerLag:
    consumer_lag = ConsumerLag(SimpleNamespace(node_id=1), lambda: NOW)

    async def request(leader, api_key, version, body, timeout_s):
        return await leaders[leader].request(leader, api_key, version, body, timeout_s)

    consumer_lag._request = request
    return consumer_lag


def test_the_leader_is_asked_as_a_consumer_once_per_committed_offset():
    leader = Leader(batches([NOW - 9000, NOW - 8000], [NOW - 3000]))
    consumer_lag = remote_lag({2: leader})
    behind = {("t", 0, 1): 2, ("t", 0, 2): 2}
    assert asyncio.run(consumer_lag.fetch_timestamps(behind, {("t", 0): 3})) == set()
    assert consumer_lag._timestamps == {("t", 0, 1): NOW - 8000, ("t", 0, 2): NOW - 3000}
    fetch = leader.fetches[0]
    assert (fetch["replica_id"], fetch["isolation_level"], fetch["max_wait_ms"]) == (-1, 0, 0)
    assert fetch["session_id"] == 0 and fetch["session_epoch"] == -1
    assert fetch["max_bytes"] == lag.FETCH_MAX_BYTES
    assert sorted(f["topics"][0]["partitions"][0]["fetch_offset"] for f in leader.fetches) == [1, 2]


def test_markers_are_fetched_past_and_retention_starts_at_the_log_start():
    consumer_lag = remote_lag({2: Leader(batches(*["marker"] * 70, [NOW - 500])),
                               3: Leader(batches([NOW - 900], [NOW - 800], [NOW - 700]), start=2),
                               4: Leader(batches([NOW - 50], "marker", "marker"))})
    behind = {("a", 0, 0): 2, ("b", 0, 0): 3, ("c", 0, 1): 4}
    no_record = asyncio.run(consumer_lag.fetch_timestamps(behind, {("a", 0): 71, ("b", 0): 3, ("c", 0): 3}))
    assert consumer_lag._timestamps == {("a", 0, 0): NOW - 500, ("b", 0, 0): NOW - 700}
    assert no_record == {("c", 0, 1)}  # only markers up to the end: 0 seconds, as for a local replica


def test_a_silent_leader_does_not_hold_the_scrape(monkeypatch):
    monkeypatch.setattr(lag, "TIMESTAMP_TIMEOUT_S", 0.2)
    consumer_lag = remote_lag({2: Leader(batches([NOW - 100])), 3: Leader(batches([NOW - 100]), silent=True)})
    # The silent leader never answers: returning at all is the bound (wait_for only fails a hang, generously).
    no_record = asyncio.run(asyncio.wait_for(consumer_lag.fetch_timestamps(
        {("a", 0, 0): 2, ("b", 0, 0): 3}, {("a", 0): 1, ("b", 0): 1}), 60))
    assert consumer_lag._timestamps == {("a", 0, 0): NOW - 100}  # b is left out of this scrape
    assert no_record == set()

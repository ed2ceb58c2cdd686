"""Push queries (`SELECT ... EMIT CHANGES`) and PRINT: results streamed to a client until it leaves.

A push query is a transient Spark streaming query whose micro-batches are handed, row by row, to the
client's connection; it starts reading where `auto.offset.reset` says (ksqlDB's default: latest) and is
stopped, its temporary checkpoint removed, when the client goes away or its LIMIT is reached. Its header is
sent once its first micro-batch has fixed its starting offsets, so a record produced after the client
saw the header is in the results.
"""

from __future__ import annotations

import datetime
import itertools
import json
import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator

from confluent_kafka import Consumer, KafkaError, TopicPartition

from odradek.sql import ast
from odradek.sql.catalog import SourceColumn
from odradek.sql.planner import TOMBSTONE, QueryPlan
from odradek.sql.values import to_json

_ids = itertools.count(1)
_START_TIMEOUT_S = 120.0


class PushQuery:
    def __init__(self, plan: QueryPlan, limit: int | None, trigger_ms: int, statement: str = ""):
        self.id = f"transient_{'_'.join(plan.sources)}_{next(_ids)}_{int(time.time() * 1000)}"
        self.statement = statement  # its text, for SHOW QUERIES
        self.columns: tuple[SourceColumn, ...] = plan.columns
        self.limit = limit
        self.rows: queue.Queue = queue.Queue()
        self.closed = threading.Event()
        self.checkpoint = tempfile.mkdtemp(prefix="odradek-sql-push-")
        names = [c.name for c in self.columns]
        self.query = (plan.frame.writeStream.foreachBatch(lambda frame, _batch: self._batch(frame, names))
                      .option("checkpointLocation", self.checkpoint)
                      .trigger(processingTime=f"{trigger_ms} milliseconds").start())
        self._wait_started()

    def _wait_started(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while self.query.lastProgress is None:
            if not self.query.isActive:
                error = self.query.exception()
                self.close()
                raise RuntimeError(str(error).splitlines()[0] if error else "the query stopped")
            if time.monotonic() > deadline:
                self.close()
                raise TimeoutError("the push query did not start")
            time.sleep(0.05)

    def _batch(self, frame, names: list[str]) -> None:
        for row in frame.collect():
            if row[TOMBSTONE]:
                continue
            self.rows.put([to_json(row[name]) for name in names])

    def results(self, poll_s: float = 0.5) -> Iterator[list | None]:
        """Rows as they come; None when nothing came for poll_s (so the caller can see if its client left)."""
        sent = 0
        while not self.closed.is_set():
            if self.limit is not None and sent >= self.limit:
                return
            try:
                row = self.rows.get(timeout=poll_s)
            except queue.Empty:
                if not self.query.isActive:
                    error = self.query.exception()
                    raise RuntimeError(str(error).splitlines()[0] if error else "the query stopped") from None
                yield None
                continue
            sent += 1
            yield row

    def close(self) -> None:
        self.closed.set()
        try:
            self.query.stop()
        except Exception:  # stopping a failed query raises its error again
            pass
        shutil.rmtree(self.checkpoint, ignore_errors=True)


class PrintTopic:
    """PRINT topic [FROM BEGINNING] [LIMIT n]: the records as text lines, as ksqlDB prints them."""

    def __init__(self, statement: ast.Print, client_config: dict):
        self.statement = statement
        self.closed = threading.Event()
        self.consumer = Consumer({**client_config, "group.id": f"odradek-sql-print-{next(_ids)}",
                                  "enable.auto.commit": False, "enable.partition.eof": False,
                                  "auto.offset.reset": "earliest" if statement.from_beginning else "latest"})
        metadata = self.consumer.list_topics(statement.topic, timeout=30)
        topic = metadata.topics.get(statement.topic)
        if topic is None or topic.error is not None and topic.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            self.consumer.close()
            raise LookupError(f"Could not find topic '{statement.topic}', or the KSQL user does not have "
                              "permissions to list the topic. Topic names are case-sensitive.")
        offset = -2 if statement.from_beginning else -1  # OFFSET_BEGINNING, OFFSET_END
        self.consumer.assign([TopicPartition(statement.topic, p, offset) for p in topic.partitions])

    def lines(self, poll_s: float = 0.5) -> Iterator[str | None]:
        sent = 0
        try:
            while not self.closed.is_set():
                if self.statement.limit is not None and sent >= self.statement.limit:
                    return
                message = self.consumer.poll(poll_s)
                if message is None:
                    yield None
                    continue
                if message.error():
                    continue
                sent += 1
                yield _print_line(message)
        finally:
            self.consumer.close()

    def close(self) -> None:
        self.closed.set()

    def discard(self) -> None:
        """Close a PRINT whose lines were never read (its client left first, or asked the wrong endpoint)."""
        self.closed.set()
        self.consumer.close()


def _text(data: bytes | None) -> str:
    if data is None:
        return "<null>"
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return json.dumps(data.hex())


def _print_line(message) -> str:
    stamp = datetime.datetime.fromtimestamp(message.timestamp()[1] / 1000, datetime.UTC)
    rowtime = stamp.strftime("%Y/%m/%d %H:%M:%S.") + f"{stamp.microsecond // 1000:03d} Z"
    return (f"rowtime: {rowtime}, key: {_text(message.key())}, value: {_text(message.value())}, "
            f"partition: {message.partition()}")

"""Kafka's long-running programs (Connect workers, MirrorMaker 2, Kafka Streams applications) started from their
scripts for a test, each in its own process group so that a kill -9 takes its JVM with it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from tests.reference_kafka import KAFKA_BIN, java_env


class KafkaProgram:
    def __init__(self, script: str, *args: str | Path, work_dir: Path):
        self.command = [str(KAFKA_BIN / script), *map(str, args)]
        self.work_dir = work_dir
        self.log_path = work_dir / f"{script.removesuffix('.sh')}.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> KafkaProgram:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            # LOG_DIR: the scripts' own log files go here, not into the Kafka distribution.
            self.proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, cwd=self.work_dir,
                                         start_new_session=True, env=java_env(LOG_DIR=str(self.work_dir / "logs")))
        return self

    def kill(self) -> None:
        """kill -9 of the JVM (and the script around it)."""
        self._signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self._signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.kill()

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def wait_for(self, condition, what: str, timeout: float = 120.0):
        """condition() until it returns something true; the deadline only bounds a failure."""
        deadline = time.monotonic() + timeout
        while True:
            result = condition()
            if result:
                return result
            assert self.proc.poll() is None, f"{self.command[0]} exited ({self.proc.returncode}) before {what}:\n" \
                                             f"{self.tail()}"
            assert time.monotonic() < deadline, f"not {what} within {timeout:.0f} s:\n{self.tail()}"
            time.sleep(0.5)


def read_partition(bootstrap: str, topic: str, partition: int = 0, *,
                   read_committed: bool = False) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) of every record of a partition up to its high watermark as it is now (with read_committed
    the partition must have no open transaction, or the read waits for it)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-reader", "enable.auto.commit": False,
                         "isolation.level": "read_committed" if read_committed else "read_uncommitted"})
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        consumer.assign([TopicPartition(topic, partition, 0)])
        records, deadline = [], time.monotonic() + 60
        while consumer.position([TopicPartition(topic, partition)])[0].offset < end:
            assert time.monotonic() < deadline, f"{topic}-{partition} not read to offset {end} within 60 s"
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                records.append((message.key(), message.value()))
        return records
    finally:
        consumer.close()

"""Apache Kafka 4.0 from ../shared/reference: its tools, Java clients, Connect, MirrorMaker 2, Streams and broker.

Tests that hold Odradek against Kafka's own software use this module; they skip, saying why, only when the
reference folder is absent.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference"
KAFKA_HOME = REFERENCE / "kafka_2.13-4.0.0"
KAFKA_BIN = KAFKA_HOME / "bin"
SPARK_KAFKA_JARS = REFERENCE / "spark-kafka-jars"
START_SCRIPT = REFERENCE / "kafka-reference"

requires_reference = pytest.mark.skipif(
    not KAFKA_BIN.is_dir() or shutil.which("java") is None,
    reason=f"needs Apache Kafka 4.0 in {REFERENCE} and java on PATH (make test installs Java)")


def java_env(**extra: str) -> dict[str, str]:
    """The environment for Kafka's scripts: a small heap, no JMX port, quiet GC logs, logs under /tmp."""
    env = dict(os.environ)
    env.setdefault("KAFKA_HEAP_OPTS", "-Xmx256M")
    env.pop("JMX_PORT", None)
    env.update(extra)
    return env


class ReferenceBroker:
    """The reference Kafka 4.0 broker (KRaft, one combined node), started with `kafka-reference`."""

    def __init__(self, directory: Path, port: int, settings: dict[str, str] | None = None):
        self.directory = directory
        self.port = port
        self.settings = dict(settings or {})

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def controller_bootstrap(self) -> str:
        return f"127.0.0.1:{self.port + 1}"

    def start(self) -> ReferenceBroker:
        args = [str(START_SCRIPT), "start", str(self.directory), str(self.port)]
        args += [f"{key}={value}" for key, value in self.settings.items()]
        subprocess.run(args, check=True, capture_output=True, timeout=180,
                       env=java_env(KAFKA_HEAP_OPTS="-Xmx1G -Xms1G"))
        return self

    def stop(self) -> None:
        subprocess.run([str(START_SCRIPT), "stop", str(self.directory)], capture_output=True, timeout=120)

"""A Spark Connect server (Spark's SparkConnectServer, started with pyspark's spark-submit) for a test module, and
the client that talks to it over sc:// from a process of its own (connect_client.py)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from odradek.spark.datasource import JAR  # noqa: E402
from tests.conftest import free_port  # noqa: E402
from tests.spark.topics import SPARK_DEADLINE_S  # noqa: E402

CLIENT_SCRIPT = Path(__file__).with_name("connect_client.py")
STARTED = "Spark Connect server started at"


class ConnectServer:
    """`spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer`, local[2], on a free port of
    127.0.0.1. Its Python workers run this interpreter, which has odradek installed: that is all the server needs
    for format("odradek") (static registration through the pyspark_odradek package); `--jars` adds the JVM sink."""

    def __init__(self, directory: Path):
        import pyspark

        self.directory = directory
        self.port = free_port()
        self.log_path = directory / "connect-server.log"
        spark_home = Path(pyspark.__file__).parent
        env = {name: value for name, value in os.environ.items()
               if name not in ("PYSPARK_SUBMIT_ARGS", "SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
        env.update(SPARK_HOME=str(spark_home), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
                   PYSPARK_DRIVER_PYTHON=sys.executable)
        args = [str(spark_home / "bin" / "spark-submit"),
                "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
                "--master", "local[2]", "--driver-memory", "1g", "--jars", JAR,
                "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
                "--conf", f"spark.connect.grpc.binding.port={self.port}",
                "--conf", "spark.ui.enabled=false",
                "--conf", "spark.sql.shuffle.partitions=2",
                "--conf", "spark.sql.session.timeZone=UTC"]
        with open(self.log_path, "wb") as log:
            # a session of its own: teardown kills the process group, the JVM and its Python workers with it
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, cwd=directory, start_new_session=True)

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def wait_started(self, timeout: float = SPARK_DEADLINE_S) -> "ConnectServer":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if STARTED in self.log_path.read_text(errors="replace"):
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Spark Connect server exited with {self.proc.returncode}:\n{self.log_tail()}")
            time.sleep(0.1)
        raise RuntimeError(f"the Spark Connect server did not start within {timeout} s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def client(self, op: str, **args) -> dict:
        """Run connect_client.py's `op` with the keyword arguments against this server; its JSON result."""
        env = {name: value for name, value in os.environ.items()
               if name not in ("SPARK_HOME", "PYSPARK_SUBMIT_ARGS", "SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
        try:
            done = subprocess.run([sys.executable, str(CLIENT_SCRIPT), self.url, op, json.dumps(args)],
                                  capture_output=True, text=True, env=env, cwd=self.directory,
                                  timeout=SPARK_DEADLINE_S)
        except subprocess.TimeoutExpired as e:
            raise AssertionError(f"the Connect client's {op} did not finish within {SPARK_DEADLINE_S} s:\n"
                                 f"{e.stderr}\n--- server log ---\n{self.log_tail()}") from None
        if done.returncode != 0:
            raise AssertionError(f"the Connect client's {op} failed ({done.returncode}):\n{done.stderr[-6000:]}"
                                 f"\n--- server log ---\n{self.log_tail()}")
        return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    server = ConnectServer(tmp_path_factory.mktemp("spark-connect"))
    try:
        yield server.wait_started()
    finally:
        server.stop()

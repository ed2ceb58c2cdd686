"""A Spark standalone cluster on this machine, from pip's pyspark, and a Spark driver in a subprocess.

SparkStandalone runs `spark-class ...Master` and `...Worker` as foreground child processes (pip's pyspark is its
own SPARK_HOME but has no sbin/ scripts), each in its own session: a worker's executor JVMs and their Python
workers are its descendants, so killing the worker's session kills all of them, as losing the machine would.
Nothing waits a fixed time: the master's URLs come from its log, the workers' registration from its /json page.

DriverSession runs driver_session.py, one SparkSession against the cluster, answering JSON requests: the
driver is a process of its own because one Python process holds one SparkContext, and the tests of
tests/spark may already have made theirs (local[2]) in this pytest process.
"""

import atexit
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyspark

from tests.spark_session_process import SessionProcess

SPARK_HOME = Path(pyspark.__file__).parent
JAVA_HOME = os.environ.get("JAVA_HOME") or "/usr/lib/jvm/java-17-openjdk-amd64"
SESSION_SCRIPT = Path(__file__).with_name("driver_session.py")

# A failure bound, never a wait: JVM starts are slow on a loaded 2-core machine.
START_DEADLINE_S = 180


def spark_env(log_dir: Path) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items()
           if name not in ("PYSPARK_SUBMIT_ARGS", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET")}
    env.update({"SPARK_HOME": str(SPARK_HOME), "JAVA_HOME": JAVA_HOME, "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_LOG_DIR": str(log_dir), "SPARK_NO_DAEMONIZE": "1",
                # the executors' Python workers run this interpreter, where odradek is installed
                "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable})
    return env


def session_members(sid: int) -> list[int]:
    """The processes of a session (from /proc): a daemon started with start_new_session and its descendants,
    including the Python workers of an executor, which pyspark's daemon puts in a process group of their own."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()  # state, ppid, pgrp, session, ...
            if fields[0] != "Z" and int(fields[3]) == sid:  # a zombie is dead, waiting to be reaped
                members.append(int(entry.name))
    return members


def kill_session(proc: subprocess.Popen | None) -> None:
    """kill -9 of every process in the session that `proc` leads, as if its machine were lost; returns once
    none is left (a JVM takes a moment to exit after SIGKILL; a process forked meanwhile gets the next round)."""
    if proc is None:
        return
    deadline = time.monotonic() + START_DEADLINE_S
    while members := session_members(proc.pid):
        assert time.monotonic() < deadline, f"processes {members} of session {proc.pid} survive SIGKILL"
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.poll()  # reaps the leader: a zombie is not listed
        time.sleep(0.05)
    proc.wait()


def session_alive(sid: int) -> bool:
    return bool(session_members(sid))


class Daemon:
    """A master or worker JVM in its own session, its output in a log file."""

    def __init__(self, name: str, args: list[str], directory: Path, env: dict[str, str] | None = None):
        self.name = name
        self.log_path = directory / f"{name}.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env={**spark_env(directory), **(env or {})}, cwd=directory,
                                         start_new_session=True)
        self.sid = self.proc.pid  # start_new_session: the session and process group id
        self.killed = False

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_log(self, pattern: str) -> re.Match:
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            match = re.search(pattern, self.log_text())
            if match:
                return match
            assert self.proc.poll() is None, f"{self.name} exited with {self.proc.returncode}:\n{self.log_text()}"
            time.sleep(0.1)
        raise AssertionError(f"{self.name} did not log {pattern!r}:\n{self.log_text()[-3000:]}")

    def kill(self) -> None:
        """kill -9 of the daemon's session: it, and for a worker its executors and their Python workers."""
        self.killed = True
        kill_session(self.proc)


class SparkStandalone:
    """A master and `workers` workers of `cores` cores each, on 127.0.0.1."""

    def __init__(self, directory: Path, workers: int = 2, cores: int = 2, memory: str = "2g"):
        self.directory = directory
        self.cores, self.memory = cores, memory
        self.workers: list[Daemon] = []
        self.master = Daemon("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                        "--port", "0", "--webui-port", "0"], directory,
                             # no REST submission server: it would take the fixed port 6066
                             env={"SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"})
        atexit.register(self.stop)  # nothing outlives the tests, whatever happens to them
        try:
            self.url = self.master.wait_log(r"Starting Spark master at (spark://\S+)").group(1)
            self.ui = self.master.wait_log(r"MasterWebUI.*started at (http://\S+)").group(1)
            for _ in range(workers):
                self.add_worker()
            self.wait_alive_workers(workers)
        except BaseException:
            self.stop()
            raise

    def add_worker(self) -> Daemon:
        name = f"worker-{len(self.workers)}"
        worker = Daemon(name, ["org.apache.spark.deploy.worker.Worker", "--cores", str(self.cores),
                               "--memory", self.memory, "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
                               "--work-dir", str(self.directory / name), self.url], self.directory)
        self.workers.append(worker)
        return worker

    def state(self) -> dict:
        with urllib.request.urlopen(f"{self.ui}/json/", timeout=10) as response:
            return json.load(response)

    def alive_workers(self) -> list[dict]:
        return [w for w in self.state()["workers"] if w["state"] == "ALIVE"]

    def wait_alive_workers(self, count: int) -> None:
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            if len(self.alive_workers()) == count:
                return
            for worker in self.workers:
                assert worker.killed or worker.proc.poll() is None, f"{worker.name} exited:\n{worker.log_text()}"
            time.sleep(0.1)
        raise AssertionError(f"{count} workers are not ALIVE: {self.state()['workers']}")

    def kill_worker(self, worker: Daemon) -> None:
        worker.kill()
        assert not session_alive(worker.sid), f"a process of {worker.name}'s session survived SIGKILL"

    def stop(self) -> None:
        for daemon in [*self.workers, self.master]:
            kill_session(daemon.proc)


class DriverSession(SessionProcess):
    """driver_session.py against `master`, in a session of its own."""

    def __init__(self, directory: Path, master: str, name: str = "driver"):
        directory.mkdir(parents=True, exist_ok=True)
        log_path = directory / f"{name}.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([sys.executable, str(SESSION_SCRIPT), master, name], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=log, text=True, env=spark_env(directory),
                                    cwd=directory, start_new_session=True)
        super().__init__(proc, log_path, "the driver", request_timeout=300)
        self.sid = proc.pid  # start_new_session: the session and process group id
        atexit.register(self.kill)
        self.app_id = self.reply(timeout=START_DEADLINE_S)["result"]

    def kill(self) -> None:
        """kill -9 of the driver's session: the Python driver, its JVM and the JVM's Python workers."""
        kill_session(self.proc)

    def close(self) -> None:
        super().close()
        self.kill()

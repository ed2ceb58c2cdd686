"""A PySpark session in a subprocess of its own, driven by JSON lines: a request {"op": ..., "args": {...}} on
its stdin, one reply {"result": ...} or {"error": ...} on its stdout, and its log in a file. One Python process
holds one SparkContext, and a test's Spark may need another version or another master than the session of
the pytest process (tests/spark_kafka_connector/spark40_session.py, tests/spark_cluster/driver_session.py).
"""

import json
import queue
import subprocess
import threading
from pathlib import Path


class SessionProcess:
    """request(op, **args) sends one request and returns its result; a reply "error" fails the test."""

    def __init__(self, proc: subprocess.Popen, log_path: Path, name: str, request_timeout: float):
        self.proc, self.log_path, self.name = proc, log_path, name
        self.request_timeout = request_timeout
        self.replies: queue.Queue = queue.Queue()
        threading.Thread(target=self._read_replies, daemon=True).start()

    def _read_replies(self) -> None:
        for line in self.proc.stdout:
            self.replies.put(json.loads(line))
        self.replies.put(None)

    def reply(self, timeout: float) -> dict:
        try:
            reply = self.replies.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no answer from {self.name} within {timeout}s:\n{self.log_tail()}") from None
        assert reply is not None, f"{self.name} exited with {self.proc.wait()}:\n{self.log_tail()}"
        return reply

    def request(self, op: str, timeout: float | None = None, **args):
        self.proc.stdin.write(json.dumps({"op": op, "args": args}) + "\n")
        self.proc.stdin.flush()
        reply = self.reply(timeout or self.request_timeout)
        assert "error" not in reply, f"{op} failed: {reply['error']}\n{self.log_tail()}"
        return reply["result"]

    def log_tail(self, lines: int = 80) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def close(self) -> None:
        """End of requests: the script stops its session and exits, or is killed after a minute."""
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

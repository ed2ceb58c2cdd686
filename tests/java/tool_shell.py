"""Kafka 4.0's command-line tools (bin/kafka-*.sh) run against Odradek nodes, most of them in one shared JVM.

`KafkaTools.run("kafka-topics", "--bootstrap-server", ..., "--list")` runs the tool's main class in a
long-lived JVM (tests/java/ToolShell.java, compiled once per session) and returns its exit code and output,
as the script would have; a JVM start costs ~1.7 s, a run in the shared JVM a fraction of that. Tools that
cannot share a JVM (they call System.exit or add JVM shutdown hooks themselves) run through their real script
in a fresh JVM, as do tools that must run in the background while a test goes on (`KafkaTools.start`).
Every call has a timeout: a tool that hangs fails its test, and the shared JVM is replaced.
"""

from __future__ import annotations

import os
import re
import select
import shlex
import shutil
import struct
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tests.reference_kafka import KAFKA_BIN, KAFKA_HOME, java_env

TOOLS_LOG4J = KAFKA_HOME / "config" / "tools-log4j2.yaml"
SHELL_SOURCE = Path(__file__).with_name("ToolShell.java")

# Tools that call System.exit or add shutdown hooks with Runtime.addShutdownHook themselves: in a shared JVM
# they would end it, so they always run through their script.
OWN_JVM_TOOLS = frozenset({"kafka-verifiable-producer", "kafka-verifiable-consumer"})

DEFAULT_TIMEOUT = 60.0


class ToolTimeout(AssertionError):
    """A tool ran past its timeout (a failure of the test that ran it)."""


@dataclass(frozen=True)
class ToolResult:
    command: str
    returncode: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return (f"$ {self.command}\nexit code {self.returncode}\n--- stdout\n{self.stdout}"
                f"--- stderr\n{self.stderr}")

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()


def table(text: str, first_column: str) -> list[dict[str, str]]:
    """The rows of a table a tool printed: the header is the line starting with `first_column`; the columns
    are separated by whitespace (or tabs)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split() and line.split()[0] == first_column)
    header = lines[start].split()
    return [dict(zip(header, line.split(), strict=False)) for line in lines[start + 1:] if line.strip()]


def tool_main_classes() -> dict[str, str]:
    """Each script's main class, read from its exec line (`kafka-run-class.sh org.apache.kafka.tools.X "$@"`)."""
    classes = {}
    for script in KAFKA_BIN.glob("kafka-*.sh"):
        match = re.search(r"kafka-run-class\.sh\s+(?:\$EXTRA_ARGS\s+)?([\w.$]+)", script.read_text())
        if match:
            classes[script.stem] = match.group(1)
    return classes


def compile_tool_shell(directory: Path) -> Path:
    """Compiles ToolShell.java into `directory` against Kafka's libs; returns the directory. A Java runtime without
    `javac` (Debian's openjdk-17-jre-headless) still has the compiler's module, run here through `java -m`."""
    javac = ["javac"] if shutil.which("javac") else ["java", "-m", "jdk.compiler/com.sun.tools.javac.Main"]
    classpath = os.pathsep.join(str(jar) for jar in sorted((KAFKA_HOME / "libs").glob("*.jar")))
    subprocess.run([*javac, "-nowarn", "-d", str(directory), "-cp", classpath, str(SHELL_SOURCE)],
                   check=True, capture_output=True, timeout=180)
    return directory


def _command_text(tool: str, args: tuple[str, ...]) -> str:
    return shlex.join([f"{tool}.sh", *args])


def _frame(data: bytes | None) -> bytes:
    return struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data


class _SharedJvm:
    """One ToolShell process; runs one tool at a time."""

    def __init__(self, classes: Path, log_path: Path):
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            ["java", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
             f"-Dlog4j2.configurationFile={TOOLS_LOG4J}", "-cp", f"{classes}{os.pathsep}{KAFKA_HOME / 'libs' / '*'}",
             "ToolShell"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=java_env())
        self._buffer = b""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, main_class: str, args: tuple[str, ...], stdin: bytes | None, timeout: float
            ) -> tuple[bool, int, str, str]:
        """(ended, exit code, stdout, stderr); ended is False when the tool hung past the timeout."""
        request = struct.pack(">i", int(timeout * 1000)) + _frame(main_class.encode()) + _frame(stdin)
        request += struct.pack(">i", len(args)) + b"".join(_frame(arg.encode()) for arg in args)
        self.proc.stdin.write(request)
        self.proc.stdin.flush()
        # The shell answers at its own deadline even when the tool hangs; this margin covers a stuck JVM.
        deadline = time.monotonic() + timeout + 30
        outcome, exit_code = struct.unpack(">ii", self._read(8, deadline))
        stdout = self._read(struct.unpack(">i", self._read(4, deadline))[0], deadline)
        stderr = self._read(struct.unpack(">i", self._read(4, deadline))[0], deadline)
        return outcome == 0, exit_code, stdout.decode(errors="replace"), stderr.decode(errors="replace")

    def _read(self, count: int, deadline: float) -> bytes:
        fd = self.proc.stdout.fileno()
        while len(self._buffer) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the tool shell JVM did not answer")
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise EOFError(f"the tool shell JVM exited with {self.proc.wait()}")
                self._buffer += chunk
        data, self._buffer = self._buffer[:count], self._buffer[count:]
        return data

    def close(self) -> None:
        if self.alive():
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class BackgroundTool:
    """A tool running in its own JVM (its real script) while the test goes on; its output is collected as it
    comes. Stop it with stop() (SIGTERM, as Ctrl-C: its shutdown hooks run)."""

    def __init__(self, tool: str, args: tuple[str, ...], env: dict[str, str], input: bytes | None = None):
        self.command = _command_text(tool, args)
        self.proc = subprocess.Popen([str(KAFKA_BIN / f"{tool}.sh"), *args], env=env,
                                     stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        self._lock = threading.Lock()
        self._stdout: list[str] = []
        self._stderr: list[str] = []
        self._readers = [threading.Thread(target=self._collect, args=(self.proc.stdout, self._stdout), daemon=True),
                         threading.Thread(target=self._collect, args=(self.proc.stderr, self._stderr), daemon=True)]
        for reader in self._readers:
            reader.start()
        if input is not None:
            self.proc.stdin.write(input)
            self.proc.stdin.close()

    def _collect(self, stream, lines: list[str]) -> None:
        for raw in iter(stream.readline, b""):
            with self._lock:
                lines.append(raw.decode(errors="replace"))

    @property
    def stdout_lines(self) -> list[str]:
        with self._lock:
            return [line.rstrip("\n") for line in self._stdout]

    def wait_for_output(self, predicate, timeout: float = 60.0, what: str = "the expected output") -> list[str]:
        """Polls the output lines until predicate(lines) holds; fails, with the output so far, at the deadline."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = self.stdout_lines
            if predicate(lines):
                return lines
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise ToolTimeout(f"{self.command}: no {what} within {timeout}s\n{self.result()}")

    def result(self) -> ToolResult:
        with self._lock:
            stdout, stderr = "".join(self._stdout), "".join(self._stderr)
        return ToolResult(self.command, self.proc.returncode if self.proc.returncode is not None else -1,
                          stdout, stderr)

    def stop(self, timeout: float = 60.0) -> ToolResult:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        for reader in self._readers:
            reader.join(10)
        return self.result()

    def wait(self, timeout: float = DEFAULT_TIMEOUT) -> ToolResult:
        """Waits for the tool to end by itself; a tool still running at the deadline is killed and fails the test."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            result = self.stop(5)
            raise ToolTimeout(f"timed out after {timeout}s\n{result}") from None
        for reader in self._readers:
            reader.join(10)
        return self.result()


class KafkaTools:
    """Kafka's tools by script name (`kafka-topics`, with or without `.sh`)."""

    def __init__(self, work_dir: Path):
        self.work_dir = work_dir
        self.classes = tool_main_classes()
        self._shell_classes = compile_tool_shell(work_dir / "classes")
        self._env = java_env(LOG_DIR=str(work_dir / "logs"))
        self._jvm: _SharedJvm | None = None
        self._background: list[BackgroundTool] = []

    def run(self, tool: str, *args: str, input: str | bytes | None = None, timeout: float = DEFAULT_TIMEOUT,
            own_jvm: bool = False) -> ToolResult:
        """Runs a tool to its end and returns its exit code and output. A tool still running at the timeout fails
        the test (ToolTimeout). input is the tool's stdin (empty when None)."""
        tool = tool.removesuffix(".sh")
        args = tuple(str(arg) for arg in args)
        stdin = input.encode() if isinstance(input, str) else input
        if own_jvm or tool in OWN_JVM_TOOLS:
            return self.run_script(tool, *args, input=stdin, timeout=timeout)
        command = _command_text(tool, args)
        if self._jvm is None or not self._jvm.alive():
            self._jvm = _SharedJvm(self._shell_classes, self.work_dir / "tool-shell.log")
        try:
            ended, code, stdout, stderr = self._jvm.run(self.classes[tool], args, stdin, timeout)
        except (TimeoutError, EOFError, BrokenPipeError) as e:
            self._drop_jvm()
            raise ToolTimeout(f"{command}: {e}") from None
        if not ended:
            self._drop_jvm()
            raise ToolTimeout(f"timed out after {timeout}s\n{ToolResult(command, code, stdout, stderr)}")
        return ToolResult(command, code, stdout, stderr)

    def ok(self, tool: str, *args: str, **kwargs) -> ToolResult:
        """run(), failing the test (with the tool's output) unless the tool exits with 0."""
        result = self.run(tool, *args, **kwargs)
        assert result.returncode == 0, result
        return result

    def run_until(self, predicate, tool: str, *args: str, timeout: float = DEFAULT_TIMEOUT, **kwargs) -> ToolResult:
        """Runs the tool again and again until predicate(result) holds; fails with the last result at the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.run(tool, *args, **kwargs)
            if predicate(result):
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"the condition did not hold within {timeout}s; the last run:\n{result}")
            time.sleep(0.2)

    def run_script(self, tool: str, *args: str, input: bytes | None = None,
                   timeout: float = DEFAULT_TIMEOUT) -> ToolResult:
        """Runs the tool's real script in a fresh JVM."""
        tool = tool.removesuffix(".sh")
        return BackgroundTool(tool, tuple(str(arg) for arg in args), self._env, input).wait(timeout)

    def start(self, tool: str, *args: str, input: bytes | None = None) -> BackgroundTool:
        """Starts the tool's real script in the background; stopped at the latest when the session ends."""
        background = BackgroundTool(tool.removesuffix(".sh"), tuple(str(arg) for arg in args), self._env, input)
        self._background.append(background)
        return background

    def _drop_jvm(self) -> None:
        if self._jvm is not None:
            self._jvm.proc.kill()
            self._jvm.close()
            self._jvm = None

    def close(self) -> None:
        for background in self._background:
            background.stop(10)
        if self._jvm is not None:
            self._jvm.close()
            self._jvm = None

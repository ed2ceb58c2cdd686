"""examples/secure_node as docs/security.md walks through it: openssl certificates from make-certificates.sh,
a node from server.properties with a SASL_SSL listener, a SCRAM user made with `odradek users add`, and
records written and read with `odradek produce|consume --command-config client.properties`."""

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import free_port

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "secure_node"

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="the example makes its certificates with openssl")


def odradek(*args: str, cwd: Path, stdin: str | None = None) -> str:
    result = subprocess.run([sys.executable, "-m", "odradek", *args], cwd=cwd, input=stdin, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_secure_node_example_runs_as_documented(tmp_path):
    subprocess.run([str(EXAMPLE / "make-certificates.sh"), str(tmp_path / "certificates")], check=True,
                   capture_output=True, timeout=60)
    clients, local = free_port(), free_port()
    # the example's files, on this run's ports
    for name in ("server.properties", "client.properties"):
        text = (EXAMPLE / name).read_text().replace(":9093", f":{clients}").replace(":9092", f":{local}")
        (tmp_path / name).write_text(text)
    log = open(tmp_path / "node.log", "wb")
    node = subprocess.Popen([sys.executable, "-m", "odradek", "server", "--config", "server.properties"],
                            cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while "started in" not in (tmp_path / "node.log").read_text() and time.monotonic() < deadline:
            assert node.poll() is None, (tmp_path / "node.log").read_text()
            time.sleep(0.1)
        odradek("users", "add", "alice", "--password", "alice-secret", "--bootstrap-server", f"127.0.0.1:{local}",
                cwd=tmp_path)
        secured = ("--bootstrap-server", f"localhost:{clients}", "--command-config", "client.properties")
        odradek("produce", "greetings", *secured, cwd=tmp_path, stdin="hello\nover\ntls\n")
        out = odradek("consume", "greetings", *secured, "--from-beginning", "--max-messages", "3", cwd=tmp_path)
        assert out.splitlines() == ["hello", "over", "tls"]
    finally:
        node.terminate()
        node.wait(30)
        log.close()

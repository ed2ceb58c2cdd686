"""`odradek server`: configuration from a file and --set, clear one-line errors, formatting on first start."""

import subprocess
import sys

from tests.conftest import NodeProcess, free_port
from tests.e2e.raw_client import RawClient


def run_server(*args: str, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "odradek", "server", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_bad_settings_fail_with_one_error_line(tmp_path):
    cases = [
        (["--set", "num.partitions=many"], "error: Invalid value many for configuration num.partitions: Not a number of type INT"),
        (["--set", "listeners=nonsense"], "error: listeners: cannot parse 'nonsense'"),
        (["--config", str(tmp_path / "missing.properties")], "error: cannot read config file"),
        (["--set", "oops"], "error: --set expects key=value"),
    ]
    for args, message in cases:
        result = run_server("--set", f"log.dirs={tmp_path / 'data'}", *args)
        assert result.returncode == 1
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(message), result.stderr


def test_port_in_use_is_a_one_line_error(node, tmp_path):
    result = run_server("--set", f"listeners=PLAINTEXT://127.0.0.1:{node.port}", "--set", f"log.dirs={tmp_path / 'd'}")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "Traceback" not in result.stderr


def test_config_file_settings_apply_and_set_overrides_win(tmp_path):
    port = free_port()
    properties = tmp_path / "server.properties"
    properties.write_text(f"listeners=PLAINTEXT://127.0.0.1:{port}\nnum.partitions=4\nnode.id=7\n")
    node = NodeProcess(tmp_path / "data", port=port, settings={"num.partitions": "2"},
                       extra_args=("--config", str(properties))).start()
    try:
        with RawClient(node.bootstrap) as client:
            metadata = client.request(3, 12, {"topics": [{"topic_id": bytes(16), "name": "auto"}],
                                              "allow_auto_topic_creation": True,
                                              "include_topic_authorized_operations": False})
        assert metadata["brokers"][0]["node_id"] == 7
        assert len(metadata["topics"][0]["partitions"]) == 2
        assert "node.id=7" in (node.data_dir / "meta.properties").read_text()
    finally:
        node.stop()
    assert node.proc.returncode == 0  # SIGTERM is a clean shutdown


def test_data_directory_of_another_node_is_refused(node, tmp_path):
    node.stop()
    result = run_server("--set", f"log.dirs={node.data_dir}", "--set", "node.id=2",
                        "--set", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}")
    assert result.returncode == 1
    assert "belongs to node 1" in result.stderr

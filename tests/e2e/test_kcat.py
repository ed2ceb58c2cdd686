"""kcat (Debian's librdkafka command-line client): metadata (-L), produce (-P) and consume (-C)."""

import json
import shutil
import subprocess
import uuid

import pytest

pytestmark = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is installed by `make test`")


def kcat(node, *args: str, stdin: str | None = None, timeout: float = 30) -> str:
    result = subprocess.run(["kcat", "-b", node.bootstrap, *args], input=stdin, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_kcat_lists_metadata(shared_node):
    topic = f"kcat-meta-{uuid.uuid4().hex[:6]}"
    kcat(shared_node, "-P", "-t", topic, stdin="one\n")
    listing = json.loads(kcat(shared_node, "-L", "-J"))
    assert [b["id"] for b in listing["brokers"]] == [1]
    assert listing["brokers"][0]["name"] == shared_node.bootstrap
    topics = {t["topic"]: t for t in listing["topics"]}
    assert topics[topic]["partitions"][0]["leader"] == 1


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kcat_produces_and_consumes_lines(shared_node, codec):
    topic = f"kcat-{codec}-{uuid.uuid4().hex[:6]}"
    lines = [f"line {i}" for i in range(200)]
    kcat(shared_node, "-P", "-t", topic, "-z", codec, stdin="\n".join(lines) + "\n")
    out = kcat(shared_node, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%o %s\n")
    got = [line.split(" ", 1) for line in out.splitlines()]
    assert [int(o) for o, _ in got] == list(range(200))
    assert [v for _, v in got] == lines


def test_kcat_keys_headers_and_offsets(shared_node):
    topic = f"kcat-keys-{uuid.uuid4().hex[:6]}"
    kcat(shared_node, "-P", "-t", topic, "-K", ":", "-H", "source=kcat", stdin="a:1\nb:2\nc:3\n")
    out = kcat(shared_node, "-C", "-t", topic, "-o", "1", "-e", "-f", "%k=%s %h\n")
    assert out.splitlines() == ["b=2 source=kcat", "c=3 source=kcat"]
    out = kcat(shared_node, "-C", "-t", topic, "-o", "-1", "-e", "-f", "%k\n")
    assert out.splitlines() == ["c"]

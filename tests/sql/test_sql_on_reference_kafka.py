"""The SQL server is a plain Kafka client: the same pipelines run with Apache Kafka 4.0 as the cluster (the
transactional command topic, the exactly-once sink, read_committed sources, the tables' views), and give
the same results as on Odradek (tests/sql/test_sql_examples.py)."""

from __future__ import annotations

import pytest

from tests.java.conftest import _two_free_ports
from tests.reference_kafka import ReferenceBroker, requires_reference
from tests.sql.server_process import SqlServerProcess

pytest.importorskip("pyspark")


@requires_reference
def test_sql_pipelines_on_apache_kafka(tmp_path):
    from examples.sql import run

    port, _ = _two_free_ports()
    kafka = ReferenceBroker(tmp_path / "kafka", port, {"transaction.state.log.replication.factor": "1",
                                                      "transaction.state.log.min.isr": "1"}).start()
    server = None
    try:
        server = SqlServerProcess(kafka.bootstrap, tmp_path / "state").start()
        url = f"http://127.0.0.1:{server.port}"
        fraud = run.main(["fraud_filter", "--server", url, "--bootstrap-server", kafka.bootstrap])
        assert fraud["expected"] > 0 and len(fraud["flagged"]) == fraud["expected"]
        assert len({p["ID"] for p in fraud["flagged"]}) == fraud["expected"]
        scores = run.main(["player_scores", "--server", url, "--bootstrap-server", kafka.bootstrap])
        assert scores["before"] == [["alice", 12], ["bob", 9], ["carol", 3]]
        assert scores["after"] == [["alice", 12], ["bob", 9]]
        assert scores["best"] == [["alice", 12, 2], ["bob", 9, 2], ["carol", 3, 1]]
    finally:
        if server is not None:
            server.stop()
        kafka.stop()

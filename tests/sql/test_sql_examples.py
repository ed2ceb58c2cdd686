"""The seeds' three pipelines as SQL (examples/sql/*.sql, run by examples/sql/run.py) on a real SQL server
(Spark) and a real node, their output read back with real clients."""

from __future__ import annotations

import pytest

from tests.sql.server_process import SqlServerProcess

pytest.importorskip("pyspark")


@pytest.fixture(scope="module")
def sql(shared_node, tmp_path_factory):
    server = SqlServerProcess(shared_node.bootstrap, tmp_path_factory.mktemp("sql") / "state").start()
    yield server
    server.stop()


def run(sql, node, pipeline: str) -> dict:
    from examples.sql import run

    return run.main([pipeline, "--server", f"http://127.0.0.1:{sql.port}", "--bootstrap-server", node.bootstrap])


def test_fraud_filter(sql, shared_node):
    result = run(sql, shared_node, "fraud_filter")
    assert result["expected"] > 0
    assert len(result["flagged"]) == result["expected"]
    assert all(p["FRAUDPROBABILITY"] > 0.8 for p in result["flagged"])
    assert len({p["ID"] for p in result["flagged"]}) == result["expected"]  # each once
    fields = sql.ksql("DESCRIBE fraudulent_payments;")[0]["sourceDescription"]["fields"]
    assert [(f["name"], f.get("type")) for f in fields] == [
        ("ACCOUNT", "KEY"), ("ID", None), ("AMOUNT", None), ("FRAUDPROBABILITY", None)]


def test_windowed_counts_into_a_compacted_table(sql, shared_node):
    from examples.windowed_counts.run import BASE_MS

    counts = run(sql, shared_node, "windowed_counts")
    # 3 users over 30 s: user u clicks u+1 times a second, 10 s windows
    assert counts == {f"user{u}@{BASE_MS + w * 10_000}": 10 * (u + 1) for u in range(3) for w in range(3)}
    assert sql.pull(f"SELECT WINDOWSTART, clicks FROM click_counts WHERE user = 'user2' AND "
                    f"WINDOWSTART >= {BASE_MS + 20_000};") == [[BASE_MS + 20_000, 30]]
    description = sql.ksql("DESCRIBE EXTENDED click_counts;")[0]["sourceDescription"]
    assert description["windowType"] == "TUMBLING" and description["topic"] == "CLICK_COUNTS"


def test_snapshot_table_of_player_scores_with_a_delete(sql, shared_node):
    result = run(sql, shared_node, "player_scores")
    assert result["before"] == [["alice", 12], ["bob", 9], ["carol", 3]]
    assert result["after"] == [["alice", 12], ["bob", 9]]  # the tombstone removed carol
    assert result["alice"] == [[12]]
    assert result["best"] == [["alice", 12, 2], ["bob", 9, 2], ["carol", 3, 1]]

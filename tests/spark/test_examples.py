"""The Spark pipelines in examples/ run end to end against a real node and produce the expected output."""

import json

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("odradek.spark.datasource")


def test_fraud_filter_keeps_only_payments_above_0_8(spark, shared_node, tmp_path):
    from examples.fraud_filter import run

    expected, flagged = run.main(["--bootstrap-server", shared_node.bootstrap, "--payments", "100",
                                  "--checkpoint", str(tmp_path / "ckpt")])
    assert expected > 0
    assert len(flagged) == expected
    assert all(json.loads(v)["fraudProbability"] > 0.8 for _, v in flagged)


def test_windowed_counts_upserts_the_count_of_every_window(spark, shared_node, tmp_path):
    from examples.windowed_counts import run

    counts = run.main(["--bootstrap-server", shared_node.bootstrap, "--checkpoint", str(tmp_path / "ckpt")])
    # 3 users over 30 s: user u clicks u+1 times a second, 10 s windows
    assert counts == {f"user{u}@{run.BASE_MS + w * 10_000}": 10 * (u + 1) for u in range(3) for w in range(3)}


def test_order_choreography_reaches_the_expected_final_statuses(spark, shared_node, tmp_path):
    from examples.order_choreography import run

    status = run.main(["--bootstrap-server", shared_node.bootstrap, "--orders", "10",
                       "--checkpoint", str(tmp_path / "ckpt")])
    # items cycle book, lamp, chair; qty 1, 2, 1, 2, ...; amount 10 * (i + 1)
    assert status == {
        "o0": "dispatched", "o1": "out_of_stock", "o2": "out_of_stock", "o3": "dispatched",
        "o4": "dispatched", "o5": "out_of_stock", "o6": "dispatched", "o7": "out_of_stock", "o8": "out_of_stock",
        "o9": "declined",
    }

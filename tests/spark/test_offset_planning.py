"""Offset planning of the Spark source without Spark: options, rate limits, range splitting, offsets JSON."""

import json
import random
from itertools import pairwise

import pytest

pytest.importorskip("pyspark")

from odradek.spark.options import (  # noqa: E402
    Assign,
    Earliest,
    GlobalTimestamp,
    Latest,
    OptionError,
    SourceOptions,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    SubscribePattern,
)
from odradek.spark.source import (  # noqa: E402
    MinimumPerTrigger,
    OffsetRange,
    limit_offsets,
    offsets_from_json,
    offsets_to_json,
    split_ranges,
)

BOOTSTRAP = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def parse(streaming=False, **options):
    return SourceOptions.parse({**BOOTSTRAP, **options}, streaming=streaming)


def test_strategies_and_their_defaults():
    batch = parse(subscribe="a, b")
    assert batch.strategy == Subscribe(("a", "b"))
    assert (batch.starting, batch.ending) == (Earliest(), Latest())
    assert parse(streaming=True, subscribepattern="pay.*").strategy == SubscribePattern("pay.*")
    assert parse(streaming=True, subscribe="a").starting == Latest()
    assert parse(assign='{"a":[0,2],"b":[1]}').strategy == Assign((("a", 0), ("a", 2), ("b", 1)))


def test_option_names_are_case_insensitive_and_kafka_options_go_to_the_client():
    options = parse(**{"SUBSCRIBE": "t", "kafka.Fetch.Max.Bytes": "1000", "FailOnDataLoss": "False"})
    assert options.client == {"bootstrap.servers": "127.0.0.1:9092", "fetch.max.bytes": "1000",
                              "isolation.level": "read_uncommitted"}
    assert options.fail_on_data_loss is False
    assert parse(subscribe="t", **{"kafka.isolation.level": "read_committed"}).client["isolation.level"] == \
        "read_committed"


@pytest.mark.parametrize(("options", "streaming", "message"), [
    ({"subscribe": "t", "kafka.bootstrap.servers": None}, False, "kafka.bootstrap.servers"),
    ({}, False, "one of the options 'subscribe', 'subscribePattern' or 'assign'"),
    ({"subscribe": "t", "assign": '{"t":[0]}'}, False, "only one of"),
    ({"subscribe": " , "}, False, "no topics"),
    ({"subscribePattern": "("}, False, "not a valid regular expression"),
    ({"assign": "[0, 1]"}, False, "'assign' must be JSON"),
    ({"subscribe": "t", "startingOffsets": "latest"}, False, "can't be 'latest' for batch"),
    ({"subscribe": "t", "startingOffsets": '{"t":{"0":-1}}'}, False, "can't be latest (-1)"),
    ({"subscribe": "t", "endingOffsets": "earliest"}, False, "can't be 'earliest' for batch"),
    ({"subscribe": "t", "endingOffsets": '{"t":{"0":-2}}'}, False, "can't be earliest (-2)"),
    ({"subscribe": "t", "endingOffsets": "latest"}, True, "not valid in streaming"),
    ({"subscribe": "t", "endingTimestamp": "5"}, True, "not valid in streaming"),
    ({"subscribe": "t", "startingOffsets": "{not json"}, False, "must be JSON"),
    ({"subscribe": "t", "startingTimestamp": "yesterday"}, False, "timestamp in milliseconds"),
    ({"subscribe": "t", "maxOffsetsPerTrigger": "0"}, True, "positive integer"),
    ({"subscribe": "t", "minOffsetsPerTrigger": "-5"}, True, "positive integer"),
    ({"subscribe": "t", "minOffsetsPerTrigger": "20", "maxOffsetsPerTrigger": "10"}, True,
     "'minOffsetsPerTrigger' (20) is higher than 'maxOffsetsPerTrigger' (10)"),
    ({"subscribe": "t", "maxTriggerDelay": "soon"}, True, "duration such as"),
    ({"subscribe": "t", "maxTriggerDelay": "5 fortnights"}, True, "duration such as"),
    ({"subscribe": "t", "minPartitions": "many"}, False, "positive integer"),
    ({"subscribe": "t", "failOnDataLoss": "maybe"}, False, "'true' or 'false'"),
    ({"subscribe": "t", "startingOffsetsByTimestampStrategy": "earliest"}, False, "'error' or 'latest'"),
    ({"subscribe": "t", "kafka.auto.offset.reset": "earliest"}, False, "startingOffsets"),
    ({"subscribe": "t", "kafka.enable.auto.commit": "true"}, False, "not supported"),
])
def test_bad_options_are_one_clear_error(options, streaming, message):
    given = {k: v for k, v in {**BOOTSTRAP, **options}.items() if v is not None}
    with pytest.raises(OptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        SourceOptions.parse(given, streaming=streaming)


@pytest.mark.parametrize(("given", "seconds"), [
    (None, 900.0), ("250", 0.25), ("250ms", 0.25), ("30s", 30.0), ("15m", 900.0), ("2min", 120.0), ("1h", 3600.0),
    ("1d", 86400.0), ("1500us", 0.0015), (" 5 S ", 5.0),
])
def test_max_trigger_delay_is_a_spark_time_string_defaulting_to_15_minutes(given, seconds):
    options = parse(streaming=True, subscribe="t", **({} if given is None else {"maxTriggerDelay": given}))
    assert options.max_trigger_delay_s == pytest.approx(seconds)


def test_min_offsets_per_trigger_skips_triggers_until_enough_wait_or_the_delay_passes():
    minimum = MinimumPerTrigger(minimum=100, max_delay_s=60.0)
    assert minimum.admits(waiting=3, now=1000.0), "a query's first trigger always runs"
    assert not minimum.admits(waiting=99, now=1001.0)
    assert not minimum.admits(waiting=0, now=1059.9)
    assert minimum.admits(waiting=100, now=1060.5)  # enough records: runs, and the delay counts from here
    assert not minimum.admits(waiting=1, now=1119.0)
    assert minimum.admits(waiting=1, now=1120.5), "maxTriggerDelay passed since the last batch"
    assert not minimum.admits(waiting=50, now=1121.0)


def test_timestamps_win_over_offsets_in_spark_order():
    both = parse(subscribe="t", startingOffsets="earliest", startingOffsetsByTimestamp='{"t":{"0":7}}',
                 startingTimestamp="5")
    assert both.starting == GlobalTimestamp(5)
    by_partition = parse(subscribe="t", startingOffsets="earliest", startingOffsetsByTimestamp='{"t":{"0":7}}')
    assert by_partition.starting == SpecificTimestamps({("t", 0): 7})
    assert parse(subscribe="t", startingOffsets='{"t":{"0":3,"1":-2}}').starting == \
        SpecificOffsets({("t", 0): 3, ("t", 1): -2})


def test_offsets_json_is_sparks_kafka_form_and_round_trips():
    offsets = {("b", 10): 5, ("a", 2): 7, ("b", 9): 1}
    as_json = offsets_to_json(offsets)
    assert json.dumps(as_json, separators=(",", ":")) == '{"a":{"2":7},"b":{"9":1,"10":5}}'
    assert offsets_from_json(json.loads(json.dumps(as_json))) == offsets


def test_max_rows_bounds_every_batch_and_reaches_the_end(seed):
    rng = random.Random(seed)
    for _ in range(200):
        partitions = [("t", p) for p in range(rng.randint(1, 8))]
        start = {tp: rng.randint(0, 50) for tp in partitions}
        latest = {tp: start[tp] + rng.choice([0, 0, 1, rng.randint(0, 500)]) for tp in partitions}
        limit = rng.randint(1, 300)
        total = sum(latest[tp] - start[tp] for tp in partitions)
        batches = 0
        while start != latest:
            end = limit_offsets(start, latest, limit)
            read = sum(end[tp] - start[tp] for tp in partitions)
            assert 1 <= read <= limit, (seed, start, latest, limit, end)
            assert all(start[tp] <= end[tp] <= latest[tp] for tp in partitions)
            start, batches = end, batches + 1
        assert batches >= -(-total // limit), seed


def test_max_rows_splits_by_how_far_each_partition_is_behind():
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 0}
    latest = {("t", 0): 600, ("t", 1): 400, ("t", 2): 100}
    assert limit_offsets(start, latest, 100) == {("t", 0): 60, ("t", 1): 130, ("t", 2): 10}


def test_min_partitions_splits_the_biggest_ranges_and_keeps_every_offset():
    ranges = [OffsetRange("t", 0, 0, 1000), OffsetRange("t", 1, 50, 60), OffsetRange("t", 2, 5, 5)]
    split = split_ranges(ranges, 6)
    assert len(split) == 6
    for p, (lo, hi) in {0: (0, 1000), 1: (50, 60)}.items():
        mine = sorted((r.start, r.end) for r in split if r.partition == p)
        assert mine[0][0] == lo and mine[-1][1] == hi
        assert all(a[1] == b[0] for a, b in pairwise(mine))
    assert split_ranges(ranges, None) == ranges[:2]
    assert len(split_ranges([OffsetRange("t", 0, 0, 3)], 10)) == 3

"""Kafka's murmur2 partitioner, pinned to the values of Java's Utils.murmur2."""

from odradek.sql.partitioning import murmur2, partition_for


def test_murmur2_matches_kafkas_java_implementation():
    # Values of org.apache.kafka.common.utils.Utils.murmur2 (signed ints in Java), from Kafka's UtilsTest
    cases = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
             b"a-little-bit-longer-string": -1486304829,
             b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971, b"abc": 479470107}
    for data, java in cases.items():
        assert murmur2(data) == java & 0xFFFFFFFF, data


def test_partition_for_makes_a_negative_hash_positive_as_kafka_does():
    # Java: Utils.toPositive(-973932308) % 7 == (-973932308 & 0x7fffffff) % 7 == 3
    assert partition_for(b"21", 7) == 3

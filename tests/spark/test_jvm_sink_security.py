"""The JVM sink (jvm/) over each of a node's secured ways in (tests/e2e/test_authentication.py's node): TLS,
mutual TLS, SASL PLAIN and SCRAM over plaintext and over TLS, with librdkafka's setting names as the Python
sink takes them; refused credentials fail the write at once."""

import pytest

pytest.importorskip("pyspark")

from tests.e2e.test_authentication import (  # noqa: E402, F401 - secured is a fixture
    RECORDS,
    WAY_IDS,
    WAYS_IN,
    librdkafka_settings,
    secured,
    values,
)
from tests.spark.test_produce_client import read_back  # noqa: E402
from tests.spark.topics import unique  # noqa: E402


def write(spark, settings: dict, topic: str, rows: list[bytes]) -> None:
    df = spark.createDataFrame([(bytearray(v), 0) for v in rows], "value binary, partition int").coalesce(1)
    (df.write.format("odradek").options(**{f"kafka.{k}": v for k, v in settings.items()})
     .option("topic", topic).option("odradek.sink.jvm", "true").mode("append").save())


@pytest.mark.parametrize("way", WAYS_IN, ids=WAY_IDS)
def test_the_jvm_sink_writes_over_every_way_in(spark, secured, way):  # noqa: F811
    settings = librdkafka_settings(secured, way)
    topic = unique("jvm-auth")
    write(spark, settings, topic, values())
    assert [v for _, _, v, _, _ in read_back(settings, topic)] == values()


@pytest.mark.parametrize(("way", "reason"), [
    (WAYS_IN[3], "authentication failed: .*"),  # SCRAM-SHA-256 over plaintext
    (WAYS_IN[5], "authentication failed: .*"),  # PLAIN over TLS
], ids=["scram-sha-256", "plain-over-tls"])
def test_a_wrong_password_fails_the_write_at_once_with_the_brokers_reason(spark, secured, way, reason):  # noqa: F811
    settings = librdkafka_settings(secured, way, **{"sasl.password": "not-the-password",
                                                    "delivery.timeout.ms": "600000"})
    # Not retried until the delivery timeout: a test that waited 10 minutes would fail the suite's time.
    with pytest.raises(Exception, match=reason):
        write(spark, settings, unique("jvm-refused"), values(RECORDS))


def test_a_server_certificate_from_another_authority_is_refused(spark, secured):  # noqa: F811
    settings = librdkafka_settings(secured, WAYS_IN[0], **{"ssl.ca.location": str(secured.stranger_keys.certificate)})
    with pytest.raises(Exception, match="no node of .* answered: .*SSL"):
        write(spark, settings, unique("jvm-untrusted"), values(1))

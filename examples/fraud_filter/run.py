"""Fraud filter: a generator writes JSON payments; a streaming query keeps fraudProbability > 0.8.

    python -m examples.fraud_filter.run --bootstrap-server 127.0.0.1:9092
"""

import argparse
import json
import random
import tempfile

from confluent_kafka import Producer

from examples.spark_session import odradek_spark, read_topic


def generate_payments(bootstrap: str, topic: str, count: int, seed: int = 7) -> int:
    """Write `count` JSON payments; returns how many have fraudProbability > 0.8."""
    rng = random.Random(seed)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    fraudulent = 0
    for i in range(count):
        p = round(rng.random(), 3)
        fraudulent += p > 0.8
        payment = {"id": f"pay-{i}", "account": f"acc-{i % 10}", "amount": rng.randint(1, 500), "fraudProbability": p}
        producer.produce(topic, key=payment["account"].encode(), value=json.dumps(payment).encode())
    producer.flush(30)
    return fraudulent


def run_filter(spark, bootstrap: str, source: str, sink: str, checkpoint: str) -> None:
    schema = "id string, account string, amount int, fraudProbability double"
    payments = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", source).option("startingOffsets", "earliest").load()
                .selectExpr("key", "cast(value as string) as json")
                .selectExpr("key", f"from_json(json, '{schema}') as p", "json"))
    query = (payments.where("p.fraudProbability > 0.8").selectExpr("key", "json as value")
             .writeStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", sink).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()


def main(argv=None) -> tuple[int, list]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    parser.add_argument("--payments", type=int, default=200)
    parser.add_argument("--source", default="payments")
    parser.add_argument("--sink", default="fraudulent_payments")
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--master", default=None,
                        help="Spark master URL, e.g. spark://127.0.0.1:7077 (default $ODRADEK_SPARK_MASTER or local[2])")
    args = parser.parse_args(argv)
    expected = generate_payments(args.bootstrap_server, args.source, args.payments)
    spark = odradek_spark("fraud-filter", args.master)
    run_filter(spark, args.bootstrap_server, args.source, args.sink, args.checkpoint or tempfile.mkdtemp())
    flagged = read_topic(args.bootstrap_server, args.sink)
    print(f"{args.payments} payments generated, {expected} above 0.8, {len(flagged)} in {args.sink}")
    return expected, flagged


if __name__ == "__main__":
    main()

"""Order choreography: order, stock, payment and dispatch services react to each other's events through
topics; the stock service is a Spark streaming job, the others are plain confluent-kafka services.

    python -m examples.order_choreography.run --bootstrap-server 127.0.0.1:9092

orders --(stock, Spark)--> stock_events --(payment)--> payment_events --(dispatch)--> dispatch_events
"""

import argparse
import json
import tempfile

from confluent_kafka import Producer

from examples.spark_session import odradek_spark, read_topic

STOCK = {"book": 3, "lamp": 1, "chair": 0}  # units available per order line, per item


def _produce(bootstrap: str, topic: str, events: list[dict]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for e in events:
        producer.produce(topic, key=e["order_id"].encode(), value=json.dumps(e).encode())
    producer.flush(30)


def _events(bootstrap: str, topic: str) -> list[dict]:
    return [json.loads(v) for _, v in read_topic(bootstrap, topic)]


def order_service_place(bootstrap: str, count: int) -> list[dict]:
    items = list(STOCK)
    orders = [{"order_id": f"o{i}", "item": items[i % len(items)], "qty": 1 + i % 2, "amount": 10 * (i + 1)}
              for i in range(count)]
    _produce(bootstrap, "orders", orders)
    return orders


def stock_service_spark(spark, bootstrap: str, checkpoint: str) -> None:
    """Reserve stock for each order (Spark): reserved when qty fits the item's stock, else out_of_stock."""
    stock = ", ".join(f"'{k}', {v}" for k, v in STOCK.items())
    orders = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", "orders").option("startingOffsets", "earliest").load()
              .selectExpr("from_json(cast(value as string), 'order_id string, item string, qty int, amount int') as o"))
    events = orders.selectExpr(
        "o.order_id as key",
        f"to_json(named_struct('order_id', o.order_id, 'amount', o.amount, 'status', "
        f"if(o.qty <= map({stock})[o.item], 'reserved', 'out_of_stock'))) as value")
    query = (events.writeStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", "stock_events").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()


def payment_service(bootstrap: str) -> None:
    """Charge reserved orders: amounts over 80 are declined."""
    paid = [{"order_id": e["order_id"], "status": "paid" if e["amount"] <= 80 else "declined"}
            for e in _events(bootstrap, "stock_events") if e["status"] == "reserved"]
    _produce(bootstrap, "payment_events", paid)


def dispatch_service(bootstrap: str) -> None:
    _produce(bootstrap, "dispatch_events", [{"order_id": e["order_id"], "status": "dispatched"}
                                            for e in _events(bootstrap, "payment_events") if e["status"] == "paid"])


def order_service_status(bootstrap: str, orders: list[dict]) -> dict[str, str]:
    """The order service folds every event about its orders into their latest status."""
    status = {o["order_id"]: "placed" for o in orders}
    for topic in ("stock_events", "payment_events", "dispatch_events"):
        for e in _events(bootstrap, topic):
            if e["order_id"] in status:
                status[e["order_id"]] = e["status"]
    return status


def main(argv=None) -> dict[str, str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    parser.add_argument("--orders", type=int, default=10)
    parser.add_argument("--checkpoint", default=None)
    args = parser.parse_args(argv)
    bootstrap = args.bootstrap_server
    orders = order_service_place(bootstrap, args.orders)
    stock_service_spark(odradek_spark("order-choreography"), bootstrap, args.checkpoint or tempfile.mkdtemp())
    payment_service(bootstrap)
    dispatch_service(bootstrap)
    status = order_service_status(bootstrap, orders)
    for order_id, s in status.items():
        print(f"{order_id}\t{s}")
    return status


if __name__ == "__main__":
    main()

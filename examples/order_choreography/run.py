"""Order choreography: order, stock, payment and dispatch services react to each other's events through
topics, all running at once; the stock service is a Spark streaming job, the others confluent-kafka services
in consumer groups.

    python -m examples.order_choreography.run --bootstrap-server 127.0.0.1:9092

orders --(stock, Spark)--> stock_events --(payment)--> payment_events --(dispatch)--> dispatch_events
   ^                                                                                        |
   +---------------- the order service folds every event into each order's status <--------+
"""

import argparse
import json
import tempfile
import threading
import time
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from examples.spark_session import odradek_spark

TOPICS = ("orders", "stock_events", "payment_events", "dispatch_events")
STOCK = {"book": 3, "lamp": 1, "chair": 0}  # units available per order line, per item
FINAL = {"out_of_stock", "declined", "dispatched"}
# Events about one order arrive on different topics, which are not ordered with each other: a consumer may
# read `dispatched` before `paid`. An order's status only moves forward.
PROGRESS = {"placed": 0, "reserved": 1, "paid": 2, **{status: 3 for status in FINAL}}


def create_topics(bootstrap: str, partitions: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=30).topics
    missing = [NewTopic(t, partitions, 1) for t in TOPICS if t not in existing]
    for future in (admin.create_topics(missing).values() if missing else []):
        future.result(30)


def stock_service(spark, bootstrap: str, checkpoint: str):
    """Spark: reserve stock for each order, `reserved` when its quantity fits the item's stock."""
    stock = ", ".join(f"'{k}', {v}" for k, v in STOCK.items())
    orders = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", "orders").option("startingOffsets", "earliest").load()
              .selectExpr("key", "from_json(cast(value as string), "
                                 "'order_id string, item string, qty int, amount int') as o"))
    events = orders.selectExpr(
        "key",
        f"to_json(named_struct('order_id', o.order_id, 'amount', o.amount, 'status', "
        f"if(o.qty <= map({stock})[o.item], 'reserved', 'out_of_stock'))) as value")
    return (events.writeStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
            .option("topic", "stock_events").option("checkpointLocation", checkpoint)
            .trigger(processingTime="1 second").start())


def react(bootstrap: str, group: str, source: str, sink: str, handle, stop: threading.Event) -> None:
    """A consumer-group service: every event of `source` that `handle` maps to an event goes to `sink`."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    consumer.subscribe([source])
    try:
        while not stop.is_set():
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            out = handle(json.loads(msg.value()))
            if out is not None:
                producer.produce(sink, key=msg.key(), value=json.dumps(out).encode())
                producer.flush(30)
    finally:
        consumer.close()


def charge(event: dict) -> dict | None:
    """The payment service: reserved orders over 80 are declined."""
    if event["status"] != "reserved":
        return None
    return {"order_id": event["order_id"], "status": "paid" if event["amount"] <= 80 else "declined"}


def dispatch(event: dict) -> dict | None:
    return {"order_id": event["order_id"], "status": "dispatched"} if event["status"] == "paid" else None


def order_service(bootstrap: str, run: str, count: int, timeout: float) -> dict[str, str]:
    """Place `count` orders, then fold the events about them until every order is final."""
    items = list(STOCK)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    status = {}
    for i in range(count):
        order = {"order_id": f"{run}-o{i}", "item": items[i % len(items)], "qty": 1 + i % 2, "amount": 10 * (i + 1)}
        status[order["order_id"]] = "placed"
        producer.produce("orders", key=order["order_id"].encode(), value=json.dumps(order).encode())
    producer.flush(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"order-service-{run}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(list(TOPICS[1:]))
    try:
        deadline = time.monotonic() + timeout
        while any(s not in FINAL for s in status.values()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"orders not final after {timeout}s: {status}")
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            event = json.loads(msg.value())
            current = status.get(event["order_id"])
            if current is not None and PROGRESS[event["status"]] > PROGRESS[current]:
                status[event["order_id"]] = event["status"]
    finally:
        consumer.close()
    return {order_id.removeprefix(f"{run}-"): s for order_id, s in status.items()}


def main(argv=None) -> dict[str, str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    parser.add_argument("--orders", type=int, default=10)
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--master", default=None,
                        help="Spark master URL, e.g. spark://127.0.0.1:7077 (default $ODRADEK_SPARK_MASTER or local[2])")
    args = parser.parse_args(argv)
    bootstrap = args.bootstrap_server
    create_topics(bootstrap)
    stop = threading.Event()
    services = [threading.Thread(target=react, args=(bootstrap, "payment-service", "stock_events", "payment_events",
                                                     charge, stop)),
                threading.Thread(target=react, args=(bootstrap, "dispatch-service", "payment_events",
                                                     "dispatch_events", dispatch, stop))]
    for service in services:
        service.start()
    query = stock_service(odradek_spark("order-choreography", args.master), bootstrap, args.checkpoint or tempfile.mkdtemp())
    try:
        status = order_service(bootstrap, uuid.uuid4().hex[:8], args.orders, args.timeout)
    finally:
        query.stop()
        stop.set()
        for service in services:
            service.join()
    for order_id, s in status.items():
        print(f"{order_id}\t{s}")
    return status


if __name__ == "__main__":
    main()

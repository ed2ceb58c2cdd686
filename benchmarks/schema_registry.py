"""The schema registry's costs: what a write, a re-registration, a transitive check and a read take.

    .venv/bin/python benchmarks/schema_registry.py [--schemas 300] [--versions 40] [--readers 4] [--seconds 10]

One Odradek node with `schema.registry.listener`, driven over HTTP with keep-alive connections:
- register: --schemas new Avro schemas, each under a subject of its own, one at a time (each is a
  transactional write to `_schemas` with acks=all, read back before the answer);
- re-register: the same schemas again (the registry finds them and writes nothing);
- transitive: --versions versions of one subject at BACKWARD_TRANSITIVE, each checked against all before it;
- read: --readers threads fetching `GET /schemas/ids/{id}` (what a deserializer asks for an unknown id) for
  --seconds.
Each prints the median and 99th percentile latency and the rate. Nothing here is part of `make test`;
figures go to BENCHMARKS.md.
"""

import argparse
import http.client
import json
import statistics
import threading
import time

from brokers import Odradek, free_port

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class Http:
    def __init__(self, port: int):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def call(self, method: str, path: str, body=None) -> tuple[float, dict]:
        started = time.perf_counter()
        data = json.dumps(body) if body is not None else None
        self.connection.request(method, path, body=data, headers={"Content-Type": CONTENT_TYPE})
        response = self.connection.getresponse()
        answer = json.loads(response.read())
        if response.status != 200:
            raise RuntimeError(f"{method} {path}: {response.status} {answer}")
        return time.perf_counter() - started, answer


def record(name: str, fields: int) -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "bench",
                       "fields": [{"name": f"f{i}", "type": "long", "default": 0} for i in range(fields)]})


def report(what: str, latencies: list[float], seconds: float | None = None) -> None:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    rate = len(latencies) / (seconds if seconds is not None else sum(latencies))
    print(f"{what:<34} {len(latencies):>7}  p50 {statistics.median(ordered) * 1000:7.2f} ms  "
          f"p99 {p99 * 1000:7.2f} ms  {rate:9.0f}/s", flush=True)


def wait_serving(port: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            Http(port).call("GET", "/subjects")
            return
        except (OSError, RuntimeError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schemas", type=int, default=300)
    parser.add_argument("--versions", type=int, default=40)
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()

    port = free_port()
    node = Odradek({"schema.registry.listener": f"http://127.0.0.1:{port}"})
    try:
        wait_serving(port)
        client = Http(port)
        client.call("POST", "/subjects/warm-up/versions", {"schema": record("WarmUp", 1)})  # the writer is elected

        ids, latencies = [], []
        for n in range(args.schemas):
            took, answer = client.call("POST", f"/subjects/s{n}-value/versions", {"schema": record(f"S{n}", 3)})
            latencies.append(took)
            ids.append(answer["id"])
        report("register (new schema)", latencies)
        report("re-register (already there)", [
            client.call("POST", f"/subjects/s{n}-value/versions", {"schema": record(f"S{n}", 3)})[0]
            for n in range(args.schemas)])

        client.call("PUT", "/config/chain-value", {"compatibility": "BACKWARD_TRANSITIVE"})
        chain = [client.call("POST", "/subjects/chain-value/versions", {"schema": record("Chain", k + 1)})[0]
                 for k in range(args.versions)]
        report(f"transitive, {args.versions} versions", chain)
        print(f"{'':<34} first {chain[0] * 1000:.2f} ms, last {chain[-1] * 1000:.2f} ms", flush=True)

        stop = time.monotonic() + args.seconds
        reads: list[list[float]] = [[] for _ in range(args.readers)]

        def read(mine: list[float], offset: int) -> None:
            reader = Http(port)
            n = offset
            while time.monotonic() < stop:
                mine.append(reader.call("GET", f"/schemas/ids/{ids[n % len(ids)]}")[0])
                n += 1

        threads = [threading.Thread(target=read, args=(reads[i], i)) for i in range(args.readers)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        report(f"GET /schemas/ids/{{id}}, {args.readers} readers", [x for r in reads for x in r],
               time.monotonic() - started)
    finally:
        node.stop()


if __name__ == "__main__":
    main()

"""The three pipelines as SQL: feed a pipeline's input, run its .sql file on an `odradek sql` server, and show
what it made.

    odradek sql --bootstrap-server 127.0.0.1:9092          # in another shell (the REST API on :8088)
    python -m examples.sql.run fraud_filter --server http://127.0.0.1:8088 --bootstrap-server 127.0.0.1:9092
    python -m examples.sql.run windowed_counts ...
    python -m examples.sql.run player_scores ...

The statements run with auto.offset.reset=earliest, so the queries read what was fed before they started.
`odradek sql shell -f examples/sql/<name>.sql` runs the same files by hand.
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Producer

from examples.fraud_filter.run import generate_payments
from examples.spark_session import read_topic
from examples.windowed_counts.run import generate_clicks

HERE = Path(__file__).parent
PROPERTIES = {"auto.offset.reset": "earliest"}
TIMEOUT_S = 180.0


def post(server: str, path: str, body: dict):
    request = urllib.request.Request(f"{server}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        return json.loads(response.read())


def run_file(server: str, name: str) -> list:
    return post(server, "/ksql", {"ksql": (HERE / f"{name}.sql").read_text(), "streamsProperties": PROPERTIES})


def pull(server: str, sql: str) -> list[list]:
    """A pull query's rows (the first element of the answer is its header)."""
    return post(server, "/query-stream", {"sql": sql, "properties": {}})[1:]


def wait_for(check, what: str):
    deadline = time.monotonic() + TIMEOUT_S
    while (result := check()) is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.5)
    return result


def fraud_filter(server: str, bootstrap: str) -> dict:
    run_file(server, "fraud_filter")  # creates the topic `payments` (2 partitions) before it is fed
    expected = generate_payments(bootstrap, "payments", 100)

    def all_flagged():
        records = read_topic(bootstrap, "FRAUDULENT_PAYMENTS")
        return records if len(records) >= expected else None

    flagged = wait_for(all_flagged, "the fraudulent payments")
    print(f"{expected} payments above 0.8 of 100; FRAUDULENT_PAYMENTS holds {len(flagged)}")
    return {"expected": expected, "flagged": [json.loads(v) for _, v in flagged]}


def windowed_counts(server: str, bootstrap: str) -> dict:
    run_file(server, "windowed_counts")
    expected = generate_clicks(bootstrap, "clicks")  # {"user@windowstart": count}

    def counts():
        rows = pull(server, "SELECT user, WINDOWSTART, clicks FROM click_counts;")
        got = {f"{user}@{start}": n for user, start, n in rows}
        return got if got == expected else None

    got = wait_for(counts, "the window counts")
    for key in sorted(got):
        print(f"{key}: {got[key]} clicks")
    return got


def player_scores(server: str, bootstrap: str) -> dict:
    run_file(server, "player_scores")
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "partitioner": "murmur2_random"})
    for player, score in (("alice", 10), ("bob", 7), ("alice", 12), ("carol", 3), ("bob", 9)):
        producer.produce("score_updates", key=player.encode(), value=json.dumps({"score": score}).encode())
    producer.flush(30)

    def every_game_counted():
        rows = sorted(pull(server, "SELECT * FROM best_scores;"))
        return rows if len(rows) == 3 and sum(games for _, _, games in rows) == 5 else None

    best = wait_for(every_game_counted, "the best scores")
    before = sorted(pull(server, "SELECT * FROM player_scores;"))
    producer.produce("score_updates", key=b"carol", value=None)  # deleting a player: a tombstone
    producer.flush(30)
    after = sorted(pull(server, "SELECT * FROM player_scores;"))
    alice = pull(server, "SELECT score FROM player_scores WHERE player = 'alice';")
    print(f"latest scores {before}; after deleting carol {after}; alice's score {alice}; best scores {best}")
    return {"before": before, "after": after, "alice": alice, "best": best}


PIPELINES = {"fraud_filter": fraud_filter, "windowed_counts": windowed_counts, "player_scores": player_scores}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pipeline", choices=sorted(PIPELINES))
    parser.add_argument("--server", default="http://127.0.0.1:8088")
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    args = parser.parse_args(argv)
    return PIPELINES[args.pipeline](args.server.rstrip("/"), args.bootstrap_server)


if __name__ == "__main__":
    main()

"""Kafka 4.0's own command-line tools against a cluster of three Odradek nodes: replicas, ISRs and leaders as
the tools show them, reassignments with throttles, preferred leader election, the metadata quorum, and a node
that stops and comes back.

The module's cluster lives for all its tests; the last test stops and restarts a node.
"""

import json
import re

import pytest
from confluent_kafka import Producer

from tests.java.tool_shell import table
from tests.reference_kafka import requires_reference

pytestmark = requires_reference


@pytest.fixture
def tools(kafka_tools):
    return kafka_tools


@pytest.fixture
def cluster(tools_cluster):
    return tools_cluster


def bs(cluster) -> tuple[str, str]:
    return ("--bootstrap-server", cluster.bootstrap)


def controllers(cluster) -> str:
    """The nodes' CONTROLLER listeners, for --bootstrap-controller."""
    return ",".join(re.search(r"CONTROLLER://([\d.:]+)", node.settings["listeners"]).group(1)
                    for node in cluster.nodes)


def create_topic(tools, cluster, topic: str, *args: str) -> None:
    result = tools.ok("kafka-topics", *bs(cluster), "--create", "--topic", topic, *args)
    assert result.stdout == f"Created topic {topic}.\n", result


def partition_lines(text: str) -> dict[tuple[str, int], dict[str, str]]:
    """The partition lines of `kafka-topics --describe`: (topic, partition) -> {"Leader": "1", "Isr": "1,2", ...}."""
    described = {}
    for line in text.splitlines():
        if line.startswith("\tTopic: "):
            fields = dict(field.split(": ", 1) if ": " in field else (field.rstrip(":"), "")
                          for field in line.strip("\t").split("\t"))
            described[fields["Topic"], int(fields["Partition"])] = fields
    return described


def describe_partitions(tools, cluster, *args: str) -> dict[tuple[str, int], dict[str, str]]:
    return partition_lines(tools.ok("kafka-topics", *bs(cluster), "--describe", *args).stdout)


def fully_replicated(described: dict[tuple[str, int], dict[str, str]]) -> bool:
    return bool(described) and all(set(p["Isr"].split(",")) == set(p["Replicas"].split(","))
                                   for p in described.values())


def test_topics_on_a_cluster_spread_replicas_and_leaders_and_alter_partitions(tools, cluster):
    create_topic(tools, cluster, "spread", "--partitions", 3, "--replication-factor", 3,
                 "--config", "min.insync.replicas=2")
    described = tools.run_until(lambda r: fully_replicated(partition_lines(r.stdout)), "kafka-topics", *bs(cluster),
                                "--describe", "--topic", "spread")
    header = described.lines[0].split("\t")
    assert header[2:5] == ["PartitionCount: 3", "ReplicationFactor: 3", "Configs: min.insync.replicas=2"], described
    partitions = partition_lines(described.stdout)
    for p in partitions.values():
        replicas = p["Replicas"].split(",")
        assert sorted(replicas) == ["1", "2", "3"] and p["Leader"] == replicas[0], described
    # Leadership is spread: each node leads one of the three partitions.
    assert sorted(p["Leader"] for p in partitions.values()) == ["1", "2", "3"], described

    # Every node answers with the same topic.
    for node in cluster.brokers:
        listed = tools.run_until(lambda r: "spread" in r.lines, "kafka-topics", "--bootstrap-server", node.bootstrap,
                                 "--list")
        assert "spread" in listed.lines

    tools.ok("kafka-topics", *bs(cluster), "--alter", "--topic", "spread", "--partitions", 6)
    grown = tools.run_until(lambda r: len(partition_lines(r.stdout)) == 6 and fully_replicated(partition_lines(r.stdout)),
                            "kafka-topics", *bs(cluster), "--describe", "--topic", "spread")
    assert all(sorted(p["Replicas"].split(",")) == ["1", "2", "3"] for p in partition_lines(grown.stdout).values())

    overrides = tools.ok("kafka-topics", *bs(cluster), "--describe", "--topics-with-overrides").lines
    assert any(line.startswith("Topic: spread\t") for line in overrides), overrides
    tools.ok("kafka-topics", *bs(cluster), "--delete", "--topic", "spread")
    tools.run_until(lambda r: "spread" not in r.lines, "kafka-topics", *bs(cluster), "--list")


def test_configs_of_one_broker_stay_on_that_broker_and_the_default_reaches_all(tools, cluster):
    def broker_configs(node_id: int) -> list[str]:
        return tools.ok("kafka-configs", *bs(cluster), "--entity-type", "brokers", "--entity-name", node_id,
                        "--describe").lines

    two = ("--entity-type", "brokers", "--entity-name", "2")
    default = ("--entity-type", "brokers", "--entity-default")
    on_two = ("  message.max.bytes=2000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:message.max.bytes=2000000, "
              "DEFAULT_CONFIG:message.max.bytes=1048588}")
    try:
        done = tools.ok("kafka-configs", *bs(cluster), *two, "--alter", "--add-config", "message.max.bytes=2000000")
        assert done.stdout == "Completed updating config for broker 2.\n", done
        tools.run_until(lambda r: r.lines == ["Dynamic configs for broker 2 are:", on_two], "kafka-configs",
                        *bs(cluster), *two, "--describe", timeout=30)
        assert broker_configs(1) == ["Dynamic configs for broker 1 are:"]
        assert broker_configs(3) == ["Dynamic configs for broker 3 are:"]
        assert tools.ok("kafka-configs", *bs(cluster), *default, "--describe").lines == [
            "Default configs for brokers in the cluster are:"]

        tools.ok("kafka-configs", *bs(cluster), *default, "--alter", "--add-config", "message.max.bytes=3000000")
        # Each broker describes the cluster default under its per-broker setting, if it has one.
        for node_id, value in ((1, "3000000"), (2, "2000000"), (3, "3000000")):
            everything = tools.run_until(
                lambda r, v=value: f"  message.max.bytes={v} sensitive=false" in r.stdout,
                "kafka-configs", *bs(cluster), "--entity-type", "brokers", "--entity-name", node_id, "--describe",
                "--all", timeout=30)
            line = next(line for line in everything.lines if line.startswith("  message.max.bytes="))
            assert "DYNAMIC_DEFAULT_BROKER_CONFIG:message.max.bytes=3000000" in line, line
    finally:
        for entity in (two, default):
            taken = tools.ok("kafka-configs", *bs(cluster), *entity, "--describe").lines[1:]
            if taken:
                tools.ok("kafka-configs", *bs(cluster), *entity, "--alter", "--delete-config", "message.max.bytes")
    tools.run_until(lambda r: r.lines == ["Dynamic configs for broker 2 are:"], "kafka-configs", *bs(cluster), *two,
                    "--describe", timeout=30)


def test_console_producer_with_acks_all_and_a_consumer_group_on_a_cluster(tools, cluster):
    create_topic(tools, cluster, "replicated", "--partitions", 2, "--replication-factor", 3,
                 "--config", "min.insync.replicas=2")
    tools.ok("kafka-console-producer", *bs(cluster), "--topic", "replicated", "--request-required-acks", "all",
             "--compression-codec", "lz4", "--property", "parse.key=true", "--property", "key.separator=:",
             input="".join(f"k{i}:v{i}\n" for i in range(20)))
    assert sum(int(line.split(":")[2]) for line in tools.ok("kafka-get-offsets", *bs(cluster), "--topic",
                                                            "replicated").lines) == 20

    consumed = tools.ok("kafka-console-consumer", *bs(cluster), "--topic", "replicated", "--group", "cluster-group",
                        "--from-beginning", "--max-messages", 20)
    assert sorted(consumed.lines) == sorted(f"v{i}" for i in range(20)), consumed

    state = tools.ok("kafka-consumer-groups", *bs(cluster), "--describe", "--group", "cluster-group", "--state")
    assert re.search(r"\ncluster-group +127\.0\.0\.1:\d+ +\([123]\) +- +Empty +0\n", state.stdout), state
    described = tools.ok("kafka-consumer-groups", *bs(cluster), "--describe", "--group", "cluster-group")
    rows = table(described.stdout, "GROUP")
    assert sorted(row["PARTITION"] for row in rows) == ["0", "1"], described
    assert all(row["CURRENT-OFFSET"] == row["LOG-END-OFFSET"] and row["LAG"] == "0" for row in rows), described

    reset = tools.ok("kafka-consumer-groups", *bs(cluster), "--group", "cluster-group", "--reset-offsets",
                     "--topic", "replicated", "--to-earliest", "--execute")
    assert {(row["PARTITION"], row["NEW-OFFSET"]) for row in table(reset.stdout, "GROUP")} == {("0", "0"), ("1", "0")}
    lag = table(tools.ok("kafka-consumer-groups", *bs(cluster), "--describe", "--group", "cluster-group").stdout,
                "GROUP")
    assert sum(int(row["LAG"]) for row in lag) == 20, lag
    dropped = tools.ok("kafka-consumer-groups", *bs(cluster), "--group", "cluster-group", "--delete")
    assert dropped.stdout == "Deletion of requested consumer groups ('cluster-group') was successful.\n", dropped


def test_transactional_perf_test_and_the_transactions_tool_on_a_cluster(tools, cluster):
    create_topic(tools, cluster, "cluster-txn", "--partitions", 1, "--replication-factor", 3)
    produced = tools.ok("kafka-producer-perf-test", "--topic", "cluster-txn", "--num-records", 500, "--record-size",
                        100, "--throughput", -1, "--producer-props", f"bootstrap.servers={cluster.bootstrap}",
                        "acks=all", "--transactional-id", "cluster-perf-txn", "--transaction-duration-ms", 50)
    assert produced.stdout.startswith("500 records sent, "), produced

    # The last commit completes once its markers are written.
    listed = tools.run_until(lambda r: "CompleteCommit" in r.stdout, "kafka-transactions", *bs(cluster), "list")
    row = {row["TransactionalId"]: row for row in table(listed.stdout, "TransactionalId")}["cluster-perf-txn"]
    assert row["Coordinator"] in {"1", "2", "3"} and row["TransactionState"] == "CompleteCommit", listed
    [described] = table(tools.ok("kafka-transactions", *bs(cluster), "describe", "--transactional-id",
                                 "cluster-perf-txn").stdout, "CoordinatorId")
    assert (described["CoordinatorId"], described["ProducerId"]) == (row["Coordinator"], row["ProducerId"])
    producers = table(tools.ok("kafka-transactions", *bs(cluster), "describe-producers", "--topic", "cluster-txn",
                               "--partition", 0).stdout, "ProducerId")
    assert [(p["ProducerId"], p["CurrentTransactionStartOffset"]) for p in producers] == [
        (row["ProducerId"], "None")], producers

    committed = tools.ok("kafka-console-consumer", *bs(cluster), "--topic", "cluster-txn", "--partition", 0,
                         "--offset", "earliest", "--isolation-level", "read_committed", "--max-messages", 500)
    assert len(committed.lines) == 500, committed.stderr


def test_metadata_quorum_shows_three_voters_through_brokers_and_controllers(tools, cluster):
    cluster_id = tools.ok("kafka-cluster", "cluster-id", *bs(cluster)).stdout
    assert cluster_id == f"Cluster ID: {cluster.cluster_id}\n"
    assert tools.ok("kafka-cluster", "cluster-id", "--bootstrap-controller", controllers(cluster)).stdout == cluster_id

    endpoints = {node_id: f"CONTROLLER://{address}" for node_id, address in enumerate(controllers(cluster).split(","), 1)}
    for via in (bs(cluster), ("--bootstrap-controller", controllers(cluster))):
        # An idle quorum's followers catch up with the leader.
        status = tools.run_until(lambda r: "MaxFollowerLag:         0\n" in r.stdout, "kafka-metadata-quorum", *via,
                                 "describe", "--status")
        fields = dict(re.fullmatch(r"(\w+):\s+(.*)", line).groups() for line in status.lines)
        assert fields["ClusterId"] == cluster.cluster_id and fields["LeaderId"] in {"1", "2", "3"}, status
        voters = json.loads(fields["CurrentVoters"])
        assert {v["id"]: v["endpoints"] for v in voters} == {i: [e] for i, e in endpoints.items()}, status
        assert fields["CurrentObservers"] == "[]", status

        replication = tools.ok("kafka-metadata-quorum", *via, "describe", "--replication")
        rows = {row["NodeId"]: row for row in table(replication.stdout, "NodeId")}
        assert set(rows) == {"1", "2", "3"}, replication
        assert {node_id: row["Status"] for node_id, row in rows.items()} == {
            node_id: "Leader" if node_id == fields["LeaderId"] else "Follower" for node_id in rows}, replication
        assert rows[fields["LeaderId"]]["Lag"] == "0" and all(
            int(row["Lag"]) >= 0 and int(row["LogEndOffset"]) > 0 for row in rows.values()), replication

    features = tools.ok("kafka-features", "--bootstrap-controller", controllers(cluster), "describe")
    assert "Feature: metadata.version\t" in features.stdout and "FinalizedVersionLevel: 4.0-IV3" in features.stdout


def test_log_dirs_and_broker_api_versions_cover_every_broker(tools, cluster):
    create_topic(tools, cluster, "placed", "--replica-assignment", "1:2,2:3,3:1")

    def held(result) -> dict[int, list[str]]:
        return {b["broker"]: sorted(p["partition"] for d in b["logDirs"] for p in d["partitions"])
                for b in json.loads(result.lines[2])["brokers"]}

    # Each broker creates its replicas as it learns of the topic.
    dirs = tools.run_until(lambda r: sum(map(len, held(r).values())) == 6, "kafka-log-dirs", *bs(cluster),
                           "--describe", "--topic-list", "placed")
    assert dirs.lines[1] == "Received log directory information from brokers 1,2,3", dirs
    assert held(dirs) == {1: ["placed-0", "placed-2"], 2: ["placed-0", "placed-1"], 3: ["placed-1", "placed-2"]}, dirs

    versions = tools.ok("kafka-broker-api-versions", *bs(cluster))
    brokers = re.findall(r"^127\.0\.0\.1:(\d+) \(id: (\d) rack: null isFenced: false\) -> \($", versions.stdout, re.M)
    assert sorted(brokers, key=lambda b: b[1]) == [(str(node.port), str(i)) for i, node in enumerate(cluster.nodes, 1)]


def test_reassign_partitions_generate_execute_with_a_throttle_verify_and_cancel(tools, cluster, tmp_path):
    create_topic(tools, cluster, "moving", "--replica-assignment", "1,2")
    # 2 MB in partition 0: at 10 kB/s its copy takes minutes, long enough to see and cancel.
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 50})
    for i in range(2000):
        producer.produce("moving", value=b"%04d" % i + b"x" * 996, partition=0)
    for _ in range(10):
        producer.produce("moving", value=b"small", partition=1)
    assert producer.flush(60) == 0

    (tmp_path / "topics.json").write_text(json.dumps({"topics": [{"topic": "moving"}], "version": 1}))
    generated = tools.ok("kafka-reassign-partitions", *bs(cluster), "--generate", "--topics-to-move-json-file",
                         tmp_path / "topics.json", "--broker-list", "2,3")
    lines = generated.lines
    assert lines[0] == "Current partition replica assignment" and lines[3] == (
        "Proposed partition reassignment configuration"), generated
    current, proposed = json.loads(lines[1]), json.loads(lines[4])
    assert current == {"version": 1, "partitions": [
        {"topic": "moving", "partition": 0, "replicas": [1], "log_dirs": ["any"]},
        {"topic": "moving", "partition": 1, "replicas": [2], "log_dirs": ["any"]}]}, generated
    assert sorted(p["partition"] for p in proposed["partitions"]) == [0, 1], generated
    assert all(len(p["replicas"]) == 1 and p["replicas"][0] in (2, 3) for p in proposed["partitions"]), generated

    # Partition 0 moves from node 1 to node 3, throttled: still in progress when cancelled.
    plan = tmp_path / "slow.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "moving", "partition": 0, "replicas": [3]}]}))
    started = tools.ok("kafka-reassign-partitions", *bs(cluster), "--execute", "--reassignment-json-file", plan,
                       "--throttle", 10000)
    assert started.lines[-3:] == [
        "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is "
        "removed.",
        "The inter-broker throttle limit was set to 10000 B/s",
        "Successfully started partition reassignment for moving-0"], started
    assert json.loads(started.lines[2]) == {"version": 1, "partitions": [
        {"topic": "moving", "partition": 0, "replicas": [1], "log_dirs": ["any"]}]}, started
    listed = tools.ok("kafka-reassign-partitions", *bs(cluster), "--list")
    assert listed.lines == ["Current partition reassignments:", "moving-0: replicas: 3,1. adding: 3. removing: 1."]
    verified = tools.ok("kafka-reassign-partitions", *bs(cluster), "--verify", "--reassignment-json-file", plan)
    assert verified.lines == ["Status of partition reassignment:",
                              "Reassignment of partition moving-0 is still in progress.", ""], verified
    # The brokers learn of the reassignment a moment later.
    described = tools.run_until(lambda r: partition_lines(r.stdout)[("moving", 0)]["Replicas"] == "3,1",
                                "kafka-topics", *bs(cluster), "--describe", "--topic", "moving")
    moving = partition_lines(described.stdout)[("moving", 0)]
    assert (moving["Isr"], moving["Adding Replicas"], moving["Removing Replicas"]) == ("1", "3", "1"), moving
    throttled = tools.ok("kafka-configs", *bs(cluster), "--entity-type", "topics", "--entity-name", "moving",
                         "--describe").lines
    assert sorted(line.split(" ")[2] for line in throttled[1:]) == [
        "follower.replication.throttled.replicas=0:3", "leader.replication.throttled.replicas=0:1"], throttled
    for node_id in (1, 3):
        rates = tools.run_until(lambda r: len(r.lines) == 3, "kafka-configs", *bs(cluster), "--entity-type", "brokers",
                                "--entity-name", node_id, "--describe", timeout=30).lines
        assert sorted(line.split(" ")[2] for line in rates[1:]) == [
            "follower.replication.throttled.rate=10000", "leader.replication.throttled.rate=10000"], rates

    cancelled = tools.ok("kafka-reassign-partitions", *bs(cluster), "--cancel", "--reassignment-json-file", plan)
    assert cancelled.lines[0] == "Successfully cancelled partition reassignment for: moving-0", cancelled
    assert cancelled.lines[1].startswith("None of the specified partition moves are active."), cancelled
    assert "Clearing topic-level throttles on topic moving" in cancelled.lines, cancelled
    assert tools.run_until(lambda r: r.lines == ["No partition reassignments found."], "kafka-reassign-partitions",
                           *bs(cluster), "--list")
    back = tools.run_until(lambda r: "Adding Replicas" not in r.stdout, "kafka-topics", *bs(cluster), "--describe",
                           "--topic", "moving")
    assert partition_lines(back.stdout)[("moving", 0)]["Replicas"] == "1", back
    for node_id in (1, 2, 3):
        tools.run_until(lambda r: len(r.lines) == 1, "kafka-configs", *bs(cluster), "--entity-type", "brokers",
                        "--entity-name", node_id, "--describe", timeout=30)

    # Partition 1 moves from node 2 to node 3 under a generous throttle, and --verify sees it complete.
    plan = tmp_path / "fast.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "moving", "partition": 1, "replicas": [3]}]}))
    started = tools.ok("kafka-reassign-partitions", *bs(cluster), "--execute", "--reassignment-json-file", plan,
                       "--throttle", 50000000)
    assert started.lines[-1] == "Successfully started partition reassignment for moving-1", started
    done = tools.run_until(lambda r: "Reassignment of partition moving-1 is completed." in r.lines,
                           "kafka-reassign-partitions", *bs(cluster), "--verify", "--reassignment-json-file", plan)
    assert "Clearing topic-level throttles on topic moving" in done.lines, done
    assert any(line.startswith("Clearing broker-level throttles on brokers ") for line in done.lines), done
    moved = tools.run_until(lambda r: partition_lines(r.stdout)[("moving", 1)]["Leader"] == "3", "kafka-topics",
                            *bs(cluster), "--describe", "--topic", "moving")
    assert partition_lines(moved.stdout)[("moving", 1)]["Replicas"] == "3", moved
    assert tools.ok("kafka-get-offsets", *bs(cluster), "--topic-partitions", "moving:1").lines == ["moving:1:10"]
    assert tools.ok("kafka-console-consumer", *bs(cluster), "--topic", "moving", "--partition", 1, "--offset",
                    "earliest", "--max-messages", 10).lines == ["small"] * 10


def test_a_stopped_node_leaves_partitions_under_replicated_until_it_returns_and_preferred_election_moves_leaders_back(
        tools, cluster, tmp_path):
    create_topic(tools, cluster, "failover", "--replica-assignment", "1:2:3,2:3:1,3:1:2",
                 "--config", "min.insync.replicas=2")
    create_topic(tools, cluster, "failover-single", "--replica-assignment", "3")
    tools.run_until(lambda r: fully_replicated(partition_lines(r.stdout)), "kafka-topics", *bs(cluster), "--describe",
                    "--topic", "failover")
    node_3 = cluster.node(3)
    node_3.stop()
    try:
        def failover_lines(result) -> dict[tuple[str, int], dict[str, str]]:
            return {tp: p for tp, p in partition_lines(result.stdout).items() if tp[0] == "failover"}

        under = tools.run_until(lambda r: len(failover_lines(r)) == 3 and all(
            p["Isr"] in ("1,2", "2,1") for p in failover_lines(r).values()),
            "kafka-topics", *bs(cluster), "--describe", "--under-replicated-partitions")
        assert all(p["Leader"] in ("1", "2") for p in failover_lines(under).values()), under
        assert failover_lines(under)[("failover", 2)]["Replicas"] == "3,1,2", under

        at_min = tools.ok("kafka-topics", *bs(cluster), "--describe", "--at-min-isr-partitions")
        assert set(failover_lines(at_min)) == {("failover", p) for p in range(3)}, at_min
        unavailable = partition_lines(tools.ok("kafka-topics", *bs(cluster), "--describe",
                                               "--unavailable-partitions").stdout)
        assert unavailable[("failover-single", 0)]["Leader"] == "none", unavailable
        assert not [tp for tp in unavailable if tp[0] == "failover"], unavailable
        under_min = partition_lines(tools.ok("kafka-topics", *bs(cluster), "--describe",
                                             "--under-min-isr-partitions").stdout)
        assert ("failover-single", 0) in under_min and not [tp for tp in under_min if tp[0] == "failover"], under_min

        gone = tools.ok("kafka-cluster", "unregister", *bs(cluster), "--id", 3)
        assert gone.stdout == "Broker 3 is no longer registered.\n", gone
        listed = tools.run_until(lambda r: "(id: 3 " not in r.stdout, "kafka-broker-api-versions", *bs(cluster))
        assert sorted(re.findall(r"\(id: (\d) rack", listed.stdout)) == ["1", "2"], listed
        unknown = tools.run("kafka-cluster", "unregister", *bs(cluster), "--id", 9)
        assert unknown.returncode == 1 and ("org.apache.kafka.common.errors.BrokerIdNotRegisteredException: "
                                            "The given broker ID was not registered.") in unknown.stderr, unknown
    finally:
        node_3.start()

    tools.run_until(lambda r: "(id: 3 " in r.stdout, "kafka-broker-api-versions", *bs(cluster), timeout=90)
    back = tools.run_until(lambda r: fully_replicated({tp: p for tp, p in partition_lines(r.stdout).items()
                                                       if tp[0].startswith("failover")}),
                           "kafka-topics", *bs(cluster), "--describe", "--topic", "failover.*", timeout=90)
    described = partition_lines(back.stdout)
    assert described[("failover", 2)]["Leader"] != "3", back  # no automatic rebalance in this cluster
    assert described[("failover-single", 0)]["Leader"] == "3", back

    (tmp_path / "elect.json").write_text(json.dumps(
        {"partitions": [{"topic": "failover", "partition": p} for p in range(3)]}))
    elected = tools.ok("kafka-leader-election", *bs(cluster), "--election-type", "preferred",
                       "--path-to-json-file", tmp_path / "elect.json")
    assert "Successfully completed leader election (PREFERRED) for partitions failover-2" in elected.lines, elected
    already = next(line for line in elected.lines if line.startswith("Valid replica already elected for partitions "))
    assert sorted(already.removeprefix("Valid replica already elected for partitions ").split(", ")) == [
        "failover-0", "failover-1"], elected
    preferred = {("failover", 0): "1", ("failover", 1): "2", ("failover", 2): "3"}
    tools.run_until(lambda r: {tp: p["Leader"] for tp, p in partition_lines(r.stdout).items()} == preferred,
                    "kafka-topics", *bs(cluster), "--describe", "--topic", "failover")

    again = tools.ok("kafka-leader-election", *bs(cluster), "--election-type", "preferred", "--topic", "failover",
                     "--partition", 2)
    assert again.lines == ["Valid replica already elected for partitions failover-2"], again
    missing = tools.run("kafka-leader-election", *bs(cluster), "--election-type", "preferred", "--topic",
                        "no-such-topic", "--partition", 0)
    assert missing.returncode == 1 and missing.lines[0].startswith(
        "Error completing leader election (PREFERRED) for partition: no-such-topic-0: "
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"), missing

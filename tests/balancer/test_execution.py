"""The execution state machine: concurrency limits, throttles as Kafka applies them, leadership last, progress,
stop and resume, and its JSON round trip."""

import pytest

from odradek.balancer import LeadershipChange, Proposal, ReplicaMove
from odradek.balancer.execution import (
    FOLLOWER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_RATE,
    LEADER_THROTTLED_REPLICAS,
    ConfigChange,
    Execution,
    ExecutionError,
    ExecutionLimits,
)


def move(topic, partition, old, new, size=100):
    added = len([n for n in new if n not in old])
    return ReplicaMove(topic, partition, tuple(old), tuple(new), tuple("" for _ in new), "ReplicaDistributionGoal",
                       size * added)


def proposal(moves=(), changes=()):
    return Proposal(tuple(moves), tuple(changes), {}, {}, (), False)


class Cluster:
    """A pretend cluster: replicas, leaders and reassignments in progress, that the test advances by hand."""

    def __init__(self, partitions):
        self.replicas = {key: tuple(r) for key, r in partitions.items()}
        self.leaders = {key: r[0] for key, r in partitions.items()}
        self.ongoing = {}

    def reassign(self, key, target):
        if set(target) == set(self.replicas[key]):
            self.replicas[key] = tuple(target)
        else:
            self.ongoing[key] = tuple(target)
            self.replicas[key] = tuple(target) + tuple(n for n in self.replicas[key] if n not in target)

    def finish(self, key):
        self.replicas[key] = self.ongoing.pop(key)
        if self.leaders[key] not in self.replicas[key]:
            self.leaders[key] = self.replicas[key][0]

    def elect(self, key):
        self.leaders[key] = self.replicas[key][0]

    def observe(self, execution, now_ms):
        execution.observe(now_ms, set(self.ongoing), self.replicas, self.leaders)


def step(execution, cluster, now_ms, *, finish=()):
    """One driver step against the pretend cluster; finishes the reassignments of `finish` first."""
    for key in finish:
        cluster.finish(key)
    cluster.observe(execution, now_ms)
    started = execution.start_moves(now_ms)
    changes = execution.throttle_changes()
    execution.throttles_applied(changes, now_ms)
    for m in execution.reassignments_to_send():
        cluster.reassign(m.key, m.new_replicas)
        execution.reassignment_sent(m.key, None, now_ms)
    actions = execution.leadership_actions()
    for key, target in actions.reorders:
        cluster.reassign(key, target)
    for key in actions.elections:
        cluster.elect(key)
        execution.election_result(key, None)
    return started, changes


def test_moves_start_within_the_per_node_and_total_limits_in_proposal_order():
    moves = [move("t", 0, [1], [2]), move("t", 1, [1], [3]), move("t", 2, [1], [4]), move("t", 3, [5], [6]),
             move("t", 4, [7], [8]), move("t", 5, [9], [10])]
    execution = Execution.from_proposal(proposal(moves), ExecutionLimits(max_moves_per_node=2, max_moves_total=4),
                                        execution_id="e", now_ms=0)
    started = execution.start_moves(0)
    # t-2 would be node 1's third move; t-3 and t-4 fill the total of 4.
    assert [m.partition for m in started] == [0, 1, 3, 4]
    assert execution.start_moves(0) == []


def test_a_move_counts_against_nodes_it_adds_or_removes_on_not_those_it_keeps():
    moves = [move("t", 0, [1, 2], [1, 3]), move("t", 1, [1, 4], [1, 5])]
    execution = Execution.from_proposal(proposal(moves), ExecutionLimits(max_moves_per_node=1, max_moves_total=9),
                                        execution_id="e", now_ms=0)
    assert [m.partition for m in execution.start_moves(0)] == [0, 1]  # node 1 keeps its replicas: not counted


def test_throttles_follow_kafka_and_go_when_their_moves_are_done():
    moves = [move("t", 0, [1, 2], [2, 3]), move("t", 1, [1, 2], [1, 4]), move("u", 0, [5], [6])]
    cluster = Cluster({("t", 0): [1, 2], ("t", 1): [1, 2], ("u", 0): [5]})
    execution = Execution.from_proposal(proposal(moves), ExecutionLimits(throttle_bytes_per_s=1000),
                                        execution_id="e", now_ms=0)
    _, changes = step(execution, cluster, 0)
    applied = {(c.kind, c.name, c.key): c.value for c in changes}
    assert applied[("topic", "t", LEADER_THROTTLED_REPLICAS)] == "0:1,0:2,1:1,1:2"
    assert applied[("topic", "t", FOLLOWER_THROTTLED_REPLICAS)] == "0:3,1:4"
    assert applied[("topic", "u", LEADER_THROTTLED_REPLICAS)] == "0:5"
    assert applied[("topic", "u", FOLLOWER_THROTTLED_REPLICAS)] == "0:6"
    for node in (1, 2, 3, 4, 5, 6):
        assert applied[("broker", str(node), LEADER_THROTTLED_RATE)] == "1000"
        assert applied[("broker", str(node), FOLLOWER_THROTTLED_RATE)] == "1000"
    _, changes = step(execution, cluster, 10, finish=[("t", 0), ("u", 0)])
    assert set(changes) == {
        ConfigChange("topic", "t", LEADER_THROTTLED_REPLICAS, "1:1,1:2"),
        ConfigChange("topic", "t", FOLLOWER_THROTTLED_REPLICAS, "1:4"),
        ConfigChange("topic", "u", LEADER_THROTTLED_REPLICAS, None),
        ConfigChange("topic", "u", FOLLOWER_THROTTLED_REPLICAS, None),
        *(ConfigChange("broker", str(n), key, None) for n in (3, 5, 6)
          for key in (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE))}
    _, changes = step(execution, cluster, 20, finish=[("t", 1)])
    assert changes and all(c.value is None for c in changes)
    assert execution.applied_throttles == {}
    assert execution.finished


def test_leadership_changes_wait_for_every_replica_move_then_reorder_and_elect():
    moves = [move("t", 0, [1], [2])]
    changes = [LeadershipChange("t", 1, 1, 3, "LeaderReplicaDistributionGoal")]
    cluster = Cluster({("t", 0): [1], ("t", 1): [1, 3]})
    execution = Execution.from_proposal(proposal(moves, changes), ExecutionLimits(), execution_id="e", now_ms=0)
    step(execution, cluster, 0)
    assert cluster.leaders[("t", 1)] == 1 and execution.leadership_actions().reorders == ()
    step(execution, cluster, 10, finish=[("t", 0)])  # the move is done: the reorder goes out (copies nothing)
    assert cluster.replicas[("t", 1)] == (3, 1)
    step(execution, cluster, 20)  # the reorder is seen: the election
    assert cluster.leaders[("t", 1)] == 3
    step(execution, cluster, 30)
    assert execution.finished and execution.progress(30).leadership_done == 1


def test_leadership_changes_run_in_batches():
    changes = [LeadershipChange("t", i, 1, 2, "LeaderReplicaDistributionGoal") for i in range(5)]
    cluster = Cluster({("t", i): [2, 1] for i in range(5)})
    for i in range(5):
        cluster.leaders[("t", i)] = 1
    execution = Execution.from_proposal(proposal((), changes), ExecutionLimits(leadership_batch=2),
                                        execution_id="e", now_ms=0)
    cluster.observe(execution, 0)
    assert execution.leadership_actions().elections == (("t", 0), ("t", 1))


def test_stop_lets_moves_in_flight_finish_and_starts_none_then_resume_continues():
    moves = [move("t", i, [1], [2]) for i in range(4)]
    cluster = Cluster({("t", i): [1] for i in range(4)})
    execution = Execution.from_proposal(proposal(moves), ExecutionLimits(max_moves_per_node=2, throttle_bytes_per_s=7),
                                        execution_id="e", now_ms=0)
    step(execution, cluster, 0)
    execution.stop(5)
    assert execution.status == "stopping"
    started, _ = step(execution, cluster, 10, finish=[("t", 0)])
    assert started == [] and execution.status == "stopping"
    step(execution, cluster, 20, finish=[("t", 1)])
    assert execution.status == "stopped" and execution.applied_throttles == {}
    assert execution.progress(20).moves_done == 2
    execution.resume(30)
    started, _ = step(execution, cluster, 30)
    assert [m.partition for m in started] == [2, 3]
    step(execution, cluster, 40, finish=[("t", 2), ("t", 3)])
    assert execution.finished


def test_progress_estimates_the_time_left_from_the_bytes_rate():
    moves = [move("t", 0, [1], [2], size=1000), move("t", 1, [1], [3], size=3000)]
    cluster = Cluster({("t", 0): [1], ("t", 1): [1]})
    execution = Execution.from_proposal(proposal(moves), ExecutionLimits(max_moves_per_node=1),
                                        execution_id="e", now_ms=0)
    step(execution, cluster, 0)
    assert execution.progress(0).eta_ms is None
    step(execution, cluster, 100, finish=[("t", 0)])
    progress = execution.progress(100)
    assert (progress.moves_done, progress.bytes_done, progress.bytes_total) == (1, 1000, 4000)
    assert progress.eta_ms == 300  # 3000 bytes left at 10 bytes/ms


def test_a_started_move_the_cluster_never_saw_is_sent_again_after_a_restart():
    moves = [move("t", 0, [1], [2])]
    cluster = Cluster({("t", 0): [1]})
    execution = Execution.from_proposal(proposal(moves), ExecutionLimits(), execution_id="e", now_ms=0)
    execution.start_moves(0)
    saved = execution.to_json()  # persisted, then the driver died before sending
    restored = Execution.from_json(saved)
    cluster.observe(restored, 10)
    assert [m.key for m in restored.reassignments_to_send()] == [("t", 0)]


def test_a_move_the_cluster_refuses_fails_and_the_rest_go_on():
    moves = [move("t", 0, [1], [2]), move("t", 1, [1], [2])]
    cluster = Cluster({("t", 0): [1], ("t", 1): [1]})
    execution = Execution.from_proposal(proposal(moves), ExecutionLimits(), execution_id="e", now_ms=0)
    execution.start_moves(0)
    execution.reassignment_sent(("t", 0), "INVALID_REPLICA_ASSIGNMENT: no", 0)
    execution.reassignment_sent(("t", 1), None, 0)
    cluster.reassign(("t", 1), (2,))
    step(execution, cluster, 10, finish=[("t", 1)])
    progress = execution.progress(10)
    assert (progress.moves_failed, progress.moves_done, progress.status) == (1, 1, "done")


def test_json_round_trip_keeps_everything():
    moves = [move("t", 0, [1, 2], [2, 3]), move("t", 1, [1], [4])]
    changes = [LeadershipChange("t", 2, 1, 2, "g")]
    cluster = Cluster({("t", 0): [1, 2], ("t", 1): [1], ("t", 2): [1, 2]})
    execution = Execution.from_proposal(proposal(moves, changes), ExecutionLimits(max_moves_total=1,
                                        throttle_bytes_per_s=5), execution_id="e", now_ms=0)
    step(execution, cluster, 0)
    text = execution.to_json()
    restored = Execution.from_json(text)
    assert restored.to_json() == text
    assert restored.applied_throttles == execution.applied_throttles
    assert restored.progress(5) == execution.progress(5)


def test_the_same_inputs_give_the_same_json():
    def run():
        moves = [move("t", i, [1], [2 + i % 3]) for i in range(6)]
        cluster = Cluster({("t", i): [1] for i in range(6)})
        execution = Execution.from_proposal(proposal(moves), ExecutionLimits(max_moves_per_node=2,
                                            throttle_bytes_per_s=9), execution_id="e", now_ms=0)
        step(execution, cluster, 0)
        step(execution, cluster, 10, finish=[("t", 0)])
        return execution.to_json()
    assert run() == run()


def test_bad_input_is_refused():
    with pytest.raises(ExecutionError):
        ExecutionLimits(max_moves_per_node=0)
    with pytest.raises(ExecutionError):
        Execution.from_proposal(proposal([move("t", 0, [1], [2]), move("t", 0, [1], [3])]), ExecutionLimits(),
                                execution_id="e", now_ms=0)
    with pytest.raises(ExecutionError):
        Execution.from_json('{"version": 99}')


def test_a_move_whose_partition_is_deleted_fails_and_a_lagging_metadata_only_resends():
    moves = [move("t", 0, [1], [2]), move("u", 0, [1], [3])]
    cluster = Cluster({("t", 0): [1], ("u", 0): [1]})
    execution = Execution.from_proposal(proposal(moves), ExecutionLimits(), execution_id="e", now_ms=0)
    step(execution, cluster, 0)
    # The controller finished u-0 but the metadata still shows the old replicas: sent again, not failed.
    del cluster.ongoing[("u", 0)]
    cluster.replicas[("u", 0)] = (1,)
    cluster.observe(execution, 10)
    assert [m.key for m in execution.reassignments_to_send()] == [("u", 0)]
    del cluster.replicas[("t", 0)], cluster.ongoing[("t", 0)]  # the topic was deleted
    cluster.replicas[("u", 0)] = (3,)
    cluster.observe(execution, 20)
    progress = execution.progress(20)
    assert (progress.moves_failed, progress.moves_done, progress.status) == (1, 1, "done")
    assert execution.moves[0].error == "the partition no longer exists"

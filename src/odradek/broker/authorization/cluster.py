"""Authorization of the requests nodes send each other: the metadata quorum's Fetch, FetchSnapshot, Vote,
BeginQuorumEpoch and EndQuorumEpoch, the brokers' BrokerRegistration, BrokerHeartbeat, AlterPartition and
AllocateProducerIds. Each needs CLUSTER_ACTION on the cluster, which Kafka's brokers and controllers have
(as super users, or by an ACL); anyone else gets CLUSTER_AUTHORIZATION_FAILED for the whole request. The
brokers' own follower Fetch, WriteTxnMarkers and AddPartitionsToTxn v4+ are with their APIs' rules."""

from __future__ import annotations

from odradek.broker.authorization.access import requires_cluster, top_level_error
from odradek.security.acl import AclOperation

CLUSTER_ACTION = AclOperation.CLUSTER_ACTION

authorize_metadata_fetch = requires_cluster(CLUSTER_ACTION, lambda error: {
    **top_level_error(error), "session_id": 0, "responses": []})
authorize_fetch_snapshot = requires_cluster(CLUSTER_ACTION, lambda error: {**top_level_error(error), "topics": []})
authorize_vote = requires_cluster(CLUSTER_ACTION, lambda error: {"error_code": error, "topics": []})
authorize_begin_quorum_epoch = authorize_vote
authorize_end_quorum_epoch = authorize_vote
authorize_alter_partition = requires_cluster(CLUSTER_ACTION, lambda error: {**top_level_error(error), "topics": []})
authorize_broker_registration = requires_cluster(CLUSTER_ACTION, lambda error: {
    **top_level_error(error), "broker_epoch": -1})
authorize_broker_heartbeat = requires_cluster(CLUSTER_ACTION, top_level_error)
authorize_allocate_producer_ids = requires_cluster(CLUSTER_ACTION, lambda error: {
    **top_level_error(error), "producer_id_start": -1, "producer_id_len": 0})

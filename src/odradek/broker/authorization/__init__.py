"""Authorization of every request, as Kafka's KafkaApis (broker listeners) and ControllerApis (controller
listeners) check it, in one place between the dispatcher and the handlers.

Before a handler runs, the API's rule (records, metadata, groups, transactions, admin and cluster modules)
asks the authorizer about the caller and the request's resources, and either answers the request itself (a
refusal of the whole request, built as that API answers any error) or lets the handler run with only what
the caller may touch, remembering each refused part and its error; afterwards it puts the refusals back into
the handler's response where Kafka has them, and hides what the caller may not see (topics in Metadata,
groups in ListGroups, transactions in ListTransactions, KIP-430 authorized operations). Handlers never see a
resource the caller may not touch, and know nothing of ACLs.

Without an authorizer (`authorizer.class.name` empty, `node.authorizer` None) the dispatcher does not come
here at all.

Brokers forward some admin requests to the active controller (controller_channel.py) after their own rule has
kept only what the caller may touch; the controller then trusts a forwarding node, one with CLUSTER_ACTION on
the cluster, as Kafka's controller trusts the principal inside a forwarding broker's Envelope.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from odradek.broker.authorization import admin, cluster, groups, metadata, records, transactions
from odradek.broker.authorization.access import HOST_KEY, Access, Answer, Gate, Rule, acl_host
from odradek.network.server import Deferred
from odradek.security.acl import AclOperation

# Rules of the broker listeners, by API key. Keys not here need no authorization (ApiVersions, the SASL
# exchange, and the delegation token APIs, which Odradek refuses on every listener).
BROKER_RULES: dict[int, Rule] = {
    0: records.authorize_produce,
    1: records.authorize_fetch,
    2: records.authorize_list_offsets,
    3: metadata.authorize_metadata,
    8: groups.authorize_offset_commit,
    9: groups.authorize_offset_fetch,
    10: groups.authorize_find_coordinator,
    11: groups.authorize_join_group,
    12: groups.authorize_heartbeat,
    13: groups.authorize_leave_group,
    14: groups.authorize_sync_group,
    15: groups.authorize_describe_groups,
    16: groups.authorize_list_groups,
    19: admin.authorize_create_topics,
    20: admin.authorize_delete_topics,
    21: records.authorize_delete_records,
    22: transactions.authorize_init_producer_id,
    23: records.authorize_offset_for_leader_epoch,
    24: transactions.authorize_add_partitions_to_txn,
    25: transactions.authorize_add_offsets_to_txn,
    26: transactions.authorize_end_txn,
    27: transactions.authorize_write_txn_markers,
    28: transactions.authorize_txn_offset_commit,
    29: admin.authorize_describe_acls,
    30: admin.authorize_create_acls,
    31: admin.authorize_delete_acls,
    32: admin.authorize_describe_configs,
    33: admin.authorize_alter_configs,
    34: admin.authorize_alter_replica_log_dirs,
    35: admin.authorize_describe_log_dirs,
    37: admin.authorize_create_partitions,
    42: groups.authorize_delete_groups,
    43: admin.authorize_elect_leaders,
    44: admin.authorize_incremental_alter_configs,
    45: admin.authorize_alter_partition_reassignments,
    46: admin.authorize_list_partition_reassignments,
    47: groups.authorize_offset_delete,
    48: admin.authorize_describe_client_quotas,
    49: admin.authorize_alter_client_quotas,
    50: admin.authorize_describe_user_scram_credentials,
    51: admin.authorize_alter_user_scram_credentials,
    55: admin.authorize_describe_quorum,
    57: admin.authorize_update_features,
    60: metadata.authorize_describe_cluster,
    61: records.authorize_describe_producers,
    64: admin.authorize_unregister_broker,
    65: transactions.authorize_describe_transactions,
    66: transactions.authorize_list_transactions,
    68: groups.authorize_consumer_group_heartbeat,
    69: groups.authorize_consumer_group_describe,
    74: admin.authorize_list_client_metrics_resources,
    75: metadata.authorize_describe_topic_partitions,
}

# Rules of the controller listeners: the quorum's and the brokers' requests, and the admin APIs.
CONTROLLER_RULES: dict[int, Rule] = {
    **{key: BROKER_RULES[key] for key in (19, 20, 29, 30, 31, 32, 33, 37, 43, 44, 45, 46, 49, 50, 51, 55, 57,
                                          60, 64)},
    1: cluster.authorize_metadata_fetch,
    52: cluster.authorize_vote,
    53: cluster.authorize_begin_quorum_epoch,
    54: cluster.authorize_end_quorum_epoch,
    56: cluster.authorize_alter_partition,
    59: cluster.authorize_fetch_snapshot,
    62: cluster.authorize_broker_registration,
    63: cluster.authorize_broker_heartbeat,
    67: cluster.authorize_allocate_producer_ids,
}

# What brokers forward to the controller, already authorized there with the client's principal.
FORWARDED = frozenset({19, 20, 30, 31, 33, 37, 43, 44, 45, 46, 49, 51, 55, 57, 64})


class ApiAuthorization:
    """The dispatcher's hook: `handle(ctx, request, handler)` in place of `handler(ctx, request)` while
    `node.authorizer` is set."""

    def __init__(self, node, *, controller_side: bool = False):
        self.node = node
        self.controller_side = controller_side
        self.rules = CONTROLLER_RULES if controller_side else BROKER_RULES

    def handle(self, ctx, request: dict, handler: Callable):
        rule = self.rules.get(ctx.api_key)
        if rule is None:
            return handler(ctx, request)
        connection = ctx.connection
        host = connection.state.get(HOST_KEY)
        if host is None:
            host = connection.state[HOST_KEY] = acl_host(connection.peer)
        access = Access(self.node.authorizer, connection.principal, host)
        if self.controller_side and ctx.api_key in FORWARDED and access.cluster(AclOperation.CLUSTER_ACTION):
            return handler(ctx, request)
        verdict = rule(Gate(self.node, access, ctx.api_version, request, self.controller_side))
        if verdict is None:
            return handler(ctx, request)
        if isinstance(verdict, Answer):
            if verdict.response is None:
                connection.close_after_response = True
            return verdict.response
        result = handler(ctx, verdict.request)
        if verdict.close_connection:
            connection.close_after_response = True
        if verdict.finish is None:
            return result
        return _then(result, verdict.finish)


def _then(result, finish: Callable[[dict], dict]):
    """Apply `finish` to a handler's result, whichever form it takes (see dispatcher.py)."""
    if isinstance(result, Deferred):
        return Deferred(_finish_later(result.awaitable, finish))
    if inspect.isawaitable(result):
        return _finish_later(result, finish)
    return None if result is None else finish(result)


async def _finish_later(pending, finish: Callable[[dict], dict]):
    result = await pending
    return None if result is None else finish(result)


__all__ = ["BROKER_RULES", "CONTROLLER_RULES", "FORWARDED", "ApiAuthorization"]

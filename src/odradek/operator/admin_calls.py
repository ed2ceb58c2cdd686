"""What the topic and user handlers share in calling confluent-kafka's AdminClient: the request timeout, and how a
future's error becomes either a refusal reported in the resource's status or an error retried with the pass."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

REQUEST_TIMEOUT_S = 30.0


class RequestRefused(Exception):
    """The cluster refused a request for a reason retrying will not change (an invalid config value, more replicas
    than brokers, an ACL it cannot take): reported as NotReady, not retried."""


def future_result(future, doing: str, ignore: int | None = None):
    """The future's result; None for the error `ignore`. An error retrying cannot fix is a RequestRefused saying
    what could not be done (`doing`); others (the cluster unreachable, a timeout) raise as they are, for the caller
    to retry the pass."""
    try:
        return future.result(timeout=REQUEST_TIMEOUT_S + 5)
    except KafkaException as e:
        error: KafkaError = e.args[0]
        if error.code() == ignore:
            return None
        if error.retriable() or error.code() < 0:  # librdkafka's own errors: transport, timeouts
            raise
        raise RequestRefused(f"cannot {doing}: {error.str()}") from None

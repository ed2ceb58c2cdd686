"""Reading a known number of records with kafka-python's KafkaConsumer. Iterating a consumer ends only after
`consumer_timeout_ms` without a record, so a test that reads every record by iterating would wait that long each
time; here `consumer_timeout_ms` only bounds a read that never gets its records."""

import itertools

# How long to look for records past the expected ones. They were written before the read began and come with
# the first fetches, so this only bounds the look; it cannot fail a read that got what it expected.
_EXTRA_LOOK_MS = 500


def take(consumer, count: int) -> list:
    """The consumer's first `count` records, and any record past them that a short poll then finds, so that a
    log holding too many records shows as a read of too many."""
    records = list(itertools.islice(consumer, count))
    if len(records) == count:
        for batch in consumer.poll(timeout_ms=_EXTRA_LOOK_MS).values():
            records.extend(batch)
    return records

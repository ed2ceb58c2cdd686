"""AllocateProducerIds (API key 67), from Kafka's AllocateProducerIdsRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Field, Int16, Int32, Int64

ALLOCATE_PRODUCER_IDS = Api(
    key=67,
    name="AllocateProducerIds",
    valid_versions=(0, 0),
    flexible_from=0,
    request=[
        Field("broker_id", Int32),
        Field("broker_epoch", Int64, default=-1),
    ],
    response=[
        Field("throttle_time_ms", Int32),
        Field("error_code", Int16),
        Field("producer_id_start", Int64),
        Field("producer_id_len", Int32),
    ],
)

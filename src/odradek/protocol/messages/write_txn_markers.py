"""WriteTxnMarkers (API key 27), from Kafka's WriteTxnMarkersRequest/Response.json by tools/generate_messages.py."""

from odradek.protocol.schema import Api, Array, Bool, Field, Int16, Int32, Int64, String, Struct

WRITE_TXN_MARKERS = Api(
    key=27,
    name="WriteTxnMarkers",
    valid_versions=(1, 1),
    flexible_from=1,
    request=[
        Field("markers", Array(Struct(
            Field("producer_id", Int64),
            Field("producer_epoch", Int16),
            Field("transaction_result", Bool),
            Field("topics", Array(Struct(
                Field("name", String),
                Field("partition_indexes", Array(Int32)),
                name="WritableTxnMarkerTopic",
            ))),
            Field("coordinator_epoch", Int32),
            name="WritableTxnMarker",
        ))),
    ],
    response=[
        Field("markers", Array(Struct(
            Field("producer_id", Int64),
            Field("topics", Array(Struct(
                Field("name", String),
                Field("partitions", Array(Struct(
                    Field("partition_index", Int32),
                    Field("error_code", Int16),
                    name="WritableTxnMarkerPartitionResult",
                ))),
                name="WritableTxnMarkerTopicResult",
            ))),
            name="WritableTxnMarkerResult",
        ))),
    ],
)

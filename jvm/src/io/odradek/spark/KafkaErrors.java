package io.odradek.spark;

import java.util.Map;
import java.util.Set;

/** Kafka's error codes that a producer meets, by name, and which of them are worth sending again. */
final class KafkaErrors {
    static final short OFFSET_OUT_OF_RANGE = 1;
    static final short UNKNOWN_TOPIC_OR_PARTITION = 3;
    static final short NOT_COORDINATOR = 16;
    static final short COORDINATOR_NOT_AVAILABLE = 15;
    static final short TOPIC_ALREADY_EXISTS = 36;
    static final short DUPLICATE_SEQUENCE_NUMBER = 46;

    private static final Map<Short, String> NAMES = Map.ofEntries(
            Map.entry((short) 1, "OFFSET_OUT_OF_RANGE"),
            Map.entry((short) 2, "CORRUPT_MESSAGE"),
            Map.entry((short) 3, "UNKNOWN_TOPIC_OR_PARTITION"),
            Map.entry((short) 5, "LEADER_NOT_AVAILABLE"),
            Map.entry((short) 6, "NOT_LEADER_OR_FOLLOWER"),
            Map.entry((short) 7, "REQUEST_TIMED_OUT"),
            Map.entry((short) 10, "MESSAGE_TOO_LARGE"),
            Map.entry((short) 13, "NETWORK_EXCEPTION"),
            Map.entry((short) 14, "COORDINATOR_LOAD_IN_PROGRESS"),
            Map.entry((short) 15, "COORDINATOR_NOT_AVAILABLE"),
            Map.entry((short) 16, "NOT_COORDINATOR"),
            Map.entry((short) 17, "INVALID_TOPIC_EXCEPTION"),
            Map.entry((short) 18, "RECORD_LIST_TOO_LARGE"),
            Map.entry((short) 19, "NOT_ENOUGH_REPLICAS"),
            Map.entry((short) 20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND"),
            Map.entry((short) 21, "INVALID_REQUIRED_ACKS"),
            Map.entry((short) 29, "TOPIC_AUTHORIZATION_FAILED"),
            Map.entry((short) 31, "CLUSTER_AUTHORIZATION_FAILED"),
            Map.entry((short) 35, "UNSUPPORTED_VERSION"),
            Map.entry((short) 36, "TOPIC_ALREADY_EXISTS"),
            Map.entry((short) 37, "INVALID_PARTITIONS"),
            Map.entry((short) 38, "INVALID_REPLICATION_FACTOR"),
            Map.entry((short) 40, "INVALID_CONFIG"),
            Map.entry((short) 41, "NOT_CONTROLLER"),
            Map.entry((short) 45, "OUT_OF_ORDER_SEQUENCE_NUMBER"),
            Map.entry((short) 46, "DUPLICATE_SEQUENCE_NUMBER"),
            Map.entry((short) 47, "INVALID_PRODUCER_EPOCH"),
            Map.entry((short) 48, "INVALID_TXN_STATE"),
            Map.entry((short) 49, "INVALID_PRODUCER_ID_MAPPING"),
            Map.entry((short) 50, "INVALID_TRANSACTION_TIMEOUT"),
            Map.entry((short) 51, "CONCURRENT_TRANSACTIONS"),
            Map.entry((short) 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
            Map.entry((short) 55, "OPERATION_NOT_ATTEMPTED"),
            Map.entry((short) 56, "KAFKA_STORAGE_ERROR"),
            Map.entry((short) 59, "UNKNOWN_PRODUCER_ID"),
            Map.entry((short) 87, "INVALID_RECORD"),
            Map.entry((short) 90, "PRODUCER_FENCED"));

    // As the sink's Python producer (produce.py): the leader moved or is busy; sending again may succeed. And a
    // coordinator's "not now": a transaction still ending, a request not forwarded yet, a partition not tried.
    private static final Set<Short> RETRIABLE = Set.of(
            (short) 3, (short) 5, (short) 6, (short) 7, (short) 13, (short) 14, (short) 15, (short) 16,
            (short) 19, (short) 20, (short) 41, (short) 51, (short) 55, (short) 56);

    private KafkaErrors() {}

    static boolean isRetriable(short code) {
        return RETRIABLE.contains(code);
    }

    static String describe(short code, String message) {
        String name = NAMES.getOrDefault(code, "error code " + code);
        return message == null || message.isEmpty() ? name : name + " (" + message + ")";
    }
}

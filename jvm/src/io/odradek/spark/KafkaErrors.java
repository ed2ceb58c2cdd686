package io.odradek.spark;

import java.util.Map;
import java.util.Set;

/** Kafka's error codes that a producer meets, by name, and which of them are worth sending again. */
final class KafkaErrors {
    static final short DUPLICATE_SEQUENCE_NUMBER = 46;

    private static final Map<Short, String> NAMES = Map.ofEntries(
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
            Map.entry((short) 45, "OUT_OF_ORDER_SEQUENCE_NUMBER"),
            Map.entry((short) 46, "DUPLICATE_SEQUENCE_NUMBER"),
            Map.entry((short) 47, "INVALID_PRODUCER_EPOCH"),
            Map.entry((short) 56, "KAFKA_STORAGE_ERROR"),
            Map.entry((short) 59, "UNKNOWN_PRODUCER_ID"),
            Map.entry((short) 87, "INVALID_RECORD"));

    // As the sink's Python producer (produce.py): the leader moved or is busy; sending again may succeed.
    private static final Set<Short> RETRIABLE = Set.of(
            (short) 3, (short) 5, (short) 6, (short) 7, (short) 13, (short) 14, (short) 15, (short) 16,
            (short) 19, (short) 20, (short) 56);

    private KafkaErrors() {}

    static boolean isRetriable(short code) {
        return RETRIABLE.contains(code);
    }

    static String describe(short code, String message) {
        String name = NAMES.getOrDefault(code, "error code " + code);
        return message == null || message.isEmpty() ? name : name + " (" + message + ")";
    }
}

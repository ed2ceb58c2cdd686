package io.odradek.spark;

import java.io.Closeable;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The transaction coordinator of one transactional id, as a transactional producer speaks to it: found by
 * FindCoordinator, asked for a producer id and a new epoch (which fences every earlier holder of the id and aborts
 * what it left open), told of each partition before the producer writes to it, and asked to end the transaction.
 * A coordinator that moved is found again; one still ending the last transaction is asked again.
 */
final class TransactionCoordinator implements Closeable {
    private static final short FIND_COORDINATOR = 10;
    private static final short INIT_PRODUCER_ID = 22;
    private static final short ADD_PARTITIONS_TO_TXN = 24;
    private static final short END_TXN = 26;
    private static final byte TRANSACTION_KEY = 1;
    private static final int REQUEST_TIMEOUT_MS = 30_000;
    private static final long BACKOFF_MS = 20;  // the Java producer's for CONCURRENT_TRANSACTIONS

    /** A request to whichever node answers (the producer's bootstrap servers and known nodes). */
    interface AnyNode {
        ByteBuffer call(short apiKey, short apiVersion, byte[] body) throws IOException;
    }

    private final String transactionalId;
    private final SinkSettings settings;
    private final AnyNode anyNode;
    private final Map<String, Set<Integer>> added = new HashMap<>();
    private Connection connection;
    private long producerId = -1;
    private short producerEpoch = -1;

    TransactionCoordinator(String transactionalId, SinkSettings settings, AnyNode anyNode) {
        this.transactionalId = transactionalId;
        this.settings = settings;
        this.anyNode = anyNode;
    }

    long producerId() {
        return producerId;
    }

    short producerEpoch() {
        return producerEpoch;
    }

    /** A new epoch of the id's producer: earlier holders of the id are fenced, their open transaction aborted. */
    void initProducerId() throws IOException {
        added.clear();
        long deadline = System.currentTimeMillis() + settings.deliveryTimeoutMs;
        while (true) {
            ByteBuffer response = call(INIT_PRODUCER_ID, (short) 1, Wire.request(out -> {
                Wire.writeString(out, transactionalId);
                out.writeInt(settings.transactionTimeoutMs);  // the coordinator aborts a transaction open longer
            }), deadline);
            if (response == null) {
                continue;
            }
            response.getInt();  // throttle time
            short error = response.getShort();
            if (error == 0) {
                producerId = response.getLong();
                producerEpoch = response.getShort();
                return;
            }
            retryOrFail(error, "InitProducerId", deadline);
        }
    }

    /** Adds to the transaction those of `partitions` not in it yet: a producer does, before it writes to them. */
    void addPartitions(Map<String, Set<Integer>> partitions) throws IOException {
        Map<String, List<Integer>> missing = new HashMap<>();
        for (Map.Entry<String, Set<Integer>> topic : partitions.entrySet()) {
            Set<Integer> known = added.getOrDefault(topic.getKey(), Set.of());
            for (int partition : topic.getValue()) {
                if (!known.contains(partition)) {
                    missing.computeIfAbsent(topic.getKey(), k -> new ArrayList<>()).add(partition);
                }
            }
        }
        long deadline = System.currentTimeMillis() + settings.deliveryTimeoutMs;
        while (!missing.isEmpty()) {
            Map<String, List<Integer>> asked = missing;
            ByteBuffer response = call(ADD_PARTITIONS_TO_TXN, (short) 1, Wire.request(out -> {
                Wire.writeString(out, transactionalId);
                out.writeLong(producerId);
                out.writeShort(producerEpoch);
                out.writeInt(asked.size());
                for (Map.Entry<String, List<Integer>> topic : asked.entrySet()) {
                    Wire.writeString(out, topic.getKey());
                    out.writeInt(topic.getValue().size());
                    for (int partition : topic.getValue()) {
                        out.writeInt(partition);
                    }
                }
            }), deadline);
            if (response == null) {
                continue;
            }
            response.getInt();  // throttle time
            missing = new HashMap<>();
            short retriable = 0;
            for (int topics = response.getInt(); topics > 0; topics--) {
                String topic = Wire.readString(response);
                for (int n = response.getInt(); n > 0; n--) {
                    int partition = response.getInt();
                    short error = response.getShort();
                    if (error == 0) {
                        added.computeIfAbsent(topic, k -> new HashSet<>()).add(partition);
                        continue;
                    }
                    if (!KafkaErrors.isRetriable(error)) {
                        throw new IOException("AddPartitionsToTxn " + topic + "[" + partition + "]: "
                                + KafkaErrors.describe(error, null));
                    }
                    if (error == KafkaErrors.NOT_COORDINATOR || error == KafkaErrors.COORDINATOR_NOT_AVAILABLE) {
                        dropConnection();
                    }
                    retriable = error;
                    missing.computeIfAbsent(topic, k -> new ArrayList<>()).add(partition);
                }
            }
            if (!missing.isEmpty()) {
                retryOrFail(retriable, "AddPartitionsToTxn", deadline);
            }
        }
    }

    /** Commits or aborts the transaction; a transaction that wrote to no partition has nothing to end. */
    void endTransaction(boolean commit) throws IOException {
        if (added.isEmpty()) {
            return;
        }
        long deadline = System.currentTimeMillis() + settings.deliveryTimeoutMs;
        while (true) {
            ByteBuffer response = call(END_TXN, (short) 1, Wire.request(out -> {
                Wire.writeString(out, transactionalId);
                out.writeLong(producerId);
                out.writeShort(producerEpoch);
                out.writeBoolean(commit);
            }), deadline);
            if (response == null) {
                continue;
            }
            response.getInt();  // throttle time
            short error = response.getShort();
            if (error == 0) {
                added.clear();
                return;
            }
            retryOrFail(error, commit ? "EndTxn (commit)" : "EndTxn (abort)", deadline);
        }
    }

    /** One request to the coordinator; null when it could not be reached (found again on the next call). */
    private ByteBuffer call(short apiKey, short apiVersion, byte[] body, long deadline) throws IOException {
        try {
            return coordinator(deadline).call(apiKey, apiVersion, body);
        } catch (Security.AuthenticationException e) {
            throw e;
        } catch (IOException e) {
            dropConnection();
            if (System.currentTimeMillis() > deadline) {
                throw new IOException("the transaction coordinator of " + transactionalId + ": " + e, e);
            }
            Waits.sleep(BACKOFF_MS);
            return null;
        }
    }

    private Connection coordinator(long deadline) throws IOException {
        while (connection == null) {
            ByteBuffer response = anyNode.call(FIND_COORDINATOR, (short) 1, Wire.request(out -> {
                Wire.writeString(out, transactionalId);
                out.writeByte(TRANSACTION_KEY);
            }));
            response.getInt();  // throttle time
            short error = response.getShort();
            Wire.readString(response);  // error message
            response.getInt();  // node id
            String host = Wire.readString(response);
            int port = response.getInt();
            if (error != 0) {
                retryOrFail(error, "FindCoordinator", deadline);
                continue;
            }
            connection = new Connection(new InetSocketAddress(host, port), settings, REQUEST_TIMEOUT_MS);
        }
        return connection;
    }

    private void retryOrFail(short error, String what, long deadline) throws IOException {
        if (!KafkaErrors.isRetriable(error) || System.currentTimeMillis() > deadline) {
            throw new IOException(what + " of " + transactionalId + ": " + KafkaErrors.describe(error, null));
        }
        if (error == KafkaErrors.NOT_COORDINATOR || error == KafkaErrors.COORDINATOR_NOT_AVAILABLE) {
            dropConnection();
        }
        Waits.sleep(BACKOFF_MS);
    }

    private void dropConnection() {
        if (connection != null) {
            try {
                connection.close();
            } catch (IOException ignored) {
                // given up on
            }
            connection = null;
        }
    }

    @Override
    public void close() {
        dropConnection();
    }
}

package io.odradek.spark;

import java.io.Closeable;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * An idempotent producer for a write task's rows: a producer id from the cluster, a sequence per partition,
 * records appended straight into each partition's next record batch, and a batch sent when it reaches
 * `batch.size` or the task ends (one batch per partition in a request, as Kafka requires). One request is in
 * flight, on the producer's sender thread, while the task encodes the next batches; the next waits for it, so a
 * partition's batches reach the log in order. A retriable error
 * or a lost connection sends the same bytes again to the leader the metadata names then, until
 * `delivery.timeout.ms` passes without progress; the sequence makes a repeat land once. Any other error fails
 * the task with its name.
 *
 * <p>With a transactional id it is a transactional producer: {@link #initTransactions} fences the id's earlier
 * producers, each partition joins the transaction ({@link TransactionCoordinator}) before a batch goes to it, and
 * {@link #commitTransaction} ends it once every batch is acknowledged.
 */
final class Producer implements Closeable {
    private static final short PRODUCE = 0;
    private static final short METADATA = 3;
    private static final short INIT_PRODUCER_ID = 22;
    private static final int REQUEST_TIMEOUT_MS = 30_000;
    private static final long BACKOFF_MS = 100;
    private static final long METADATA_MAX_AGE_MS = 300_000;  // Kafka's metadata.max.age.ms

    private final SinkSettings settings;
    private final String transactionalId;
    private final TransactionCoordinator coordinator;
    private final Map<Integer, InetSocketAddress> nodes = new HashMap<>();
    private final Map<Integer, Connection> connections = new ConcurrentHashMap<>();
    private final ExecutorService sender = Executors.newSingleThreadExecutor(runnable -> {
        Thread thread = new Thread(runnable, "odradek-sink-sender");
        thread.setDaemon(true);
        return thread;
    });
    private Future<?> inFlight;
    private final Map<String, TopicState> topics = new HashMap<>();
    private long metadataAtMs;
    private long producerId;
    private short producerEpoch;

    private static final class TopicState {
        int[] leaders;
        RecordBatchBuilder[] open;
        int[] sequences;
        int sticky;
    }

    private static final class Pending {
        final String topic;
        final int partition;
        final byte[] batch;

        Pending(String topic, int partition, byte[] batch) {
            this.topic = topic;
            this.partition = partition;
            this.batch = batch;
        }
    }

    /** An idempotent producer, with its producer id. */
    Producer(SinkSettings settings) throws IOException {
        this(settings, null);
        long deadline = System.currentTimeMillis() + settings.deliveryTimeoutMs;
        while (true) {
            ByteBuffer response = callAny(INIT_PRODUCER_ID, (short) 1, Wire.request(out -> {
                out.writeShort(-1);  // no transactional id: idempotence only
                out.writeInt(60_000);
            }));
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

    /**
     * A transactional producer when `transactionalId` is not null, which has no producer id until
     * {@link #initTransactions}.
     */
    Producer(SinkSettings settings, String transactionalId) {
        this.settings = settings;
        this.transactionalId = transactionalId;
        coordinator = transactionalId == null ? null
                : new TransactionCoordinator(transactionalId, settings, this::callAny);
    }

    /**
     * A new epoch of the transactional id: every earlier producer of the id is fenced and its open transaction
     * aborted. Sequences start again at 0.
     */
    synchronized void initTransactions() throws IOException {
        coordinator.initProducerId();
        producerId = coordinator.producerId();
        producerEpoch = coordinator.producerEpoch();
        for (TopicState state : topics.values()) {
            Arrays.fill(state.sequences, 0);
        }
    }

    /** Sends what is left, waits for its acknowledgement, then commits the transaction. */
    void commitTransaction() throws IOException {
        flush();
        coordinator.endTransaction(true);
    }

    /** Aborts the transaction (what was sent of it is never read by read_committed consumers). */
    void abortTransaction() throws IOException {
        try {
            awaitInFlight();  // no batch of it may land after its abort marker
        } catch (IOException | RuntimeException ignored) {
            // what failed the task: the abort goes on
        }
        coordinator.endTransaction(false);
    }

    /** Appends a record; `partition` -1 lets the key's murmur2 (or, without a key, the sticky partition) pick. */
    void send(String topic, int partition, UTF8String key, UTF8String value, long timestamp, byte[][] headers)
            throws IOException {
        Pending full;
        synchronized (this) {
            TopicState state = topic(topic);
            if (partition >= state.leaders.length) {
                refreshMetadata();  // partitions may have been added since
            }
            if (partition < -1 || partition >= state.leaders.length) {
                throw new IllegalArgumentException("topic " + topic + " has no partition " + partition);
            }
            boolean sticky = partition == -1 && key == null;
            if (partition == -1) {
                partition = key == null ? state.sticky : Murmur2.partition(key, state.leaders.length);
            }
            RecordBatchBuilder builder = state.open[partition];
            if (builder == null) {
                builder = state.open[partition] = new RecordBatchBuilder();
            }
            // A batch is cut before it passes batch.size (a record bigger than that is a batch of its own): a
            // batch.size near the broker's max.message.bytes must not make batches it refuses.
            full = builder.count() > 0
                    && builder.bytes() + RecordBatchBuilder.sizeBound(key, value, headers) > settings.batchBytes
                    ? seal(topic, state, partition) : null;
            builder.append(key, value, timestamp, headers);
            if (full == null) {
                return;
            }
            if (sticky) {  // as Kafka's sticky partitioner: keyless records move on when a batch is full
                state.sticky = (state.sticky + 1) % state.leaders.length;
            }
        }
        List<Pending> batches = new ArrayList<>(1);
        batches.add(full);
        dispatch(batches);
    }

    /** Sends every record not yet sent and waits until all are acknowledged. */
    void flush() throws IOException {
        List<Pending> pending = new ArrayList<>();
        synchronized (this) {
            for (Map.Entry<String, TopicState> entry : topics.entrySet()) {
                RecordBatchBuilder[] open = entry.getValue().open;
                for (int partition = 0; partition < open.length; partition++) {
                    if (open[partition] != null && open[partition].count() > 0) {
                        pending.add(seal(entry.getKey(), entry.getValue(), partition));
                    }
                }
            }
        }
        dispatch(pending);
        awaitInFlight();
    }

    /** Sends batches on the sender thread, once the request before them is answered. */
    private void dispatch(List<Pending> batches) throws IOException {
        awaitInFlight();
        inFlight = sender.submit(() -> {
            produce(batches);
            return null;
        });
    }

    private void awaitInFlight() throws IOException {
        if (inFlight == null) {
            return;
        }
        try {
            Waits.result(inFlight);
        } finally {
            inFlight = null;
        }
    }

    private Pending seal(String topic, TopicState state, int partition) {
        RecordBatchBuilder builder = state.open[partition];
        int sequence = state.sequences[partition];
        state.sequences[partition] = nextSequence(sequence, builder.count());
        return new Pending(topic, partition,
                builder.seal(producerId, producerEpoch, sequence, settings.codec, coordinator != null));
    }

    /** Kafka's sequences wrap past Int32.MAX to 0. */
    static int nextSequence(int sequence, int increment) {
        return sequence > Integer.MAX_VALUE - increment
                ? increment - (Integer.MAX_VALUE - sequence) - 1 : sequence + increment;
    }

    private void produce(List<Pending> pending) throws IOException {
        if (coordinator != null) {
            Map<String, Set<Integer>> partitions = new HashMap<>();
            for (Pending p : pending) {
                partitions.computeIfAbsent(p.topic, k -> new HashSet<>()).add(p.partition);
            }
            coordinator.addPartitions(partitions);
        }
        long deadline = System.currentTimeMillis() + settings.deliveryTimeoutMs;
        while (!pending.isEmpty()) {
            Map<Integer, List<Pending>> byLeader = new LinkedHashMap<>();
            for (Pending p : pending) {
                byLeader.computeIfAbsent(leader(p.topic, p.partition), k -> new ArrayList<>()).add(p);
            }
            List<Pending> again = new ArrayList<>();
            String lastError = null;
            for (Map.Entry<Integer, List<Pending>> entry : byLeader.entrySet()) {
                try {
                    lastError = produceTo(entry.getKey(), entry.getValue(), again);
                } catch (Security.AuthenticationException e) {
                    throw e;
                } catch (IOException e) {
                    dropConnection(entry.getKey());
                    again.addAll(entry.getValue());
                    lastError = "node " + entry.getKey() + ": " + e;
                }
            }
            if (again.size() < pending.size()) {
                deadline = System.currentTimeMillis() + settings.deliveryTimeoutMs;  // progress
            }
            pending = again;
            if (!pending.isEmpty()) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IOException(pending.size() + " record batches not delivered within "
                            + settings.deliveryTimeoutMs + " ms: " + lastError);
                }
                Waits.sleep(BACKOFF_MS);
                refreshMetadata();
            }
        }
    }

    /** One Produce request to a leader; batches to send again go to `again`. Returns the last retriable error. */
    private String produceTo(int leader, List<Pending> batches, List<Pending> again) throws IOException {
        if (leader < 0) {
            again.addAll(batches);
            return "no leader";
        }
        Map<String, List<Pending>> byTopic = new LinkedHashMap<>();
        for (Pending p : batches) {
            byTopic.computeIfAbsent(p.topic, k -> new ArrayList<>()).add(p);
        }
        List<byte[]> parts = new ArrayList<>();
        parts.add(Wire.request(out -> {
            if (transactionalId == null) {
                out.writeShort(-1);
            } else {
                Wire.writeString(out, transactionalId);
            }
            out.writeShort(settings.acks);
            out.writeInt(REQUEST_TIMEOUT_MS);
            out.writeInt(byTopic.size());
        }));
        for (Map.Entry<String, List<Pending>> entry : byTopic.entrySet()) {
            parts.add(Wire.request(out -> {
                Wire.writeString(out, entry.getKey());
                out.writeInt(entry.getValue().size());
            }));
            for (Pending p : entry.getValue()) {
                parts.add(Wire.request(out -> {
                    out.writeInt(p.partition);
                    out.writeInt(p.batch.length);
                }));
                parts.add(p.batch);
            }
        }
        ByteBuffer response = connection(leader).call(PRODUCE, (short) 8, parts.toArray(new byte[0][]));
        String retriable = null;
        for (int topicCount = response.getInt(); topicCount > 0; topicCount--) {
            String topic = Wire.readString(response);
            for (int partitionCount = response.getInt(); partitionCount > 0; partitionCount--) {
                int partition = response.getInt();
                short error = response.getShort();
                response.getLong();  // base offset
                response.getLong();  // log append time
                response.getLong();  // log start offset
                for (int n = response.getInt(); n > 0; n--) {
                    response.getInt();
                    Wire.readString(response);
                }
                String message = Wire.readString(response);
                if (error == 0 || error == KafkaErrors.DUPLICATE_SEQUENCE_NUMBER) {
                    continue;
                }
                String described = topic + "[" + partition + "]: " + KafkaErrors.describe(error, message);
                if (!KafkaErrors.isRetriable(error)) {
                    throw new IOException("delivery failed: " + described);
                }
                retriable = described;
                for (Pending p : batches) {
                    if (p.topic.equals(topic) && p.partition == partition) {
                        again.add(p);
                    }
                }
            }
        }
        return retriable;
    }

    synchronized int leader(String topic, int partition) throws IOException {
        return topic(topic).leaders[partition];
    }

    private synchronized InetSocketAddress address(int node) {
        return nodes.get(node);
    }

    private synchronized TopicState topic(String topic) throws IOException {
        if (System.currentTimeMillis() - metadataAtMs > METADATA_MAX_AGE_MS && !topics.isEmpty()) {
            refreshMetadata();
        }
        TopicState state = topics.get(topic);
        if (state == null) {
            state = new TopicState();
            topics.put(topic, state);
            try {
                refreshMetadata();
            } catch (IOException | RuntimeException e) {
                topics.remove(topic);
                throw e;
            }
        }
        return state;
    }

    /** Leaders of every topic this producer writes, the topics created if they do not exist. */
    synchronized void refreshMetadata() throws IOException {
        long deadline = System.currentTimeMillis() + settings.deliveryTimeoutMs;
        while (true) {
            String missing = metadata();
            if (missing == null) {
                metadataAtMs = System.currentTimeMillis();
                return;
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IOException("no metadata within " + settings.deliveryTimeoutMs + " ms: " + missing);
            }
            Waits.sleep(BACKOFF_MS);
        }
    }

    /** One Metadata request; null when every topic was found, else what is missing. */
    private String metadata() throws IOException {
        List<String> names = new ArrayList<>(topics.keySet());
        ByteBuffer response = callAny(METADATA, (short) 8, Wire.request(out -> {
            out.writeInt(names.size());
            for (String name : names) {
                Wire.writeString(out, name);
            }
            out.writeBoolean(true);  // auto-create, as librdkafka's and Java's producers ask
            out.writeBoolean(false);
            out.writeBoolean(false);
        }));
        response.getInt();  // throttle time
        for (int n = response.getInt(); n > 0; n--) {
            int id = response.getInt();
            String host = Wire.readString(response);
            int port = response.getInt();
            Wire.readString(response);  // rack
            InetSocketAddress address = InetSocketAddress.createUnresolved(host, port);
            if (!address.equals(nodes.put(id, address))) {
                dropConnection(id);
            }
        }
        Wire.readString(response);  // cluster id
        response.getInt();  // controller id
        String missing = null;
        for (int n = response.getInt(); n > 0; n--) {
            short error = response.getShort();
            String name = Wire.readString(response);
            response.get();  // is internal
            int partitions = response.getInt();
            int[] leaders = new int[partitions];
            for (int p = 0; p < partitions; p++) {
                response.getShort();
                int index = response.getInt();
                int leader = response.getInt();
                response.getInt();  // leader epoch
                for (int list = 0; list < 3; list++) {  // replicas, in-sync replicas, offline replicas
                    for (int r = response.getInt(); r > 0; r--) {
                        response.getInt();
                    }
                }
                leaders[index] = leader;
            }
            response.getInt();  // topic authorized operations
            TopicState state = topics.get(name);
            if (state == null) {
                continue;
            }
            if (error != 0 || partitions == 0) {
                if (error != 0 && !KafkaErrors.isRetriable(error)) {
                    throw new IOException("topic " + name + ": " + KafkaErrors.describe(error, null));
                }
                missing = "topic " + name + ": " + KafkaErrors.describe(error, null);
                continue;
            }
            resize(state, partitions);
            state.leaders = leaders;
        }
        return missing;
    }

    private static void resize(TopicState state, int partitions) {
        if (state.leaders != null && state.leaders.length == partitions) {
            return;
        }
        RecordBatchBuilder[] open = new RecordBatchBuilder[partitions];
        int[] sequences = new int[partitions];
        if (state.open != null) {
            System.arraycopy(state.open, 0, open, 0, Math.min(partitions, state.open.length));
            System.arraycopy(state.sequences, 0, sequences, 0, Math.min(partitions, state.sequences.length));
        } else {
            state.sticky = ThreadLocalRandom.current().nextInt(partitions);
        }
        state.open = open;
        state.sequences = sequences;
    }

    private void retryOrFail(short error, String what, long deadline) throws IOException {
        if (!KafkaErrors.isRetriable(error) || System.currentTimeMillis() > deadline) {
            throw new IOException(what + ": " + KafkaErrors.describe(error, null));
        }
        Waits.sleep(BACKOFF_MS);
    }

    /** A request to any node that answers: the bootstrap servers first, then the nodes the metadata named. */
    ByteBuffer callAny(short apiKey, short apiVersion, byte[] body) throws IOException {
        IOException last = null;
        List<InetSocketAddress> candidates = new ArrayList<>(settings.bootstrapAddresses());
        synchronized (this) {
            candidates.addAll(nodes.values());
        }
        for (InetSocketAddress address : candidates) {
            InetSocketAddress resolved = new InetSocketAddress(address.getHostString(), address.getPort());
            try (Connection connection = new Connection(resolved, settings, REQUEST_TIMEOUT_MS)) {
                return connection.call(apiKey, apiVersion, body);
            } catch (Security.AuthenticationException e) {
                throw e;  // refused credentials: another node would refuse them too
            } catch (IOException e) {
                last = e;
            }
        }
        throw new IOException("no node of " + settings.bootstrapServers + " answered: " + last, last);
    }

    Connection connection(int node) throws IOException {
        Connection connection = connections.get(node);
        if (connection == null) {
            InetSocketAddress address = address(node);
            if (address == null) {
                throw new IOException("node " + node + " is not in the metadata");
            }
            connection = new Connection(new InetSocketAddress(address.getHostString(), address.getPort()),
                    settings, REQUEST_TIMEOUT_MS);
            connections.put(node, connection);
        }
        return connection;
    }

    void dropConnection(int node) {
        Connection connection = connections.remove(node);
        if (connection != null) {
            try {
                connection.close();
            } catch (IOException ignored) {
                // the connection is being given up on
            }
        }
    }

    @Override
    public void close() {
        sender.shutdownNow();
        if (coordinator != null) {
            coordinator.close();
        }
        for (Integer node : new ArrayList<>(connections.keySet())) {
            dropConnection(node);
        }
    }
}

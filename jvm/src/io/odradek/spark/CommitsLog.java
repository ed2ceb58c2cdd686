package io.odradek.spark;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * `__odradek_spark_commits`, the exactly-once sink's record of what is done, in the layout of the Python data
 * source's (sink.py), so that either sink can go on with a query the other wrote: `done/<sink id>/<task>` says a
 * task's transaction of that batch committed, `commit/<sink id>` that the driver committed the batch; each value
 * is `{"batch_id": N}`. Markers only ever raise a batch id, so an executor reads on from where it stopped.
 */
final class CommitsLog {
    static final String TOPIC = "__odradek_spark_commits";
    private static final short FETCH = 1;
    private static final short METADATA = 3;
    private static final short CREATE_TOPICS = 19;
    private static final int FETCH_MAX_BYTES = 1 << 20;
    private static final int FETCH_WAIT_MS = 0;  // the read ends at the high watermark: nothing to wait for
    private static final long BACKOFF_MS = 20;
    private static final Pattern BATCH_ID = Pattern.compile("\"batch_id\"\\s*:\\s*(-?\\d+)");

    /** What the markers say of one sink: its last committed batch, and each task's last batch done. */
    static final class SinkState {
        final long lastCommitted;
        final Map<Integer, Long> done;

        SinkState(long lastCommitted, Map<Integer, Long> done) {
            this.lastCommitted = lastCommitted;
            this.done = done;
        }

        /** Whether `task` of `batch` needs writing: not if the driver committed the batch or the task did it. */
        boolean isDone(long batch, int task) {
            return batch <= lastCommitted || done.getOrDefault(task, -1L) >= batch;
        }
    }

    private static final class Read {
        final SinkState state;
        final long readTo;

        Read(SinkState state, long readTo) {
            this.state = state;
            this.readTo = readTo;
        }
    }

    // What this executor read for each sink (by cluster and sink id), and up to where.
    private static final Map<String, Read> READ = new ConcurrentHashMap<>();

    private CommitsLog() {}

    static UTF8String commitKey(String sinkId) {
        return UTF8String.fromString("commit/" + sinkId);
    }

    static UTF8String doneKey(String sinkId, int task) {
        return UTF8String.fromString("done/" + sinkId + "/" + task);
    }

    static UTF8String batchValue(long batch) {
        return UTF8String.fromString("{\"batch_id\": " + batch + "}");
    }

    /** One transactional id per task of a sink: the same in every attempt of the task, and short. */
    static String transactionalId(String sinkId, int task) {
        try {
            byte[] digest = MessageDigest.getInstance("SHA-256").digest(sinkId.getBytes(StandardCharsets.UTF_8));
            StringBuilder hex = new StringBuilder("odradek-sink-");
            for (int i = 0; i < 12; i++) {
                hex.append(String.format("%02x", digest[i]));
            }
            return hex.append('-').append(task).toString();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Creates the topic (one partition, compacted) if it does not exist; on the driver, before any task. */
    static void ensureTopic(Producer producer, long deadlineMs) throws IOException {
        while (true) {
            ByteBuffer metadata = producer.callAny(METADATA, (short) 8, Wire.request(out -> {
                out.writeInt(1);
                Wire.writeString(out, TOPIC);
                out.writeBoolean(false);  // not auto-created: it needs its own settings
                out.writeBoolean(false);
                out.writeBoolean(false);
            }));
            if (topicError(metadata) == 0) {
                return;
            }
            ByteBuffer created = producer.callAny(CREATE_TOPICS, (short) 4, Wire.request(out -> {
                out.writeInt(1);
                Wire.writeString(out, TOPIC);
                out.writeInt(1);
                out.writeShort(-1);  // the broker's default.replication.factor: as durable as the data topics
                out.writeInt(0);  // no assignments
                // Ten-minute segments: compaction cleans closed ones only, and a new executor reads it all.
                out.writeInt(2);
                Wire.writeString(out, "cleanup.policy");
                Wire.writeString(out, "compact");
                Wire.writeString(out, "segment.ms");
                Wire.writeString(out, "600000");
                out.writeInt(30_000);
                out.writeBoolean(false);
            }));
            created.getInt();  // throttle time
            created.getInt();  // one topic
            Wire.readString(created);
            short error = created.getShort();
            String message = Wire.readString(created);
            if (error == 0 || error == KafkaErrors.TOPIC_ALREADY_EXISTS) {
                continue;  // until the metadata has it
            }
            if (!KafkaErrors.isRetriable(error) || System.currentTimeMillis() > deadlineMs) {
                throw new IOException("creating " + TOPIC + ": " + KafkaErrors.describe(error, message));
            }
            Waits.sleep(BACKOFF_MS);
        }
    }

    /** The error of the one topic of a Metadata v8 response. */
    private static short topicError(ByteBuffer response) {
        response.getInt();  // throttle time
        for (int n = response.getInt(); n > 0; n--) {
            response.getInt();
            Wire.readString(response);
            response.getInt();
            Wire.readString(response);
        }
        Wire.readString(response);  // cluster id
        response.getInt();  // controller id
        response.getInt();  // one topic
        short error = response.getShort();
        if (error == 0) {
            Wire.readString(response);
            response.get();
            if (response.getInt() == 0) {
                return KafkaErrors.UNKNOWN_TOPIC_OR_PARTITION;  // not yet with its partition
            }
        }
        return error;
    }

    /** Appends a marker outside any transaction and waits for it (the driver's commit of a batch). */
    static void append(Producer producer, UTF8String key, UTF8String value) throws IOException {
        producer.send(TOPIC, 0, key, value, System.currentTimeMillis(), null);
        producer.flush();
    }

    /**
     * What the markers say of `sinkId`, read to the end of the topic with every transaction in it decided:
     * up to the high watermark of the first fetch, waiting for the last stable offset to get there.
     */
    static SinkState read(Producer producer, String clusterKey, String sinkId, long deadlineMs) throws IOException {
        String cacheKey = clusterKey + "\u0000" + sinkId;
        Read known = READ.getOrDefault(cacheKey, new Read(new SinkState(-1, new HashMap<>()), 0));
        long lastCommitted = known.state.lastCommitted;
        Map<Integer, Long> done = new HashMap<>(known.state.done);
        String commitKey = "commit/" + sinkId;
        String donePrefix = "done/" + sinkId + "/";
        long position = known.readTo;
        long end = -1;
        while (end < 0 || position < end) {
            Fetched fetched = fetch(producer, position, deadlineMs);
            if (fetched.error == KafkaErrors.OFFSET_OUT_OF_RANGE) {
                // Behind the log start, read from there; past the end, the topic was made again: all is new.
                if (position < fetched.logStart) {
                    position = fetched.logStart;
                } else {
                    position = 0;
                    lastCommitted = -1;
                    done.clear();
                }
                continue;
            }
            if (end < 0) {
                end = fetched.highWatermark;
            }
            long[] raised = {lastCommitted};
            long next = RecordBatchReader.readCommitted(fetched.records, position, fetched.aborted,
                    (offset, key, value) -> {
                        if (key == null || value == null) {
                            return;
                        }
                        String name = new String(key, StandardCharsets.UTF_8);
                        boolean commit = name.equals(commitKey);
                        // done/<sink id>/<task>: another sink's id can start with this one's and a slash
                        if (!commit && !(name.startsWith(donePrefix) && isTask(name, donePrefix.length()))) {
                            return;
                        }
                        Matcher m = BATCH_ID.matcher(new String(value, StandardCharsets.UTF_8));
                        if (!m.find()) {
                            return;
                        }
                        long batch = Long.parseLong(m.group(1));
                        if (commit) {
                            raised[0] = Math.max(raised[0], batch);
                        } else {
                            done.merge(Integer.parseInt(name.substring(donePrefix.length())), batch, Math::max);
                        }
                    });
            lastCommitted = raised[0];
            if (next == position) {  // nothing decided past it yet: a transaction is still open
                if (System.currentTimeMillis() > deadlineMs) {
                    throw new IOException("timed out reading " + TOPIC + " up to offset " + end
                            + " (last stable offset " + fetched.lastStable + ")");
                }
                Waits.sleep(BACKOFF_MS);
            }
            position = next;
        }
        SinkState state = new SinkState(lastCommitted, done);
        READ.put(cacheKey, new Read(state, position));
        return state;
    }

    private static boolean isTask(String name, int from) {
        if (from == name.length() || name.length() - from > 9) {
            return false;
        }
        for (int i = from; i < name.length(); i++) {
            if (name.charAt(i) < '0' || name.charAt(i) > '9') {
                return false;
            }
        }
        return true;
    }

    private static final class Fetched {
        short error;
        long highWatermark;
        long lastStable;
        long logStart;
        final List<long[]> aborted = new ArrayList<>();
        ByteBuffer records = ByteBuffer.allocate(0);
    }

    /** One read_committed Fetch (v5) of the topic's partition from its leader, the leader's errors retried. */
    private static Fetched fetch(Producer producer, long offset, long deadlineMs) throws IOException {
        while (true) {
            int leader = producer.leader(TOPIC, 0);
            String failure;
            if (leader < 0) {
                failure = "no leader";
            } else {
                Fetched fetched = null;
                try {
                    fetched = fetchFrom(producer.connection(leader), offset);
                } catch (Security.AuthenticationException e) {
                    throw e;
                } catch (IOException e) {
                    producer.dropConnection(leader);
                }
                if (fetched == null) {
                    failure = "node " + leader + " did not answer";
                } else if (fetched.error == 0 || fetched.error == KafkaErrors.OFFSET_OUT_OF_RANGE) {
                    return fetched;
                } else if (KafkaErrors.isRetriable(fetched.error)) {
                    failure = KafkaErrors.describe(fetched.error, null);
                } else {
                    throw new IOException("reading " + TOPIC + ": " + KafkaErrors.describe(fetched.error, null));
                }
            }
            if (System.currentTimeMillis() > deadlineMs) {
                throw new IOException("reading " + TOPIC + ": " + failure);
            }
            Waits.sleep(BACKOFF_MS);
            producer.refreshMetadata();
        }
    }

    private static Fetched fetchFrom(Connection connection, long offset) throws IOException {
        ByteBuffer response = connection.call(FETCH, (short) 5, Wire.request(out -> {
            out.writeInt(-1);  // a consumer
            out.writeInt(FETCH_WAIT_MS);
            out.writeInt(1);
            out.writeInt(FETCH_MAX_BYTES);
            out.writeByte(1);  // read_committed
            out.writeInt(1);
            Wire.writeString(out, TOPIC);
            out.writeInt(1);
            out.writeInt(0);
            out.writeLong(offset);
            out.writeLong(-1);  // log start offset: a follower's
            out.writeInt(FETCH_MAX_BYTES);
        }));
        Fetched fetched = new Fetched();
        response.getInt();  // throttle time
        response.getInt();  // one topic
        Wire.readString(response);
        response.getInt();  // one partition
        response.getInt();
        fetched.error = response.getShort();
        fetched.highWatermark = response.getLong();
        fetched.lastStable = response.getLong();
        fetched.logStart = response.getLong();
        for (int n = response.getInt(); n > 0; n--) {  // -1: null
            fetched.aborted.add(new long[] {response.getLong(), response.getLong()});
        }
        int size = response.getInt();
        if (size > 0) {
            fetched.records = response.slice(response.position(), size);
        }
        return fetched;
    }
}

package io.odradek.spark;

import java.io.Serializable;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * What a write of `format("odradek")` asks for, when this sink can do it: a batch write, the exactly-once
 * streaming sink, or the plain one (`odradek.sink.transactional=false`), of Spark's Kafka sink columns as strings
 * or binaries, with settings this producer honours (security: {@link Security}). Anything else (Avro columns,
 * tagged records, GSSAPI, an encrypted key, another codec or partitioner, `acks=0`) is the Python data source's,
 * which {@link #of} says by returning null. `odradek.sink.jvm` (true, false; unset: wherever it can) asks for it
 * or keeps it out.
 */
final class SinkSettings implements Serializable {
    private static final long serialVersionUID = 1L;
    private static final String KAFKA_PREFIX = "kafka.";
    static final String JVM_OPTION = "odradek.sink.jvm";
    static final String TRANSACTIONAL_OPTION = "odradek.sink.transactional";
    private static final String SINK_ID_OPTION = "odradek.sink.id";
    private static final String TAG_RECORDS_OPTION = "odradek.sink.tagRecords";
    private static final Set<String> HONOURED = Set.of(
            "bootstrap.servers", "client.id", "acks", "request.required.acks", "compression.type",
            "compression.codec", "enable.idempotence", "batch.size", "delivery.timeout.ms", "message.timeout.ms",
            "partitioner", "security.protocol", "ssl.ca.location", "ssl.ca.pem", "ssl.certificate.location",
            "ssl.key.location", "ssl.key.password", "ssl.endpoint.identification.algorithm",
            "enable.ssl.certificate.verification", "sasl.mechanism", "sasl.mechanisms", "sasl.username",
            "sasl.password", "transaction.timeout.ms");
    // librdkafka's queueing and pacing, which mean nothing to a producer that sends as it encodes.
    private static final Set<String> NOT_APPLICABLE = Set.of(
            "linger.ms", "queue.buffering.max.ms", "queue.buffering.max.messages", "queue.buffering.max.kbytes",
            "batch.num.messages", "retries", "message.send.max.retries", "retry.backoff.ms", "retry.backoff.max.ms",
            "reconnect.backoff.ms", "reconnect.backoff.max.ms", "socket.connection.setup.timeout.ms",
            "topic.metadata.refresh.interval.ms", "max.in.flight.requests.per.connection", "max.in.flight");

    final String bootstrapServers;
    final Security security;
    final String topic;
    /** The exactly-once streaming sink's id (before the query's id is added), null for a plain write. */
    final String sinkId;
    final String clientId;
    final short acks;
    final byte codec;
    final int batchBytes;
    final long deliveryTimeoutMs;
    final int transactionTimeoutMs;
    final int keyColumn;
    final boolean keyIsString;
    final int valueColumn;
    final boolean valueIsString;
    final int topicColumn;
    final int partitionColumn;
    final int headersColumn;
    final int timestampColumn;
    final boolean timestampIsMillis;

    private SinkSettings(Map<String, String> kafka, Security security, String topic, String sinkId,
                         Map<String, Integer> columns, StructType schema) {
        bootstrapServers = kafka.get("bootstrap.servers");
        this.security = security;
        this.topic = topic;
        this.sinkId = sinkId;
        clientId = kafka.getOrDefault("client.id", "odradek-spark");
        acks = "1".equals(acks(kafka)) ? (short) 1 : (short) -1;
        codec = "gzip".equals(codecName(kafka)) ? RecordBatchBuilder.CODEC_GZIP : RecordBatchBuilder.CODEC_NONE;
        batchBytes = Integer.parseInt(kafka.getOrDefault("batch.size", "1000000").trim());
        deliveryTimeoutMs = Long.parseLong(
                kafka.getOrDefault("delivery.timeout.ms", kafka.getOrDefault("message.timeout.ms", "120000")).trim());
        transactionTimeoutMs = Integer.parseInt(kafka.getOrDefault("transaction.timeout.ms", "60000").trim());
        keyColumn = columns.getOrDefault("key", -1);
        keyIsString = keyColumn >= 0 && schema.fields()[keyColumn].dataType() instanceof StringType;
        valueColumn = columns.get("value");
        valueIsString = schema.fields()[valueColumn].dataType() instanceof StringType;
        topicColumn = columns.getOrDefault("topic", -1);
        partitionColumn = columns.getOrDefault("partition", -1);
        headersColumn = columns.getOrDefault("headers", -1);
        timestampColumn = columns.getOrDefault("timestamp", -1);
        timestampIsMillis = timestampColumn >= 0 && schema.fields()[timestampColumn].dataType() instanceof LongType;
    }

    /**
     * These settings, or null when the write is the Python data source's to do. With `odradek.sink.jvm=true`
     * a write this sink cannot take fails, saying why; with `false` every write is the Python data source's.
     */
    static SinkSettings of(CaseInsensitiveStringMap options, StructType schema, boolean streaming) {
        String jvm = trimmed(options.get(JVM_OPTION));
        if (jvm != null && !jvm.equalsIgnoreCase("true") && !jvm.equalsIgnoreCase("false")) {
            throw new IllegalArgumentException("'" + JVM_OPTION + "' must be 'true' or 'false', got '" + jvm + "'");
        }
        if ("false".equalsIgnoreCase(jvm)) {
            return null;
        }
        Map<String, String> kafka = new HashMap<>();
        String topic = null;
        boolean registry = false;
        for (Map.Entry<String, String> option : options.entrySet()) {
            String name = option.getKey().toLowerCase(Locale.ROOT);
            if (name.startsWith(KAFKA_PREFIX)) {
                kafka.put(name.substring(KAFKA_PREFIX.length()), option.getValue());
            } else if (name.equals("topic")) {
                topic = option.getValue();
            } else {
                registry |= name.startsWith("keyschemaregistry.") || name.startsWith("valueschemaregistry.");
            }
        }
        Map<String, Integer> columns = columns(schema);
        boolean transactional = streaming && booleanOption(options, TRANSACTIONAL_OPTION, true);
        String sinkId = transactional ? sinkId(options) : null;
        String refusal;
        if (registry) {
            refusal = "it does not encode Avro columns (keySchemaRegistry.*, valueSchemaRegistry.*)";
        } else if (transactional && sinkId == null) {
            refusal = "the streaming sink needs a stable id: set option '" + SINK_ID_OPTION
                    + "' (or 'checkpointLocation' as a writer option)";
        } else if (transactional && booleanOption(options, TAG_RECORDS_OPTION, false)) {
            refusal = "it does not tag records with their sink, batch and task (" + TAG_RECORDS_OPTION + ")";
        } else if (transactional && "1".equals(acks(kafka))) {
            refusal = "the exactly-once sink waits for every in-sync replica, not acks=1";
        } else if (!kafka.containsKey("bootstrap.servers")) {
            refusal = "option 'kafka.bootstrap.servers' must be specified";
        } else if (columns == null || !columns.containsKey("value")
                || (topic == null && !columns.containsKey("topic"))) {
            refusal = "it takes Spark's Kafka sink columns as strings and binaries: value, key, topic, partition "
                    + "(int), timestamp, headers (array<struct<key: string, value: binary>>)";
        } else {
            refusal = settingRefusal(kafka);
        }
        if (refusal == null) {
            refusal = Security.refusal(kafka);
        }
        if (refusal == null) {
            try {
                SinkSettings settings = new SinkSettings(kafka, new Security(kafka), topic, sinkId, columns, schema);
                if (!settings.bootstrapAddresses().isEmpty()) {
                    return settings;
                }
                refusal = "no address in kafka.bootstrap.servers";
            } catch (NumberFormatException e) {
                refusal = "kafka.bootstrap.servers is not a list of host:port";
            }
        }
        if ("true".equalsIgnoreCase(jvm)) {
            throw new IllegalArgumentException(JVM_OPTION + "=true, but the JVM sink cannot take this write: "
                    + refusal);
        }
        return null;
    }

    /** The Python data source's boolean options: true or false, any case; anything else is an error. */
    private static boolean booleanOption(CaseInsensitiveStringMap options, String name, boolean unset) {
        String value = trimmed(options.get(name));
        if (value == null) {
            return unset;
        }
        if (!value.equalsIgnoreCase("true") && !value.equalsIgnoreCase("false")) {
            throw new IllegalArgumentException("'" + name + "' must be 'true' or 'false', got '" + options.get(name)
                    + "'");
        }
        return value.equalsIgnoreCase("true");
    }

    /** As the Python data source's: `odradek.sink.id`, else `checkpoint:` and the checkpoint's normalized path. */
    private static String sinkId(CaseInsensitiveStringMap options) {
        String id = options.get(SINK_ID_OPTION);
        if (id != null && !id.isEmpty()) {
            return id;
        }
        String checkpoint = options.get("checkpointLocation");
        return checkpoint == null || checkpoint.isEmpty() ? null : "checkpoint:" + normalizedPath(checkpoint);
    }

    /** Python's posixpath.normpath: the same id from the same checkpoint, whichever sink computes it. */
    private static String normalizedPath(String path) {
        int leadingSlashes = path.startsWith("//") && !path.startsWith("///") ? 2 : path.startsWith("/") ? 1 : 0;
        List<String> parts = new ArrayList<>();
        for (String part : path.split("/")) {
            if (part.isEmpty() || part.equals(".")) {
                continue;
            }
            boolean up = part.equals("..");
            if (!up || (leadingSlashes == 0 && parts.isEmpty())
                    || (!parts.isEmpty() && parts.get(parts.size() - 1).equals(".."))) {
                parts.add(part);
            } else if (!parts.isEmpty()) {
                parts.remove(parts.size() - 1);
            }
        }
        String normalized = "/".repeat(leadingSlashes) + String.join("/", parts);
        return normalized.isEmpty() ? "." : normalized;
    }

    /** Why the producer cannot honour these kafka.* settings, or null if it can. */
    private static String settingRefusal(Map<String, String> kafka) {
        for (String name : kafka.keySet()) {
            if (!HONOURED.contains(name) && !NOT_APPLICABLE.contains(name)) {
                return "it does not speak kafka." + name;
            }
        }
        String partitioner = trimmed(kafka.getOrDefault("partitioner", "murmur2_random"));
        String acks = acks(kafka);
        String codec = codecName(kafka);
        if (!partitioner.equals("murmur2_random") && !partitioner.equals("murmur2")) {
            return "it partitions as Kafka does (murmur2_random), not kafka.partitioner=" + partitioner;
        }
        if (!acks.equals("all") && !acks.equals("-1") && !acks.equals("1")) {
            return "it waits for acknowledgements (acks all or 1), not acks=" + acks;
        }
        if (!codec.equals("none") && !codec.equals("gzip")) {
            return "it compresses with gzip or not at all, not " + codec;
        }
        if (!isPositiveInt(kafka.getOrDefault("batch.size", "1"))) {
            return "kafka.batch.size is not a positive integer";
        }
        if (!isPositiveInt(kafka.getOrDefault("delivery.timeout.ms", kafka.getOrDefault("message.timeout.ms", "1")))) {
            return "the delivery timeout is not a positive integer";
        }
        if (!isPositiveInt(kafka.getOrDefault("transaction.timeout.ms", "1"))) {
            return "kafka.transaction.timeout.ms is not a positive integer";
        }
        return null;
    }

    /** Spark's Kafka sink columns by lowercase name, or null if one of them has a type this sink does not take. */
    private static Map<String, Integer> columns(StructType schema) {
        Map<String, Integer> columns = new HashMap<>();
        StructField[] fields = schema.fields();
        for (int i = 0; i < fields.length; i++) {
            String name = fields[i].name().toLowerCase(Locale.ROOT);
            DataType type = fields[i].dataType();
            boolean takes;
            switch (name) {
                case "key":
                case "value":
                    takes = type instanceof StringType || type instanceof BinaryType;
                    break;
                case "topic":
                    takes = type instanceof StringType;
                    break;
                case "partition":
                    takes = type instanceof IntegerType;
                    break;
                case "timestamp":
                    takes = type instanceof TimestampType || type instanceof LongType;
                    break;
                case "headers":
                    takes = isHeaders(type);
                    break;
                default:
                    continue;  // not a record's: Spark's Kafka sink ignores it too
            }
            if (!takes) {
                return null;
            }
            columns.put(name, i);
        }
        return columns;
    }

    private static boolean isHeaders(DataType type) {
        if (!(type instanceof ArrayType) || !(((ArrayType) type).elementType() instanceof StructType)) {
            return false;
        }
        StructField[] fields = ((StructType) ((ArrayType) type).elementType()).fields();
        return fields.length == 2 && fields[0].dataType() instanceof StringType
                && fields[1].dataType() instanceof BinaryType;
    }

    List<InetSocketAddress> bootstrapAddresses() {
        List<InetSocketAddress> addresses = new ArrayList<>();
        for (String server : bootstrapServers.split(",")) {
            String address = server.trim();
            int colon = address.lastIndexOf(':');
            if (colon > 0) {
                addresses.add(InetSocketAddress.createUnresolved(
                        address.substring(0, colon).replace("[", "").replace("]", ""),
                        Integer.parseInt(address.substring(colon + 1))));
            }
        }
        return addresses;
    }

    /** Which cluster, as whom: what the markers read from it are kept by. */
    String clusterKey() {
        return String.join("\u0000", bootstrapServers, security.key());
    }

    /** What decides a producer: tasks with equal keys can share one. */
    String producerKey() {
        return String.join("\u0000", bootstrapServers, clientId, Short.toString(acks), Byte.toString(codec),
                Integer.toString(batchBytes), Long.toString(deliveryTimeoutMs), Integer.toString(transactionTimeoutMs),
                security.key());
    }

    private static String acks(Map<String, String> kafka) {
        return trimmed(kafka.getOrDefault("acks", kafka.getOrDefault("request.required.acks", "all")))
                .toLowerCase(Locale.ROOT);
    }

    private static String codecName(Map<String, String> kafka) {
        return trimmed(kafka.getOrDefault("compression.type", kafka.getOrDefault("compression.codec", "none")))
                .toLowerCase(Locale.ROOT);
    }

    private static boolean isPositiveInt(String value) {
        try {
            return Integer.parseInt(value.trim()) > 0;
        } catch (NumberFormatException e) {
            return false;
        }
    }

    private static String trimmed(String value) {
        return value == null ? null : value.trim();
    }
}

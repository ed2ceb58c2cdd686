package io.odradek.spark;

import java.io.IOException;
import java.io.UncheckedIOException;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingDataWriterFactory;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The plain writes of {@link SinkSettings}: every task produces its rows and waits for their acknowledgement
 * before it commits, so a committed task's rows are in the log (at-least-once when Spark runs a task again, as
 * Spark's Kafka sink). There is nothing to commit on the driver.
 */
final class RowWriters {
    private RowWriters() {}

    private static final class Done implements WriterCommitMessage {
        private static final long serialVersionUID = 1L;
    }

    /** A batch write's or a streaming query's: the tasks' writers; nothing to commit on the driver. */
    static final class PlainWrite implements BatchWrite, StreamingWrite {
        private final SinkSettings settings;

        PlainWrite(SinkSettings settings) {
            this.settings = settings;
        }

        @Override
        public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
            return new Factory(settings);
        }

        @Override
        public StreamingDataWriterFactory createStreamingWriterFactory(PhysicalWriteInfo info) {
            return new Factory(settings);
        }

        @Override
        public boolean useCommitCoordinator() {  // Spark's default for both: one committed attempt per task
            return true;
        }

        @Override
        public void commit(WriterCommitMessage[] messages) {}

        @Override
        public void abort(WriterCommitMessage[] messages) {}

        @Override
        public void commit(long epochId, WriterCommitMessage[] messages) {}

        @Override
        public void abort(long epochId, WriterCommitMessage[] messages) {}
    }

    static final class Factory implements DataWriterFactory, StreamingDataWriterFactory {
        private static final long serialVersionUID = 1L;
        private final SinkSettings settings;

        Factory(SinkSettings settings) {
            this.settings = settings;
        }

        @Override
        public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
            return new RowWriter(settings);
        }

        @Override
        public DataWriter<InternalRow> createWriter(int partitionId, long taskId, long epochId) {
            return new RowWriter(settings);
        }
    }

    static final class RowWriter implements DataWriter<InternalRow> {
        private final SinkSettings settings;
        private final Producer producer;
        private boolean committed;

        RowWriter(SinkSettings settings) {
            this.settings = settings;
            try {
                this.producer = ProducerPool.borrow(settings, null);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public void write(InternalRow row) throws IOException {
            send(producer, settings, row);
        }

        @Override
        public WriterCommitMessage commit() throws IOException {
            producer.flush();
            committed = true;
            return new Done();
        }

        @Override
        public void abort() {}

        @Override
        public void close() {
            if (committed) {
                ProducerPool.giveBack(settings, null, producer);
            } else {
                producer.close();  // what it sent is unknown: its sequences are not to be continued
            }
        }
    }

    /** Appends a row of Spark's Kafka sink columns to the producer as a record. */
    static void send(Producer producer, SinkSettings settings, InternalRow row) throws IOException {
        String topic = settings.topic;
        if (topic == null) {
            if (row.isNullAt(settings.topicColumn)) {
                throw new IllegalArgumentException(
                        "null topic present in the data. Use the topic option for setting a topic.");
            }
            topic = row.getUTF8String(settings.topicColumn).toString();
        }
        int partition = settings.partitionColumn < 0 || row.isNullAt(settings.partitionColumn)
                ? -1 : row.getInt(settings.partitionColumn);
        producer.send(topic, partition, bytes(row, settings.keyColumn, settings.keyIsString),
                bytes(row, settings.valueColumn, settings.valueIsString), timestamp(settings, row),
                headers(settings, row));
    }

    private static long timestamp(SinkSettings settings, InternalRow row) {
        int column = settings.timestampColumn;
        if (column < 0 || row.isNullAt(column)) {
            return System.currentTimeMillis();
        }
        long value = row.getLong(column);
        return settings.timestampIsMillis ? value : Math.floorDiv(value, 1000L);  // Spark's are microseconds
    }

    private static byte[][] headers(SinkSettings settings, InternalRow row) {
        int column = settings.headersColumn;
        if (column < 0 || row.isNullAt(column)) {
            return null;
        }
        ArrayData array = row.getArray(column);
        byte[][] headers = new byte[array.numElements() * 2][];
        for (int i = 0; i < array.numElements(); i++) {
            InternalRow header = array.isNullAt(i) ? null : array.getStruct(i, 2);
            if (header == null || header.isNullAt(0)) {
                throw new IllegalArgumentException("a header and its key cannot be null: a Kafka record "
                        + "header has a key");
            }
            headers[2 * i] = header.getUTF8String(0).getBytes();
            headers[2 * i + 1] = header.isNullAt(1) ? null : header.getBinary(1);
        }
        return headers;
    }

    /** A string or binary column's bytes, where the row holds them when it can (no copy). */
    private static UTF8String bytes(InternalRow row, int column, boolean string) {
        if (column < 0 || row.isNullAt(column)) {
            return null;
        }
        if (string || row instanceof UnsafeRow) {  // an UnsafeRow lays out binaries as strings
            return row.getUTF8String(column);
        }
        return UTF8String.fromBytes(row.getBinary(column));
    }
}

package io.odradek.spark;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.zip.CRC32C;
import java.util.zip.GZIPOutputStream;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * One partition's next record batch (magic 2), filled record by record straight from Spark's rows: a key's and
 * a value's bytes are copied once, from the row's memory into the batch. {@link #seal} frames it with the producer
 * id, epoch and base sequence of an idempotent or transactional producer.
 */
final class RecordBatchBuilder {
    static final int HEADER_BYTES = 61;
    private static final int CRC_OFFSET = 17;
    private static final int ATTRIBUTES_OFFSET = 21;
    static final byte CODEC_NONE = 0;
    static final byte CODEC_GZIP = 1;
    static final short TRANSACTIONAL = 0x10;

    private byte[] buffer = new byte[1 << 16];
    private int position = HEADER_BYTES;
    private int count;
    private long firstTimestamp;
    private long maxTimestamp;

    int count() {
        return count;
    }

    /** The batch's size so far, uncompressed. */
    int bytes() {
        return position;
    }

    /** The most bytes a record of these fields takes in a batch (its varints at their longest). */
    static int sizeBound(UTF8String key, UTF8String value, byte[][] headers) {
        int size = 5 + 1 + 10 + 5 + fieldSize(key) + fieldSize(value) + 5;  // length, attributes, deltas, count
        for (int i = 0; headers != null && i < headers.length; i++) {
            size += 5 + (headers[i] == null ? 0 : headers[i].length);
        }
        return size;
    }

    /** Appends a record; headers alternate key and value (a null value is a header without one). */
    void append(UTF8String key, UTF8String value, long timestamp, byte[][] headers) {
        if (count == 0) {
            firstTimestamp = timestamp;
            maxTimestamp = timestamp;
        }
        maxTimestamp = Math.max(maxTimestamp, timestamp);
        long timestampDelta = timestamp - firstTimestamp;
        int headerCount = headers == null ? 0 : headers.length / 2;
        int body = 1 + varlongSize(timestampDelta) + varlongSize(count) + fieldSize(key) + fieldSize(value)
                + varlongSize(headerCount);
        for (int i = 0; i < headerCount * 2; i++) {
            body += headers[i] == null ? 1 : varlongSize(headers[i].length) + headers[i].length;
        }
        ensure(varlongSize(body) + body);
        writeVarlong(body);
        buffer[position++] = 0;  // record attributes
        writeVarlong(timestampDelta);
        writeVarlong(count);
        writeField(key);
        writeField(value);
        writeVarlong(headerCount);
        for (int i = 0; i < headerCount * 2; i++) {
            writeField(headers[i] == null ? null : UTF8String.fromBytes(headers[i]));
        }
        count++;
    }

    /** The framed batch, and the builder emptied for the next one. */
    byte[] seal(long producerId, short producerEpoch, int baseSequence, byte codec, boolean transactional) {
        byte[] batch = codec == CODEC_NONE ? Arrays.copyOf(buffer, position) : compressed(codec);
        ByteBuffer header = ByteBuffer.wrap(batch, 0, HEADER_BYTES);
        header.putLong(0L);                       // base offset: the broker assigns offsets
        header.putInt(batch.length - 12);         // batch length, after the offset and this field
        header.putInt(-1);                        // partition leader epoch
        header.put((byte) 2);                     // magic
        header.putInt(0);                         // CRC, below
        header.putShort((short) (codec | (transactional ? TRANSACTIONAL : 0)));  // attributes; create time
        header.putInt(count - 1);                 // last offset delta
        header.putLong(firstTimestamp);
        header.putLong(maxTimestamp);
        header.putLong(producerId);
        header.putShort(producerEpoch);
        header.putInt(baseSequence);
        header.putInt(count);
        CRC32C crc = new CRC32C();
        crc.update(batch, ATTRIBUTES_OFFSET, batch.length - ATTRIBUTES_OFFSET);
        ByteBuffer.wrap(batch, CRC_OFFSET, 4).putInt((int) crc.getValue());
        position = HEADER_BYTES;
        count = 0;
        return batch;
    }

    private byte[] compressed(byte codec) {
        if (codec != CODEC_GZIP) {
            throw new IllegalArgumentException("codec " + codec);
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream(position / 2 + HEADER_BYTES);
        out.write(buffer, 0, HEADER_BYTES);  // the header's room, written over by seal()
        try (GZIPOutputStream gzip = new GZIPOutputStream(out, 1 << 16)) {
            gzip.write(buffer, HEADER_BYTES, position - HEADER_BYTES);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return out.toByteArray();
    }

    private static int fieldSize(UTF8String field) {
        return field == null ? 1 : varlongSize(field.numBytes()) + field.numBytes();
    }

    private void writeField(UTF8String field) {
        if (field == null) {
            writeVarlong(-1);
            return;
        }
        writeVarlong(field.numBytes());
        field.writeToMemory(buffer, Platform.BYTE_ARRAY_OFFSET + position);
        position += field.numBytes();
    }

    private void ensure(int more) {
        if (position + more > buffer.length) {
            buffer = Arrays.copyOf(buffer, Math.max(buffer.length * 2, position + more));
        }
    }

    private static int varlongSize(long value) {
        long zigzag = (value << 1) ^ (value >> 63);
        int size = 1;
        while ((zigzag & ~0x7FL) != 0) {
            size++;
            zigzag >>>= 7;
        }
        return size;
    }

    private void writeVarlong(long value) {
        long zigzag = (value << 1) ^ (value >> 63);
        while ((zigzag & ~0x7FL) != 0) {
            buffer[position++] = (byte) ((zigzag & 0x7F) | 0x80);
            zigzag >>>= 7;
        }
        buffer[position++] = (byte) zigzag;
    }
}

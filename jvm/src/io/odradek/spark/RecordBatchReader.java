package io.odradek.spark;

import com.github.luben.zstd.ZstdInputStream;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.PriorityQueue;
import java.util.Set;
import java.util.zip.GZIPInputStream;
import net.jpountz.lz4.LZ4FrameInputStream;
import org.xerial.snappy.SnappyInputStream;

/**
 * The records of one partition's Fetch response (record batches of magic 2) as a read_committed consumer sees
 * them: the batches of aborted transactions (the response's list of them) and control batches skipped, the rest
 * decompressed with the codec its batch names (gzip by the JDK; snappy, lz4 and zstd by the libraries Spark ships).
 */
final class RecordBatchReader {
    private static final int HEADER_BYTES = 61;
    private static final short CODEC_MASK = 0x07;
    private static final short TRANSACTIONAL = 0x10;
    private static final short CONTROL = 0x20;
    private static final short ABORT_MARKER = 0;

    interface RecordVisitor {
        void record(long offset, byte[] key, byte[] value);
    }

    private RecordBatchReader() {}

    /**
     * Visits the committed records at or after `from`, in offset order; `aborted` holds the response's aborted
     * transactions as {producer id, first offset}. Returns the offset after the last whole batch (a batch cut off
     * by the response's size limit is left for the next fetch), or `from` if there was none.
     */
    static long readCommitted(ByteBuffer records, long from, List<long[]> aborted, RecordVisitor visitor)
            throws IOException {
        PriorityQueue<long[]> pending = new PriorityQueue<>(Comparator.comparingLong((long[] a) -> a[1]));
        pending.addAll(aborted);
        Set<Long> aborting = new HashSet<>();
        long next = from;
        while (records.remaining() >= 12) {
            int start = records.position();
            long baseOffset = records.getLong(start);
            int size = 12 + records.getInt(start + 8);
            if (records.remaining() < size) {
                break;
            }
            ByteBuffer batch = records.slice(start, size);
            records.position(start + size);
            if (batch.get(16) != 2) {
                throw new IOException("a record batch of magic " + batch.get(16) + " at offset " + baseOffset
                        + ": only magic 2 is read");
            }
            short attributes = batch.getShort(21);
            long lastOffset = baseOffset + batch.getInt(23);
            long producerId = batch.getLong(43);
            int count = batch.getInt(57);
            next = Math.max(next, lastOffset + 1);
            while (!pending.isEmpty() && pending.peek()[1] <= lastOffset) {
                aborting.add(pending.poll()[0]);
            }
            ByteBuffer body = body(batch, attributes);
            if ((attributes & CONTROL) != 0) {
                if (count > 0 && aborting.contains(producerId) && controlType(body) == ABORT_MARKER) {
                    aborting.remove(producerId);
                }
                continue;
            }
            if ((attributes & TRANSACTIONAL) != 0 && aborting.contains(producerId)) {
                continue;
            }
            for (int i = 0; i < count; i++) {
                readVarlong(body);  // the record's length
                body.get();  // attributes
                readVarlong(body);  // timestamp delta
                long offset = baseOffset + readVarlong(body);
                byte[] key = field(body);
                byte[] value = field(body);
                for (long headers = readVarlong(body); headers > 0; headers--) {
                    field(body);
                    field(body);
                }
                if (offset >= from) {
                    visitor.record(offset, key, value);
                }
            }
        }
        return next;
    }

    /** A control record's type: its key is a version (int16) then the type (int16, 0 abort, 1 commit). */
    private static short controlType(ByteBuffer body) {
        readVarlong(body);
        body.get();
        readVarlong(body);
        readVarlong(body);
        int keyLength = (int) readVarlong(body);
        return keyLength >= 4 ? body.getShort(body.position() + 2) : -1;
    }

    private static ByteBuffer body(ByteBuffer batch, short attributes) throws IOException {
        ByteBuffer raw = batch.slice(HEADER_BYTES, batch.limit() - HEADER_BYTES);
        int codec = attributes & CODEC_MASK;
        if (codec == 0) {
            return raw;
        }
        byte[] bytes = new byte[raw.remaining()];
        raw.get(bytes);
        InputStream compressed = new ByteArrayInputStream(bytes);
        InputStream in;
        switch (codec) {
            case 1:
                in = new GZIPInputStream(compressed);
                break;
            case 2:
                in = new SnappyInputStream(compressed);
                break;
            case 3:
                in = new LZ4FrameInputStream(compressed);
                break;
            case 4:
                in = new ZstdInputStream(compressed);
                break;
            default:
                throw new IOException("a record batch compressed with codec " + codec);
        }
        try (InputStream stream = in) {
            return ByteBuffer.wrap(stream.readAllBytes());
        }
    }

    private static byte[] field(ByteBuffer body) {
        int length = (int) readVarlong(body);
        if (length < 0) {
            return null;
        }
        byte[] bytes = new byte[length];
        body.get(bytes);
        return bytes;
    }

    private static long readVarlong(ByteBuffer in) {
        long zigzag = 0;
        for (int shift = 0; ; shift += 7) {
            byte b = in.get();
            zigzag |= (long) (b & 0x7F) << shift;
            if (b >= 0) {
                break;
            }
        }
        return (zigzag >>> 1) ^ -(zigzag & 1);
    }
}

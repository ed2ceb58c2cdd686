package io.odradek.spark;

import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Kafka's default partitioner hash (Utils.murmur2 in Kafka's clients), over a key's bytes where Spark's row
 * holds them: a key goes where Java producers put it.
 */
final class Murmur2 {
    private Murmur2() {}

    static int partition(UTF8String key, int partitions) {
        return (hash(key) & 0x7fffffff) % partitions;
    }

    @SuppressWarnings("fallthrough")  // the tail bytes, as Kafka's murmur2 takes them
    static int hash(UTF8String key) {
        final Object base = key.getBaseObject();
        final long offset = key.getBaseOffset();
        final int m = 0x5bd1e995;
        final int r = 24;
        int length = key.numBytes();
        int h = 0x9747b28c ^ length;
        int i = 0;
        for (; i + 4 <= length; i += 4) {
            int k = (byteAt(base, offset, i) & 0xff) | ((byteAt(base, offset, i + 1) & 0xff) << 8)
                    | ((byteAt(base, offset, i + 2) & 0xff) << 16) | ((byteAt(base, offset, i + 3) & 0xff) << 24);
            k *= m;
            k ^= k >>> r;
            k *= m;
            h *= m;
            h ^= k;
        }
        switch (length - i) {
            case 3:
                h ^= (byteAt(base, offset, i + 2) & 0xff) << 16;
                // fall through
            case 2:
                h ^= (byteAt(base, offset, i + 1) & 0xff) << 8;
                // fall through
            case 1:
                h ^= byteAt(base, offset, i) & 0xff;
                h *= m;
                break;
            default:
                break;
        }
        h ^= h >>> 13;
        h *= m;
        h ^= h >>> 15;
        return h;
    }

    private static byte byteAt(Object base, long offset, int i) {
        return Platform.getByte(base, offset + i);
    }
}

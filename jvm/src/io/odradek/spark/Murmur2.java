package io.odradek.spark;

/** Kafka's default partitioner hash (Utils.murmur2 in Kafka's clients): a key goes where Java producers put it. */
final class Murmur2 {
    private Murmur2() {}

    static int partition(byte[] key, int partitions) {
        return (hash(key) & 0x7fffffff) % partitions;
    }

    static int hash(byte[] data) {
        final int m = 0x5bd1e995;
        final int r = 24;
        int length = data.length;
        int h = 0x9747b28c ^ length;
        int i = 0;
        for (; i + 4 <= length; i += 4) {
            int k = (data[i] & 0xff) | ((data[i + 1] & 0xff) << 8) | ((data[i + 2] & 0xff) << 16)
                    | ((data[i + 3] & 0xff) << 24);
            k *= m;
            k ^= k >>> r;
            k *= m;
            h *= m;
            h ^= k;
        }
        switch (length - i) {
            case 3:
                h ^= (data[i + 2] & 0xff) << 16;
                // fall through
            case 2:
                h ^= (data[i + 1] & 0xff) << 8;
                // fall through
            case 1:
                h ^= data[i] & 0xff;
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
}

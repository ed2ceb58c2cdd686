package io.odradek.spark;

import java.io.IOException;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;

/**
 * Producers kept in an executor between tasks with the same settings (and transactional id): a new one would
 * ask for a producer id, a coordinator and metadata first. One idle longer than {@link #MAX_IDLE_MS} is closed
 * instead of reused, well inside the time (producer.id.expiration.ms, a day by default) a broker keeps an idle
 * producer's state. A producer whose task failed is closed, not given back: what it sent is unknown.
 */
final class ProducerPool {
    private static final long MAX_IDLE_MS = 600_000;
    private static final Map<String, ConcurrentLinkedDeque<Kept>> IDLE = new ConcurrentHashMap<>();

    private ProducerPool() {}

    private static final class Kept {
        final Producer producer;
        final long idleSinceMs;

        Kept(Producer producer, long idleSinceMs) {
            this.producer = producer;
            this.idleSinceMs = idleSinceMs;
        }
    }

    /** An idempotent producer (`transactionalId` null) or a transactional one, kept or new. */
    static Producer borrow(SinkSettings settings, String transactionalId) throws IOException {
        ConcurrentLinkedDeque<Kept> idle = IDLE.get(key(settings, transactionalId));
        for (Kept kept; idle != null && (kept = idle.poll()) != null; ) {
            if (System.currentTimeMillis() - kept.idleSinceMs < MAX_IDLE_MS) {
                return kept.producer;
            }
            kept.producer.close();
        }
        return transactionalId == null ? new Producer(settings) : new Producer(settings, transactionalId);
    }

    /** Keeps a producer whose last task succeeded, for the next task with the same settings. */
    static void giveBack(SinkSettings settings, String transactionalId, Producer producer) {
        long now = System.currentTimeMillis();
        closeIdle(now);
        IDLE.computeIfAbsent(key(settings, transactionalId), k -> new ConcurrentLinkedDeque<>())
                .push(new Kept(producer, now));
    }

    /** Closes the producers idle too long, whatever their settings (those of a query that ended, say). */
    private static void closeIdle(long now) {
        for (ConcurrentLinkedDeque<Kept> idle : IDLE.values()) {
            for (Kept kept : idle) {
                // closed only by the thread that took it out: a task may be borrowing it at the same moment
                if (now - kept.idleSinceMs >= MAX_IDLE_MS && idle.remove(kept)) {
                    kept.producer.close();
                }
            }
        }
    }

    private static String key(SinkSettings settings, String transactionalId) {
        return settings.producerKey() + "\u0000" + (transactionalId == null ? "" : transactionalId);
    }
}

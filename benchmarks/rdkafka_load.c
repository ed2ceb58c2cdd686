/* A native load generator on librdkafka, so the load generator is never the bottleneck.
 *
 *   rdkafka_load produce <bootstrap> <topic> <records> <value bytes> [name=value ...]
 *   rdkafka_load consume <bootstrap> <topic> <records>
 *   rdkafka_load latency <bootstrap> <topic> <records/s> <seconds> <value bytes> [name=value ...]
 *
 * produce sends keyless records (librdkafka's default partitioner spreads them) with kcat's benchmark
 * settings (linger.ms=5, batch.size=1000000), then the producer settings given, and exits non-zero unless
 * every one was acknowledged.
 * consume reads every partition from the beginning with the simple (group-less) consumer, as kcat -C does,
 * and exits once it has read <records> records.
 * Both print the seconds from their first record to their last acknowledged or read one (not counting the
 * process start and the first metadata request).
 * latency sends records to partition 0 at a fixed rate (acks=all, linger.ms=0, then the settings given),
 * each carrying its send time (CLOCK_MONOTONIC), while a consumer thread reads them as they arrive. After
 * one second of warm-up it counts <seconds> of records and prints one line:
 *   <achieved records/s> <p50 ms> <p99 ms> <p99.9 ms> <max ms>
 * and exits non-zero unless every record was acknowledged and consumed.
 * `make bench` builds it against the newer librdkafka bundled in the confluent-kafka wheel.
 */
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WARMUP_S 1.0

static long delivered, failed;

static void fail(const char *what, const char *why) {
    fprintf(stderr, "rdkafka_load: %s: %s\n", what, why);
    exit(1);
}

static void set(rd_kafka_conf_t *conf, const char *name, const char *value) {
    char err[512];
    if (rd_kafka_conf_set(conf, name, value, err, sizeof err) != RD_KAFKA_CONF_OK)
        fail(name, err);
}

/* name=value arguments, applied in order after the defaults */
static void set_all(rd_kafka_conf_t *conf, int count, char **settings) {
    for (int i = 0; i < count; i++) {
        char *eq = strchr(settings[i], '=');
        if (!eq)
            fail(settings[i], "a setting is name=value");
        *eq = '\0';
        set(conf, settings[i], eq + 1);
        *eq = '=';
    }
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque) {
    (void)rk;
    (void)opaque;
    if (msg->err) {
        if (failed++ == 0)
            fprintf(stderr, "rdkafka_load: delivery failed: %s\n", rd_kafka_err2str(msg->err));
    } else {
        delivered++;
    }
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static rd_kafka_t *new_producer(const char *bootstrap, const char **defaults, int count, char **settings) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", bootstrap);
    for (const char **d = defaults; *d; d += 2)
        set(conf, d[0], d[1]);
    set_all(conf, count, settings);
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk)
        fail("producer", err);
    return rk;
}

static void send_one(rd_kafka_t *rk, const char *topic, int32_t partition, const char *value, int value_bytes) {
    while (rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition),
                             RD_KAFKA_V_VALUE((void *)value, value_bytes), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                             RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
        rd_kafka_poll(rk, 1);
    rd_kafka_poll(rk, 0);
}

static int all_delivered(rd_kafka_t *rk, long records) {
    rd_kafka_flush(rk, 120 * 1000);
    rd_kafka_destroy(rk);
    if (delivered != records) {
        fprintf(stderr, "rdkafka_load: %ld of %ld records acknowledged, %ld failed\n", delivered, records, failed);
        return 0;
    }
    return 1;
}

static int produce(const char *bootstrap, const char *topic, long records, int value_bytes, int count,
                   char **settings) {
    const char *defaults[] = {"linger.ms", "5", "batch.size", "1000000", "queue.buffering.max.messages", "1000000",
                              NULL};
    rd_kafka_t *rk = new_producer(bootstrap, defaults, count, settings);
    char *value = malloc(value_bytes);
    for (int i = 0; i < value_bytes; i++)
        value[i] = 'a' + i % 26;
    int64_t start = now_ns();
    for (long i = 0; i < records; i++) {
        value[i % value_bytes] = 'a' + i % 26; /* not all records alike, as compression would flatter them */
        send_one(rk, topic, RD_KAFKA_PARTITION_UA, value, value_bytes);
    }
    free(value);
    rd_kafka_flush(rk, 120 * 1000);
    double seconds = (now_ns() - start) / 1e9;
    if (!all_delivered(rk, records))
        return 1;
    printf("%.6f\n", seconds);
    return 0;
}

static int consume(const char *bootstrap, const char *topic, long records) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", bootstrap);
    set(conf, "enable.auto.commit", "false");
    set(conf, "fetch.wait.max.ms", "20");
    /* once a million records are queued ahead of this loop, librdkafka pauses fetching for
     * fetch.queue.backoff.ms, 1 s by default: a pause per refill would measure that setting, not the broker */
    set(conf, "queued.min.messages", "1000000");
    set(conf, "fetch.queue.backoff.ms", "10");
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk)
        fail("consumer", err);
    const struct rd_kafka_metadata *metadata;
    rd_kafka_topic_t *handle = rd_kafka_topic_new(rk, topic, NULL);
    rd_kafka_resp_err_t code = rd_kafka_metadata(rk, 0, handle, &metadata, 10000);
    if (code || metadata->topic_cnt != 1 || metadata->topics[0].partition_cnt == 0)
        fail("metadata", code ? rd_kafka_err2str(code) : "no such topic");
    int partitions = metadata->topics[0].partition_cnt;
    rd_kafka_metadata_destroy(metadata);
    rd_kafka_queue_t *queue = rd_kafka_queue_new(rk);
    int64_t start = now_ns();
    for (int p = 0; p < partitions; p++)
        if (rd_kafka_consume_start_queue(handle, p, RD_KAFKA_OFFSET_BEGINNING, queue))
            fail("consume start", rd_kafka_err2str(rd_kafka_last_error()));
    long consumed = 0;
    while (consumed < records) {
        rd_kafka_message_t *msg = rd_kafka_consume_queue(queue, 10000);
        if (!msg)
            fail("consume", "no record for 10 s");
        if (msg->err && msg->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
            fail("consume", rd_kafka_message_errstr(msg));
        if (!msg->err)
            consumed++;
        rd_kafka_message_destroy(msg);
    }
    printf("%.6f\n", (now_ns() - start) / 1e9);
    for (int p = 0; p < partitions; p++)
        rd_kafka_consume_stop(handle, p);
    rd_kafka_queue_destroy(queue);
    rd_kafka_topic_destroy(handle);
    rd_kafka_destroy(rk);
    return 0;
}

/* latency: the consumer thread */

struct receiver {
    rd_kafka_t *rk;
    rd_kafka_topic_t *handle;
    long expected;      /* records, warm-up included */
    long received;
    double *latencies;  /* ms, of the counted (stamped) records */
    long counted;
    volatile int fetching;
    volatile int64_t give_up_ns;
};

static void *receive(void *arg) {
    struct receiver *r = arg;
    while (r->received < r->expected && now_ns() < r->give_up_ns) {
        rd_kafka_message_t *msg = rd_kafka_consume(r->handle, 0, 100);
        int64_t arrived = now_ns();
        if (!msg)
            continue;
        if (msg->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            r->fetching = 1;
        } else if (msg->err) {
            fail("consume", rd_kafka_message_errstr(msg));
        } else {
            r->received++;
            int64_t sent = 0;
            const unsigned char *p = msg->payload;
            for (int i = 0; i < 8; i++)
                sent = (sent << 8) | p[i];
            if (sent >= 0)
                r->latencies[r->counted++] = (arrived - sent) / 1e6;
        }
        rd_kafka_message_destroy(msg);
    }
    return NULL;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double percentile(const double *sorted, long count, double q) {
    long i = (long)(q * count);
    return sorted[i < count ? i : count - 1];
}

static int latency(const char *bootstrap, const char *topic, long rate, double seconds, int value_bytes, int count,
                   char **settings) {
    char err[512];
    long warmup = (long)(rate * WARMUP_S), total = warmup + (long)(rate * seconds);
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", bootstrap);
    set(conf, "fetch.wait.max.ms", "100");
    set(conf, "enable.partition.eof", "true");
    struct receiver r = {.expected = total, .latencies = malloc(sizeof(double) * (total - warmup + 1)),
                         .give_up_ns = INT64_MAX};
    r.rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!r.rk)
        fail("consumer", err);
    r.handle = rd_kafka_topic_new(r.rk, topic, NULL);
    if (rd_kafka_consume_start(r.handle, 0, RD_KAFKA_OFFSET_BEGINNING))
        fail("consume start", rd_kafka_err2str(rd_kafka_last_error()));
    pthread_t thread;
    pthread_create(&thread, NULL, receive, &r);
    for (int64_t give_up = now_ns() + 30000000000LL; !r.fetching; ) {
        if (now_ns() > give_up)
            fail("consumer", "not fetching after 30 s");
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }

    const char *defaults[] = {"acks", "all", "linger.ms", "0", "queue.buffering.max.messages", "1000000", NULL};
    rd_kafka_t *rk = new_producer(bootstrap, defaults, count, settings);
    char *value = calloc(value_bytes < 8 ? 8 : value_bytes, 1);
    int64_t start = now_ns();
    for (long i = 0; i < total; i++) {
        int64_t due = start + (int64_t)(i * 1e9 / rate), now;
        while ((now = now_ns()) < due) { /* sleeps rather than spins: the brokers need the cores */
            rd_kafka_poll(rk, 0);
            struct timespec pause = {0, due - now < 1000000 ? due - now : 1000000};
            nanosleep(&pause, NULL);
        }
        int64_t stamp = i < warmup ? -1 : now;
        for (int b = 7; b >= 0; b--, stamp >>= 8)
            value[b] = (char)(stamp & 0xff);
        send_one(rk, topic, 0, value, value_bytes < 8 ? 8 : value_bytes);
    }
    double achieved = total / ((now_ns() - start) / 1e9);
    int acknowledged = all_delivered(rk, total);
    r.give_up_ns = now_ns() + 60000000000LL;
    pthread_join(thread, NULL);
    rd_kafka_consume_stop(r.handle, 0);
    rd_kafka_topic_destroy(r.handle);
    rd_kafka_destroy(r.rk);
    free(value);
    if (r.received != total) {
        fprintf(stderr, "rdkafka_load: consumed %ld of %ld records\n", r.received, total);
        return 1;
    }
    qsort(r.latencies, r.counted, sizeof(double), by_value);
    printf("%.0f %.3f %.3f %.3f %.3f\n", achieved, percentile(r.latencies, r.counted, 0.5),
           percentile(r.latencies, r.counted, 0.99), percentile(r.latencies, r.counted, 0.999),
           r.latencies[r.counted - 1]);
    free(r.latencies);
    return acknowledged ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc >= 6 && !strcmp(argv[1], "produce"))
        return produce(argv[2], argv[3], atol(argv[4]), atoi(argv[5]), argc - 6, argv + 6);
    if (argc == 5 && !strcmp(argv[1], "consume"))
        return consume(argv[2], argv[3], atol(argv[4]));
    if (argc >= 7 && !strcmp(argv[1], "latency"))
        return latency(argv[2], argv[3], atol(argv[4]), atof(argv[5]), atoi(argv[6]), argc - 7, argv + 7);
    fprintf(stderr, "usage: rdkafka_load produce <bootstrap> <topic> <records> <value bytes> [name=value ...]\n"
                    "       rdkafka_load consume <bootstrap> <topic> <records>\n"
                    "       rdkafka_load latency <bootstrap> <topic> <records/s> <seconds> <value bytes> "
                    "[name=value ...]\n");
    return 2;
}

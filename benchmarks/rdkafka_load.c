/* A native load generator on librdkafka, for brokers Debian's kcat (librdkafka 2.0.2) cannot talk to.
 *
 *   rdkafka_load produce <bootstrap> <topic> <records> <value bytes> <acks> <codec>
 *   rdkafka_load consume <bootstrap> <topic> <records>
 *
 * produce sends keyless records (librdkafka's default partitioner spreads them) with kcat's benchmark
 * settings (linger.ms=5, batch.size=1000000) and exits non-zero unless every one was acknowledged.
 * consume reads every partition from the beginning with the simple (group-less) consumer, as kcat -C does,
 * and exits once it has read <records> records.
 * `make bench` builds it against the newer librdkafka bundled in the confluent-kafka wheel.
 */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static int produce(const char *bootstrap, const char *topic, long records, int value_bytes, const char *acks,
                   const char *codec) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", bootstrap);
    set(conf, "acks", acks);
    set(conf, "linger.ms", "5");
    set(conf, "batch.size", "1000000");
    set(conf, "compression.codec", codec);
    set(conf, "queue.buffering.max.messages", "1000000");
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk)
        fail("producer", err);
    char *value = malloc(value_bytes);
    for (int i = 0; i < value_bytes; i++)
        value[i] = 'a' + i % 26;
    for (long i = 0; i < records; i++) {
        value[i % value_bytes] = 'a' + i % 26; /* not all records alike, as compression would flatter them */
        while (rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_VALUE(value, value_bytes),
                                 RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END) ==
               RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(rk, 1);
        rd_kafka_poll(rk, 0);
    }
    rd_kafka_flush(rk, 120 * 1000);
    rd_kafka_destroy(rk);
    free(value);
    if (delivered != records) {
        fprintf(stderr, "rdkafka_load: %ld of %ld records acknowledged, %ld failed\n", delivered, records, failed);
        return 1;
    }
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
    for (int p = 0; p < partitions; p++)
        rd_kafka_consume_stop(handle, p);
    rd_kafka_queue_destroy(queue);
    rd_kafka_topic_destroy(handle);
    rd_kafka_destroy(rk);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 8 && !strcmp(argv[1], "produce"))
        return produce(argv[2], argv[3], atol(argv[4]), atoi(argv[5]), argv[6], argv[7]);
    if (argc == 5 && !strcmp(argv[1], "consume"))
        return consume(argv[2], argv[3], atol(argv[4]));
    fprintf(stderr, "usage: rdkafka_load produce <bootstrap> <topic> <records> <value bytes> <acks> <codec>\n"
                    "       rdkafka_load consume <bootstrap> <topic> <records>\n");
    return 2;
}

/*
 * rdkafka_latency: an open-loop produce-latency client on librdkafka's C API, for
 * perf/run.sh's W2 (issue 20).
 *
 *   rdkafka_latency -b HOST:PORT -t TOPIC -r RATE -n RECORDS [-s 1024] [-a 1]
 *                   [-w WARMUP_S] [-i WAKE_US, default 100] -o OUT.json
 *
 * Why it exists: W2 measures a broker's produce latency at a fixed rate, and librdkafka's
 * clients at hand cannot hold 40,000 records/s on one core without being the bottleneck.
 * - confluent-kafka's Python application runs a Python callback per record and stays at
 *   100 % CPU. Its p99 (~200 ms) is its own backlog, the same against any broker.
 * - `rdkafka_performance -r` waits for its schedule in a `rd_kafka_poll(rk, 0)` busy loop.
 *   That takes the core from librdkafka's own threads: 29k records/s at 100 % CPU.
 *
 * This client sleeps until the next record is due (clock_nanosleep, timer slack 1 ns),
 * then produces every record that is due, each carrying its intended send time. A record's
 * latency runs from that intended time to its delivery report, which corrects for
 * coordinated omission as the bundled generator and rdkafka_perf.py do. Records are keyless
 * (librdkafka's sticky partitioner), linger.ms=0, no idempotence, as run.sh's other
 * producers. Records due in the first WARMUP_S seconds are sent but not measured.
 *
 * Output: rdkafka_perf.py's JSON fields (records, records_per_s, mib_per_s, target_rate,
 * latency_us p50/p99/p9999/max, cpu_pct_of_core, errors), so perf/report.py reads it alike.
 * Bounded: the run stops 60 s past its schedule whatever it reached.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "rdkafka.h"

static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double cpu_s(void) {
        struct rusage r;
        getrusage(RUSAGE_SELF, &r);
        return (double)r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6 +
               (double)r.ru_stime.tv_sec + r.ru_stime.tv_usec / 1e6;
}

/* Delivered records' latencies (µs), measured ones only. */
static uint32_t *lat_us;
static size_t lat_n, lat_cap;
static uint64_t measure_from_ns;
static uint64_t delivered, failed;
static char first_error[128];

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
        (void)rk;
        (void)opaque;
        uint64_t intended = (uint64_t)(uintptr_t)m->_private;
        if (m->err) {
                if (!failed)
                        snprintf(first_error, sizeof first_error, "%s",
                                 rd_kafka_err2name(m->err));
                failed++;
                return;
        }
        delivered++;
        if (intended < measure_from_ns || lat_n >= lat_cap)
                return;
        uint64_t lat = (now_ns() - intended) / 1000;
        lat_us[lat_n++] = lat > UINT32_MAX ? UINT32_MAX : (uint32_t)lat;
}

static int cmp_u32(const void *a, const void *b) {
        uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
        return x < y ? -1 : x > y;
}

static uint32_t pct(double q) {
        size_t i = (size_t)(q * (double)lat_n);
        if (i >= lat_n)
                i = lat_n - 1;
        return lat_us[i];
}

static void usage(void) {
        fprintf(stderr,
                "usage: rdkafka_latency -b HOST:PORT -t TOPIC -r RATE -n RECORDS "
                "[-s RECORD_BYTES] [-a ACKS] [-w WARMUP_S] [-i WAKE_US] -o OUT.json\n");
        exit(2);
}

int main(int argc, char **argv) {
        const char *bootstrap = NULL, *topic = NULL, *out = NULL, *acks = "1";
        double rate = 0, warmup_s = 0, wake_us = 100;
        long long records = 0;
        int size = 1024, opt;
        while ((opt = getopt(argc, argv, "b:t:r:n:s:a:w:i:o:")) != -1) {
                switch (opt) {
                case 'b': bootstrap = optarg; break;
                case 't': topic = optarg; break;
                case 'r': rate = atof(optarg); break;
                case 'n': records = atoll(optarg); break;
                case 's': size = atoi(optarg); break;
                case 'a': acks = optarg; break;
                case 'w': warmup_s = atof(optarg); break;
                case 'i': wake_us = atof(optarg); break;
                case 'o': out = optarg; break;
                default: usage();
                }
        }
        if (!bootstrap || !topic || !out || rate <= 0 || records <= 0 || size < 0 ||
            warmup_s < 0)
                usage();
        /* Sleeps end when asked: the default 50 µs slack would be two records late. */
        prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

        char err[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        const char *props[][2] = {
            {"bootstrap.servers", bootstrap},
            {"acks", acks},
            {"linger.ms", "0"},
            {"enable.idempotence", "false"},
            {"queue.buffering.max.messages", "1000000"},
            {"queue.buffering.max.kbytes", "1048576"},
        };
        for (size_t i = 0; i < sizeof props / sizeof props[0]; i++) {
                if (rd_kafka_conf_set(conf, props[i][0], props[i][1], err, sizeof err) !=
                    RD_KAFKA_CONF_OK) {
                        fprintf(stderr, "rdkafka_latency: %s: %s\n", props[i][0], err);
                        return 2;
                }
        }
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
        if (!rk) {
                fprintf(stderr, "rdkafka_latency: %s\n", err);
                return 2;
        }
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
        lat_cap = (size_t)records;
        lat_us = malloc(lat_cap * sizeof *lat_us);
        char *payload = calloc(1, size > 0 ? (size_t)size : 1);
        if (!lat_us || !payload) {
                fprintf(stderr, "rdkafka_latency: out of memory\n");
                return 2;
        }
        memset(payload, 'x', (size_t)size);

        double interval_ns = 1e9 / rate;
        uint64_t t0 = now_ns();
        measure_from_ns = t0 + (uint64_t)(warmup_s * 1e9);
        uint64_t deadline = t0 + (uint64_t)((double)records * interval_ns) + 60000000000ull;
        double c0 = cpu_s();
        long long sent = 0;
        uint64_t last_wake = 0, wake_ns = (uint64_t)(wake_us * 1000.0);
        while (sent < records && now_ns() < deadline) {
                uint64_t due = t0 + (uint64_t)((double)sent * interval_ns);
                uint64_t now = now_ns();
                /* Woken at most every wake_us: one wake-up per record at 40,000/s took the
                 * core librdkafka's threads need. What is due meanwhile goes out together,
                 * each record still timed from its own intended time. */
                if (now < due || now < last_wake + wake_ns) {
                        if (now >= due)
                                due = last_wake + wake_ns;
                        rd_kafka_poll(rk, 0);
                        struct timespec ts = {(time_t)(due / 1000000000ull),
                                              (long)(due % 1000000000ull)};
                        /* Never past 1 ms: delivery reports are served between sleeps. */
                        if (due - now > 1000000ull) {
                                uint64_t until = now + 1000000ull;
                                ts.tv_sec = (time_t)(until / 1000000000ull);
                                ts.tv_nsec = (long)(until % 1000000000ull);
                        }
                        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
                        continue;
                }
                last_wake = now;
                /* Every record due by now, each with its own intended time. */
                while (sent < records && t0 + (uint64_t)((double)sent * interval_ns) <= now) {
                        uint64_t intended = t0 + (uint64_t)((double)sent * interval_ns);
                        if (rd_kafka_produce(rkt, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY,
                                             payload, (size_t)size, NULL, 0,
                                             (void *)(uintptr_t)intended) == -1) {
                                if (rd_kafka_last_error() == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                                        rd_kafka_poll(rk, 1);
                                        break;
                                }
                                fprintf(stderr, "rdkafka_latency: produce failed: %s\n",
                                        rd_kafka_err2str(rd_kafka_last_error()));
                                return 1;
                        }
                        sent++;
                }
                rd_kafka_poll(rk, 0);
        }
        uint64_t left_ms = 0;
        uint64_t now = now_ns();
        if (now < deadline)
                left_ms = (deadline - now) / 1000000ull;
        rd_kafka_flush(rk, (int)(left_ms > 60000 ? 60000 : left_ms));
        uint64_t t1 = now_ns();
        double cpu = cpu_s() - c0;
        rd_kafka_topic_destroy(rkt);
        rd_kafka_destroy(rk);

        double secs = (double)(t1 - t0) / 1e9;
        if (secs <= 0)
                secs = 1e-9;
        FILE *f = fopen(out, "w");
        if (!f) {
                fprintf(stderr, "rdkafka_latency: cannot write %s: %s\n", out, strerror(errno));
                return 2;
        }
        fprintf(f, "{\"client\": \"rdkafka_latency (librdkafka %s, C)\", ", rd_kafka_version_str());
        fprintf(f, "\"records\": %" PRIu64 ", \"records_per_s\": %.1f, \"mib_per_s\": %.3f, ",
                delivered, (double)delivered / secs,
                (double)delivered * size / secs / 1048576.0);
        fprintf(f, "\"target_rate\": %.1f, \"measured\": %zu, ", rate, lat_n);
        if (lat_n) {
                qsort(lat_us, lat_n, sizeof *lat_us, cmp_u32);
                fprintf(f,
                        "\"latency_us\": {\"p50\": %u, \"p99\": %u, \"p9999\": %u, \"max\": %u}, ",
                        pct(0.50), pct(0.99), pct(0.9999), lat_us[lat_n - 1]);
        } else {
                fprintf(f, "\"latency_us\": {\"p50\": null, \"p99\": null, \"p9999\": null, "
                           "\"max\": null}, ");
        }
        fprintf(f, "\"cpu_pct_of_core\": %.1f, ", 100.0 * cpu / secs);
        if (failed)
                fprintf(f, "\"errors\": {\"%s\": %" PRIu64 "}}\n", first_error, failed);
        else
                fprintf(f, "\"errors\": {}}\n");
        fclose(f);
        printf("rdkafka_latency: %" PRIu64 " delivered (%zu measured), %" PRIu64
               " failed, %.1f s\n",
               delivered, lat_n, failed, secs);
        return delivered > 0 ? 0 : 1;
}

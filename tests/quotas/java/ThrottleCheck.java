// The Java producer against a producer_byte_rate quota (issue 18): with client.id qc-java,
// whose quota quota_check.py set through ConfigCommand, the producer's own metrics
// `produce-throttle-time-avg` / `-max` show the broker's throttle_time_ms, and its
// acknowledged rate over a few seconds stays near the per-shard share (within 2x).
// Run: java -cp "$(perf/kafka/kafka.sh classpath)" tests/quotas/java/ThrottleCheck.java BOOTSTRAP TOPIC RATE SHARDS
// Bounded: produces for 6 s, every wait fails after 30 s. Prints PASS or exits non-zero.
import java.util.*;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.serialization.*;

public class ThrottleCheck {
    static void check(boolean ok, String what) {
        if (!ok) { System.out.println("FAIL: " + what); System.exit(1); }
        System.out.println("ok   " + what);
    }

    static double metric(Producer<?, ?> p, String name) {
        for (Map.Entry<MetricName, ? extends Metric> e : p.metrics().entrySet()) {
            if (e.getKey().name().equals(name) && e.getKey().group().equals("producer-metrics")) {
                Object v = e.getValue().metricValue();
                if (v instanceof Double d && !d.isNaN()) return d;
            }
        }
        return 0.0;
    }

    public static void main(String[] args) throws Exception {
        String bs = args[0], topic = args[1];
        double rate = Double.parseDouble(args[2]);
        int shards = Integer.parseInt(args[3]);
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bs);
        pp.put("client.id", "qc-java");
        pp.put("linger.ms", "5");
        pp.put("buffer.memory", "262144");
        pp.put("max.block.ms", "30000");
        pp.put("key.serializer", ByteArraySerializer.class.getName());
        pp.put("value.serializer", ByteArraySerializer.class.getName());
        byte[] value = new byte[1000];
        AtomicLong acked = new AtomicLong();
        double throttleMax = 0;
        long start = System.nanoTime();
        try (Producer<byte[], byte[]> p = new KafkaProducer<>(pp)) {
            while (System.nanoTime() - start < TimeUnit.SECONDS.toNanos(6)) {
                p.send(new ProducerRecord<>(topic, value), (md, err) -> {
                    if (err == null) acked.addAndGet(value.length);
                });
            }
            p.flush();
            double secs = (System.nanoTime() - start) / 1e9;
            double got = acked.get() / secs;
            throttleMax = metric(p, "produce-throttle-time-max");
            double avg = metric(p, "produce-throttle-time-avg");
            System.out.printf("     qc-java: %.0f B/s acknowledged (quota %.0f, share %.0f), " +
                "produce-throttle-time-avg %.0f ms, max %.0f ms%n", got, rate, rate / shards, avg, throttleMax);
            check(throttleMax > 0, "the Java producer's produce-throttle-time-max shows the throttling");
            check(got > rate / shards / 2 && got < rate * 2, "its rate stays near the quota");
        }
        System.out.println("PASS");
    }
}

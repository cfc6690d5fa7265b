// The Java producer's side of tests/idempotence: enable.idempotence=true, acks=all, 5 in
// flight, retrying until delivery.timeout.ms. Sends "java-<n>" (key "k<n % 97>") to the
// topic's partitions round-robin by key until the file STOP exists, then flushes, and prints
// one line per acknowledged record: "ACK <partition> <offset> <value>" (or "ERR <value> <e>").
// Run: java -cp "$(perf/kafka/kafka.sh classpath)" IdempotentProducer.java BOOTSTRAP TOPIC STOP
import java.nio.file.*;
import java.util.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.*;

public class IdempotentProducer {
    public static void main(String[] args) throws Exception {
        String bs = args[0], topic = args[1];
        Path stop = Paths.get(args[2]);
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bs);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        pp.put("enable.idempotence", "true");
        pp.put("acks", "all");
        pp.put("max.in.flight.requests.per.connection", "5");
        pp.put("linger.ms", "5");
        pp.put("batch.size", "4096");
        pp.put("retries", String.valueOf(Integer.MAX_VALUE));
        pp.put("retry.backoff.ms", "50");
        pp.put("retry.backoff.max.ms", "500");
        pp.put("reconnect.backoff.max.ms", "500");
        pp.put("request.timeout.ms", "5000");
        pp.put("delivery.timeout.ms", "600000");
        pp.put("metadata.max.age.ms", "5000");
        final Object lock = new Object();
        long n = 0;
        try (Producer<String, String> p = new KafkaProducer<>(pp)) {
            while (!Files.exists(stop)) {
                final String value = "java-" + n;
                p.send(new ProducerRecord<>(topic, "k" + (n % 97), value), (md, e) -> {
                    synchronized (lock) {
                        if (e != null) System.out.println("ERR " + value + " " + e);
                        else System.out.println("ACK " + md.partition() + " " + md.offset() + " " + value);
                    }
                });
                n++;
                if (n % 20 == 0) Thread.sleep(10);
            }
            p.flush();
        }
        synchronized (lock) { System.out.println("DONE " + n); }
        System.out.flush();
    }
}

// KIP-467 with the Java producer: a batch to a compacted topic with keyless records fails
// those records with InvalidRecordException and the rest of the batch with the producer's
// generic "part of a batch which had one more more invalid records" KafkaException.
// Run: java -cp "$(perf/kafka/kafka.sh classpath)" tests/conformance/java/RecordErrorsCheck.java BOOTSTRAP
// Bounded: every wait fails after 30 s. Prints PASS or exits non-zero.
import java.util.*;
import java.util.concurrent.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.InvalidRecordException;
import org.apache.kafka.common.serialization.*;

public class RecordErrorsCheck {
    public static void main(String[] args) throws Exception {
        String bs = args[0];
        String topic = "kip467-java-" + UUID.randomUUID().toString().substring(0, 8);
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bs))) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1)
                .configs(Map.of("cleanup.policy", "compact")))).all().get(30, TimeUnit.SECONDS);
        }
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bs);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        pp.put("linger.ms", "500");
        pp.put("enable.idempotence", "false");
        pp.put("retries", "0");
        String[] keys = {"k0", null, "k2", null, "k4"};
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (Producer<String, String> p = new KafkaProducer<>(pp)) {
            for (int i = 0; i < keys.length; i++) {
                sent.add(p.send(new ProducerRecord<>(topic, 0, keys[i], "v" + i)));
            }
            p.flush();
            for (int i = 0; i < keys.length; i++) {
                Throwable cause = null;
                try {
                    sent.get(i).get(30, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    cause = e.getCause();
                }
                boolean invalid = keys[i] == null;
                boolean ok = cause != null && (invalid == (cause instanceof InvalidRecordException));
                String what = "record " + i + " (key " + keys[i] + "): " + cause;
                if (!ok) { System.out.println("FAIL: " + what); System.exit(1); }
                System.out.println("ok   " + what);
            }
        }
        System.out.println("PASS");
    }
}

// OffsetForLeaderEpoch through the Java consumer: seeking with a leader epoch makes the
// consumer validate its position with an OffsetsForLeaderEpoch request (KIP-320) before
// it fetches. Also DescribeCluster/DescribeConfigs/CreatePartitions via the Java Admin.
// Run: java -cp "$(perf/kafka/kafka.sh classpath)" tests/admin/java/EpochCheck.java BOOTSTRAP
// Bounded: every wait fails after 30 s. Prints PASS or exits non-zero.
import java.time.Duration;
import java.util.*;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.*;

public class EpochCheck {
    static void check(boolean ok, String what) {
        if (!ok) { System.out.println("FAIL: " + what); System.exit(1); }
        System.out.println("ok   " + what);
    }

    public static void main(String[] args) throws Exception {
        String bs = args.length > 0 ? args[0] : "127.0.0.1:9092";
        String topic = "epoch-" + UUID.randomUUID().toString().substring(0, 8);
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bs))) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(2))).all().get(30, TimeUnit.SECONDS);
            int parts = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS)
                .get(topic).partitions().size();
            check(parts == 2, "Java Admin CreatePartitions: 2 partitions");
            var cluster = admin.describeCluster();
            check(cluster.nodes().get(30, TimeUnit.SECONDS).size() == 1
                && cluster.clusterId().get(30, TimeUnit.SECONDS) != null, "Java Admin DescribeCluster");
            var res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            var cfg = admin.describeConfigs(List.of(res)).all().get(30, TimeUnit.SECONDS).get(res);
            check("delete".equals(cfg.get("cleanup.policy").value()), "Java Admin DescribeConfigs cleanup.policy");
        }
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bs);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        try (Producer<String, String> p = new KafkaProducer<>(pp)) { // idempotent by default
            for (int i = 0; i < 50; i++) p.send(new ProducerRecord<>(topic, 0, "k", "v" + i)).get(30, TimeUnit.SECONDS);
        }
        Properties cp = new Properties();
        cp.put("bootstrap.servers", bs);
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Consumer<String, String> c = new KafkaConsumer<>(cp)) {
            c.assign(List.of(tp));
            // A position with a leader epoch: the consumer validates it with
            // OffsetsForLeaderEpoch (v3+) before fetching; a truncation would raise.
            c.seek(tp, new OffsetAndMetadata(10, Optional.of(0), ""));
            int got = 0;
            long first = -1;
            boolean epochs = true;
            long deadline = System.currentTimeMillis() + 30_000;
            while (got < 40 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    if (first < 0) first = r.offset();
                    epochs &= r.leaderEpoch().isPresent() && r.leaderEpoch().get() == 0;
                    got++;
                }
            }
            check(epochs, "every record carries leader epoch 0");
            check(first == 10 && got == 40, "OffsetForLeaderEpoch-validated seek: read 40 records from offset 10");
        }
        System.out.println("PASS");
    }
}

// Java kafka-clients consumer groups against the broker: the cooperative-sticky assignor
// (incremental rebalances) and static membership (a restarted static member gets its
// partitions back without a new generation). Run as a single-file program:
//   java -cp "$(perf/kafka/kafka.sh classpath)" tests/groups/java/GroupCheck.java BOOTSTRAP
// Bounded: every wait fails after 60 s. Prints PASS or exits non-zero.
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

public class GroupCheck {
    static String bs;

    public static void main(String[] args) throws Exception {
        bs = args.length > 0 ? args[0] : "127.0.0.1:39092";
        cooperativeSticky();
        staticMembership();
        System.out.println("PASS");
    }

    static String createTopic(int partitions) throws Exception {
        String topic = "java-grp-" + UUID.randomUUID().toString().substring(0, 8);
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bs))) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(30, TimeUnit.SECONDS);
        }
        return topic;
    }

    static void produce(String topic, String prefix, int n) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bs);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("enable.idempotence", "false"); // InitProducerId is another issue
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < n; i++) producer.send(new ProducerRecord<>(topic, i % 6, null, prefix + i));
            producer.flush();
        }
    }

    static KafkaConsumer<String, String> consumer(String group, String assignor, String instance) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bs);
        p.put("group.id", group);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("auto.offset.reset", "earliest");
        p.put("partition.assignment.strategy", assignor);
        p.put("session.timeout.ms", "10000");
        p.put("heartbeat.interval.ms", "500");
        if (instance != null) p.put("group.instance.id", instance);
        return new KafkaConsumer<>(p);
    }

    static void check(boolean cond, String what) {
        if (!cond) {
            System.out.println("FAIL: " + what);
            System.exit(1);
        }
    }

    /** Polls all consumers until `done` holds or 60 s pass. */
    static void pollUntil(List<KafkaConsumer<String, String>> cs, Set<String> seen, java.util.function.BooleanSupplier done, String what) {
        long deadline = System.currentTimeMillis() + 60_000;
        while (!done.getAsBoolean()) {
            check(System.currentTimeMillis() < deadline, "timed out waiting for " + what);
            for (KafkaConsumer<String, String> c : cs)
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) seen.add(r.value());
        }
    }

    static void cooperativeSticky() throws Exception {
        String topic = createTopic(6);
        String group = "coop-" + UUID.randomUUID().toString().substring(0, 8);
        String assignor = CooperativeStickyAssignor.class.getName();
        KafkaConsumer<String, String> a = consumer(group, assignor, null), b = consumer(group, assignor, null);
        a.subscribe(List.of(topic));
        b.subscribe(List.of(topic));
        produce(topic, "x", 120);
        Set<String> seen = ConcurrentHashMap.newKeySet();
        List<KafkaConsumer<String, String>> both = List.of(a, b);
        pollUntil(both, seen, () -> a.assignment().size() + b.assignment().size() == 6
                && !a.assignment().isEmpty() && !b.assignment().isEmpty() && seen.size() >= 120, "cooperative split");
        Set<TopicPartition> union = new HashSet<>(a.assignment());
        union.addAll(b.assignment());
        check(union.size() == 6, "cooperative: every partition assigned once " + a.assignment() + " " + b.assignment());
        System.out.println("cooperative-sticky split: " + a.assignment().size() + "+" + b.assignment().size());
        a.commitSync();
        b.commitSync();
        Set<TopicPartition> keptByA = new HashSet<>(a.assignment());
        b.close();
        produce(topic, "y", 120);
        pollUntil(List.of(a), seen, () -> a.assignment().size() == 6 && seen.size() >= 240, "cooperative takeover");
        check(a.assignment().containsAll(keptByA), "sticky: a kept its partitions");
        a.close();
        System.out.println("cooperative-sticky: survivor owns 6 partitions, 240 records consumed");
    }

    static void staticMembership() throws Exception {
        String topic = createTopic(6);
        String group = "static-" + UUID.randomUUID().toString().substring(0, 8);
        String assignor = RangeAssignor.class.getName();
        KafkaConsumer<String, String> a = consumer(group, assignor, "inst-a"), b = consumer(group, assignor, "inst-b");
        a.subscribe(List.of(topic));
        b.subscribe(List.of(topic));
        Set<String> seen = ConcurrentHashMap.newKeySet();
        produce(topic, "s", 60);
        pollUntil(List.of(a, b), seen, () -> a.assignment().size() + b.assignment().size() == 6
                && !a.assignment().isEmpty() && !b.assignment().isEmpty() && seen.size() >= 60, "static split");
        int generation = b.groupMetadata().generationId();
        Set<TopicPartition> bParts = new HashSet<>(b.assignment());
        b.commitSync();
        b.close(); // a static member does not leave the group on close
        KafkaConsumer<String, String> b2 = consumer(group, assignor, "inst-b");
        b2.subscribe(List.of(topic));
        pollUntil(List.of(a, b2), seen, () -> !b2.assignment().isEmpty(), "static rejoin");
        check(b2.assignment().equals(bParts), "static member got its partitions back: " + b2.assignment() + " vs " + bParts);
        check(b2.groupMetadata().generationId() == generation, "no new generation for a static rejoin: "
                + b2.groupMetadata().generationId() + " vs " + generation);
        check(a.groupMetadata().generationId() == generation, "other member undisturbed");
        a.close();
        b2.close();
        System.out.println("static membership: rejoin kept generation " + generation + " and partitions " + bParts);
    }
}

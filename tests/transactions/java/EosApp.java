// The Java side of tests/transactions: Kafka's consume-transform-produce loop with
// exactly-once semantics. Reads IN (read_committed, group GROUP), writes "out-<value>" to OUT
// in a transaction with the consumed offsets (sendOffsetsToTransaction with the consumer's
// group metadata), at most 20 records per transaction held open 30 ms (simulated work, so
// the driver's kills land inside transactions), until the file STOP exists. Any error exits non-zero: the driver restarts
// the app, whose initTransactions fences this instance and aborts its open transaction.
// Run: java -cp "$(perf/kafka/kafka.sh classpath)" EosApp.java BOOTSTRAP IN OUT GROUP TXN_ID STOP
import java.nio.file.*;
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

public class EosApp {
    public static void main(String[] args) throws Exception {
        String bs = args[0], in = args[1], out = args[2], group = args[3], txnId = args[4];
        Path stop = Paths.get(args[5]);
        Properties cp = new Properties();
        cp.put("bootstrap.servers", bs);
        cp.put("group.id", group);
        cp.put("isolation.level", "read_committed");
        cp.put("enable.auto.commit", "false");
        cp.put("auto.offset.reset", "earliest");
        // Kafka's default is 45 s; 6 s expired the member on a loaded 2-core host while the
        // group coordinator moved (TxnOffsetCommit: UNKNOWN_MEMBER_ID, the app exits).
        cp.put("session.timeout.ms", "20000");
        cp.put("heartbeat.interval.ms", "500");
        cp.put("max.poll.records", "20");
        // Static membership: a restarted app takes its partitions back at once.
        cp.put("group.instance.id", group + "-app");
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bs);
        pp.put("transactional.id", txnId);
        pp.put("transaction.timeout.ms", "10000");
        pp.put("linger.ms", "5");
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        long done = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp);
             KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            producer.initTransactions();
            consumer.subscribe(List.of(in));
            while (!Files.exists(stop)) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(100));
                if (records.isEmpty()) continue;
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> r : records) {
                    producer.send(new ProducerRecord<>(out, r.partition(), r.key(), "out-" + r.value()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                Thread.sleep(30);
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                producer.commitTransaction();
                done += records.count();
            }
        }
        System.out.println("java app: " + done + " records transformed");
    }
}

package dev.shardlog.interop;

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Java kafka-clients program of the interoperability suite, mirroring the Python client
 * programs (tests/interop/scenario.py documents the file formats):
 * {@code create|produce|consume|offsets --bootstrap B --topic T [--partitions N] [--input F]
 * [--output F] [--compression CODEC] [--group G]}. {@code consume}: no consumer group,
 * partitions are assign()ed without group.id. {@code consume-group}: subscribe() with group.id
 * G from the earliest offset, commitSync() once every partition is read, then committed() must
 * equal the end offsets. The producer keeps the client's defaults (idempotent, acks=all, 5 in flight)
 * because that is what users run.
 */
public final class InteropClient {
  private static final Base64.Encoder B64 = Base64.getEncoder();
  private static final Base64.Decoder UNB64 = Base64.getDecoder();

  private final Map<String, String> opts = new HashMap<>();

  public static void main(String[] args) throws Exception {
    if (args.length < 1) {
      die("usage: InteropClient create|produce|consume|offsets --bootstrap B --topic T ...");
    }
    InteropClient c = new InteropClient();
    for (int i = 1; i + 1 < args.length; i += 2) {
      c.opts.put(args[i].replaceFirst("^--", ""), args[i + 1]);
    }
    switch (args[0]) {
      case "create" -> c.create();
      case "produce" -> c.produce();
      case "consume" -> c.consume();
      case "consume-group" -> c.consumeGroup();
      case "offsets" -> c.offsets();
      default -> die("unknown step " + args[0]);
    }
  }

  private static void die(String msg) {
    System.err.println(msg);
    System.exit(1);
  }

  private String opt(String name) {
    String v = opts.get(name);
    if (v == null) {
      die("missing --" + name);
    }
    return v;
  }

  private int partitions() {
    return Integer.parseInt(opts.getOrDefault("partitions", "6"));
  }

  private long timeoutMs() {
    return (long) (Double.parseDouble(opts.getOrDefault("timeout-s", "60")) * 1000);
  }

  private Properties common() {
    Properties p = new Properties();
    p.put("bootstrap.servers", opt("bootstrap"));
    return p;
  }

  private void create() throws Exception {
    Properties p = common();
    p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
    try (Admin admin = Admin.create(p)) {
      String topic = opt("topic");
      admin.createTopics(List.of(new NewTopic(topic, partitions(), (short) 1)))
          .all().get(timeoutMs(), TimeUnit.MILLISECONDS);
      long deadline = System.currentTimeMillis() + timeoutMs();
      while (true) {
        try {
          TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames()
              .get(10, TimeUnit.SECONDS).get(topic);
          boolean leaders = d.partitions().stream().allMatch(i -> i.leader() != null);
          if (d.partitions().size() == partitions() && leaders) {
            System.out.println("describe: " + d.partitions().size() + " partitions, id "
                + d.topicId());
            return;
          }
        } catch (java.util.concurrent.ExecutionException e) {
          if (System.currentTimeMillis() > deadline) {
            throw e;
          }
        }
        if (System.currentTimeMillis() > deadline) {
          die("describeTopics never showed " + partitions() + " partitions with leaders");
        }
        Thread.sleep(200);
      }
    }
  }

  private void produce() throws Exception {
    Properties p = common();
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, opts.getOrDefault("compression", "none"));
    ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
      for (String line : Files.readAllLines(Path.of(opt("input")), StandardCharsets.US_ASCII)) {
        String[] f = line.split("\t", -1);
        int part = Integer.parseInt(f[1]);
        long ts = Long.parseLong(f[2]);
        ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(opt("topic"),
            part < 0 ? null : part, ts < 0 ? null : ts, UNB64.decode(f[3]), UNB64.decode(f[4]),
            parseHeaders(f[5]));
        producer.send(rec, (md, e) -> {
          if (e != null) {
            errors.add("p" + part + ": " + e);
          }
        });
      }
      producer.flush();
    }
    if (!errors.isEmpty()) {
      die(errors.size() + " sends failed, first: " + errors.peek());
    }
  }

  private static List<Header> parseHeaders(String text) {
    List<Header> out = new ArrayList<>();
    if (text.isEmpty()) {
      return out;
    }
    for (String item : text.split(",")) {
      String[] kv = item.split(":", 2);
      out.add(new RecordHeader(new String(UNB64.decode(kv[0]), StandardCharsets.UTF_8),
          UNB64.decode(kv[1])));
    }
    return out;
  }

  private Properties consumerProps() {
    Properties p = common();
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    return p;
  }

  private List<TopicPartition> allPartitions() {
    List<TopicPartition> tps = new ArrayList<>();
    for (int i = 0; i < partitions(); i++) {
      tps.add(new TopicPartition(opt("topic"), i));
    }
    return tps;
  }

  private void consume() throws IOException {
    List<TopicPartition> tps = allPartitions();
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps());
        BufferedWriter out = Files.newBufferedWriter(Path.of(opt("output")),
            StandardCharsets.US_ASCII)) {
      consumer.assign(tps);
      consumer.seekToBeginning(tps);
      Map<TopicPartition, Long> ends = consumer.endOffsets(tps, Duration.ofSeconds(30));
      long deadline = System.currentTimeMillis() + timeoutMs();
      while (tps.stream().anyMatch(tp -> consumer.position(tp) < ends.get(tp))) {
        if (System.currentTimeMillis() > deadline) {
          die("timed out before the end offsets " + ends);
        }
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
          out.write(formatRecord(r));
        }
      }
    }
  }

  private void consumeGroup() throws IOException {
    List<TopicPartition> tps = allPartitions();
    Properties props = consumerProps();
    props.put(ConsumerConfig.GROUP_ID_CONFIG, opt("group"));
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
        BufferedWriter out = Files.newBufferedWriter(Path.of(opt("output")),
            StandardCharsets.US_ASCII)) {
      Map<TopicPartition, Long> ends = consumer.endOffsets(tps, Duration.ofSeconds(30));
      Map<TopicPartition, Long> next = new HashMap<>();
      consumer.subscribe(List.of(opt("topic")));
      long deadline = System.currentTimeMillis() + timeoutMs();
      while (tps.stream().anyMatch(tp -> next.getOrDefault(tp, 0L) < ends.get(tp))) {
        if (System.currentTimeMillis() > deadline) {
          die("timed out at " + next + " before the end offsets " + ends);
        }
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
          out.write(formatRecord(r));
          next.put(new TopicPartition(r.topic(), r.partition()), r.offset() + 1);
        }
      }
      consumer.commitSync(Duration.ofSeconds(30));
      Map<TopicPartition, OffsetAndMetadata> committed =
          consumer.committed(Set.copyOf(tps), Duration.ofSeconds(30));
      List<String> problems = new ArrayList<>();
      Map<Integer, Long> endsByPartition = new TreeMap<>();
      for (TopicPartition tp : tps) {
        long end = ends.get(tp);
        endsByPartition.put(tp.partition(), end);
        OffsetAndMetadata c = committed.get(tp);
        boolean ok = c == null ? end == 0 : c.offset() == end;
        if (!ok) {
          problems.add("p" + tp.partition() + ": committed " + c + ", log end offset " + end);
        }
      }
      if (!problems.isEmpty()) {
        die("committed offsets differ from the end offsets: " + problems);
      }
      System.out.println("committed offsets equal the log end offsets " + endsByPartition);
    }
  }

  private static String formatRecord(ConsumerRecord<byte[], byte[]> r) {
    String tstype = r.timestampType() == TimestampType.CREATE_TIME ? "create"
        : r.timestampType() == TimestampType.LOG_APPEND_TIME ? "append" : "none";
    StringBuilder h = new StringBuilder();
    for (Header header : r.headers()) {
      if (h.length() > 0) {
        h.append(',');
      }
      h.append(B64.encodeToString(header.key().getBytes(StandardCharsets.UTF_8))).append(':')
          .append(B64.encodeToString(header.value() == null ? new byte[0] : header.value()));
    }
    return r.partition() + "\t" + r.offset() + "\t" + r.timestamp() + "\t" + tstype + "\t"
        + (r.key() == null ? "~" : B64.encodeToString(r.key())) + "\t"
        + (r.value() == null ? "~" : B64.encodeToString(r.value())) + "\t" + h + "\n";
  }

  private void offsets() throws IOException {
    List<String> lines = Files.readAllLines(Path.of(opt("input")), StandardCharsets.US_ASCII);
    StringBuilder answers = new StringBuilder();
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps())) {
      // One timestamp per partition per call: the API takes a map keyed by partition.
      for (String line : lines) {
        if (line.isBlank()) {
          continue;
        }
        String[] f = line.split("\t");
        TopicPartition tp = new TopicPartition(opt("topic"), Integer.parseInt(f[0]));
        long ts = Long.parseLong(f[1]);
        OffsetAndTimestamp res = consumer.offsetsForTimes(Map.of(tp, ts), Duration.ofSeconds(30))
            .get(tp);
        answers.append(f[0]).append('\t').append(ts).append('\t')
            .append(res == null ? -1 : res.offset()).append('\n');
      }
    }
    Files.writeString(Path.of(opt("output")), answers.toString(), StandardCharsets.US_ASCII);
  }
}

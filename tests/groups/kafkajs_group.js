// kafkajs producer and two group consumers on a 4-partition topic: every record consumed
// once across the group, assignments disjoint, offsets committed and fetched back.
// Usage: NODE_PATH=<dir with kafkajs> node kafkajs_group.js BOOTSTRAP. Bounded: 60 s.
const { Kafka, logLevel } = require('kafkajs');

const bootstrap = process.argv[2] || '127.0.0.1:39092';
const suffix = Math.random().toString(16).slice(2, 10);
const topic = `kjs-${suffix}`;
const groupId = `kjs-g-${suffix}`;
const kafka = new Kafka({ clientId: 'kjs-group', brokers: [bootstrap], logLevel: logLevel.WARN });

function fail(msg) {
  console.log(`FAIL: ${msg}`);
  process.exit(1);
}

async function main() {
  const timer = setTimeout(() => fail('timed out after 60 s'), 60000);
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 4, replicationFactor: 1 }] });
  const producer = kafka.producer();
  await producer.connect();
  const messages = [...Array(100).keys()].map((i) => ({ value: `m${i}`, partition: i % 4 }));
  await producer.send({ topic, messages });

  const seen = new Map();
  const assigned = [new Set(), new Set()];
  const consumers = [0, 1].map(() => kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500 }));
  await Promise.all(consumers.map(async (c, i) => {
    await c.connect();
    c.on(c.events.GROUP_JOIN, (e) => {
      assigned[i] = new Set((e.payload.memberAssignment[topic] || []));
    });
    await c.subscribe({ topic, fromBeginning: true });
    await c.run({ eachMessage: async ({ message }) => {
      const v = message.value.toString();
      seen.set(v, (seen.get(v) || 0) + 1);
    } });
  }));
  while (seen.size < 100 || assigned[0].size + assigned[1].size !== 4) {
    await new Promise((r) => setTimeout(r, 200));
  }
  const overlap = [...assigned[0]].filter((p) => assigned[1].has(p));
  if (overlap.length) fail(`overlapping assignments ${[...assigned[0]]} / ${[...assigned[1]]}`);
  await Promise.all(consumers.map((c) => c.disconnect()));
  const offsets = await admin.fetchOffsets({ groupId, topics: [topic] });
  const committed = offsets[0].partitions.reduce((sum, p) => sum + Number(p.offset), 0);
  if (committed !== 100) fail(`committed offsets sum to ${committed}, expected 100`);
  console.log(`kafkajs: assignments [${[...assigned[0]]}] [${[...assigned[1]]}], 100 records, committed 100`);
  await producer.disconnect();
  await admin.disconnect();
  clearTimeout(timer);
  console.log('PASS');
}

main().catch((e) => fail(e.stack || e));

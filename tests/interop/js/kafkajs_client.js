// kafkajs client program of the interoperability suite, mirroring the Python and Java ones
// (tests/interop/scenario.py documents the file formats):
//   node kafkajs_client.js create|produce|consume|consume-group|offsets --bootstrap B --topic T
//        [--partitions N] [--input F] [--output F] [--compression none|gzip] [--group G]
// kafkajs's consumer always joins a group, so `consume` subscribes with a fresh group id
// from the beginning and never commits; `consume-group` subscribes with group G, commits
// what it read, and checks the group's committed offsets (admin fetchOffsets) equal the end
// offsets. kafkajs does not expose a record's timestamp type, so the consumed file says
// "unknown" there.
'use strict';

// We choose partitions explicitly; the default-partitioner notice is noise here.
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';
const fs = require('fs');
const { Kafka, logLevel, CompressionTypes } = require('kafkajs');

const B64 = (buf) => (buf == null ? '~' : Buffer.from(buf).toString('base64'));

function parseArgs(argv) {
  const opts = { step: argv[0], partitions: '6', 'timeout-s': '60', compression: 'none' };
  for (let i = 1; i + 1 < argv.length; i += 2) opts[argv[i].replace(/^--/, '')] = argv[i + 1];
  for (const req of ['bootstrap', 'topic']) {
    if (!opts[req]) throw new Error(`missing --${req}`);
  }
  return opts;
}

function client(opts) {
  return new Kafka({
    clientId: 'shardlog-interop',
    brokers: [opts.bootstrap],
    logLevel: logLevel.ERROR,
    retry: { retries: 5 },
  });
}

async function create(opts) {
  const admin = client(opts).admin();
  await admin.connect();
  const partitions = Number(opts.partitions);
  await admin.createTopics({
    topics: [{ topic: opts.topic, numPartitions: partitions, replicationFactor: 1 }],
    waitForLeaders: true,
  });
  const md = await admin.fetchTopicMetadata({ topics: [opts.topic] });
  const parts = md.topics[0].partitions;
  await admin.disconnect();
  if (parts.length !== partitions || parts.some((p) => p.leader < 0)) {
    throw new Error(`metadata shows ${JSON.stringify(parts)}`);
  }
  console.log(`metadata: ${parts.length} partitions with leaders`);
}

function readRecords(path) {
  return fs.readFileSync(path, 'ascii').split('\n').filter((l) => l).map((line) => {
    const [, part, ts, key, value, headers] = line.split('\t');
    const h = {};
    for (const item of headers ? headers.split(',') : []) {
      const [k, v] = item.split(':');
      h[Buffer.from(k, 'base64').toString()] = Buffer.from(v, 'base64');
    }
    const msg = { key: Buffer.from(key, 'base64'), value: Buffer.from(value, 'base64'), headers: h };
    if (Number(part) >= 0) msg.partition = Number(part);
    if (Number(ts) >= 0) msg.timestamp = ts;
    return msg;
  });
}

async function produce(opts) {
  const codecs = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP };
  if (!(opts.compression in codecs)) throw new Error(`kafkajs here supports none|gzip, not ${opts.compression}`);
  const producer = client(opts).producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const messages = readRecords(opts.input);
  const chunk = 500;
  for (let i = 0; i < messages.length; i += chunk) {
    await producer.send({
      topic: opts.topic, acks: -1, compression: codecs[opts.compression],
      messages: messages.slice(i, i + chunk),
    });
  }
  await producer.disconnect();
}

async function endOffsets(kafka, topic) {
  const admin = kafka.admin();
  await admin.connect();
  const offsets = await admin.fetchTopicOffsets(topic);
  await admin.disconnect();
  return Object.fromEntries(offsets.map((o) => [o.partition, Number(o.high)]));
}

// Subscribes from the beginning with `groupId` and reads `total` records; with `commit`, the
// offsets after the last record of each partition are committed before disconnecting.
async function consumeWithGroup(opts, kafka, ends, groupId, commit) {
  const total = Object.values(ends).reduce((a, b) => a + b, 0);
  const consumer = kafka.consumer({ groupId });
  await consumer.connect();
  await consumer.subscribe({ topic: opts.topic, fromBeginning: true });
  const lines = [];
  const next = {};
  let done;
  let crashed;
  const finished = new Promise((resolve, reject) => { done = resolve; crashed = reject; });
  // kafkajs retries a crashed consumer forever by default: fail at the first crash instead,
  // with its reason (e.g. no group coordinator), rather than at the timeout.
  consumer.on(consumer.events.CRASH, ({ payload }) => crashed(payload.error));
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      const headers = Object.entries(message.headers || {})
        .map(([k, v]) => `${B64(Buffer.from(k))}:${B64(v)}`).join(',');
      lines.push([partition, message.offset, message.timestamp, 'unknown', B64(message.key),
        B64(message.value), headers].join('\t'));
      next[partition] = (BigInt(message.offset) + 1n).toString();
      if (lines.length >= total) done();
    },
  });
  const timeout = new Promise((_, reject) => setTimeout(
    () => reject(new Error(`timed out with ${lines.length} of ${total} records`)),
    Number(opts['timeout-s']) * 1000));
  try {
    if (total > 0) await Promise.race([finished, timeout]);
    if (commit) {
      await consumer.commitOffsets(Object.entries(next)
        .map(([partition, offset]) => ({ topic: opts.topic, partition: Number(partition), offset })));
    }
  } finally {
    await consumer.disconnect();
    fs.writeFileSync(opts.output, lines.map((l) => `${l}\n`).join(''), 'ascii');
  }
}

async function consume(opts) {
  const kafka = client(opts);
  const ends = await endOffsets(kafka, opts.topic);
  await consumeWithGroup(opts, kafka, ends, `interop-kafkajs-${process.pid}-${Date.now()}`, false);
}

async function consumeGroup(opts) {
  if (!opts.group) throw new Error('missing --group');
  const kafka = client(opts);
  const ends = await endOffsets(kafka, opts.topic);
  await consumeWithGroup(opts, kafka, ends, opts.group, true);
  const admin = kafka.admin();
  await admin.connect();
  const res = await admin.fetchOffsets({ groupId: opts.group, topics: [opts.topic] });
  await admin.disconnect();
  const committed = Object.fromEntries(res[0].partitions.map((p) => [p.partition, Number(p.offset)]));
  const problems = Object.entries(ends)
    .filter(([p, end]) => !(committed[p] === end || (end === 0 && !(committed[p] > 0))))
    .map(([p, end]) => `p${p}: committed ${committed[p]}, log end offset ${end}`);
  if (problems.length) throw new Error(`committed offsets differ from the end offsets: ${problems}`);
  console.log(`committed offsets equal the log end offsets ${JSON.stringify(ends)}`);
}

async function offsets(opts) {
  const kafka = client(opts);
  // kafkajs answers "no such offset" with the high watermark instead of -1: map it back.
  const ends = await endOffsets(kafka, opts.topic);
  const admin = kafka.admin();
  await admin.connect();
  const queries = fs.readFileSync(opts.input, 'ascii').split('\n').filter((l) => l)
    .map((l) => l.split('\t').map(Number));
  const out = [];
  // One call per timestamp; it answers every partition of the topic.
  for (const ts of [...new Set(queries.map((q) => q[1]))]) {
    const res = await admin.fetchTopicOffsetsByTimestamp(opts.topic, ts);
    const byPart = Object.fromEntries(res.map((r) => [r.partition, Number(r.offset)]));
    for (const [p, t] of queries.filter((q) => q[1] === ts)) {
      const off = byPart[p];
      const none = off === undefined || off < 0 || off >= ends[p];
      out.push(`${p}\t${t}\t${none ? -1 : off}\n`);
    }
  }
  await admin.disconnect();
  fs.writeFileSync(opts.output, out.join(''), 'ascii');
}

const steps = { create, produce, consume, 'consume-group': consumeGroup, offsets };
const opts = parseArgs(process.argv.slice(2));
if (!steps[opts.step]) {
  console.error(`unknown step ${opts.step}`);
  process.exit(2);
}
steps[opts.step](opts).then(() => process.exit(0), (err) => {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(1);
});

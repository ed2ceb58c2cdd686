// A second, independent client of an Odradek node: @kafkajs/confluent-schema-registry for the schema registry
// and kafkajs for Kafka, driven by tests/registry/test_javascript_client.py.
//
//   node roundtrip.mjs --mode MODE --bootstrap-server HOST:PORT --registry-url URL --topic TOPIC [options]
//
// or the same from the environment: MODE, BOOTSTRAP_SERVER, SCHEMA_REGISTRY_URL, TOPIC, COUNT, TIMEOUT_MS.
//
// Modes (every one prints JSON lines on stdout, and nothing else):
//   register  registers one AVRO, one JSON and one PROTOBUF schema with the library's `register`, under
//             the subjects TOPIC-shop.Payment, TOPIC-shop.Shipment and TOPIC-shop.Order (Confluent's
//             TopicRecordNameStrategy); prints {"format", "subject", "id"} for each.
//   produce   registers the same, encodes COUNT records with each and produces them to TOPIC (key: the
//             format); prints {"format", "subject", "id", "key", "value"} for each record sent.
//   consume   reads COUNT records of TOPIC from the beginning (a consumer group of its own), decodes each
//             with the schema its id names (fetched from the registry); prints
//             {"partition", "offset", "key", "schemaId", "value"} for each, in offset order.
//
// It creates no topic (auto-creation is off). Every wait is bounded by TIMEOUT_MS (default 120000) for the
// whole run; any failure exits non-zero (3 on the timeout, 1 otherwise) with the error on stderr. kafkajs
// logs errors only, to stderr.

import registryPackage from '@kafkajs/confluent-schema-registry'
import kafkajsPackage from 'kafkajs'

const { SchemaRegistry, SchemaType } = registryPackage
const { Kafka, logLevel, Partitioners } = kafkajsPackage

// The schemas. test_javascript_client.py holds its own copies (written differently) of the same schemas.
const PAYMENT_AVRO = {
  type: 'record',
  name: 'Payment',
  namespace: 'shop',
  fields: [
    { name: 'id', type: 'string' },
    { name: 'amount', type: 'double' },
    { name: 'note', type: ['null', 'string'], default: null },
    { name: 'tags', type: { type: 'array', items: 'string' } },
    { name: 'method', type: { type: 'enum', name: 'Method', symbols: ['CARD', 'CASH', 'TRANSFER'] } },
  ],
}

const SHIPMENT_JSON = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  title: 'shop.Shipment',
  type: 'object',
  properties: {
    id: { type: 'integer' },
    destination: { type: 'string' },
    express: { type: 'boolean' },
    weightKg: { type: 'number' },
    parcels: { type: 'array', items: { type: 'string' } },
  },
  required: ['id', 'destination'],
  additionalProperties: false,
}

const ORDER_PROTO = `syntax = "proto3";
package shop;

message Order {
  enum Status {
    STATUS_UNSPECIFIED = 0;
    PLACED = 1;
    SHIPPED = 2;
  }
  message Line {
    string sku = 1;
    int32 count = 2;
  }
  string id = 1;
  int32 quantity = 2;
  Status status = 3;
  repeated Line lines = 4;
  repeated string tags = 5;
}
`

// The records of `produce`, the i-th of each format; the Python test builds the same values on its own.
const RECORDS = {
  avro: i => ({
    id: `p${i}`,
    amount: i * 1.25,
    note: i % 2 === 0 ? null : `note ${i}`,
    tags: Array.from({ length: i % 3 }, (_, t) => `t${t}`),
    method: ['CARD', 'CASH', 'TRANSFER'][i % 3],
  }),
  json: i => ({
    id: 1000 + i,
    destination: `city ${i}`,
    express: i % 2 === 1,
    weightKg: i + 0.5,
    parcels: Array.from({ length: i % 3 }, (_, p) => `parcel-${i}-${p}`),
  }),
  // Enums by number: protobufjs' verify (run by the library before encoding) takes numbers.
  protobuf: i => ({
    id: `o${i}`,
    quantity: i + 1,
    status: (i % 2) + 1,
    lines: [{ sku: `sku-${i}`, count: i + 2 }],
    tags: [`tag${i}`],
  }),
}

const SCHEMAS = [
  { format: 'avro', record: 'shop.Payment',
    schema: { type: SchemaType.AVRO, schema: JSON.stringify(PAYMENT_AVRO) } },
  { format: 'json', record: 'shop.Shipment',
    schema: { type: SchemaType.JSON, schema: JSON.stringify(SHIPMENT_JSON) } },
  { format: 'protobuf', record: 'shop.Order',
    schema: { type: SchemaType.PROTOBUF, schema: ORDER_PROTO } },
]

function options() {
  const given = {}
  const argv = process.argv.slice(2)
  for (let i = 0; i < argv.length; i++) {
    const match = /^--([a-z-]+)(?:=(.*))?$/.exec(argv[i])
    if (!match) throw new Error(`unexpected argument ${JSON.stringify(argv[i])}`)
    given[match[1]] = match[2] !== undefined ? match[2] : argv[++i]
    if (given[match[1]] === undefined) throw new Error(`--${match[1]} needs a value`)
  }
  const env = process.env
  const chosen = {
    mode: given.mode ?? env.MODE,
    bootstrap: given['bootstrap-server'] ?? env.BOOTSTRAP_SERVER,
    registryUrl: given['registry-url'] ?? env.SCHEMA_REGISTRY_URL,
    topic: given.topic ?? env.TOPIC,
    count: Number(given.count ?? env.COUNT ?? 5),
    timeoutMs: Number(given['timeout-ms'] ?? env.TIMEOUT_MS ?? 120000),
  }
  if (!['register', 'produce', 'consume'].includes(chosen.mode)) {
    throw new Error(`--mode must be register, produce or consume, not ${JSON.stringify(chosen.mode)}`)
  }
  if (chosen.mode !== 'register' && !chosen.bootstrap) {
    throw new Error('--bootstrap-server (or BOOTSTRAP_SERVER) is needed')
  }
  if (!chosen.registryUrl) throw new Error('--registry-url (or SCHEMA_REGISTRY_URL) is needed')
  if (!chosen.topic) throw new Error('--topic (or TOPIC) is needed')
  if (!(Number.isInteger(chosen.count) && chosen.count > 0)) {
    throw new Error('--count must be a positive integer')
  }
  if (!(chosen.timeoutMs > 0)) throw new Error('--timeout-ms must be positive')
  return chosen
}

let phase = 'starting'

function emit(line) {
  process.stdout.write(JSON.stringify(line, jsonValue) + '\n')
}

// Decoded Avro bytes/fixed are Buffers: printed as base64.
function jsonValue(_key, value) {
  if (value && value.type === 'Buffer' && Array.isArray(value.data)) {
    return Buffer.from(value.data).toString('base64')
  }
  return value
}

function kafkaClient(bootstrap) {
  const toStderr = () => ({ namespace, label, log }) => {
    process.stderr.write(`kafkajs ${label} [${namespace}] ${JSON.stringify(log)}\n`)
  }
  return new Kafka({
    clientId: 'odradek-js-roundtrip',
    brokers: bootstrap.split(','),
    logLevel: logLevel.ERROR,
    logCreator: toStderr,
    connectionTimeout: 10000,
    requestTimeout: 30000,
    retry: { retries: 8, initialRetryTime: 200, maxRetryTime: 5000 },
  })
}

// Confluent's Protobuf framing puts the message indexes between the schema id and the message: [0], the first
// message of the schema, is the one byte 0. This library writes none (kafkajs/confluent-schema-registry#248,
// #152), so the frame is completed here for other clients; its own decoder skips leading zero bytes.
function withFirstMessageIndex(framed) {
  return Buffer.concat([framed.subarray(0, 5), Buffer.from([0]), framed.subarray(5)])
}

async function register(registry, topic) {
  const registered = []
  for (const { format, record, schema } of SCHEMAS) {
    const subject = `${topic}-${record}`
    phase = `registering ${format} under ${subject}`
    const { id } = await registry.register(schema, { subject })
    registered.push({ format, subject, id })
  }
  return registered
}

async function produce(registry, kafka, topic, count) {
  const registered = await register(registry, topic)
  const messages = []
  const sent = []
  for (const { format, subject, id } of registered) {
    for (let i = 0; i < count; i++) {
      const value = RECORDS[format](i)
      phase = `encoding ${format} record ${i}`
      let encoded = await registry.encode(id, value)
      if (format === 'protobuf') encoded = withFirstMessageIndex(encoded)
      messages.push({ key: format, value: encoded })
      sent.push({ format, subject, id, key: format, value })
    }
  }
  const producer = kafka.producer({
    allowAutoTopicCreation: false,
    createPartitioner: Partitioners.DefaultPartitioner,
  })
  phase = 'connecting the producer'
  await producer.connect()
  try {
    phase = `producing ${messages.length} records to ${topic}`
    await producer.send({ topic, acks: -1, timeout: 30000, messages })
  } finally {
    phase = 'disconnecting the producer'
    await producer.disconnect()
  }
  sent.forEach(emit)
}

async function consume(registry, kafka, topic, count) {
  const consumer = kafka.consumer({
    groupId: `${topic}-js-${process.pid}-${Date.now()}`,
    allowAutoTopicCreation: false,
    sessionTimeout: 30000,
    maxWaitTimeInMs: 500,
  })
  const received = []
  phase = 'connecting the consumer'
  await consumer.connect()
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    let failure = null
    consumer.on(consumer.events.CRASH, ({ payload }) => {
      const detail = payload.error?.stack ?? payload.error
      if (!failure) process.stderr.write(`kafkajs consumer crashed: ${detail}\n`)
    })
    const done = new Promise((resolve, reject) => {
      phase = `consuming ${count} records of ${topic}`
      consumer.run({
        autoCommit: false,
        eachMessage: async ({ partition, message }) => {
          if (received.length >= count) return
          try {
            const schemaId = message.value.length >= 5 ? message.value.readInt32BE(1) : null
            const decoded = await registry.decode(message.value)
            received.push({
              partition,
              offset: Number(message.offset),
              key: message.key === null ? null : message.key.toString(),
              schemaId,
              value: plain(decoded),
            })
          } catch (error) {
            failure = error
            reject(new Error(`decoding offset ${message.offset} of ${topic}: ${error.stack || error}`))
            return
          }
          if (received.length === count) resolve()
        },
      }).catch(reject)
    })
    await done
  } finally {
    phase = 'disconnecting the consumer'
    await consumer.disconnect()
  }
  received.sort((a, b) => a.partition - b.partition || a.offset - b.offset)
  received.forEach(emit)
}

// What a decoder returned, as plain JSON: protobufjs messages through toObject (enum names, every field).
function plain(decoded) {
  if (decoded && decoded.$type && typeof decoded.$type.toObject === 'function') {
    return decoded.$type.toObject(decoded, { enums: String, longs: Number, defaults: true, arrays: true })
  }
  return decoded
}

async function main() {
  const { mode, bootstrap, registryUrl, topic, count, timeoutMs } = options()
  const timer = setTimeout(() => {
    process.stderr.write(`roundtrip.mjs ${mode}: timed out after ${timeoutMs} ms while ${phase}\n`)
    process.exit(3)
  }, timeoutMs)
  const registry = new SchemaRegistry({ host: registryUrl, clientId: 'odradek-js-roundtrip' })
  if (mode === 'register') {
    (await register(registry, topic)).forEach(emit)
  } else if (mode === 'produce') {
    await produce(registry, kafkaClient(bootstrap), topic, count)
  } else {
    await consume(registry, kafkaClient(bootstrap), topic, count)
  }
  clearTimeout(timer)
}

main().then(
  () => process.exit(0),
  error => {
    const detail = error && error.stack ? error.stack : error
    process.stderr.write(`roundtrip.mjs failed while ${phase}: ${detail}\n`)
    process.exit(1)
  },
)

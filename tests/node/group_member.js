// One member of a coordinator group with KafkaJS, an independent client (neither librdkafka nor kafka-python):
// the same arguments and JSON lines as tests/integration/group_member.py.
//
//   node tests/node/group_member.js --bootstrap B --group G --name N --topic T [--topic T2]
//        [--session-timeout-ms N] [--max-poll-interval-ms N]
//
// KafkaJS ships one assigner (round robin), so --assignor is accepted and ignored. It resolves a --pattern once,
// at subscribe time (KafkaJS does not follow new topics), so the pattern scenarios leave it out.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

function parseArgs(argv) {
  const args = { topic: [], sessionTimeoutMs: 6000, maxPollIntervalMs: 300000, name: 'member' }
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]]
    switch (flag) {
      case '--bootstrap': args.bootstrap = value; break
      case '--group': args.group = value; break
      case '--name': args.name = value; break
      case '--topic': args.topic.push(value); break
      case '--pattern': args.pattern = value; break
      case '--assignor': break
      case '--session-timeout-ms': args.sessionTimeoutMs = Number(value); break
      case '--max-poll-interval-ms': args.maxPollIntervalMs = Number(value); break
      default: throw new Error(`unknown argument ${flag}`)
    }
  }
  return args
}

function emit(fields) {
  process.stdout.write(JSON.stringify(fields) + '\n')
}

async function main() {
  const args = parseArgs(process.argv.slice(2))
  const kafka = new Kafka({
    clientId: args.name,
    brokers: args.bootstrap.split(','),
    logLevel: logLevel.ERROR,
    retry: { retries: 20, initialRetryTime: 100, maxRetryTime: 2000 },
  })
  const consumer = kafka.consumer({
    groupId: args.group,
    sessionTimeout: args.sessionTimeoutMs,
    rebalanceTimeout: args.maxPollIntervalMs,
    heartbeatInterval: Math.min(1000, Math.floor(args.sessionTimeoutMs / 3)),
    metadataMaxAge: 1000,
    maxWaitTimeInMs: 100,
  })
  consumer.on(consumer.events.GROUP_JOIN, event => {
    const partitions = []
    for (const [topic, ids] of Object.entries(event.payload.memberAssignment)) {
      for (const id of ids) partitions.push([topic, id])
    }
    partitions.sort()
    emit({ event: 'assigned', partitions })
  })
  consumer.on(consumer.events.CRASH, event => emit({ event: 'error', error: String(event.payload.error) }))
  let stopping = false
  process.on('SIGTERM', async () => {
    if (stopping) return
    stopping = true
    await consumer.disconnect()
    emit({ event: 'closed' })
    process.exit(0)
  })
  emit({ event: 'started' })
  await consumer.connect()
  const topics = args.pattern ? [new RegExp(`^${args.pattern}`)] : args.topic
  await consumer.subscribe({ topics, fromBeginning: true })
  await consumer.run({
    eachMessage: async ({ topic, partition, message }) => {
      emit({
        event: 'record', topic, partition, offset: Number(message.offset),
        value: message.value === null ? '' : message.value.toString(),
      })
    },
  })
}

main().catch(error => {
  emit({ event: 'error', error: String(error) })
  process.exit(1)
})

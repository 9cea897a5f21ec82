// The Admin API's core operations with KafkaJS, a third independent client (neither librdkafka nor kafka-python):
// create a topic with a config, add partitions, alter and describe its configs, describe the cluster, delete
// it; delete records below an offset, move partition 0 to other replicas and list the moves in progress. Prints one
// JSON line per step, for tests/integration/test_admin_api.py to check against ZooKeeper.
//
//   node tests/node/admin_ops.js --bootstrap B --topic T --step create|grow|configs|cluster|delete|trim|move|moving
//        [--offset O] [--replicas 2,3]
'use strict'

const { Kafka, logLevel, ConfigResourceTypes } = require('kafkajs')

async function main() {
  const argv = process.argv.slice(2)
  const arg = (flag) => argv[argv.indexOf(flag) + 1]
  const topic = arg('--topic')
  const kafka = new Kafka({ clientId: 'kafkajs-admin', brokers: arg('--bootstrap').split(','), logLevel: logLevel.NOTHING })
  const admin = kafka.admin()
  await admin.connect()
  const out = (fields) => process.stdout.write(JSON.stringify(fields) + '\n')
  try {
    switch (arg('--step')) {
      case 'create':
        out({ created: await admin.createTopics({
          topics: [{ topic, numPartitions: 2, replicationFactor: 2, configEntries: [{ name: 'retention.ms', value: '3600000' }] }],
          waitForLeaders: true, timeout: 30000 }) })
        break
      case 'grow': {
        // The broker that answers CreatePartitions waits until its own metadata has the new partitions' leaders
        // (Kafka's DelayedCreatePartitions); the metadata may then come from another broker, which the controller's
        // UpdateMetadata reaches a little later, as in Kafka: read it until it shows the change, for at most 15 s.
        await admin.createPartitions({ topicPartitions: [{ topic, count: 3 }], timeout: 30000 })
        const count = async () => (await admin.fetchTopicMetadata({ topics: [topic] })).topics[0].partitions.length
        let partitions = await count()
        for (const deadline = Date.now() + 15000; partitions < 3 && Date.now() < deadline; partitions = await count()) {
          await new Promise((resolve) => setTimeout(resolve, 200))
        }
        out({ partitions })
        break
      }
      case 'configs': {
        await admin.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: topic,
          configEntries: [{ name: 'retention.ms', value: '7200000' }] }] })
        const described = await admin.describeConfigs({ includeSynonyms: false,
          resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }] })
        const entries = described.resources[0].configEntries
        out({ retention: entries.find((e) => e.configName === 'retention.ms').configValue })
        break
      }
      case 'cluster': {
        const cluster = await admin.describeCluster()
        out({ brokers: cluster.brokers.map((b) => b.nodeId).sort(), controller: cluster.controller, clusterId: cluster.clusterId })
        break
      }
      case 'delete':
        await admin.deleteTopics({ topics: [topic], timeout: 30000 })
        out({ deleted: true })
        break
      case 'trim':
        await admin.fetchTopicMetadata({ topics: [topic] }) // KafkaJS 2.2 finds the leaders only from loaded metadata
        await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: arg('--offset') }] })
        out({ trimmed: true })
        break
      case 'move':
        await admin.alterPartitionReassignments({ timeout: 30000, topics: [{ topic, partitionAssignment: [
          { partition: 0, replicas: arg('--replicas').split(',').map(Number) }] }] })
        out({ started: true })
        break
      case 'moving': {
        const listed = await admin.listPartitionReassignments({ timeout: 30000 })
        out({ moving: listed.topics.filter((t) => t.name === topic).flatMap((t) => t.partitions.map((p) => ({
          partition: p.partition, replicas: p.replicas, adding: p.addingReplicas, removing: p.removingReplicas }))) })
        break
      }
      default:
        throw new Error('unknown --step')
    }
  } finally {
    await admin.disconnect()
  }
}

main().catch((e) => { process.stderr.write(`${e.name}: ${e.message}\n`); process.exit(1) })

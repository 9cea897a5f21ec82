"""The lab: a real ZooKeeper server and broker processes on 127.0.0.1 for failover scenarios,
teaching and tests, plus the demo story."""

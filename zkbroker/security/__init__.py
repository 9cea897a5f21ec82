"""Security as ZooKeeper-era Kafka had it (DESIGN §19): the ACL authorizer's decisions and the ACL znodes,
SCRAM credentials and the server side of a SCRAM exchange. Pure logic: no sockets, no ZooKeeper session."""

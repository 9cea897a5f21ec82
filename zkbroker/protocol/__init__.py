"""The sans-I/O Kafka wire codec: frames, headers, per-(api_key, version) schemas (flexible versions, KIP-482,
included), message sets (magic 0 and 1), Kafka's error codes and the client side of a connection (client_codec).
Bytes in, structs out; no sockets anywhere."""

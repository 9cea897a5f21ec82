"""The sans-I/O Kafka wire codec: frames, headers, per-(api_key, version) schemas, message
sets (magic 0 and 1) and Kafka's error codes. Bytes in, structs out; no sockets anywhere."""

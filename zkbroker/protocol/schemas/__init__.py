"""Declarative request/response schemas, one module per Kafka API (``API_KEY``, ``REQUEST`` and
``RESPONSE`` dicts keyed by version); ``zkbroker.protocol.api`` registers and serves them."""

# A Spark node with nothing but pyspark and pyarrow (and Java), as the workers of a real cluster have:
# the zkkafka source and spark-ingest ship the rest of zkbroker to the executors themselves.
FROM python:3.11-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends default-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*
# Keep it equal to the driver's pyspark version.
ARG PYSPARK_VERSION=4.0.1
RUN pip install --no-cache-dir "pyspark==${PYSPARK_VERSION}" pyarrow
ENTRYPOINT ["spark-class"]

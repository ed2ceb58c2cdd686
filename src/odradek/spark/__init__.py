"""The "odradek" PySpark data source: Spark-Kafka-compatible batch and streaming reads and writes."""

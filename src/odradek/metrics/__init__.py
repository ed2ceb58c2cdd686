"""Prometheus metrics of a node, under the names Kafka's JMX exporter rules (Strimzi's) give Kafka's MBeans.

`registry` is the sans-I/O core (counters, gauges, histograms, text rendering); `broker_topic` and `requests`
count on the produce, fetch and request paths; `collectors` computes gauges at scrape time from what the
node already holds; `lag` is consumer lag as kafka_exporter names it; `http` serves it all on
`metrics.listener`. docs/monitoring.md lists every metric.
"""

"""Cluster links: topics mirrored byte for byte from another Kafka cluster, offsets preserved."""

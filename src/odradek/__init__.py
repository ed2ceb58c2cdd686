"""Odradek: a Kafka-compatible distributed streaming platform."""

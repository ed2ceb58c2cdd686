"""The schema registry: Confluent Schema Registry's REST API, served from the nodes, stored in `_schemas`."""

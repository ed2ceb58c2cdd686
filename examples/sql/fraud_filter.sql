-- The fraud filter: every payment whose fraudProbability is above 0.8, kept as a stream of its own.
-- Payments are JSON, keyed by account: {"id": "pay-1", "account": "acc-1", "amount": 20, "fraudProbability": 0.93}
CREATE STREAM IF NOT EXISTS payments (account VARCHAR KEY, id VARCHAR, amount INT, fraudProbability DOUBLE)
  WITH (KAFKA_TOPIC='payments', VALUE_FORMAT='JSON', PARTITIONS=2);

CREATE STREAM IF NOT EXISTS fraudulent_payments AS
  SELECT * FROM payments WHERE fraudProbability > 0.8 EMIT CHANGES;

-- Per-user click counts in 10-second tumbling windows, kept in a compacted table (topic CLICK_COUNTS).
-- Clicks are JSON, keyed by user, with their event time in ms: {"user": "user1", "ts": 1700000000000}
CREATE STREAM IF NOT EXISTS clicks (user VARCHAR KEY, ts BIGINT)
  WITH (KAFKA_TOPIC='clicks', VALUE_FORMAT='JSON', PARTITIONS=2, TIMESTAMP='ts');

CREATE TABLE IF NOT EXISTS click_counts AS
  SELECT user, COUNT(*) AS clicks FROM clicks
  WINDOW TUMBLING (SIZE 10 SECONDS, GRACE PERIOD 1 MINUTE)
  GROUP BY user EMIT CHANGES;

-- Pull query: SELECT user, WINDOWSTART, clicks FROM click_counts WHERE user = 'user2';

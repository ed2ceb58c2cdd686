-- A table is a snapshot of a stream: score updates, keyed by player, read twice.
-- As a TABLE, the topic is a changelog: each player's latest score, and a tombstone (null value) deletes them.
-- As a STREAM, every update counts: the best score and the number of games per player.
CREATE STREAM IF NOT EXISTS score_updates (player VARCHAR KEY, score INT)
  WITH (KAFKA_TOPIC='score_updates', VALUE_FORMAT='JSON', PARTITIONS=2);

CREATE TABLE IF NOT EXISTS player_scores (player VARCHAR PRIMARY KEY, score INT)
  WITH (KAFKA_TOPIC='score_updates', VALUE_FORMAT='JSON');

CREATE TABLE IF NOT EXISTS best_scores AS
  SELECT player, MAX(score) AS best, COUNT(*) AS games FROM score_updates GROUP BY player EMIT CHANGES;

-- Pull queries: SELECT * FROM player_scores WHERE player = 'alice';
--               SELECT * FROM best_scores;

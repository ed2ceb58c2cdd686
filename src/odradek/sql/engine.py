"""The SQL engine: runs statements against the catalog, the cluster and Spark.

DDL and persistent queries go through the command topic first (so a restart finds them), then act:
topics are created, Spark Structured Streaming queries started with a checkpoint per query id under the
state directory, table views materialized for pull queries. A supervisor restarts a persistent query
that failed (a broker away, an executor lost) from its checkpoint; the exactly-once sink makes the
replay invisible to read_committed readers.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.sql import ast, serde
from odradek.sql.ast import type_text
from odradek.sql.catalog import Catalog, Command, DataSource, PersistentQuery, SourceColumn
from odradek.sql.command_log import CommandLog, command_topic_name
from odradek.sql.materialized import MaterializedTable
from odradek.sql.parser import SqlSyntaxError, parse_with_text
from odradek.sql.planner import PlanError, Planner, QueryPlan, check_formats, sink_source
from odradek.sql.values import LiteralError, coerce, literal

log = logging.getLogger(__name__)

_TIMEOUT_S = 30.0
# The WITH properties the serde reads (ksqlDB's names), kept with the source in the catalog
_SERDE_PROPERTIES = ("KEY_DELIMITER", "VALUE_DELIMITER", "WRAP_SINGLE_VALUE", "KEY_SCHEMA_ID", "VALUE_SCHEMA_ID",
                     "KEY_SCHEMA_FULL_NAME", "VALUE_SCHEMA_FULL_NAME", "VALUE_AVRO_SCHEMA_FULL_NAME",
                     "KEY_PROTOBUF_NULLABLE_REPRESENTATION", "VALUE_PROTOBUF_NULLABLE_REPRESENTATION")
_SOURCE_PROPERTIES = {"KAFKA_TOPIC", "KEY_FORMAT", "VALUE_FORMAT", "FORMAT", "PARTITIONS", "REPLICAS",
                      "TIMESTAMP", "TIMESTAMP_FORMAT", *_SERDE_PROPERTIES}
OFFSET_RESET_PROPERTIES = ("auto.offset.reset", "ksql.streams.auto.offset.reset")


class StatementError(Exception):
    """A statement refused: one line, with the position when known; nothing was created."""

    def __init__(self, message: str, statement: str = ""):
        super().__init__(message)
        self.message = message
        self.statement = statement

    def __str__(self) -> str:
        return self.message


@dataclass
class EngineConfig:
    bootstrap: str
    state_dir: str
    client_config: dict = field(default_factory=dict)
    service_id: str = "default_"
    spark_master: str = "local[2,4]"  # two cores; a failed task is retried up to 4 times
    spark_config: dict = field(default_factory=dict)
    registry_url: str | None = None
    trigger_interval_ms: int = 500
    offset_reset: str = "latest"  # ksqlDB's default auto.offset.reset
    replication_factor: int = 3  # for the topics the server creates, at most the number of brokers


class Engine:
    def __init__(self, config: EngineConfig):
        self.config = config
        self.catalog = Catalog()
        self.lock = threading.RLock()
        self.running: dict[str, Any] = {}  # query id -> pyspark StreamingQuery
        self.failures: dict[str, str] = {}  # query id -> why it last failed
        self.views: dict[str, MaterializedTable] = {}
        self.state_dir = os.path.realpath(config.state_dir)
        self.transient: dict[str, Any] = {}  # query id -> the push.PushQuery of a client's push query
        self.client_config = {"bootstrap.servers": config.bootstrap, **config.client_config}
        self.admin = AdminClient(dict(self.client_config))
        self.commands = CommandLog(config.bootstrap, config.client_config, command_topic_name(config.service_id),
                                   config.replication_factor)
        self.registry = serde.HttpRegistryClient(config.registry_url) if config.registry_url else None
        self.spark = None
        self.planner: Planner | None = None
        self.stopping = threading.Event()
        self.ready = threading.Event()
        self.supervisor = threading.Thread(target=self._supervise, name="sql-query-supervisor", daemon=True)

    # ---------------------------------------------------------------- life cycle

    def start(self) -> None:
        self.spark = _spark_session(self.config)
        self.planner = Planner(self.spark, self.catalog, self.config.bootstrap, self.config.client_config,
                               self.config.registry_url)
        self.commands.ensure_topic()
        for offset, command in self.commands.read_all():
            self.catalog.apply(command, offset)
        for source in self.catalog.sources.values():
            if source.kind == "TABLE":
                self._materialize(source)
        for query in list(self.catalog.queries.values()):
            try:
                self._start_query(query)
            except Exception as e:  # one query that cannot start must not keep the server down: retried
                self.failures[query.id] = _first_line(e)
                log.warning("persistent query %s could not start: %s", query.id, self.failures[query.id])
        self.ready.set()
        self.supervisor.start()

    def activate(self) -> None:
        """Make the session this thread's active one: Spark looks Python data sources up through it."""
        self.spark._jvm.SparkSession.setActiveSession(self.spark._jsparkSession)

    def stop(self) -> None:
        self.stopping.set()
        for query in list(self.running.values()):
            try:
                query.stop()
            except Exception:  # stopping a failed query raises its error again
                log.debug("stopping a query", exc_info=True)
        for view in self.views.values():
            view.close()
        self.commands.close()
        if self.spark is not None:
            try:
                self.spark.stop()
            except Exception:  # the JVM is already gone (it got the signal too)
                log.debug("stopping Spark", exc_info=True)

    def _supervise(self) -> None:
        """Restart every persistent query that is not running (it failed, or could not start) from its
        checkpoint, at most every 5 seconds each."""
        backoff: dict[str, float] = {}
        while not self.stopping.wait(1.0):
            with self.lock:
                for query_id, query in list(self.catalog.queries.items()):
                    try:
                        running = self.running.get(query_id)
                        if running is not None and running.isActive:
                            continue
                        if running is not None:
                            error = running.exception()
                            self.failures[query_id] = _first_line(error) if error else "stopped"
                        if time.monotonic() < backoff.get(query_id, 0):
                            continue
                        log.warning("persistent query %s is not running, restarting it from its checkpoint: %s",
                                    query_id, self.failures.get(query_id))
                        backoff[query_id] = time.monotonic() + 5
                        self.activate()
                        self._start_query(query)
                    except Exception as e:  # e.g. the cluster is still away: try again later
                        self.failures[query_id] = _first_line(e)

    # ---------------------------------------------------------------- statements

    def execute(self, text: str, properties: dict | None = None) -> list[dict]:
        """Run the statements of a POST /ksql request; stops at the first error (StatementError)."""
        properties = properties or {}
        try:
            statements = parse_with_text(text)
        except SqlSyntaxError as e:
            raise StatementError(str(e), text) from None
        results = []
        self.activate()
        for statement, statement_text in statements:
            with self.lock:
                try:
                    result = self._execute(statement, statement_text, properties)
                except (PlanError, LiteralError, serde.SerdeError) as e:
                    raise StatementError(str(e), statement_text) from None
                except StatementError as e:
                    e.statement = statement_text
                    raise
            if result is not None:
                results.append(result)
        return results

    def _execute(self, statement: ast.Statement, text: str, properties: dict) -> dict | None:
        handler = {
            ast.CreateSource: self._create_source,
            ast.CreateAsSelect: self._create_as_select,
            ast.InsertIntoSelect: self._insert_select,
            ast.InsertValues: self._insert_values,
            ast.Drop: self._drop,
            ast.Show: self._show,
            ast.Describe: self._describe,
            ast.Explain: self._explain,
            ast.Terminate: self._terminate,
        }.get(type(statement))
        if handler is None:
            raise StatementError("SELECT and PRINT are queries: send them to /query or /query-stream")
        return handler(statement, text, properties)

    def offset_reset(self, properties: dict) -> str:
        for name in OFFSET_RESET_PROPERTIES:
            value = properties.get(name)
            if value is not None:
                if str(value).lower() not in ("earliest", "latest"):
                    raise StatementError(f"{name} must be earliest or latest, got {value!r}")
                return str(value).lower()
        return self.config.offset_reset

    def _status(self, text: str, message: str, command_id: str, query_id: str | None = None) -> dict:
        return {"@type": "currentStatus", "statementText": text, "commandId": command_id,
                "commandStatus": {"status": "SUCCESS", "message": message, "queryId": query_id},
                "commandSequenceNumber": self.catalog.next_offset - 1, "warnings": []}

    def _check_name_free(self, name: str, or_replace: bool, if_not_exists: bool) -> bool:
        """False when the statement has nothing to do (IF NOT EXISTS and the name exists)."""
        existing = self.catalog.sources.get(name)
        if existing is None:
            return True
        if if_not_exists:
            return False
        if not or_replace:
            raise StatementError(f"Cannot add {existing.kind.lower()} '{name}': A {existing.kind.lower()} "
                                 f"with the same name already exists")
        return True

    def _properties(self, given: dict, allowed: set[str]) -> dict:
        unknown = sorted(set(given) - allowed)
        if unknown:
            raise StatementError(f"Invalid config variable(s) in the WITH clause: {', '.join(unknown)}")
        result = dict(given)
        if "FORMAT" in result:
            if "KEY_FORMAT" in result or "VALUE_FORMAT" in result:
                raise StatementError("Cannot supply both 'FORMAT' and 'KEY_FORMAT' or 'VALUE_FORMAT'")
            result["KEY_FORMAT"] = result["VALUE_FORMAT"] = result.pop("FORMAT")
        for name in ("KEY_FORMAT", "VALUE_FORMAT"):
            if name in result:
                result[name] = str(result[name]).upper()
        return result

    def _create_source(self, statement: ast.CreateSource, text: str, properties: dict) -> dict | None:
        if not self._check_name_free(statement.name, statement.or_replace, statement.if_not_exists):
            return None
        if statement.or_replace and self.catalog.readers_of(statement.name):
            raise StatementError(f"Cannot replace {statement.name}: queries read from it")
        props = self._properties(statement.properties, _SOURCE_PROPERTIES)
        kind = statement.kind
        columns = []
        for c in statement.columns:
            if kind == "TABLE" and c.key:
                raise StatementError(f"Column {c.name} is a 'KEY' column: please use 'PRIMARY KEY' for tables")
            if kind == "STREAM" and c.primary_key:
                raise StatementError(f"Column {c.name} is a 'PRIMARY KEY' column: please use 'KEY' for streams")
            columns.append(SourceColumn(c.name, c.type, c.key or c.primary_key))
        if not columns:
            raise StatementError(f"The {kind.lower()} {statement.name} declares no columns: list them "
                                 "(inferring them from a schema registry is not supported yet)")
        names = [c.name for c in columns]
        duplicate = next((n for n in names if names.count(n) > 1), None)
        if duplicate:
            raise StatementError(f"Duplicate column name: {duplicate}")
        reserved = next((n for n in names if n in ast.PSEUDO_COLUMNS), None)
        if reserved:
            raise StatementError(f"{reserved} is a reserved column name")
        if kind == "TABLE" and not any(c.key for c in columns):
            raise StatementError("Tables require a PRIMARY KEY. Please define the PRIMARY KEY.")
        timestamp = props.get("TIMESTAMP")
        if timestamp is not None:
            timestamp = str(timestamp).upper()
            column = next((c for c in columns if c.name == timestamp), None)
            if column is None:
                raise StatementError(f"The TIMESTAMP column set in the WITH clause does not exist in the "
                                     f"schema: '{timestamp}'")
        ordered = tuple([c for c in columns if c.key] + [c for c in columns if not c.key])
        topic = str(props.get("KAFKA_TOPIC", statement.name))
        source = DataSource(kind, statement.name, topic, ordered, props.get("KEY_FORMAT", "KAFKA"),
                            props.get("VALUE_FORMAT", "JSON"), timestamp,
                            props.get("TIMESTAMP_FORMAT"), None,
                            {k: props[k] for k in _SERDE_PROPERTIES if k in props}, text)
        check_formats(source, self.config.registry_url)
        self._ensure_topic(topic, props, kind, None)
        self._commit([Command(f"source/{source.name}", source)])
        if kind == "TABLE":
            self._materialize(source)
        return self._status(text, f"{kind.capitalize()} created", f"{kind.lower()}/`{source.name}`/create")

    def _ensure_topic(self, topic: str, props: dict, kind: str, default_partitions: int | None,
                      windowed: bool = False) -> None:
        metadata = self.admin.list_topics(timeout=_TIMEOUT_S)
        existing = metadata.topics.get(topic)
        partitions = props.get("PARTITIONS")
        if partitions is not None and (not isinstance(partitions, int) or partitions < 1):
            raise StatementError("PARTITIONS must be a positive number")
        if existing is not None:
            if partitions is not None and len(existing.partitions) != partitions:
                raise StatementError(f"A Kafka topic with the name '{topic}' already exists, with different "
                                     f"partition/replica configuration than required. KSQL expects {partitions} "
                                     f"partitions (topic has {len(existing.partitions)})")
            return
        partitions = partitions or default_partitions
        if partitions is None:
            raise StatementError(f"Topic '{topic}' does not exist. If you want to create a new topic for the "
                                 f"{kind.lower()} please re-run the statement providing the required "
                                 "'PARTITIONS' configuration in the WITH clause (and optionally 'REPLICAS')")
        replicas = props.get("REPLICAS") or max(1, min(self.config.replication_factor, len(metadata.brokers)))
        config = {}
        if kind == "TABLE":
            config["cleanup.policy"] = "compact,delete" if windowed else "compact"
        try:
            self.admin.create_topics([NewTopic(topic, partitions, int(replicas), config=config)])[topic].result(
                _TIMEOUT_S)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise StatementError(f"could not create topic {topic}: {e.args[0].str()}") from None

    def _partitions_of(self, topic: str) -> int:
        topic_metadata = self.admin.list_topics(timeout=_TIMEOUT_S).topics.get(topic)
        return len(topic_metadata.partitions) if topic_metadata is not None else 1

    def _commit(self, commands: list[Command]) -> None:
        offsets = self.commands.append(commands)
        for command, offset in zip(commands, offsets, strict=True):
            self.catalog.apply(command, offset)

    def _start_new_query(self, query: PersistentQuery, plan: QueryPlan, commands: list[Command]) -> None:
        """Start a query whose commands were just committed; if it cannot start, take them back."""
        shutil.rmtree(self.checkpoint_dir(query.id), ignore_errors=True)  # never resume someone else's
        try:
            self._start_query(query, plan)
        except Exception as e:
            self._commit([Command(c.key, None) for c in reversed(commands)])
            self.failures.pop(query.id, None)
            view = self.views.pop(query.sink, None)
            if view is not None and query.sink not in self.catalog.sources:
                view.close()
            raise StatementError(f"the query could not start: {_first_line(e)}") from None

    def _plan(self, select: ast.Select, properties: dict, persistent: bool) -> QueryPlan:
        if persistent and select.limit is not None:
            raise StatementError("LIMIT is not supported in persistent queries")
        return self.planner.plan(select, self.offset_reset(properties), persistent)

    def _create_as_select(self, statement: ast.CreateAsSelect, text: str, properties: dict) -> dict | None:
        if not self._check_name_free(statement.name, False, statement.if_not_exists):
            return None
        props = self._properties(statement.properties, _SOURCE_PROPERTIES - {"TIMESTAMP", "TIMESTAMP_FORMAT"})
        plan = self._plan(statement.query, properties, persistent=True)
        if plan.kind != statement.kind:
            raise StatementError(f"Invalid result type. Your SELECT query produces a {plan.kind}. Please use "
                                 f"CREATE {plan.kind} AS SELECT statement instead.")
        first = self.catalog.source(plan.sources[0])
        prefix = "CSAS" if statement.kind == "STREAM" else "CTAS"
        query_id = self.catalog.next_query_id(prefix, statement.name)
        topic = str(props.get("KAFKA_TOPIC", statement.name))
        sink = sink_source(plan, statement.kind, statement.name, topic, props.get("KEY_FORMAT", first.key_format),
                           props.get("VALUE_FORMAT", first.value_format),
                           {k: props[k] for k in _SERDE_PROPERTIES if k in props}, text, query_id)
        check_formats(sink, self.config.registry_url)
        self._ensure_topic(topic, props, statement.kind, self._partitions_of(first.topic),
                           windowed=plan.windowing is not None)
        query = PersistentQuery(query_id, statement.name, plan.sources, text, self.offset_reset(properties))
        commands = [Command(f"source/{sink.name}", sink), Command(f"query/{query_id}", query)]
        self._commit(commands)
        if sink.kind == "TABLE":
            self._materialize(sink)
        self._start_new_query(query, plan, commands)
        return self._status(text, f"Created query with ID {query_id}",
                            f"{statement.kind.lower()}/`{sink.name}`/create", query_id)

    def _insert_select(self, statement: ast.InsertIntoSelect, text: str, properties: dict) -> dict:
        target = self._source(statement.target)
        if target.kind != "STREAM":
            raise StatementError(f"INSERT INTO can only be used to insert into a stream. {target.name} is a table.")
        plan = self._plan(statement.query, properties, persistent=True)
        if plan.kind != "STREAM":
            raise StatementError("INSERT INTO needs a query that produces a STREAM")
        mine = [(c.name, c.type, c.key) for c in plan.columns]
        theirs = [(c.name, c.type, c.key) for c in target.columns]
        if mine != theirs:
            raise StatementError(f"Incompatible schema between results and sink. Result schema is "
                                 f"{_schema_text(plan.columns)}, but the sink schema is {_schema_text(target.columns)}.")
        query_id = self.catalog.next_query_id("INSERTQUERY")
        query = PersistentQuery(query_id, target.name, plan.sources, text, self.offset_reset(properties))
        commands = [Command(f"query/{query_id}", query)]
        self._commit(commands)
        self._start_new_query(query, plan, commands)
        return self._status(text, f"Created query with ID {query_id}", f"stream/`{target.name}`/insert", query_id)

    def _insert_values(self, statement: ast.InsertValues, text: str, properties: dict) -> None:
        target = self._source(statement.target)
        names = list(statement.columns) or [c.name for c in target.columns]
        if len(names) != len(statement.values):
            raise StatementError(f"Expected a value for each column. Expected Columns: {names}. "
                                 f"Got {len(statement.values)} values")
        given = dict(zip(names, statement.values, strict=False))
        rowtime = None
        if "ROWTIME" in given:
            rowtime = coerce(literal(given.pop("ROWTIME")), ast.PrimitiveType("BIGINT"), "ROWTIME")
        unknown = [n for n in given if target.column(n) is None]
        if unknown:
            raise StatementError(f"Column name {unknown[0]} does not exist.")
        row = {n: coerce(literal(e), target.column(n).type, n) for n, e in given.items()}
        if target.kind == "TABLE" and any(row.get(c.name) is None for c in target.key_columns):
            raise StatementError("Failed to insert values into a table: the PRIMARY KEY must not be null")
        key_format, value_format = target.formats(self.registry)
        key = key_format.encode([row.get(c.name) for c in target.key_columns])
        value = value_format.encode([row.get(c.name) for c in target.value_columns])
        if rowtime is None and target.timestamp_column is not None:
            stamp = row.get(target.timestamp_column)
            rowtime = stamp if isinstance(stamp, int) else None
        producer = Producer({**self.client_config, "enable.idempotence": True, "acks": "all",
                             "partitioner": "murmur2_random", "linger.ms": 0})
        errors: list = []
        kwargs = {"timestamp": rowtime} if rowtime is not None else {}
        producer.produce(target.topic, key=key, value=value, on_delivery=lambda err, _m: err and errors.append(err),
                         **kwargs)
        if producer.flush(_TIMEOUT_S) or errors:
            raise StatementError(f"Failed to insert values into '{target.name}': "
                                 f"{errors[0].str() if errors else 'timed out'}")
        return None

    def _source(self, name: str) -> DataSource:
        source = self.catalog.sources.get(name)
        if source is None:
            raise StatementError(f"{name} does not exist.")
        return source

    def _drop(self, statement: ast.Drop, text: str, properties: dict) -> dict | None:
        source = self.catalog.sources.get(statement.name)
        if source is None:
            if statement.if_exists:
                return None
            raise StatementError(f"{statement.kind.capitalize()} {statement.name} does not exist.")
        if source.kind != statement.kind:
            raise StatementError(f"Incompatible data source type is {source.kind}, but statement was "
                                 f"DROP {statement.kind}")
        readers = [q.id for q in self.catalog.readers_of(source.name) if q.sink != source.name]
        if readers:
            raise StatementError(f"Cannot drop {source.name}. The following queries read from this source: "
                                 f"[{', '.join(sorted(readers))}]. You need to terminate them before dropping "
                                 f"{source.name}.")
        writers = [q for q in self.catalog.queries.values() if q.sink == source.name]
        commands = [Command(f"query/{q.id}", None) for q in writers] + [Command(f"source/{source.name}", None)]
        self._commit(commands)
        for q in writers:
            self._stop_query(q.id)
        view = self.views.pop(source.name, None)
        if view is not None:
            view.close()
        if statement.delete_topic:
            try:
                self.admin.delete_topics([source.topic])[source.topic].result(_TIMEOUT_S)
            except KafkaException as e:
                raise StatementError(f"{source.name} was dropped, but deleting topic {source.topic} failed: "
                                     f"{e.args[0].str()}") from None
        return self._status(text, f"Source `{source.name}` (topic: {source.topic}) was dropped.",
                            f"{source.kind.lower()}/`{source.name}`/drop")

    def _terminate(self, statement: ast.Terminate, text: str, properties: dict) -> dict:
        ids = list(self.catalog.queries) if statement.all else [statement.query_id]
        unknown = [i for i in ids if i not in self.catalog.queries]
        if unknown:
            raise StatementError(f"Unknown queryId: {unknown[0]}")
        self._commit([Command(f"query/{i}", None) for i in ids])
        for i in ids:
            self._stop_query(i)
        return self._status(text, "Query terminated.", f"terminate/{'ALL' if statement.all else ids[0]}/execute")

    # ---------------------------------------------------------------- SHOW, DESCRIBE, EXPLAIN

    def _show(self, statement: ast.Show, text: str, properties: dict) -> dict:
        if statement.what in ("STREAMS", "TABLES"):
            kind = statement.what[:-1]
            listed = [{"type": kind, "name": s.name, "topic": s.topic, "keyFormat": s.key_format,
                       "valueFormat": s.value_format, "isWindowed": s.windowing is not None}
                      for s in sorted(self.catalog.sources.values(), key=lambda s: s.name) if s.kind == kind]
            return {"@type": statement.what.lower(), "statementText": text, statement.what.lower(): listed,
                    "warnings": []}
        if statement.what == "TOPICS":
            metadata = self.admin.list_topics(timeout=_TIMEOUT_S)
            topics = [{"name": name, "replicaInfo": [len(p.replicas) for _, p in sorted(t.partitions.items())]}
                      for name, t in sorted(metadata.topics.items()) if not name.startswith("_")]
            return {"@type": "kafka_topics", "statementText": text, "topics": topics, "warnings": []}
        queries = [self._query_entity(q) for q in sorted(self.catalog.queries.values(), key=lambda q: q.id)]
        # as ksqlDB, the push queries that clients are running too
        queries += [{"queryString": q.statement, "sinks": [], "sinkKafkaTopics": [], "id": q.id,
                     "statusCount": {"RUNNING": 1}, "queryType": "PUSH", "state": "RUNNING"}
                    for q in list(self.transient.values()) if not q.closed.is_set()]
        return {"@type": "queries", "statementText": text, "queries": queries, "warnings": []}

    def query_state(self, query_id: str) -> str:
        running = self.running.get(query_id)
        return "RUNNING" if running is not None and running.isActive else "ERROR"

    def _query_entity(self, q: PersistentQuery) -> dict:
        sink = self.catalog.sources.get(q.sink)
        state = self.query_state(q.id)
        entity = {"queryString": q.statement, "sinks": [q.sink], "sinkKafkaTopics": [sink.topic] if sink else [],
                  "id": q.id, "statusCount": {state: 1}, "queryType": "PERSISTENT", "state": state}
        if state == "ERROR" and q.id in self.failures:
            entity["error"] = self.failures[q.id]
        return entity

    def _describe(self, statement: ast.Describe, text: str, properties: dict) -> dict:
        source = self._source(statement.name)
        fields = [{"name": c.name, "schema": {"type": type_text(c.type)},
                   **({"type": "KEY"} if c.key else {})} for c in source.columns]
        description = {
            "name": source.name, "type": source.kind, "topic": source.topic, "keyFormat": source.key_format,
            "valueFormat": source.value_format, "fields": fields, "statement": source.statement,
            "windowType": source.windowing.kind if source.windowing else None,
            "timestamp": source.timestamp_column or "",
            "readQueries": [self._query_entity(q) for q in self.catalog.readers_of(source.name)],
            "writeQueries": [self._query_entity(q) for q in self.catalog.queries.values() if q.sink == source.name],
            "extended": statement.extended,
        }
        if statement.extended:
            topic = self.admin.list_topics(timeout=_TIMEOUT_S).topics.get(source.topic)
            description["partitions"] = len(topic.partitions) if topic else 0
            description["replication"] = len(topic.partitions[0].replicas) if topic and topic.partitions else 0
        return {"@type": "sourceDescription", "statementText": text, "sourceDescription": description,
                "warnings": []}

    def _explain(self, statement: ast.Explain, text: str, properties: dict) -> dict:
        if statement.query_id is not None:
            query = self.catalog.queries.get(statement.query_id)
            if query is None:
                raise StatementError(f"Query with id:{statement.query_id} does not exist, "
                                     "use SHOW QUERIES to view the full set of queries.")
            select = _select_of(query.statement)
            statement_text, query_id, state = query.statement, query.id, self.query_state(query.id)
        else:
            select, statement_text, query_id, state = statement.query, text, "", "NOT_RUNNING"
        plan = self._plan(select, properties, persistent=False)
        fields = [{"name": c.name, "schema": {"type": type_text(c.type)}, **({"type": "KEY"} if c.key else {})}
                  for c in plan.columns]
        execution = plan.frame._jdf.queryExecution().analyzed().treeString()
        return {"@type": "queryDescription", "statementText": text,
                "queryDescription": {"id": query_id, "statementText": statement_text, "fields": fields,
                                     "sources": list(plan.sources), "executionPlan": execution,
                                     "state": state}, "warnings": []}

    # ---------------------------------------------------------------- persistent queries

    def checkpoint_dir(self, query_id: str) -> str:
        return os.path.join(self.state_dir, "checkpoints", query_id)

    def _start_query(self, query: PersistentQuery, plan: QueryPlan | None = None) -> None:
        if plan is None:
            plan = self.planner.plan(_select_of(query.statement), query.offset_reset, persistent=True)
        sink = self.catalog.source(query.sink)
        partitions = self._partitions_of(sink.topic) if sink.windowing is not None else None
        writer = (self.planner.encode(plan, sink, partitions).writeStream.format("odradek")
                  .option("kafka.bootstrap.servers", self.config.bootstrap)
                  .option("kafka.partitioner", "murmur2_random")  # as Java clients and ksqlDB place keys
                  .option("topic", sink.topic)
                  # the exactly-once sink's id: the same whatever the state dir is called
                  .option("odradek.sink.id", f"odradek-sql/{self.config.service_id}/{query.id}")
                  .option("checkpointLocation", self.checkpoint_dir(query.id))
                  .queryName(query.id)
                  .trigger(processingTime=f"{self.config.trigger_interval_ms} milliseconds"))
        for name, value in self.config.client_config.items():
            writer = writer.option(f"kafka.{name}", value)
        self.running[query.id] = writer.start()
        self.failures.pop(query.id, None)

    def _stop_query(self, query_id: str) -> None:
        running = self.running.pop(query_id, None)
        if running is not None:
            try:
                running.stop()
            except Exception:
                log.debug("stopping %s", query_id, exc_info=True)
        shutil.rmtree(self.checkpoint_dir(query_id), ignore_errors=True)

    def _materialize(self, source: DataSource) -> None:
        previous = self.views.pop(source.name, None)
        if previous is not None:
            previous.close()
        self.views[source.name] = MaterializedTable(source, self.client_config, self.registry)


def _first_line(error: BaseException) -> str:
    return next((line for line in str(error).splitlines() if line.strip()), type(error).__name__)


def _select_of(statement_text: str) -> ast.Select:
    statement = parse_with_text(statement_text)[0][0]
    return statement.query


def _schema_text(columns) -> str:
    return ", ".join(f"`{c.name}` {type_text(c.type, rest=True)}{' KEY' if c.key else ''}" for c in columns)


def _spark_session(config: EngineConfig):
    # Spark hands timestamps to Python as naive local times: make local time UTC, in this process and the
    # Python workers it starts, so push query rows show the same instants as pull queries.
    os.environ["TZ"] = "UTC"
    time.tzset()
    # Spark's Python workers must run this interpreter, the one with odradek installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from odradek.spark.datasource import JAR, OdradekDataSource

    builder = (SparkSession.builder.appName(f"odradek-sql-{config.service_id}").master(config.spark_master)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               # ksqlDB's expressions give null (and the record goes on) where ANSI SQL would fail the query
               .config("spark.sql.ansi.enabled", "false")
               .config("spark.sql.streaming.stopGracefullyOnShutdown", "true"))
    if os.path.exists(JAR):  # the JVM sink, for the plain writes of queries without exactly-once
        builder = builder.config("spark.jars", JAR)
    for name, value in config.spark_config.items():
        builder = builder.config(name, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(OdradekDataSource)
    return spark


def describe_schema(columns: tuple[SourceColumn, ...]) -> str:
    """A query's schema as ksqlDB's /query header writes it: `ID` STRING KEY, `N` INTEGER."""
    return _schema_text(columns)



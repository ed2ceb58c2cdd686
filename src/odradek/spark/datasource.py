"""The "odradek" PySpark data source: Spark's Kafka connector, with `format("odradek")`.

    from odradek.spark.datasource import JAR, OdradekDataSource
    spark = SparkSession.builder.config("spark.jars", JAR).getOrCreate()  # optional: the JVM sink
    spark.dataSource.register(OdradekDataSource)

JAR (built from jvm/ by `make`) puts format("odradek")'s plain writes in the executors' JVMs, with no Python
worker (jvm/src/io/odradek/spark/OdradekProvider.java); everything else stays this data source's.
"""

from __future__ import annotations

import os

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from odradek.spark.options import OptionError, SourceOptions
from odradek.spark.schema_registry import SourceDecoders
from odradek.spark.sink import OdradekBatchWriter, OdradekStreamWriter
from odradek.spark.source import OdradekBatchReader, OdradekStreamReader, source_schema

JAR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "odradek-spark.jar")


class OdradekDataSource(DataSource):
    """Batch and streaming reads and writes of Odradek (or any Kafka) topics."""

    @classmethod
    def name(cls) -> str:
        return "odradek"

    def schema(self) -> StructType:
        include_headers = SourceOptions.parse_include_headers(self.options)
        key, value = SourceOptions.parse_registries(self.options)
        if key is None and value is None:
            return source_schema(include_headers)
        # The subjects' latest schemas decide the key/value types now, when the query is planned; Spark
        # pickles this instance for reader(), which decodes with the same schemas.
        self._decoders = SourceDecoders.fetch(key, value)
        return source_schema(include_headers, **self._decoders.column_types())

    def reader(self, schema: StructType) -> OdradekBatchReader:
        return OdradekBatchReader(self.options, schema, getattr(self, "_decoders", None))

    def streamReader(self, schema: StructType) -> OdradekStreamReader:
        return OdradekStreamReader(self.options, schema, getattr(self, "_decoders", None))

    def writer(self, schema: StructType, overwrite: bool) -> OdradekBatchWriter:
        if overwrite:
            raise OptionError("save mode 'overwrite' is not allowed: a topic is append-only; use mode('append')")
        return OdradekBatchWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> OdradekStreamWriter:
        return OdradekStreamWriter(self.options, schema)

"""The "odradek" data source, registered statically: with this package installed, `spark.read.format("odradek")`
works in any Spark 4 session, with no `spark.dataSource.register(...)` call.

When a session first resolves a Python data source, Spark imports every top-level package whose name starts
with `pyspark_` and registers its `DefaultSource` under `DefaultSource.name()`.
"""

from odradek.spark.datasource import OdradekDataSource as DefaultSource

__all__ = ["DefaultSource"]

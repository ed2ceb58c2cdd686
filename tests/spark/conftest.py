"""One SparkSession (local mode) for every Spark test, with the "odradek" data source registered."""

import os
import sys

import pytest

pytest.importorskip("pyspark")


@pytest.fixture(scope="session")
def spark():
    # Spark's Python workers must run this interpreter, the one with odradek and its dependencies.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from odradek.spark.datasource import OdradekDataSource

    session = (SparkSession.builder.appName("odradek-tests").master("local[2]")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.memory", "1g")
               .config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(OdradekDataSource)
    yield session
    session.stop()

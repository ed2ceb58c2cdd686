"""One SparkSession (local mode) for every Spark test, with the "odradek" data source registered and its JVM
sink on the classpath."""

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

    from odradek.spark.datasource import JAR, OdradekDataSource

    assert os.path.exists(JAR), "the JVM sink is not built: make src/odradek/spark/odradek-spark.jar"

    session = (SparkSession.builder.appName("odradek-tests").master("local[2]")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.memory", "1g")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.jars", JAR)
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(OdradekDataSource)
    yield session
    session.stop()

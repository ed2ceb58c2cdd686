from tests.spark.conftest import spark  # noqa: F401

"""The commit protocols: what Spark's driver and executors import, and nothing else (the zip the
committed operator ships to them is this package and `spark`; tests/airflow/test_shipped_modules.py checks
both against the import graph). No Airflow imports."""

"""The commit protocols; no Airflow imports: this runs inside Spark executors."""

"""Development tools, kept apart from what the provider runs: the embedded S3 server the tests,
benchmarks and demo use, a private PostgreSQL and Hive's Thrift metastore on it, and the demo
itself, and their command, ``airflow-commit-dev`` (`devtools.cli`). Nothing outside `devtools`, `tests`
and `bench` imports from here."""

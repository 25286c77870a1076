"""Whether a `_SUCCESS` (or a job's record) proves what downstream work needs (`check`), and whether
every file it lists is in the store (`listed_files`, `success verify --files`).

Run by the Airflow worker (the success sensor, the committed operator's outcome), the triggerer
(the deferred sensor's trigger) and the CLI (`airflow-commit success`); never by Spark, so it is not
shipped to executors, and it imports no Airflow.
"""

"""An orchestrator's task tries: which job each try runs and what becomes of earlier tries' jobs
(`plan`), each try's local working directory (`workdirs`), and aborting a job that Hadoop's own
committers ran (`hadoop_jobs`).

Run by the Airflow worker for the committed operator's tries; never by Spark, so it is not shipped
to executors, and it imports no Airflow (a try is named by `core.task_key.TaskKey`).
"""

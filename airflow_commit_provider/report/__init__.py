"""The commit report for people: in a terminal (`airflow-commit report`), as one HTML file, and as
the page the Airflow UI plugin serves.

Run by the CLI and by the api-server (the UI plugin, `ui.app`); never by Spark, so it is not
shipped to executors, and it imports no Airflow. The facts come from `commit_report`, read from a
job's records; `commit_statistics` reads what a committer counted and timed; `addresses` says
where the UI's pages live, for the plugin and the operator's link alike.
"""

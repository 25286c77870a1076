"""The commit report in the Airflow UI: a plugin's pages, and the task's link to them."""

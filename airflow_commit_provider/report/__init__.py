"""The commit report for people: in a terminal (`airflow-commit report`), as one HTML file, and as
the page the Airflow UI plugin serves. The facts come from `core.commit_report`."""

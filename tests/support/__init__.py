"""What the tests share: paths to the fixtures, golden files, a running bot and its story,
stand-ins of SMTP, Airflow specs."""

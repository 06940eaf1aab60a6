"""The queue below the term and the server: uploads and their states (records), the Huey queue and the grading
task (jobs), recording once (collector), the worker processes (supervisor), the workers' self-test (selftest)."""

"""The worker: the Celery app, its config, tasks, signals, bootsteps and broker transport.

`celery -A workers.worker.app worker` and `memsync worker` start it.
"""

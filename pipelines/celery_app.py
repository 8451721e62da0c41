"""The Celery app of the rollup workers: `celery -A pipelines.celery_app -b <broker> worker`.

dagster-celery's own app (`dagster_celery.app`) with one change: a worker acknowledges a day
when it has finished it, not when it starts it, so it holds one day at a time and the others
stay in the queue for the idle workers (by default a worker takes the next day as soon as it
starts one). And a day whose worker dies is not acknowledged: Celery puts it back in the queue
for another worker (a killed pool process at once, a killed worker after Redis's visibility
timeout, an hour) instead of losing it while its run waits; re-running a day replaces it
whole. That recovery is Celery's documented behaviour, not tested here.
"""

from dagster_celery.app import app

app.conf.update(task_acks_late=True, task_reject_on_worker_lost=True, worker_prefetch_multiplier=1)

"""What `atlas`'s users submit: ordinary jobs drawn per account (size, queue, run time, how
they end, how they use their GPUs), the jobs placed on purpose so that every seed shows each case,
job arrays and a heterogeneous job, and the jobs asking for one MIG instance. Placement is
`scheduler`'s.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from datetime import timedelta

from simulator.clock import EPOCH
from simulator.site import (
    A100,
    ACCOUNTS,
    ATLAS_MIG_NODES,
    GPUS_PER_NODE,
    H100,
    MIG_1G,
    USER_POOL,
    WARM_UP_S,
    Account,
    Layout,
    Partition,
)

QUEUES = ("batch", "interactive", "preemptible")

SIZE_MIXES = {
    "large": ((1, 2, 4, 8, 16, 32), (10, 8, 17, 40, 15, 10)),
    "mixed": ((1, 2, 4, 8, 16, 32), (38, 18, 20, 18, 4, 2)),
    "medium": ((1, 2, 4, 8), (35, 20, 25, 20)),
    "small": ((1, 2, 4, 8), (62, 20, 13, 5)),
}

# Queue behaviour: median and spread of the run time (log-normal), longest allowed run, and
# how jobs end. Interactive sessions are short unless forgotten (zombies, see _new_job).
MEDIAN_RUN_H = {"batch": 2.5, "interactive": 0.75, "preemptible": 1.5}
RUN_SIGMA = {"batch": 1.3, "interactive": 0.9, "preemptible": 1.1}
MAX_RUN_H = {"batch": 120, "interactive": 24, "preemptible": 48}
TIME_LIMITS_H = (1, 2, 4, 8, 12, 24, 48, 72, 120)
OUTCOMES = {
    "batch": {"COMPLETED": 80, "FAILED": 8, "OUT_OF_MEMORY": 3, "CANCELLED": 5, "TIMEOUT": 4},
    "interactive": {"COMPLETED": 62, "CANCELLED": 30, "TIMEOUT": 3, "FAILED": 5},
    "preemptible": {
        "COMPLETED": 60,
        "PREEMPTED": 25,
        "FAILED": 7,
        "CANCELLED": 4,
        "TIMEOUT": 4,
    },
}

# Work reaches the H100 partition after a smoke test on A100: half as many of its jobs fail.
H100_FAILURE_FACTOR = {"FAILED": 0.5, "OUT_OF_MEMORY": 0.5}

# Utilisation profiles of a job's GPUs (codes used by the vectorised telemetry). SERVING is an
# inference replica: busy with traffic, idle in its lulls.
PRODUCTIVE, LOW, BURSTY, ZOMBIE, HUNG, UNDERUSED, SERVING = range(7)


@dataclass
class Job:
    """One job: the request, then what the scheduler simulation made of it."""

    submit: int
    account: str
    user: str
    queue: str
    qos: str
    gpu_model: str
    gpus: int
    runtime: int  # seconds it runs once started
    state: str  # final state if nothing interferes
    exit_code: int
    profile: int
    patience: int | None = None  # interactive users give up after waiting this long
    nodelist: tuple[str, ...] = ()  # nodes the user insisted on (Slurm --nodelist)
    start: int | None = None
    end: int | None = None
    held: list[tuple[str, int]] = field(default_factory=list)
    job_id: str = ""
    time_limit: int = 0  # seconds (sacct Timelimit)
    array: int | None = None  # number of the job array this task belongs to
    task: int = 0  # array task index
    het: int | None = None  # number of the heterogeneous job this is a component of
    het_part: int = 0
    raw_id: str = ""  # sacct JobIDRaw
    partition: Partition | None = None  # asks for `gpus` MIG instances of this kind

    @property
    def gpu_eq(self) -> float:
        """GPU-equivalents: whole GPUs, or the MIG instances' fraction of a GPU."""
        return self.gpus if self.partition is None else self.gpus * self.partition.gpu_eq


def _users(rnd: random.Random) -> dict[str, list[str]]:
    """Two to five users per account, drawn from a shared pool (people work in several)."""
    return {a.name: rnd.sample(USER_POOL, rnd.randint(2, 5)) for a in ACCOUNTS}


def submit_times(rnd: random.Random, layout: Layout, count: int | None = None) -> list[int]:
    """Submission instants with a working-hours peak and quieter weekends.

    ``count`` (default: the layout's submissions) is for the month and its warm-up week; over
    history months as many more are drawn as keep the month's density, less the demand
    growth (`Layout.demand_at`).
    """
    hours = range((layout.export_at - layout.sim_start) // 3600)
    weights, month_weight = [], 0.0
    for h in hours:
        moment = EPOCH + timedelta(seconds=layout.sim_start + h * 3600)
        busy = 3.0 if 8 <= moment.hour < 19 else 1.5 if 19 <= moment.hour < 23 else 0.7
        weight = busy * (0.5 if moment.weekday() >= 5 else 1.0)
        if layout.sim_start + h * 3600 >= layout.month_start - WARM_UP_S:
            month_weight += weight
        weights.append(weight * layout.demand_at(layout.sim_start + h * 3600))
    count = count or layout.n_submissions
    if layout.first_month_start < layout.month_start:
        count = round(count * sum(weights) / month_weight)
    picks = rnd.choices(hours, weights=weights, k=count)
    return sorted(layout.sim_start + h * 3600 + rnd.randrange(3600) for h in picks)


def job_requests(rnd: random.Random, layout: Layout) -> list[Job]:
    """All job submissions of the simulated window, in submit order."""
    users = _users(rnd)
    weights = [a.weight for a in ACCOUNTS]
    jobs = [
        _new_job(rnd, submit, rnd.choices(ACCOUNTS, weights=weights)[0], users, layout)
        for submit in submit_times(rnd, layout)
    ]
    jobs += _special_jobs(users, layout)
    # drawn from streams of their own, so that the ordinary workload stays as it was
    jobs += _array_jobs(random.Random(rnd.getrandbits(64)), users, layout)
    jobs += _mig_jobs(random.Random(rnd.getrandbits(64)), users, layout)
    jobs.sort(key=lambda j: j.submit)
    return jobs


def _new_job(rnd: random.Random, submit: int, account: Account, users: dict, layout: Layout) -> Job:
    """One ordinary submission: size, queue, run time and how it is going to end."""
    queue = rnd.choices(QUEUES, weights=account.queue_mix)[0]
    model = H100 if rnd.random() < account.h100_share else A100
    if queue == "interactive":
        model = A100  # the H100 partition takes batch and preemptible work only
    gpus = _job_size(rnd, queue, account, layout)
    profile = _profile(rnd, queue, gpus, model)
    if profile == ZOMBIE:
        # A notebook left open: it runs for hours whatever the scale of the demo.
        runtime = rnd.randint(4 * 3600, 20 * 3600)
        limit = runtime
        state = rnd.choices(("COMPLETED", "CANCELLED", "TIMEOUT"), weights=(3, 5, 2))[0]
    else:
        runtime, limit = _runtime(rnd, queue, gpus, layout)
        outcomes = OUTCOMES[queue]
        weights = [
            weight * (H100_FAILURE_FACTOR.get(state, 1.0) if model == H100 else 1.0)
            for state, weight in outcomes.items()
        ]
        state = rnd.choices(list(outcomes), weights=weights)[0]
        if runtime >= limit:
            state = "TIMEOUT"  # would have run longer than the queue allows
    runtime, exit_code = _apply_outcome(rnd, state, runtime, limit)
    if state == "TIMEOUT" and profile == PRODUCTIVE and rnd.random() < 0.5:
        profile = HUNG  # most time-outs are jobs that stopped making progress
    return _drawn_job(
        rnd,
        users,
        account.name,
        queue,
        submit=submit,
        gpu_model=model,
        gpus=gpus,
        runtime=runtime,
        state=state,
        exit_code=exit_code,
        profile=profile,
        time_limit=limit,
    )


def _drawn_job(rnd: random.Random, users: dict, account: str, queue: str, **request) -> Job:
    """A job the account submits to the queue, drawn in this order: which of the account's
    users, the QoS and, on the interactive queue, how long the user waits for it to start."""
    return Job(
        account=account,
        user=rnd.choice(users[account]),
        queue=queue,
        qos=_qos(rnd, queue),
        patience=rnd.randint(600, 7200) if queue == "interactive" else None,
        **request,
    )


def _job_size(rnd: random.Random, queue: str, account: Account, layout: Layout) -> int:
    """GPUs a job asks for: notebooks take one or two, batch work follows the account mix."""
    if queue == "interactive":
        return 1 if rnd.random() < 0.85 else 2
    sizes, weights = SIZE_MIXES[account.sizes]
    gpus = rnd.choices(sizes, weights=weights)[0]
    # Preemptible work is opportunistic and single-node; the small cluster has two nodes a pool.
    return min(gpus, GPUS_PER_NODE if queue == "preemptible" else layout.max_job_gpus)


def _profile(rnd: random.Random, queue: str, gpus: int, model: str) -> int:
    """How the job will use its GPUs (see the profile codes at the top)."""
    if queue == "interactive":
        return ZOMBIE if gpus == 1 and rnd.random() < 0.25 else BURSTY
    draw = rnd.random()
    # asked for a node, uses one GPU (the review before H100 access catches that)
    if gpus in (4, 8) and draw < 0.06 and model == A100:
        return UNDERUSED
    return LOW if draw < 0.14 else PRODUCTIVE


def _runtime(rnd: random.Random, queue: str, gpus: int, layout: Layout) -> tuple[int, int]:
    """Log-normal run time (capped by the queue) and the time limit the user asked for."""
    median = MEDIAN_RUN_H[queue] * 3600 * layout.duration_scale * (1.5 if gpus > 8 else 1.0)
    cap = MAX_RUN_H[queue] * 3600
    runtime = int(min(cap, max(60.0, rnd.lognormvariate(math.log(median), RUN_SIGMA[queue]))))
    fitting = [h * 3600 for h in TIME_LIMITS_H if runtime * 1.2 <= h * 3600 <= cap]
    return runtime, fitting[0] if fitting else cap


def _apply_outcome(rnd: random.Random, state: str, runtime: int, limit: int) -> tuple[int, int]:
    """Run time and exit code once the planned final state is known."""
    if state == "TIMEOUT":
        return limit, 0
    if state == "FAILED":
        return max(30, int(runtime * rnd.uniform(0.02, 0.7))), rnd.choice((1, 1, 1, 2, 137, 139))
    if state == "OUT_OF_MEMORY":
        return max(30, int(runtime * rnd.uniform(0.05, 0.6))), 125
    if state == "CANCELLED":
        return max(30, int(runtime * rnd.uniform(0.1, 0.9))), 15
    if state == "PREEMPTED":
        return max(60, int(runtime * rnd.uniform(0.1, 0.8))), 0
    return runtime, 0


def _qos(rnd: random.Random, queue: str) -> str:
    """Preemptible work runs at low QoS; some batch work pays for high."""
    if queue == "preemptible":
        return "low"
    if queue == "interactive":
        return "normal"
    return "high" if rnd.random() < 0.15 else "normal"


def _special_jobs(users: dict, layout: Layout) -> list[Job]:
    """Jobs submitted on purpose, so that every seed shows each case the demo promises."""

    def job(
        submit: int,
        account: str,
        queue: str,
        model: str,
        gpus: int,
        hours: float,
        profile: int = PRODUCTIVE,
        nodelist: tuple[str, ...] = (),
    ) -> Job:
        return Job(
            submit=submit,
            account=account,
            user=users[account][0],
            queue=queue,
            qos="high" if queue == "batch" else "normal",
            gpu_model=model,
            gpus=gpus,
            runtime=int(hours * 3600),
            state="COMPLETED",
            exit_code=0,
            profile=profile,
            nodelist=nodelist,
            time_limit=int(math.ceil(hours * 1.5)) * 3600,
        )

    day = 86400
    # Vision's campaign on the 12th takes it far over its quota limit.
    campaign = layout.month_start + 11 * day + 8 * 3600
    hours = 30 if layout.small else 40
    jobs = [
        job(campaign + i * 300, "vision", "batch", A100, GPUS_PER_NODE, hours)
        for i in range(layout.burst_jobs)
    ]
    # A notebook opened on the 5th and forgotten.
    forgotten = layout.month_start + 4 * day + 9 * 3600
    jobs.append(job(forgotten, "notebooks", "interactive", A100, 1, 11, profile=ZOMBIE))
    # A long run pinned to the first outage node, half a day before it breaks.
    pinned = layout.outage[0] - day // 2
    jobs.append(job(pinned, "speech", "batch", A100, 1, 30, nodelist=layout.outage_nodes[:1]))
    # Submitted as the export runs (so the export time can be read from the data) and still
    # waiting for its nodes when it is taken.
    jobs.append(job(layout.export_at, "nlp-train", "batch", H100, layout.max_job_gpus, 30))
    # Assist's fine-tuning pipeline retrains its model around the clock (a cron at 00:30 and
    # 12:30): an H100 node for five hours each time, so the H100 queue is never empty.
    for submit in range(layout.sim_start + 1800, layout.export_at, 12 * 3600):
        jobs.append(job(submit, "assistant", "batch", H100, GPUS_PER_NODE, 5))
    # A heterogeneous job on the 8th: an H100 node of trainers and an A100 half-node of data
    # loaders, started together (`123+0`, `123+1`).
    het_submit = layout.month_start + 7 * day + 10 * 3600
    for part, (model, gpus) in enumerate(((H100, GPUS_PER_NODE), (A100, GPUS_PER_NODE // 2))):
        component = job(het_submit, "nlp-train", "batch", model, gpus, 20)
        component.het, component.het_part = 0, part
        jobs.append(component)
    return jobs


def _array_jobs(rnd: random.Random, users: dict, layout: Layout) -> list[Job]:
    """Parameter sweeps submitted as job arrays (`sbatch --array`): one GPU a task, except

    - the first, 4-GPU tasks pinned to one node (`--nodelist`) submitted just before the daily
      dump of the 13th: that dump shows its waiting tasks as one record (`123_[2-5]`), later
      dumps show each task once it has run;
    - the last, an 8-GPU benchmark sweep submitted hours before the export: its tasks are
      still pending when the month is exported (sacct collapses them too).
    """
    jobs = []
    accounts = ("rl-lab", "bio-sim", "nlp-eval", "dp-etl")
    span = layout.export_at - layout.sim_start - 3 * 86400
    for number in range(layout.n_arrays):
        first, last = number == 0, number == layout.n_arrays - 1
        account = "nlp-eval" if last else accounts[number % len(accounts)]
        submit = layout.sim_start + 86400 + rnd.randrange(span)
        tasks = rnd.randint(6, 10 if layout.small else 40)
        model = H100 if rnd.random() < 0.3 else A100
        gpus, nodelist, median = 1, (), 0.7 * 3600 * layout.duration_scale
        if first:
            submit = layout.month_start + 12 * 86400 + 23 * 3600 + 1800
            tasks, model, gpus = 6, A100, GPUS_PER_NODE // 2
            nodelist, median = (layout.nodes[0].name,), 3 * 3600
        elif last:
            # hours before the export; with history months the H100 queue at the export is
            # another draw, shorter: an hour before, so that its tasks still wait
            submit = (
                layout.export_at
                - (1 if layout.first_month_start < layout.month_start else 4) * 3600
            )
            tasks, model, gpus = (6 if layout.small else 16), H100, GPUS_PER_NODE
            median = 3 * 3600
        limit = 6 * 3600
        user = users[account][number % len(users[account])]
        for task in range(tasks):
            runtime = int(min(limit - 60, max(120.0, rnd.lognormvariate(math.log(median), 0.5))))
            state = rnd.choices(("COMPLETED", "FAILED", "CANCELLED"), weights=(90, 7, 3))[0]
            runtime, exit_code = _apply_outcome(rnd, state, runtime, limit)
            jobs.append(
                Job(
                    submit=submit,
                    account=account,
                    user=user,
                    queue="batch",
                    qos="normal",
                    gpu_model=model,
                    gpus=gpus,
                    runtime=runtime,
                    state=state,
                    exit_code=exit_code,
                    profile=PRODUCTIVE if rnd.random() < 0.85 else LOW,
                    time_limit=limit,
                    array=number,
                    task=task,
                    nodelist=nodelist,
                )
            )
    return jobs


# Who works on atlas's MIG instances: account, weight, queue. Notebooks and small batch work
# (policy evaluation, feature extraction) fit a 1g.10gb slice; fine-tuning and evaluation of
# mid-sized models a 3g.40gb. Median run hours per profile and queue.
MIG_ACCOUNTS = {
    "1g.10gb": (
        ("notebooks", 4, "interactive"),
        ("analytics", 3, "interactive"),
        ("rl-lab", 2, "batch"),
        ("features", 2, "batch"),
        ("search", 1, "batch"),
    ),
    "3g.40gb": (
        ("speech", 3, "batch"),
        ("recsys", 2, "batch"),
        ("ads-ml", 2, "batch"),
        ("nlp-eval", 2, "batch"),
    ),
}
MIG_MEDIAN_RUN_H = {
    ("1g.10gb", "interactive"): 1.5,
    ("1g.10gb", "batch"): 1.2,
    ("3g.40gb", "batch"): 4.0,
}
WORKSHOP_SEATS = 8  # notebooks of the MIG workshop: more than one GPU's seven 1g.10gb


def _mig_jobs(rnd: random.Random, users: dict, layout: Layout) -> list[Job]:
    """Jobs asking for one MIG instance (`--gres=gpu:a100_1g.10gb:1`, `a100_3g.40gb`): Jupyter
    sessions (a quarter forgotten) and short batch work on 1g.10gb, batch work on 3g.40gb; and a
    workshop on the 10th where eight users open a 1g.10gb notebook at 10:00, filling a GPU.
    """
    partitions = {p.profile: p for p in ATLAS_MIG_NODES.values()}
    jobs = []
    for profile, count in layout.mig_submissions.items():
        accounts = MIG_ACCOUNTS[profile]
        weights = [weight for _, weight, _ in accounts]
        for submit in submit_times(rnd, layout, count):
            account, _, queue = rnd.choices(accounts, weights=weights)[0]
            zombie = queue == "interactive" and rnd.random() < 0.25
            if zombie:  # a notebook left open: hours whatever the scale of the demo
                runtime = limit = rnd.randint(4 * 3600, 12 * 3600)
                state = rnd.choices(("COMPLETED", "CANCELLED", "TIMEOUT"), weights=(3, 5, 2))[0]
                profile_code = ZOMBIE
            else:
                median = MIG_MEDIAN_RUN_H[profile, queue] * 3600 * layout.mig_duration_scale
                cap = MAX_RUN_H[queue] * 3600
                runtime = int(min(cap, max(60.0, rnd.lognormvariate(math.log(median), 1.0))))
                fitting = [h * 3600 for h in TIME_LIMITS_H if runtime * 1.2 <= h * 3600 <= cap]
                limit = fitting[0] if fitting else cap
                outcomes = OUTCOMES[queue]
                state = rnd.choices(list(outcomes), weights=list(outcomes.values()))[0]
                if runtime >= limit:
                    state = "TIMEOUT"
                profile_code = _profile(rnd, queue, 1, A100)
            runtime, exit_code = _apply_outcome(rnd, state, runtime, limit)
            jobs.append(
                _drawn_job(
                    rnd,
                    users,
                    account,
                    queue,
                    submit=submit,
                    gpu_model=A100,
                    gpus=1,
                    runtime=runtime,
                    state=state,
                    exit_code=exit_code,
                    profile=profile_code,
                    time_limit=limit,
                    partition=partitions[profile],
                )
            )
    workshop = layout.month_start + 9 * 86400 + 10 * 3600
    for seat, user in enumerate(rnd.sample(USER_POOL, WORKSHOP_SEATS)):
        jobs.append(
            Job(
                submit=workshop + seat * 20,
                account="analytics",
                user=user,
                queue="interactive",
                qos="normal",
                gpu_model=A100,
                gpus=1,
                runtime=3 * 3600 - seat * 20,
                state="COMPLETED",
                exit_code=0,
                profile=BURSTY,
                time_limit=4 * 3600,
                partition=MIG_1G,
            )
        )
    return jobs

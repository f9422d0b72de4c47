"""Parallel workers walk different contexts (``--order context`` with replicas, issue 49 part 4)."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st
from stateflow.tasks.harness.executors import LaneQueue, ThreadExecutor


class _NoEnv:
    def close(self) -> None:
        pass


def _lane(job: tuple[str, int]) -> str:
    return job[0]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from("abcd"), min_size=1, max_size=30), st.integers(1, 3), st.randoms())
def test_every_job_is_handed_out_once_and_each_lane_keeps_its_order(lanes, workers, rnd):
    jobs = [(k, i) for i, k in enumerate(lanes)]
    q = LaneQueue(jobs, _lane)
    flying: list[tuple[str, int]] = []
    taken: list[tuple[str, int]] = []
    while len(taken) < len(jobs):
        while len(flying) < workers and (job := q.take()) is not None:
            # two jobs of one lane in flight only when every remaining lane is busy
            if any(f[0] == job[0] for f in flying):
                remaining = {j[0] for j in jobs if j not in taken and j != job}
                busy = {f[0] for f in flying}
                assert remaining <= busy | {job[0]}, "shared a lane while another was free"
            flying.append(job)
            taken.append(job)
        done = flying.pop(rnd.randrange(len(flying)))
        q.done(done)
    assert sorted(taken) == sorted(jobs)
    for k in set(lanes):
        assert [j for j in taken if j[0] == k] == [j for j in jobs if j[0] == k]


def test_a_lane_stays_with_the_worker_that_began_it():
    q = LaneQueue([("a", 0), ("a", 1), ("b", 2), ("b", 3), ("c", 4)], _lane)
    first, second = q.take(), q.take()
    assert (first, second) == (("a", 0), ("b", 2))
    q.done(second)
    assert q.take() == ("b", 3)  # b's worker goes on with b, not with the new lane c
    q.done(first)
    assert q.take() == ("a", 1)


def test_two_threads_share_a_database_only_when_no_other_one_waits():
    jobs = [(db, i) for i, db in enumerate("aaaabbbbccdd")]
    lock = threading.Lock()
    flying: Counter[str] = Counter()
    waiting = Counter(db for db, _ in jobs)
    shared: list[tuple[str, set[str]]] = []
    rnd = random.Random(7)

    def work(env, job):
        with lock:
            flying[job[0]] += 1
            waiting[job[0]] -= 1
            others = {k for k, v in waiting.items() if v and k != job[0]}
            if flying[job[0]] > 1 and others:  # two on one database while another one waited
                shared.append((job[0], others))
        time.sleep(rnd.uniform(0.001, 0.01))
        with lock:
            flying[job[0]] -= 1
        return {"job": job}

    ex = ThreadExecutor(2, _NoEnv)
    try:
        done = [r["job"] for r in ex.run(jobs, work, lane=_lane)]
    finally:
        ex.close()
    assert sorted(done) == sorted(jobs)
    assert shared == []


def test_without_lanes_the_queue_order_is_kept():
    ex = ThreadExecutor(1, _NoEnv)
    jobs = [("b", 0), ("a", 1), ("b", 2)]
    try:
        assert [r["job"] for r in ex.run(jobs, lambda env, j: {"job": j})] == jobs
    finally:
        ex.close()

"""One interruptible pool: run tasks a few at a time; on a way out early, start no more."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import TypeVar

T = TypeVar("T")


def run_parallel(
    tasks: Sequence[Callable[[], T]],
    *,
    jobs: int,
    on_done: Callable[[int, T], None] | None = None,
) -> list[T]:
    """Every task's result, in the order of `tasks`, running `jobs` of them at a time.

    `on_done(index, result)` is called in this thread as each task finishes. When anything
    leaves early (a task's exception, an Interrupted from a signal handler), queued tasks
    are cancelled and running ones are not waited for: their child processes are ended by
    whoever owns them (the signal handler, a closing warm worker), which lets them return.
    """
    pool = ThreadPoolExecutor(max_workers=jobs)
    results: dict[int, T] = {}
    try:
        futures: dict[Future[T], int] = {pool.submit(task): i for i, task in enumerate(tasks)}
        for future in as_completed(futures):
            index = futures[future]
            results[index] = future.result()
            if on_done is not None:
                on_done(index, results[index])
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return [results[index] for index in range(len(tasks))]

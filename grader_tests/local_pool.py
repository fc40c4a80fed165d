"""The local executor: each submission graded by ``job.grade_job`` in a fresh process of a
local pool (forked from a server that imported the graders once), so nothing one student's
grading did survives into the next.

``grade_in_pool`` yields each student's record as it finishes; the batch, which consumes
it, alone logs and writes the gradebook. Stopped however it stops (Ctrl-C, SIGTERM,
SIGHUP, the consumer's own failure), the pool's processes are killed at once, and their
jails with them.
"""

import concurrent.futures
import multiprocessing
from collections.abc import Generator

from .i18n import _
from .job import die_with_parent, grade_job, grading_error_record


def kill_pool(pool: concurrent.futures.ProcessPoolExecutor) -> None:
    """Kill the processes of a ``ProcessPoolExecutor`` now and shut it down."""
    for process in list(getattr(pool, "_processes", {}).values()):
        try:
            process.kill()
        except (OSError, ValueError, AttributeError):
            pass
    pool.shutdown(wait=False, cancel_futures=True)


def grade_in_pool(jobs: list[tuple[str, str]], workers: int, assignment: str,
                  jailed: bool = True, language: str = "en",
                  allowed_modules: tuple[str, ...] | None = None,
                  ) -> Generator[tuple[str, dict], None, None]:
    """Grade ``jobs`` in a pool of ``workers`` processes, one fresh process per job.

    Args:
        jobs: list of ``(student, path)``.
        workers: int, processes of the pool.
        assignment: str, the assignment's name.
        jailed: bool, grade in the jail.
        language: the language of the reports' messages (the course's setting).
        allowed_modules: the third-party modules submissions may import (the course's
            setting, ``config.allowed_modules``; default: the current folder's course).

    Yields:
        ``(student, record)`` in the order the jobs finish: ``grade_job``'s record, or a
        grading error record when the pool process died (every later job of a broken pool
        fails too: graded again by the next run).
    """
    if not jobs:
        return
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["grader_tests.sandbox", "grader_tests.checks"])
    pool = concurrent.futures.ProcessPoolExecutor(
        max_workers=workers, mp_context=context, max_tasks_per_child=1,
        initializer=die_with_parent)
    try:
        futures = {pool.submit(grade_job, s, p, assignment, jailed, language,
                               allowed_modules): s for s, p in jobs}
        for future in concurrent.futures.as_completed(futures):
            student = futures[future]
            try:
                record = future.result()
            except Exception as exc:
                record = grading_error_record(
                    student, _("grading process failed: {error}").format(
                        error=f"{type(exc).__name__}: {exc}"))
            yield student, record
    except BaseException:
        # Interrupted (or closed by the consumer): the grading processes go at once, and
        # their jails with them; what finished is in the log and the gradebook.
        kill_pool(pool)
        raise
    pool.shutdown(wait=True)

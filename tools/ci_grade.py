"""The one script the CI workflows call (``.github/workflows/``), and that runs here too.

Two modes:

``python -m tools.ci_grade [--root DIR] [--jobs N]``
    The instructor's grading run: the kit's main job (``tools.demo``: release, autograde
    every submission under ``submitted/``, feedback, ``grades.csv``, the per-fault-id
    class summary ``class_summary.json``) on the course directory ``DIR`` (default: this
    repository), then a check that everything the workflow uploads is there, and a
    Markdown report (score table, fault counts) for the job summary.

``python -m tools.ci_grade --visible-only PATH``
    The student's check on push: execute the notebook ``PATH`` with nbclient, keeping
    only the cells the visible tests need (setup, the student's own cells) and the visible
    tests (cells tagged ``visible-test``); the hidden-check cells and the lesson's
    measurements are left out. Errors are allowed: every visible test runs and is reported
    passed or failed, with the first line of its error.

Both modes write their Markdown report to ``$GITHUB_STEP_SUMMARY`` when that is set
(GitHub Actions shows it on the run's page), and to stdout otherwise.

Exit status: 0 whenever the kit did its job, however the students did; 2 when the kit
itself broke (the release cannot be generated, no submission could be graded, an expected
output is missing, the kernel cannot start). A student's notebook that cannot be read or
has no visible tests is reported, not a failure. With ``--strict``, ``--visible-only``
exits 1 when a visible test failed or the notebook could not be read (for a student who
wants a red check).
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tools.demo import (ASSIGNMENT, ROOT, below_full_marks, child_env, in_points_order,
                        students_of)

KIT_BROKEN = 2
TESTS_FAILED = 1
# Seconds the whole main job may take in CI before the run counts as broken.
GRADE_TIME_LIMIT = 3600
# Seconds one cell may run in --visible-only (the visible tests limit themselves to 5 s).
VISIBLE_CELL_TIMEOUT = 60


def emit_summary(markdown: str) -> None:
    """Append ``markdown`` to ``$GITHUB_STEP_SUMMARY`` if set, else print it."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if target:
        with open(target, "a", encoding="utf-8") as f:
            f.write(markdown.rstrip("\n") + "\n")
    else:
        print(markdown, flush=True)


class KitBroken(Exception):
    """The kit, not a student, failed: the run must fail."""


# ---------------------------------------------------------------------------------------
# The instructor's grading run.


def run_main_job(root: Path, jobs: int) -> None:
    """``python -m tools.demo --root ROOT --jobs JOBS``, its output streamed to ours.

    Raises:
        KitBroken: the main job exited non-zero or outran ``GRADE_TIME_LIMIT``.
    """
    command = [sys.executable, "-m", "tools.demo", "--root", str(root), "--jobs", str(jobs)]
    try:
        result = subprocess.run(command, cwd=ROOT, env=child_env(), timeout=GRADE_TIME_LIMIT,
                                check=False)
    except subprocess.TimeoutExpired:
        raise KitBroken(f"the main job did not finish within {GRADE_TIME_LIMIT} s") from None
    if result.returncode != 0:
        raise KitBroken(f"the main job (tools.demo) exited with status {result.returncode}")


def check_outputs(root: Path, students: list[str]) -> dict[str, Any]:
    """What the workflow uploads, read back: ``grades.csv``, ``class_summary.json``, and a
    feedback folder per graded student.

    Returns:
        the class summary (dict).

    Raises:
        KitBroken: an output is missing or unreadable, or no submission was graded.
    """
    summary_path, grades_path = root / "class_summary.json", root / "grades.csv"
    for path in (summary_path, grades_path):
        if not path.is_file():
            raise KitBroken(f"{path.name} was not written")
    try:
        summary = json.loads(summary_path.read_text())
        with grades_path.open(newline="") as f:
            rows = list(csv.DictReader(f))
    except (ValueError, csv.Error) as exc:
        raise KitBroken(f"an output cannot be read: {exc}") from None
    graded = [s for s, r in summary.get("results", {}).items() if r.get("graded")]
    if students and not graded:
        raise KitBroken(f"none of the {len(students)} submissions could be graded")
    in_csv = {row.get("student_id") for row in rows if row.get("assignment") == ASSIGNMENT}
    missing = sorted(set(graded) - in_csv)
    if missing:
        raise KitBroken(f"graded but not in grades.csv: {', '.join(missing)}")
    no_feedback = [s for s in graded
                   if not list((root / "feedback" / s / ASSIGNMENT).glob("*.html"))]
    if no_feedback:
        raise KitBroken(f"graded but no feedback written: {', '.join(no_feedback)}")
    return summary


def grading_report(summary: dict[str, Any]) -> str:
    """Markdown: the score table and how many students hit each fault id."""
    lines = [f"## Autograde: assignment `{summary.get('assignment', ASSIGNMENT)}`", "",
             "| student | score | below full marks (fault ids) |", "|---|---:|---|"]
    for student, r in sorted(summary.get("results", {}).items()):
        if not r.get("graded"):
            lines.append(f"| {student} | not graded | nbgrader could not grade this "
                         "submission (see the log) |")
            continue
        functions = r.get("functions", {})
        lost = [f"{name} {c['score']:g}/{c['max_score']:g} ({', '.join(c['faults']) or '-'})"
                for name in in_points_order(functions) for c in [functions[name]]
                if below_full_marks(c)]
        lines.append(f"| {student} | {r['score']:g} / {r['max_score']:g} | "
                     f"{'; '.join(lost) or '-'} |")
    lines += ["", f"### Fault ids, over {summary.get('students', 0)} students", "",
              "| fault id | students |", "|---|---:|"]
    faults = summary.get("faults", {})
    lines += [f"| `{fault}` | {n} |" for fault, n in faults.items()] or ["| (none) | 0 |"]
    return "\n".join(lines) + "\n"


def grade(root: Path, jobs: int) -> int:
    """The instructor's run. Returns the exit status."""
    started = time.perf_counter()
    root = root.resolve()
    students = students_of(root)
    try:
        if not (root / "source" / ASSIGNMENT).is_dir():
            raise KitBroken(f"no source/{ASSIGNMENT}/ in {root}: nothing to release")
        if not students:
            raise KitBroken(f"no submissions under {root / 'submitted'}")
        run_main_job(root, jobs)
        summary = check_outputs(root, students)
    except KitBroken as exc:
        print(f"ci_grade: KIT BROKEN: {exc}", flush=True)
        emit_summary(f"## Autograde: the kit failed\n\n{exc}\n")
        return KIT_BROKEN
    emit_summary(grading_report(summary))
    not_graded = [s for s, r in summary["results"].items() if not r.get("graded")]
    print(f"ci_grade: {len(students) - len(not_graded)}/{len(students)} submissions graded "
          f"in {time.perf_counter() - started:.1f} s"
          + (f"; not graded: {', '.join(not_graded)}" if not_graded else ""), flush=True)
    return 0


# ---------------------------------------------------------------------------------------
# The student's visible tests.


def visible_notebook(nb: Any) -> tuple[Any, list[int]]:
    """``nb`` without the cells the visible tests do not need: the hidden-check (grade)
    cells and the lesson's measurements (tag ``lesson``). Returns ``(notebook, indices of
    the visible-test cells in it)``."""
    import nbformat

    kept: list[Any] = []
    visible: list[int] = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tags = set(cell.get("metadata", {}).get("tags", []))
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if "lesson" in tags or meta.get("grade"):
            continue
        if "visible-test" in tags:
            visible.append(len(kept))
        kept.append(cell)
    out = nbformat.v4.new_notebook(metadata=nb.metadata)
    out.cells = kept
    return out, visible


def test_name(cell: Any, fallback: str) -> str:
    """A visible-test cell's name: its grade id without ``_visible_test``, else ``fallback``."""
    grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
    return grade_id.removesuffix("_visible_test") or fallback


def first_line(text: object, limit: int = 200) -> str:
    """The first non-blank line of ``str(text)``, stripped, cut to ``limit`` characters."""
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[:limit - 1] + "…"


def visible_results(nb: Any, visible: list[int]) -> list[dict[str, Any]]:
    """Per visible test of the executed ``nb``: ``{"name", "passed", "message"}``."""
    results = []
    for n, index in enumerate(visible):
        cell = nb.cells[index]
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        printed = "".join(o.get("text", "") for o in cell.get("outputs", [])
                          if o.get("output_type") == "stream" and o.get("name") == "stdout")
        if errors:
            e = errors[0]
            message = f"{e.get('ename', 'Error')}: {first_line(e.get('evalue', ''))}".rstrip(": ")
            passed = False
        else:
            message, passed = first_line(printed) or "ran without error", True
        results.append({"name": test_name(cell, f"visible test {n + 1}"), "passed": passed,
                        "message": message})
    return results


def visible_report(path: Path, results: list[dict[str, Any]]) -> str:
    """Markdown: the table of the visible tests' ``results`` of the notebook at ``path``."""
    passed = sum(r["passed"] for r in results)
    lines = [f"## Visible tests of `{path.name}`: {passed}/{len(results)} passed", "",
             "| test | result | message |", "|---|---|---|"]
    for r in results:
        message = r["message"].replace("|", "\\|")
        lines.append(f"| {r['name']} | {'passed' if r['passed'] else '**failed**'} | {message} |")
    lines += ["", ("These are only the visible tests; the hidden checks run when the notebook "
                   "is graded. `NotImplementedError` means the function is still the stub.")]
    return "\n".join(lines) + "\n"


def run_visible(path: Path, strict: bool = False) -> int:
    """The student's check. Returns the exit status."""
    import nbformat
    from nbclient import NotebookClient

    path = path.resolve()
    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception as exc:  # noqa: BLE001  (any unreadable file is reported the same way)
        print(f"ci_grade: cannot read {path}: {type(exc).__name__}: {exc}", flush=True)
        emit_summary(f"## Visible tests\n\n`{path.name}` cannot be read as a notebook: "
                     f"{type(exc).__name__}: {first_line(exc)}\n")
        return TESTS_FAILED if strict else 0  # the student's file, not the kit
    run, visible = visible_notebook(nb)
    if not visible:
        emit_summary(f"## Visible tests of `{path.name}`\n\nNo cell tagged `visible-test` "
                     "found: is this the assignment's notebook?\n")
        return TESTS_FAILED if strict else 0
    os.environ.update(child_env())
    client = NotebookClient(run, timeout=VISIBLE_CELL_TIMEOUT, allow_errors=True,
                            kernel_name="python3", startup_timeout=120,
                            resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute()
    except Exception as exc:  # noqa: BLE001  (a kernel that dies or never starts)
        print(f"ci_grade: the notebook could not be executed: {type(exc).__name__}: {exc}",
              flush=True)
        emit_summary(f"## Visible tests of `{path.name}`\n\nThe notebook could not be "
                     f"executed: {type(exc).__name__}: {first_line(exc)}\n")
        return KIT_BROKEN
    results = visible_results(run, visible)
    emit_summary(visible_report(path, results))
    return TESTS_FAILED if strict and not all(r["passed"] for r in results) else 0


def main(argv: list[str] | None = None) -> int:
    """The command line (``python -m tools.ci_grade``); returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m tools.ci_grade",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="course directory to grade (default: this repository)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="students graded at once (default: 2)")
    parser.add_argument("--visible-only", type=Path, metavar="PATH",
                        help="run only the visible tests of the notebook PATH")
    parser.add_argument("--strict", action="store_true",
                        help="with --visible-only: exit 1 when a visible test fails")
    args = parser.parse_args(argv)
    if args.visible_only is not None:
        return run_visible(args.visible_only, strict=args.strict)
    return grade(args.root, args.jobs)


if __name__ == "__main__":
    sys.exit(main())

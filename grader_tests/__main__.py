"""Command line of the graders.

    python -m grader_tests grade PATH [--json] [--only NAME ...]

PATH is a filled-in notebook or a ``.py`` module defining the names of SPEC section 1.
Without ``--json`` a plain-text report per graded name is printed; with it, one JSON
object ``{"score", "max_score", "functions": {NAME: {"score", "max_score", "checks":
[{"name", "passed", "fault", "message"}]}}}``. The exit status is 0 when grading ran
(whatever the score) and 2 when the submission could not be read.
"""

import argparse
import json
import sys

from .core import POINTS, format_result, grade_namespace, report_dict
from .submission import SubmissionError, load


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m grader_tests",
                                     description="Grade an attention submission.")
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("grade", help="grade one notebook or .py file")
    g.add_argument("path")
    g.add_argument("--json", action="store_true", help="print one JSON object")
    g.add_argument("--only", nargs="+", choices=list(POINTS), metavar="NAME",
                   help="grade only these names")
    args = parser.parse_args(argv)

    try:
        loaded = load(args.path)
    except SubmissionError as exc:
        if args.json:
            print(json.dumps({"error": str(exc)}))
        else:
            print(f"error: {exc}", file=sys.stderr)
        return 2
    results = grade_namespace(loaded.namespace, args.only)
    if args.json:
        report = report_dict(results)
        if loaded.cell_errors:
            report["cell_errors"] = loaded.cell_errors
        print(json.dumps(report, indent=1))
    else:
        for r in results.values():
            print(format_result(r))
        total = sum(r.score for r in results.values())
        top = sum(r.max_score for r in results.values())
        print(f"\nTotal: {total:.2f} / {top:g}")
        for err in loaded.cell_errors:
            print(f"note: {err}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

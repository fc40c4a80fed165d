"""The batch's log: an append-only JSON-lines file of finished students, read back when a
batch is run again so that nothing is graded twice and nothing graded is lost."""

import json
import os

from . import assignments


def log_name(assignment: "str | assignments.Assignment") -> str:
    """File name of the default log of ``assignment`` (one log per assignment, so that
    resuming one never skips a student of the other): ``batch_log.jsonl`` for the default
    assignment, ``batch_log_<name>.jsonl`` for the others."""
    owner = assignments.get(assignment)
    return "batch_log.jsonl" if owner is assignments.DEFAULT else \
        f"batch_log_{owner.name}.jsonl"


class Log:
    """Append-only JSON-lines record of finished students; the last line per student wins.

    Args:
        path: str, the log file (created on the first ``append``).

    Attributes:
        records: dict student -> the student's last record.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.records: dict[str, dict] = {}
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError:  # a line cut by a kill mid-write
                        continue
                    self.records[rec["student"]] = rec

    def append(self, record: dict) -> None:
        """Write ``record`` (with its ``student``) as one line, flushed to disk."""
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.records[record["student"]] = record

"""The kit's safe copy of a student's exchange folder and its zip_collect collector
(``grader_tests/exchange.py``), without running nbgrader's commands."""

from __future__ import annotations

import logging
import os
import time
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pytest
from traitlets.config import Configurable

from grader_tests.exchange import TIMESTAMP_NOTE, CanvasCollector, PlatformExtractor, \
    copy_submission, safe_student_id, settle_timestamp
from tests.test_attacks_round5 import _collector_regexp


def test_copy_submission_copies_files_and_folders_and_leaves_out_links(tmp_path, caplog):
    src = tmp_path / "inbound" / "mallory+attention+t+x"
    (src / "sub").mkdir(parents=True)
    (src / "attention.ipynb").write_text("mine")
    (src / "sub" / "data.txt").write_text("data")
    os.chmod(src / "attention.ipynb", 0o640)
    secret = tmp_path / "secret.ipynb"
    secret.write_text("the instructor's")
    (src / "link.ipynb").symlink_to(secret)
    (src / "folder_link").symlink_to(tmp_path)
    os.mkfifo(src / "pipe")
    with caplog.at_level(logging.WARNING):
        refused = copy_submission(src, tmp_path / "out" / "mallory", who="mallory")
    assert refused == ["folder_link", "link.ipynb", "pipe"]
    out = tmp_path / "out" / "mallory"
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == \
        ["attention.ipynb", "sub", "sub/data.txt"]
    assert (out / "attention.ipynb").read_text() == "mine"
    assert os.stat(out / "attention.ipynb").st_mode & 0o777 == 0o640
    assert "mallory" in caplog.text and "link.ipynb" in caplog.text


def test_copy_submission_refuses_a_folder_that_is_a_link(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "attention.ipynb").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError):
        copy_submission(tmp_path / "link", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def _submission(tmp_path, claimed: str | None) -> tuple[Path, Path]:
    """An inbound folder written now (its files' change time: now), with ``claimed`` in
    its timestamp.txt (None: no timestamp.txt), and its collected copy."""
    src = tmp_path / "inbound" / "alice+attention+t+x"
    src.mkdir(parents=True)
    (src / "attention.ipynb").write_text("mine")
    if claimed is not None:
        (src / "timestamp.txt").write_text(claimed)
    dest = tmp_path / "submitted" / "alice" / "attention"
    copy_submission(src, dest, who="alice")
    return src, dest


def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f %Z")


def test_an_honest_submission_time_is_kept(tmp_path, caplog):
    claimed = _utc(time.time() - 2)  # nbgrader's submit: the time, then the copy
    src, dest = _submission(tmp_path, claimed)
    (dest / TIMESTAMP_NOTE).write_text("the student's own file of that name")
    with caplog.at_level(logging.WARNING):
        assert settle_timestamp(src, dest, who="alice") is None
    assert (dest / "timestamp.txt").read_text() == claimed
    assert not (dest / TIMESTAMP_NOTE).exists()
    assert caplog.text == ""


def test_a_backdated_or_missing_timestamp_gives_way_to_the_files_change_time(tmp_path,
                                                                                caplog):
    from nbgrader.utils import parse_utc

    before = time.time()
    src, dest = _submission(tmp_path / "backdated", "2025-03-14 16:59:00.000000 UTC")
    with caplog.at_level(logging.WARNING):
        note = settle_timestamp(src, dest, who="alice")
    kept = parse_utc((dest / "timestamp.txt").read_text()).replace(tzinfo=timezone.utc)
    ctime = os.lstat(src / "timestamp.txt").st_ctime
    assert abs(kept.timestamp() - ctime) < 1e-3 and kept.timestamp() >= before - 1
    assert "2025-03-14 16:59:00" in note and f"{kept:%Y-%m-%d %H:%M:%S}" in note
    assert (dest / TIMESTAMP_NOTE).read_text().strip() == note
    assert "alice" in caplog.text and "2025-03-14 16:59:00" in caplog.text
    # no timestamp.txt at all, or none nbgrader can read: the change time too
    for claimed in (None, "yesterday-ish"):
        src, dest = _submission(tmp_path / str(claimed), claimed)
        assert settle_timestamp(src, dest, who="alice") is not None
        kept = parse_utc((dest / "timestamp.txt").read_text()).replace(tzinfo=timezone.utc)
        assert kept.timestamp() >= before - 1
    # a claimed time a minute earlier than the files is beyond the tolerance (10 s)
    src, dest = _submission(tmp_path / "minute", _utc(time.time() - 60))
    assert settle_timestamp(src, dest, who="alice") is not None
    src, dest = _submission(tmp_path / "wide", _utc(time.time() - 60))
    assert settle_timestamp(src, dest, who="alice", tolerance=120) is None


@pytest.mark.parametrize("student_id, safe", [
    ("doejane", True), ("o.brien-2", True), ("..", False), (".", False), (".hidden", False),
    ("a/b", False), ("a\\b", False), ("a\x1b[2K", False), ("a\nb", False), ("", False),
    (None, False)])
def test_safe_student_id(student_id, safe):
    assert safe_student_id(student_id) is safe


class _App(Configurable):
    """What the collector reads of nbgrader's ZipCollectApp."""

    def __init__(self, root: Path, **kwargs):
        super().__init__(**kwargs)
        self.extracted_directory = str(root)
        self.coursedir = type("CourseDir", (), {"db_url": f"sqlite:///{root}/none.db",
                                                "course_id": "c", "assignment_id": "attention"})

    def _format_collect_path(self, step: str) -> str:
        return step


def _collect_all(root: Path) -> dict[str, dict | None]:
    collector = CanvasCollector(parent=_App(root), named_regexp=_collector_regexp())
    return {str(p.relative_to(root)): collector.collect(str(p))
            for p in sorted(root.rglob("*.ipynb"))}


def test_the_collector_keeps_the_latest_file_and_trusts_only_the_platforms_names(tmp_path,
                                                                                 caplog):
    root = tmp_path / "extracted"
    (root / "dl" / "mallory_48299_1190062_work").mkdir(parents=True)
    for name in ("doejane_48213_1190044_attention.ipynb",
                 "mallory_48299_1190060_attention.ipynb",
                 "mallory_48299_1190061_attention-2.ipynb",
                 "mallory_48299_1190063_attention-1.ipynb",
                 "doejohn_48300_1190050_attention-1.ipynb",
                 "doejohn_48300_1190070_attention.ipynb",
                 "mallory_48299_1190062_work.zip",
                 "mallory_48299_1190062_work/smithjohn_1_2_attention.ipynb",
                 "mallory_48299_1190062_work/.._1_2_attention.ipynb"):
        (root / "dl" / name).write_text(name)
    (root / "dl" / ".._1_3_attention.ipynb").write_text("no id")
    found = _collect_all(root)
    assert found == {
        "dl/.._1_3_attention.ipynb": None,
        "dl/doejane_48213_1190044_attention.ipynb":
            {"student_id": "doejane", "file_id": "attention"},
        # the newest attempt is the highest attachment id, whatever -N says: an upload
        # whose name repeats an earlier one gets -1, and a later one may have no suffix
        "dl/doejohn_48300_1190050_attention-1.ipynb": None,
        "dl/doejohn_48300_1190070_attention.ipynb":
            {"student_id": "doejohn", "file_id": "attention"},
        "dl/mallory_48299_1190060_attention.ipynb": None,
        "dl/mallory_48299_1190061_attention-2.ipynb": None,
        "dl/mallory_48299_1190062_work/.._1_2_attention.ipynb": None,
        "dl/mallory_48299_1190062_work/smithjohn_1_2_attention.ipynb": None,
        "dl/mallory_48299_1190063_attention-1.ipynb":
            {"student_id": "mallory", "file_id": "attention"},
    }
    skipped = [r.getMessage() for r in caplog.records if "older attempt of doejohn" in
               r.getMessage()]
    assert len(skipped) == 1 and "1190050" in skipped[0] and "kept" in skipped[0] \
        and "1190070" in skipped[0] and "attachment id" in skipped[0], skipped


@pytest.mark.slow  # runs nbgrader zip_collect
def test_a_late_file_is_stamped_and_the_extractor_leaves_students_archives_packed(tmp_path):
    archive, extracted = tmp_path / "archive", tmp_path / "extracted"
    archive.mkdir()
    extracted.mkdir()
    with zipfile.ZipFile(archive / "submissions.zip", "w") as zf:
        zf.writestr("smithjohn_LATE_48214_1190051_attention.ipynb", b"{}")
        zf.writestr("mallory_48299_1190060_notes.gz", b"not a tarball")
    app = _App(extracted)
    PlatformExtractor(parent=app).extract(str(archive), str(extracted))
    assert sorted(p.name for p in (extracted / "submissions").iterdir()) == \
        ["mallory_48299_1190060_notes.gz", "smithjohn_LATE_48214_1190051_attention.ipynb"]
    found = _collect_all(extracted)
    info = found["submissions/smithjohn_LATE_48214_1190051_attention.ipynb"]
    assert info["student_id"] == "smithjohn" and info["timestamp"].endswith(" UTC")


def test_a_late_file_is_stamped_one_second_after_the_gradebooks_due_date(tmp_path,
                                                                         new_gradebooks):
    import datetime

    from nbgrader.api import Gradebook
    from nbgrader.utils import parse_utc

    root = tmp_path / "extracted"
    root.mkdir()
    (root / "smithjohn_LATE_48214_1190051_attention.ipynb").write_text("{}")
    (root / "doejane_48213_1190044_attention.ipynb").write_text("{}")
    app = _App(root)
    app.coursedir.db_url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(app.coursedir.db_url, "c") as gradebook:
        gradebook.add_assignment("attention", duedate="2026-03-14 17:00:00 UTC")
    collector = CanvasCollector(parent=app, named_regexp=_collector_regexp())
    late = collector.collect(str(root / "smithjohn_LATE_48214_1190051_attention.ipynb"))
    assert parse_utc(late["timestamp"]) == datetime.datetime(2026, 3, 14, 17, 0, 1)
    on_time = collector.collect(str(root / "doejane_48213_1190044_attention.ipynb"))
    assert on_time == {"student_id": "doejane", "file_id": "attention"}

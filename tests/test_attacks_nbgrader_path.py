"""nbgrader's grading path against a student who writes their own notebook to get past
its limits or into the pages that show it (the autograded notebook in the formgrader, the
feedback page):

- the output budget of ``JailedExecute`` counts every byte the kernel sends, whatever the
  message's kind (a display's metadata, an error's message and traceback), at the socket
  before the grader reads it, and bounds the number of outputs; a kernel that floods past
  it is stopped, and the classmate graded next is graded as usual;
- outputs' and cells' metadata, execution counts, attachments: the student data nbconvert's
  HTML templates write into tag attributes or read as a given type, cleaned
  (``feedback.clean_notebook``) when the autograded notebook is written and again for the
  feedback page, which is written whatever the metadata holds;
- the kit's ``[grading]`` note is the only cell that may call itself the note;
- a whole notebook's run has a wall-time limit (``c.JailedExecute.notebook_seconds``) past
  which only the assignment's solution and test cells run.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time

import nbformat
import pytest

from grader_tests import jail
from grader_tests.autograde import JailedExecute, NoteChosenNotebook
from grader_tests.feedback import (SanitizeStudentMarkdown, clean_notebook,
                                   clean_output_metadata, image_side)
from tests.helpers import ROOT, correct_notebook, kit_env


needs_jail = pytest.mark.skipif(jail.problem() is not None, reason=f"no jail: {jail.problem()}")


# --- without nbgrader: the cleaning, the counting, the note -------------------------------


def test_image_sizes_are_kept_only_as_positive_numbers_within_bounds():
    assert image_side(320) == 320 and image_side(12.5) == 12.5
    for bad in ("1 onerror=alert(1)", "320", True, 0, -4, float("nan"), 10_001, None, [3],
                {"a": 1}):
        assert image_side(bad) is None, bad
    meta = {"image/png": {"width": "1 onerror=x", "height": 200, "alt": "a"},
            "image/jpeg": "wide", "width": 50, "filenames": {"image/png": "javascript:x"},
            "isolated": True, "pad": "m" * 100}
    assert clean_output_metadata(meta) == {"width": 50, "image/png": {"height": 200}}
    assert clean_output_metadata("wide") == {} and clean_output_metadata(None) == {}


def _odd_notebook():
    """A notebook whose student data is every shape nbconvert's HTML template trips on."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"x": "<b>"}}
    code = nbformat.v4.new_code_cell("x = 1")
    code.execution_count = "<img src=x onerror=window.KIT_XSS_COUNT=1>"
    code.outputs = [
        nbformat.from_dict({"output_type": "display_data", "data": {"image/png": "AAAA"},
                            "metadata": {"image/png": {"width": "1 onerror=window.KIT_XSS=1",
                                                       "height": 2}}}),
        nbformat.from_dict({"output_type": "display_data", "data": {"image/jpeg": "AAAA"},
                            "metadata": {"image/jpeg": "wide", "width": [1]}}),
        nbformat.from_dict({"output_type": "execute_result", "data": {"text/plain": "1"},
                            "metadata": {}, "execution_count": "<script>"}),
        nbformat.from_dict({"output_type": "stream", "name": "x\" onload=\"y", "text": "t"}),
        nbformat.from_dict({"output_type": "nonsense", "data": {}}),
    ]
    markdown = nbformat.v4.new_markdown_cell("![a](attachment:missing.png) and "
                                             "![b](attachment:kept.png)")
    markdown.metadata = {"tags": 5, "transient": "x", "grading_note": "yes"}
    markdown.attachments = {"kept.png": {"image/png": "AAAA"}, "bad": "nope"}
    raw = nbformat.v4.new_raw_cell("<b>raw</b>")
    raw.metadata = {"raw_mimetype": 7}
    nb.cells = [code, markdown, raw]
    return nb


def test_a_page_is_written_whatever_the_student_data_holds():
    from nbconvert import HTMLExporter

    nb = _odd_notebook()
    with pytest.raises(Exception):  # as handed in, nbconvert cannot write its page
        HTMLExporter(template_name="classic", sanitize_html=True).from_notebook_node(
            nbformat.from_dict(json.loads(json.dumps(nb))))
    clean_notebook(nb)
    code, markdown, raw = nb.cells
    assert code.execution_count is None and "widgets" not in nb.metadata
    assert [o["output_type"] for o in code.outputs] == [
        "display_data", "display_data", "execute_result", "stream"]
    assert code.outputs[0].metadata == {"image/png": {"height": 2}}
    assert code.outputs[1].metadata == {}
    assert code.outputs[2].execution_count is None and code.outputs[3].name == "stdout"
    assert markdown.metadata == {} and raw.metadata == {}
    assert list(markdown.attachments) == ["kept.png"]
    assert "attachment-not-shown:missing.png" in markdown.source
    assert "attachment:kept.png" in markdown.source
    page, _ = HTMLExporter(template_name="classic", sanitize_html=True).from_notebook_node(nb)
    assert "KIT_XSS" not in page and "<script>\"" not in page
    assert 'height="2"' in page and "data:image/png;base64,AAAA" in page


def test_a_students_markdown_claiming_to_be_the_note_is_sanitised_in_the_feedback():
    from grader_tests.notebook_choice import NOTE_MARK

    nb = nbformat.v4.new_notebook()
    forged = nbformat.v4.new_markdown_cell("<script>window.KIT_XSS_NOTE=1</script>")
    forged.metadata["grading_note"] = True
    note = nbformat.v4.new_markdown_cell(f"{NOTE_MARK} graded &lt;x&gt;.ipynb, not "
                                         f"[y](JavaScript:alert(1)).ipynb")
    note.metadata["grading_note"] = True
    nb.cells = [note, forged]
    out, _ = SanitizeStudentMarkdown().preprocess(nb, {})
    assert out.cells[0].source == (f"{NOTE_MARK} graded &lt;x&gt;.ipynb, not "  # the kit's
                                   f"[y](blocked:alert(1)).ipynb")
    assert "<script" not in out.cells[1].source and "&lt;script&gt;" in out.cells[1].source
    first = nbformat.v4.new_markdown_cell(f"{NOTE_MARK} <img src=x onerror=y>")
    first.metadata["grading_note"] = True  # first, marked, but not the kit's escaped text
    nb.cells = [first]
    out, _ = SanitizeStudentMarkdown().preprocess(nb, {})
    assert "<img" not in out.cells[0].source


def test_only_the_kits_note_carries_grading_note_after_autograde(tmp_path):
    from grader_tests.notebook_choice import NOTE_MARK, stage_chosen_notebook

    nb = nbformat.v4.new_notebook()
    forged = nbformat.v4.new_markdown_cell("<script>x</script>")
    forged.metadata["grading_note"] = True
    nb.cells = [forged, nbformat.v4.new_code_cell("x = 1")]
    out, _ = NoteChosenNotebook().preprocess(nbformat.from_dict(json.loads(json.dumps(nb))),
                                             {"metadata": {"path": str(tmp_path)}})
    assert [c.metadata.get("grading_note") for c in out.cells] == [None, None]
    # with a note to give (two notebooks handed in), the kit's note alone is marked
    folder = tmp_path / "course" / "submitted" / "s" / "attention"
    folder.mkdir(parents=True)
    for name in ("attention.ipynb", "other.ipynb"):
        nbformat.write(nb, str(folder / name))
    stage_chosen_notebook(assignment="attention", student="s",
                          notebooks=[str(folder / "attention.ipynb"),
                                     str(folder / "other.ipynb")])
    out, _ = NoteChosenNotebook().preprocess(nbformat.from_dict(json.loads(json.dumps(nb))),
                                             {"metadata": {"path": str(folder)}})
    marked = [c for c in out.cells if c.metadata.get("grading_note")]
    assert len(marked) == 1 and marked[0] is out.cells[0]
    assert out.cells[0].source.startswith(NOTE_MARK)


# --- through nbgrader: autograde, then generate_feedback ---------------------------------


# ``course``: a course folder with `attention` released (tests/conftest.py).


def _class_with(course, name, files):
    """A fresh ``submitted/`` in ``course``: ``honest`` (a correct notebook) and ``name``
    (``files``: file name -> bytes)."""
    submitted = course / "submitted"
    if submitted.exists():
        shutil.rmtree(submitted)
    for stale in ("batch_log.jsonl", "summary.json"):
        if (course / stale).exists():
            (course / stale).unlink()
    correct = json.dumps(correct_notebook(course)).encode("utf-8")
    (submitted / "honest" / "attention").mkdir(parents=True)
    (submitted / "honest" / "attention" / "attention.ipynb").write_bytes(correct)
    folder = submitted / name / "attention"
    folder.mkdir(parents=True)
    for file_name, data in files.items():
        (folder / file_name).write_bytes(correct if data is None else data)




@pytest.mark.slow
@needs_jail
def test_output_past_the_budget_is_dropped_whatever_the_message_kind(course):
    """Attack 4 (module doc): displays carrying 12 MB of metadata and an error carrying a
    6 MB message pass ``JailedExecute``'s 4 MiB output budget uncounted."""
    import nbformat


    nb = correct_notebook(course)
    nb.cells.append(nbformat.v4.new_code_cell(
        "from IPython.display import display\n"
        "for i in range(12):\n"
        "    display({'text/plain': 'x'}, metadata={'pad': 'm' * 1_000_000}, raw=True)\n"))
    nb.cells.append(nbformat.v4.new_code_cell("raise ValueError('e' * 6_000_000)\n"))
    handed_in = nbformat.writes(nb).encode("utf-8")
    _class_with(course, "flood", {"attention.ipynb": handed_in})
    done = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", "attention",
                           "--create", "--force", "--student=flood"], cwd=course,
                          env=kit_env(), capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    written = (course / "autograded" / "flood" / "attention" / "attention.ipynb").stat().st_size
    budget = JailedExecute.output_bytes.default_value
    assert written < len(handed_in) + budget + 2**20, (
        f"the autograded notebook is {written / 2**20:.1f} MiB for a {len(handed_in) / 2**10:.0f}"
        f" kB notebook, past the {budget / 2**20:.0f} MiB output budget")


def _peak_rss_of(proc: subprocess.Popen, timeout: float) -> int:
    """The largest resident set (bytes) of ``proc`` (only that process, not its kernels or
    jails), sampled every 5 ms until it ends."""
    import psutil

    watched, peak = psutil.Process(proc.pid), 0
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            peak = max(peak, watched.memory_info().rss)
        except psutil.Error:
            break
        time.sleep(0.005)
    proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    return peak


@pytest.mark.slow
@needs_jail
def test_an_iopub_flood_stops_that_kernel_and_the_classmate_is_graded_as_usual(course):
    """The catalogue's IOPub flood (forty displays of 15 MB, each under ZeroMQ's per-part
    limit) in one student's notebook: nbgrader's autograde process stays under 400 MiB
    (it reached 1.5 GB when it received and decoded them all), the flooding cell says its
    kernel was stopped for sending past the budget (not that it ran out of time), the cells
    after it say why they were not run, its functions are graded in full, and the
    classmate graded after it (``honest`` sorts after ``flood``) gets 100 as usual."""
    from nbgrader.api import Gradebook

    from tests.catalogue.attacks import IOPUB_FLOOD

    nb = correct_notebook(course)
    nb.cells.insert(2, nbformat.v4.new_code_cell(IOPUB_FLOOD))
    nb.cells.insert(3, nbformat.v4.new_code_cell("print('after the flood')\n"))
    _class_with(course, "flood", {"attention.ipynb": nbformat.writes(nb).encode("utf-8")})
    proc = subprocess.Popen([sys.executable, "-m", "nbgrader", "autograde", "attention",
                             "--create", "--force"], cwd=course, env=kit_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    import threading

    errors: list[str] = []
    reader = threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True)
    reader.start()
    peak = _peak_rss_of(proc, timeout=1800)
    reader.join(10)
    assert proc.returncode == 0, "".join(errors)[-3000:]
    assert peak < 400 * 2**20, f"nbgrader's autograde peaked at {peak / 2**20:.0f} MiB"
    graded = nbformat.read(str(course / "autograded" / "flood" / "attention" /
                               "attention.ipynb"), 4)
    flood = next(c for c in graded.cells if "send_multipart" in c.source)
    assert [o.get("ename") for o in flood.outputs if o.get("output_type") == "error"] == [
        "OutputTooLarge"], flood.outputs
    assert "4 MiB" in flood.outputs[-1]["evalue"]
    after = next(c for c in graded.cells if c.source.startswith("print('after the flood"))
    assert "more than 4 MiB" in after.outputs[0]["text"] and \
        "ran out of time" not in after.outputs[0]["text"], after.outputs
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert float(gb.find_submission("attention", "flood").score) == 100.0
        assert float(gb.find_submission("attention", "honest").score) == 100.0
    honest = nbformat.read(str(course / "autograded" / "honest" / "attention" /
                                "attention.ipynb"), 4)
    assert not any(o.get("ename") == "OutputTooLarge" for c in honest.cells
                   for o in c.get("outputs", ())), "the classmate's kernel was stopped"


@pytest.mark.slow
@needs_jail
def test_image_metadata_carries_no_script_into_the_feedback_page(course):
    """Attack 5 (module doc): ``width`` / ``height`` of a PNG output's metadata become
    event-handler attributes of the ``<img>`` tag of the feedback page."""

    import nbformat

    nb = correct_notebook(course)
    nb.cells.append(nbformat.v4.new_code_cell(
        "from IPython.display import display\n"
        "display({'image/png': 'AAAA'}, metadata={'image/png': {\n"
        "    'width': '1 onerror=window.KIT_XSS_PNG=1',\n"
        "    'height': '2 onload=window.KIT_XSS_PNG=2'}}, raw=True)\n"))
    _class_with(course, "pic", {"attention.ipynb": nbformat.writes(nb).encode("utf-8")})
    for command in (["autograde", "attention", "--create", "--force", "--student=pic"],
                    ["generate_feedback", "attention", "--force", "--student=pic"]):
        done = subprocess.run([sys.executable, "-m", "nbgrader", *command], cwd=course,
                              env=kit_env(), capture_output=True, text=True, timeout=1800)
        assert done.returncode == 0, done.stderr[-3000:]
    page = (course / "feedback" / "pic" / "attention" / "attention.html").read_text(
        encoding="utf-8")
    handlers = re.findall(r"<img[^>]*\son(?:error|load)\s*=[^>]*>", page)
    assert handlers == [], handlers


@pytest.mark.slow
@needs_jail
def test_an_image_with_odd_metadata_still_gets_its_feedback_page(course):
    """Attack 6 (module doc): PNG output metadata that is a string instead of a dict makes
    ``generate_feedback`` fail for the student (and ``ci_grade`` call the kit broken)."""
    import nbformat

    nb = correct_notebook(course)
    nb.cells.append(nbformat.v4.new_code_cell(
        "from IPython.display import display\n"
        "display({'image/png': 'AAAA'}, metadata={'image/png': 'wide'}, raw=True)\n"))
    _class_with(course, "odd", {"attention.ipynb": nbformat.writes(nb).encode("utf-8")})
    done = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", "attention",
                           "--create", "--force", "--student=odd"], cwd=course,
                          env=kit_env(), capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_feedback", "attention",
                           "--force", "--student=odd"], cwd=course, env=kit_env(),
                          capture_output=True, text=True, timeout=1800)
    page = course / "feedback" / "odd" / "attention" / "attention.html"
    assert done.returncode == 0 and page.is_file(), (done.stdout + done.stderr)[-2000:]


@pytest.mark.slow
@needs_jail
def test_a_markdown_cell_calling_itself_the_note_is_shown_as_text(course):
    """Attack 7 (module doc): ``metadata.grading_note`` on a student's own markdown cell
    exempts it from the feedback page's sanitising."""

    import nbformat

    nb = correct_notebook(course)
    cell = nbformat.v4.new_markdown_cell("<script>window.KIT_XSS_NOTE=1</script>\n\n"
                                         "<img src=x onerror=\"window.KIT_XSS_NOTE=2\">")
    cell.metadata["grading_note"] = True
    nb.cells.insert(5, cell)
    _class_with(course, "claims", {"attention.ipynb": nbformat.writes(nb).encode("utf-8")})
    for command in (["autograde", "attention", "--create", "--force", "--student=claims"],
                    ["generate_feedback", "attention", "--force", "--student=claims"]):
        done = subprocess.run([sys.executable, "-m", "nbgrader", *command], cwd=course,
                              env=kit_env(), capture_output=True, text=True, timeout=1800)
        assert done.returncode == 0, done.stderr[-3000:]
    page = (course / "feedback" / "claims" / "attention" / "attention.html").read_text(
        encoding="utf-8")
    assert "KIT_XSS_NOTE" in page  # shown, as text
    live = re.findall(r"<script[^>]*>\s*window\.KIT_XSS_NOTE|<img[^>]*\sonerror=[^>]*>", page)
    assert live == [], live


@pytest.mark.slow
@needs_jail
def test_an_output_past_the_size_limit_is_refused_and_the_notebook_goes_on(course):
    """One display of 3 MB with a 2 MB limit per message part: the kernel sends a note of
    its size instead (the grader would drop it unread), the cell says so, the next cell
    runs, and the functions are graded in full."""
    nb = correct_notebook(course)
    nb.cells.insert(2, nbformat.v4.new_code_cell(
        "from IPython.display import display\n"
        "display({'text/plain': 'big' * 1_000_000}, raw=True)\n"))
    nb.cells.insert(3, nbformat.v4.new_code_cell("print('after the big one')\n"))
    _class_with(course, "big", {"attention.ipynb": nbformat.writes(nb).encode("utf-8")})
    done = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", "attention",
                           "--create", "--force", "--student=big",
                           "--JailedExecute.message_limit=2000000"], cwd=course,
                          env=kit_env(), capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    graded = nbformat.read(str(course / "autograded" / "big" / "attention" /
                               "attention.ipynb"), 4)
    assert "bigbig" not in nbformat.writes(graded)
    big = next(c for c in graded.cells if "'big' * 1_000_000" in c.source)
    shown = "".join(o.get("text", "") for o in big.outputs)
    assert "an output of 3000061 bytes was refused" in shown, big.outputs
    after = next(c for c in graded.cells if c.source.startswith("print('after"))
    assert after.outputs[0]["text"] == "after the big one\n", after.outputs
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert float(gb.find_submission("attention", "big").score) == 100.0


# --- 8. one notebook holding the class's autograde ---------------------------------------


def test_the_course_configures_a_limit_on_a_whole_notebooks_run():
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    limit = config.JailedExecute.notebook_seconds
    per_cell = config.Execute.timeout
    assert isinstance(limit, (int, float)) and per_cell <= limit <= 900, (limit, per_cell)


@pytest.mark.slow
@needs_jail
def test_one_notebook_cannot_hold_the_autograde_for_as_long_as_it_likes(course):
    """Cells that each sleep just under the cell time-out: past the notebook's limit
    (8 s here, on the command line) the rest of the notebook is not run, the graded
    functions are graded in full, and the feedback says why cells were not run."""
    nb = correct_notebook(course)
    for _ in range(10):
        nb.cells.insert(2, nbformat.v4.new_code_cell("import time\ntime.sleep(3)\n"))
    _class_with(course, "sleepy", {"attention.ipynb": nbformat.writes(nb).encode("utf-8")})
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", "attention",
                           "--create", "--force", "--student=sleepy",
                           "--JailedExecute.notebook_seconds=8"], cwd=course,
                          env=kit_env(), capture_output=True, text=True, timeout=1800)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    graded = nbformat.read(str(course / "autograded" / "sleepy" / "attention" /
                               "attention.ipynb"), 4)
    sleeping = [c for c in graded.cells if c.source.startswith("import time")]
    skipped = [c for c in sleeping
               if any("not run: the notebook's cells had run for more than 8 s"
                      in o.get("text", "") for o in c.outputs)]
    assert len(sleeping) == 10 and 5 <= len(skipped) <= 8, [c.outputs for c in sleeping]
    lesson = next(c for c in graded.cells
                  if c.metadata.get("nbgrader", {}).get("grade_id") == "lesson_scaling")
    assert "not run" in lesson.outputs[0]["text"]
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        score = float(gb.find_submission("attention", "sleepy").score)
    assert score == 100.0, (score, took)
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_feedback", "attention",
                           "--force", "--student=sleepy"], cwd=course, env=kit_env(),
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    page = (course / "feedback" / "sleepy" / "attention" / "attention.html").read_text(
        encoding="utf-8")
    assert "had run for more than 8 s in all" in page

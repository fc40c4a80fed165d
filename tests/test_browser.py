"""The student's path in a real browser: JupyterLab 4 with nbgrader's lab extension,
driven by Playwright in Debian's headless Chromium.

One test, in the order a student works: open ``release/attention/attention.ipynb`` (a
temporary copy) in ``jupyter lab``, *Run → Run All Cells*, see the first stub's visible
test fail with ``NotImplementedError``, run the visible test of a filled-in function
(``causal_mask``) and see its "visible checks passed" line, press nbgrader's *Validate*
button and read its verdict.

How ``causal_mask`` gets filled in: the reference body is written into the notebook
*file* before JupyterLab opens it (typing through the code editor, with its auto-indent
and bracket closing, is the fragile part of a browser test and tests nothing of ours).
Everything else goes through the page: menus, cells, the toolbar button, the dialog.

The release notebook stops at the first stub: JupyterLab's *Run All Cells* aborts the
cells queued behind a cell that raised, so after *Run All* only the setup cell, the
``softmax`` stub and its visible test (``NotImplementedError``) have run. The test then
selects the ``causal_mask`` cells and runs them with Shift+Enter, as a student does.

The class dashboard (``grader_tests/dashboard.py``) of a course nbgrader graded is opened
from disk too: every figure loads, each student's link opens their feedback page, a
hostile student id runs nothing.

Screenshots go to ``tmp_path / "screenshots"`` (printed; run pytest with ``-s`` to see
the path), or to ``$ATTENTION_KIT_SCREENSHOTS`` when that is set (CI uploads it).

Needs ``/usr/bin/chromium`` (``tools/ci_browser_setup.sh`` installs it) and the
``playwright`` package (pinned in pyproject.toml); skipped with the reason otherwise.
Nothing here downloads a browser. Deselect locally with ``-m "not browser"``.
"""

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import pytest

from grader_tests.config import nbgrader_env
from tests.helpers import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("browser")]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Every wait of this test is bounded by one of these (seconds).
SERVER_START = 60
PAGE_WAIT = 60
VALIDATE_WAIT = 180  # the Validate button executes the whole notebook on the server

NOTEBOOK = "attention.ipynb"
FILLED = "causal_mask"
FILLED_BODY = "    return np.tril(np.ones((T, T), dtype=bool))\n"
STUB = "softmax"  # the first stub of the notebook, left as released
# A trap: padding_mask off by one (the first pad token counts as real); its visible test
# fails, so Validate must list it by name with the visible test's message.
TRAPPED = "padding_mask"
TRAPPED_BODY = "    return np.arange(T)[None, :] <= np.asarray(lengths)[:, None]\n"

if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} not found (install Debian's chromium: tools/ci_browser_setup.sh)",
                allow_module_level=True)
sync_api = pytest.importorskip(
    "playwright.sync_api",
    reason="the playwright package is not installed (pip install -e . installs the pinned one)")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cell_index(nb, grade_id):
    """Index of the cell whose nbgrader grade id is ``grade_id``."""
    for i, cell in enumerate(nb.cells):
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            return i
    raise AssertionError(f"no cell {grade_id} in the release notebook")


def fill_in(nb, name, body):
    """Replace the ``raise NotImplementedError()`` stub of ``name``'s solution cell by
    ``body``, as a student would."""
    cell = nb.cells[cell_index(nb, f"{name}_solution")]
    stub = "    # YOUR CODE HERE\n    raise NotImplementedError()"
    assert stub in cell.source, f"{name}_solution is not a stub:\n{cell.source}"
    cell.source = cell.source.replace(stub, body.rstrip("\n"))


@pytest.fixture
def student_dir(tmp_path):
    """A student's copy of ``release/attention/`` with ``causal_mask`` filled in and
    ``padding_mask`` filled in wrong."""
    folder = tmp_path / "attention"
    shutil.copytree(ROOT / "release" / "attention", folder,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", ".hypothesis"))
    nb = nbformat.read(str(folder / NOTEBOOK), as_version=4)
    fill_in(nb, FILLED, FILLED_BODY)
    fill_in(nb, TRAPPED, TRAPPED_BODY)
    nbformat.write(nb, str(folder / NOTEBOOK))
    return folder


@pytest.fixture
def screenshots(tmp_path):
    folder = Path(os.environ.get("ATTENTION_KIT_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots: {folder}")
    return folder


@pytest.fixture
def lab(student_dir, tmp_path):
    """``jupyter lab`` on 127.0.0.1, a free port and a random token, serving
    ``student_dir``, with its own Jupyter config, data-free runtime and workspace folders
    (nothing of the user's ``~/.jupyter`` is read). Yields ``(base_url, token)``; the
    server is stopped (terminate, then kill) when the test ends, whatever happened."""
    port, token = free_port(), secrets.token_hex(16)
    env = nbgrader_env()
    for var, sub in (("JUPYTER_CONFIG_DIR", "jupyter_config"),
                     ("JUPYTER_RUNTIME_DIR", "jupyter_runtime"),
                     ("JUPYTERLAB_WORKSPACES_DIR", "jupyter_workspaces")):
        env[var] = str(tmp_path / sub)
        (tmp_path / sub).mkdir()
    env.pop("JUPYTER_TOKEN", None)
    log = (tmp_path / "jupyter_lab.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser",
         "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
         "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
         "--ServerApp.allow_root=True",  # CI containers run as root
         f"--ServerApp.root_dir={student_dir}",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        cwd=student_dir, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START
        while True:
            if server.poll() is not None:
                raise AssertionError(f"jupyter lab exited ({server.returncode}):\n"
                                     + (tmp_path / "jupyter_lab.log").read_text()[-3000:])
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5) as r:
                    json.load(r)
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                if time.monotonic() > deadline:
                    raise AssertionError(f"jupyter lab did not answer within {SERVER_START} s:\n"
                                         + (tmp_path / "jupyter_lab.log").read_text()[-3000:])
                time.sleep(0.5)
        yield base, token
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=20)
        log.close()


@pytest.fixture
def page(tmp_path):
    """A page of Debian's Chromium, headless, with a fresh profile; closed at the end."""
    with sync_api.sync_playwright() as p:
        # Playwright takes the fresh profile folder as user_data_dir (a persistent
        # context), not as a --user-data-dir argument.
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "chromium_profile"), executable_path=str(CHROMIUM),
            args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 1000})
        try:
            context.set_default_timeout(PAGE_WAIT * 1000)
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            with contextlib.suppress(Exception):
                context.close()


def run_cell(page, cells, index):
    """Select cell ``index`` (command mode) and run it with Shift+Enter."""
    cell = cells.nth(index)
    cell.scroll_into_view_if_needed()
    cell.locator(".jp-InputPrompt").first.click()
    page.keyboard.press("Escape")
    page.keyboard.press("Shift+Enter")


def test_student_runs_visible_tests_and_validates(lab, page, student_dir, screenshots):
    expect = sync_api.expect
    base, token = lab
    nb = nbformat.read(str(student_dir / NOTEBOOK), as_version=4)
    stub_test = cell_index(nb, f"{STUB}_visible_test")
    filled_solution = cell_index(nb, f"{FILLED}_solution")
    filled_test = cell_index(nb, f"{FILLED}_visible_test")

    page.goto(f"{base}/lab/tree/{NOTEBOOK}?token={token}")
    notebook = page.locator(".jp-NotebookPanel .jp-Notebook")
    expect(notebook).to_be_visible(timeout=PAGE_WAIT * 1000)
    cells = notebook.locator(".jp-Cell")
    expect(cells).to_have_count(len(nb.cells), timeout=PAGE_WAIT * 1000)
    # The kernel is up when the toolbar's kernel status says Idle.
    expect(page.locator(".jp-NotebookPanel .jp-Toolbar").get_by_text("Idle")
           .or_(page.locator(".jp-NotebookPanel [data-status='idle']")).first) \
        .to_be_attached(timeout=PAGE_WAIT * 1000)
    page.screenshot(path=str(screenshots / "01_opened.png"))

    # Run -> Run All Cells, from the menu bar.
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    stub_out = cells.nth(stub_test).locator(".jp-OutputArea")
    expect(stub_out).to_contain_text("NotImplementedError", timeout=PAGE_WAIT * 1000)
    cells.nth(stub_test).scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / "02_stub_not_implemented.png"))

    # The filled-in function and its visible test, Shift+Enter on each.
    run_cell(page, cells, filled_solution)
    run_cell(page, cells, filled_test)
    filled_out = cells.nth(filled_test).locator(".jp-OutputArea")
    expect(filled_out).to_contain_text(f"{FILLED}: visible checks passed",
                                       timeout=PAGE_WAIT * 1000)
    assert "Error" not in filled_out.inner_text()
    cells.nth(filled_test).scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / "03_filled_passes.png"))

    # nbgrader's Validate button (the @jupyter/nbgrader lab extension, in the notebook's
    # toolbar): it saves the notebook, the server executes the saved file, and a dialog
    # lists the test cells that failed. If JupyterLab asks whether to overwrite the file
    # on disk (its copy was written before the server started), the answer is Overwrite.
    validate = page.locator(".jp-NotebookPanel .jp-Toolbar").get_by_role("button",
                                                                         name="Validate")
    expect(validate).to_be_visible(timeout=PAGE_WAIT * 1000)
    validate.click()
    dialog = page.locator(".jp-Dialog")
    deadline = time.monotonic() + VALIDATE_WAIT
    while True:
        assert time.monotonic() < deadline, f"no validation verdict within {VALIDATE_WAIT} s"
        if dialog.count() and "File Changed" in dialog.first.inner_text():
            dialog.first.get_by_role("button", name="Overwrite").click()
        elif dialog.count() and "Validation" in dialog.first.inner_text():
            break
        page.wait_for_timeout(500)
    expect(dialog.first).to_contain_text("Validation Results", timeout=PAGE_WAIT * 1000)
    expect(dialog.first.locator(".validation-failed, .validation-success").first) \
        .to_be_attached(timeout=PAGE_WAIT * 1000)
    page.screenshot(path=str(screenshots / "04_validate_verdict.png"))
    verdict = dialog.first.inner_text()
    # causal_mask is right, padding_mask is a trap, the rest are stubs: Validate fails on
    # the stubs, names padding_mask with its visible test's message, and does not list
    # causal_mask.
    assert "The following cell failed" in verdict, verdict[:3000]
    assert f"{STUB} is still the stub" in verdict, verdict[:3000]
    assert f"the visible checks of {TRAPPED} fail" in verdict, verdict[:3000]
    assert "padding_mask([2, 0, 3], 3) should be" in verdict, verdict[:3000]
    assert f'before_grading("{FILLED}"' not in verdict, verdict[:3000]
    assert f'before_grading("{STUB}"' in verdict, verdict[:3000]
    assert "Success!" not in verdict


@pytest.fixture
def feedback_page(tmp_path):
    """The feedback of the example class's ``student_mask_after_softmax``, made the way an
    instructor makes it: a course with the kit's ``nbgrader_config.py``,
    ``generate_assignment``, ``autograde``, ``generate_feedback``."""
    course = tmp_path / "course"
    shutil.copytree(ROOT / "source" / "attention", course / "source" / "attention")
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    student = "student_mask_after_softmax"
    shutil.copytree(ROOT / "example" / "submitted" / student, course / "submitted" / student)
    env = nbgrader_env()
    for args in (["generate_assignment", "attention", "--force"],
                 ["autograde", "attention", "--create", "--force"],
                 ["generate_feedback", "attention", "--force"]):
        done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return course / "feedback" / student / "attention" / "attention.html"


def test_feedback_names_each_part_and_wraps_its_report_at_1280_pixels(feedback_page,
                                                                      screenshots):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(feedback_page.as_uri())
            toc = page.locator("#toc li a")
            labels = [toc.nth(i).inner_text().strip() for i in range(toc.count())]
            # every graded part by its name, in the notebook's order; no anonymous link
            assert labels[:2] == ["softmax", "causal_mask"], labels
            assert "scaled_dot_product_attention" in labels and "Test cell" not in labels
            report = page.locator(".output_area pre", has_text="[mask-after-softmax]").first
            report.scroll_into_view_if_needed()
            assert "Re-read trap 2" in report.inner_text()
            overflow = page.evaluate("""() => {
                const out = [];
                for (const pre of document.querySelectorAll('.output_area pre')) {
                    if (pre.scrollWidth > pre.clientWidth + 1) out.push(pre.innerText.slice(0, 80));
                    if (pre.getBoundingClientRect().right > window.innerWidth) out.push('right edge');
                }
                if (document.documentElement.scrollWidth > window.innerWidth) out.push('page');
                return out;
            }""")
            page.screenshot(path=str(screenshots / "05_feedback_1280.png"))
            assert overflow == [], overflow
        finally:
            browser.close()


# A student id that runs a script in any page that writes it unescaped.
HOSTILE_STUDENT = "<img src=x onerror=alert(1)>"


def test_dashboard_shows_every_figure_and_links_each_student(feedback_page, screenshots):
    """The class dashboard of the feedback fixture's course (one student autograded and
    given feedback by nbgrader, plus a student with a hostile id and grades in the
    gradebook only), written by ``python -m grader_tests dashboard`` and opened from disk:
    every figure loads, each student's link opens that student's feedback page, and no
    script runs."""
    import warnings

    from nbgrader.api import Gradebook

    from grader_tests.batch import alembic_on_path
    from grader_tests.core import POINTS, grade_id

    course = feedback_page.parents[3]
    alembic_on_path()
    with warnings.catch_warnings(), \
            Gradebook(f"sqlite:///{course / 'gradebook.db'}", "attention-kit") as gb:
        warnings.simplefilter("ignore")
        gb.add_student(HOSTILE_STUDENT)
        gb.add_submission("attention", HOSTILE_STUDENT)
        for name, points in POINTS.items():
            grade = gb.find_grade(grade_id(name), "attention", "attention", HOSTILE_STUDENT)
            grade.auto_score, grade.needs_manual_grade = points / 2, False
        gb.db.commit()
    done = subprocess.run([sys.executable, "-m", "grader_tests", "dashboard"], cwd=course,
                          env=nbgrader_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    dashboard = course / "dashboard" / "attention" / "index.html"
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            dialogs = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(dashboard.as_uri())
            page.wait_for_load_state("load")
            images = page.evaluate("""() => Array.from(document.images).map(i => ({
                alt: i.alt, complete: i.complete, width: i.naturalWidth,
                height: i.naturalHeight}))""")
            assert [i["alt"] for i in images] == ["Score distribution",
                                                  "Points per graded part",
                                                  "Students per fault id",
                                                  "Student x graded part"], images
            assert all(i["complete"] and i["width"] > 0 and i["height"] > 0
                       for i in images), images
            rows = page.locator("#student-table tbody tr")
            assert rows.count() == 2
            assert HOSTILE_STUDENT in rows.nth(0).inner_text()  # shown as text
            page.screenshot(path=str(screenshots / "06_dashboard.png"), full_page=True)
            links = page.evaluate("""() => Array.from(document.querySelectorAll('a.feedback'))
                .map(a => ({text: a.textContent, url: a.href}))""")
            assert [link["text"] for link in links] == ["student_mask_after_softmax"]
            for link in links:
                page.goto(link["url"])
                assert page.url == feedback_page.as_uri()
                sync_api.expect(page.locator("#toc li a").first).to_be_attached()
                assert "scaled_dot_product_attention" in page.locator("#toc").inner_text()
            assert dialogs == []
        finally:
            browser.close()

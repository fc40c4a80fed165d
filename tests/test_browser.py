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
hostile student id runs nothing. The feedback of one trap student of a course set to
Italian (``c.AttentionKit.language = "it"``) is opened the same way, its report in Italian.

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


def grade_course(course, students):
    """A course folder made the way an instructor makes one: the kit's
    ``nbgrader_config.py`` and ``source/attention/``, ``students`` (name -> the folder to copy
    into ``submitted/<name>/``), then nbgrader's ``generate_assignment``, ``autograde`` and
    ``generate_feedback``. Returns ``course``."""
    shutil.copytree(ROOT / "source" / "attention", course / "source" / "attention")
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    for name, folder in students.items():
        shutil.copytree(folder, course / "submitted" / name)
    env = nbgrader_env()
    for args in (["generate_assignment", "attention", "--force"],
                 ["autograde", "attention", "--create", "--force"],
                 ["generate_feedback", "attention", "--force"]):
        done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return course


@pytest.fixture(scope="module")
def feedback_page(tmp_path_factory):
    """The feedback of the example class's ``student_mask_after_softmax``, made the way an
    instructor makes it (``grade_course``)."""
    student = "student_mask_after_softmax"
    course = grade_course(tmp_path_factory.mktemp("graded") / "course",
                          {student: ROOT / "example" / "submitted" / student})
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


@pytest.fixture
def feedback_page_it(tmp_path):
    """The same student's feedback in a course whose ``c.AttentionKit.language`` is
    ``"it"``: the graders' reports in Italian."""
    from tests.helpers import graded_course

    student = "student_mask_after_softmax"
    course = graded_course(tmp_path, [student], language="it")
    return course / "feedback" / student / "attention" / "attention.html"


def test_italian_feedback_of_a_trap_student(feedback_page_it, screenshots):
    """One trap student's feedback in Italian, in Chromium at 1280 pixels: the trap's
    report in the course's language beside its fault id, wrapped inside the page."""
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(feedback_page_it.as_uri())
            report = page.locator(".output_area pre", has_text="[mask-after-softmax]").first
            report.scroll_into_view_if_needed()
            text = report.inner_text()
            assert "Rileggi la trappola 2 dell'introduzione (maschera applicata dopo la " \
                "softmax)." in text, text[:2000]
            assert "scaled_dot_product_attention: 7.20 / 12 punti" in text
            assert "Re-read trap" not in text and "points" not in text
            overflow = page.evaluate("""() => Array.from(
                document.querySelectorAll('.output_area pre'))
                .filter(pre => pre.scrollWidth > pre.clientWidth + 1
                               || pre.getBoundingClientRect().right > window.innerWidth)
                .map(pre => pre.innerText.slice(0, 80))""")
            page.screenshot(path=str(screenshots / "07_feedback_italian_1280.png"))
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


def offline_context(p, fetched, allow=("file:",)):
    """A Chromium browser and context (headless, Debian's binary) with the network cut:
    every request for a URL that does not start with one of ``allow`` is aborted, and every
    URL asked for is appended to ``fetched``."""
    browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    context = browser.new_context(viewport={"width": 1280, "height": 900})

    def route(request_route):
        fetched.append(request_route.request.url)
        if request_route.request.url.startswith(allow):
            request_route.continue_()
        else:
            request_route.abort()

    context.route("**/*", route)
    return browser, context


def test_feedback_renders_its_formulas_offline_wherever_it_is_opened(feedback_page, tmp_path,
                                                                     screenshots):
    """The page as a student gets it from ``nbgrader fetch_feedback`` (the file alone, in
    their own ``attention/feedback/<time>/``), opened with the network cut: nothing is
    fetched (no MathJax, no CDN), every formula of the markdown is MathML laid out by the
    browser (a fraction is ``display: block math`` with a height), and no ``$`` delimiter
    is left in the rendered text of any markdown cell."""
    fetched_copy = tmp_path / "student_home" / "attention" / "feedback" / \
        "2026-03-14 16:59:00.000000 UTC" / "attention.html"
    fetched_copy.parent.mkdir(parents=True)
    shutil.copy(feedback_page, fetched_copy)
    fetched = []
    with sync_api.sync_playwright() as p:
        browser, context = offline_context(p, fetched)
        try:
            page = context.new_page()
            page.goto(fetched_copy.as_uri())
            page.wait_for_load_state("load")
            found = page.evaluate("""() => {
                const cells = Array.from(document.querySelectorAll('.text_cell_render'));
                const maths = Array.from(document.querySelectorAll('math'));
                const frac = document.querySelector('math mfrac');
                return {
                    cells: cells.length,
                    dollars: cells.map(c => c.innerText).filter(t => t.includes('$'))
                                  .map(t => t.slice(0, 120)),
                    maths: maths.length,
                    mathml: maths.every(m => m.namespaceURI === 'http://www.w3.org/1998/Math/MathML'),
                    drawn: maths.filter(m => m.getBoundingClientRect().width > 0).length,
                    fracDisplay: getComputedStyle(frac).display,
                    fracHeight: frac.getBoundingClientRect().height,
                    scripts: document.scripts.length,
                };
            }""")
            block = page.locator("math[display=block]").nth(3)
            block.scroll_into_view_if_needed()
            page.screenshot(path=str(screenshots / "07_feedback_formulas_offline.png"))
        finally:
            browser.close()
    assert fetched == [fetched_copy.as_uri()], fetched
    assert found["cells"] > 20 and found["dollars"] == [], found
    assert found["maths"] > 100 and found["mathml"], found
    assert found["drawn"] == found["maths"], found
    assert found["fracDisplay"] == "block math" and found["fracHeight"] > 20, found
    assert found["scripts"] == 0, found


# A student's markup, each piece trying to run a script in the page that shows it: each
# appends its own mark to ``document.title`` (``|<mark>``) when it runs.
HOSTILE_MARKDOWN = """\
## My notes <script>document.title+='|script'</script>

<img src=x onerror="document.title+='|img'"> <svg onload="document.title+='|svg'"></svg>

<iframe srcdoc="<script>parent.document.title+='|srcdoc'</script>"></iframe>
<iframe src="javascript:parent.document.title+='|iframe'"></iframe>
<object data="javascript:document.title+='|object'"></object>

<details open ontoggle="document.title+='|details'"><summary>more</summary>hidden</details>

<math><mtext><img src=x onerror="document.title+='|mathimg'"></mtext></math>

[plain](javascript:document.title+='|link') [entity](&#106;avascript:document.title+='|entity')
[split](<java\tscript:document.title+='|tab'>) <a href="jAvAsCrIpT:document.title+='|a'">a</a>
[data](data:text/html,<script>document.title+='|data'</script>)

Formulas of mine: $\\href{javascript:document.title+='|href'}{x}$ and
$\\text{<img src=x onerror=document.title+='|tex'>}$ and $\\frac{1}{\\sqrt{d_k}}$.

<form action="javascript:document.title+='|form'"><button>send</button></form>
<meta http-equiv="refresh" content="0;url=javascript:document.title+='|meta'">
"""
HOSTILE_CODE = """\
from IPython.display import HTML, Javascript, Markdown, display
display(HTML("<img src=x onerror=\\"document.title+='|outhtml'\\">"))
display(Markdown("<img src=x onerror=\\"document.title+='|outmd'\\">"))
display(Javascript("document.title+='|outjs'"))
display({'image/svg+xml': "<svg onload=\\"document.title+='|outsvg'\\"></svg>"}, raw=True)
"""
# What a page may point at: its own file and anchors, the web, mail, an embedded image.
SAFE_URL_CHECK = """() => {
    const bad = [];
    for (const el of document.querySelectorAll('[href], [src], [action], [data], [formaction], [srcdoc]')) {
        if (el.hasAttribute('srcdoc')) { bad.push(el.outerHTML.slice(0, 120)); continue; }
        for (const name of ['href', 'src', 'action', 'data', 'formaction']) {
            const value = el.getAttribute(name);
            if (value === null) continue;
            let protocol;
            try { protocol = new URL(value, document.baseURI).protocol; } catch (e) { continue; }
            const image = el.tagName.toLowerCase() === 'img' && name === 'src';
            if (!['http:', 'https:', 'mailto:', 'file:'].includes(protocol) &&
                    !(image && protocol === 'data:'))
                bad.push(el.tagName + ' ' + name + '=' + value.slice(0, 80));
        }
    }
    return bad;
}"""


@pytest.fixture(scope="module")
def markup_course(tmp_path_factory):
    """A course whose one student, ``student_markup``, handed in the example class's correct
    notebook with a markdown cell of ``HOSTILE_MARKDOWN`` and a code cell of
    ``HOSTILE_CODE`` after its introduction, autograded and given feedback by nbgrader
    (``grade_course``)."""
    folder = tmp_path_factory.mktemp("markup") / "handed_in"
    shutil.copytree(ROOT / "example" / "submitted" / "student_correct", folder)
    notebook = folder / "attention" / NOTEBOOK
    nb = nbformat.read(str(notebook), as_version=4)
    nb.cells.insert(2, nbformat.v4.new_markdown_cell(HOSTILE_MARKDOWN))
    nb.cells.insert(3, nbformat.v4.new_code_cell(HOSTILE_CODE))
    nbformat.write(nb, str(notebook))
    return grade_course(folder.parent / "course", {"student_markup": folder})


def open_and_collect(page, url):
    """Open ``url`` in ``page``, give every handler a moment to fire, and return what ran:
    the marks added to the title, the dialogs, the unsafe URLs left in the page, and the
    rendered text of the student's markdown cell."""
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(url)
    page.wait_for_load_state("load")
    details = page.locator("details")
    if details.count():
        details.first.evaluate("d => { d.open = !d.open; d.open = !d.open; }")
    page.wait_for_timeout(1500)
    notes = page.locator(".text_cell_render", has_text="My notes")
    return {"title": page.title(), "dialogs": dialogs, "unsafe": page.evaluate(SAFE_URL_CHECK),
            "notes": notes.first.inner_text() if notes.count() else None,
            "maths": page.locator(".text_cell_render", has_text="My notes").locator("math").count()}


def test_a_students_markup_runs_nothing_in_the_feedback_page(markup_course, screenshots):
    """The feedback page of ``student_markup`` opened from disk: none of the student's
    markup ran (no mark in the title, no dialog), no link, frame or form of theirs points at
    a script, their words are shown (as text where they held a tag) and their own
    formula is drawn."""
    page_path = markup_course / "feedback" / "student_markup" / "attention" / "attention.html"
    fetched = []
    with sync_api.sync_playwright() as p:
        browser, context = offline_context(p, fetched)
        try:
            page = context.new_page()
            seen = open_and_collect(page, page_path.as_uri())
            page.locator(".text_cell_render", has_text="My notes").first \
                .scroll_into_view_if_needed()
            page.screenshot(path=str(screenshots / "08_feedback_student_markup.png"))
        finally:
            browser.close()
    assert "|" not in seen["title"] and seen["dialogs"] == [], seen
    assert seen["unsafe"] == [], seen
    assert seen["notes"] is not None and "<script>" in seen["notes"], seen  # shown as text
    assert seen["maths"] >= 1, seen
    assert fetched == [page_path.as_uri()], fetched


def test_a_students_markup_runs_nothing_in_formgrader(markup_course, tmp_path, screenshots):
    """The same submission in nbgrader's formgrader, served by a Jupyter server from the
    course folder (the instructor's view, where a script would act with the instructor's
    token): none of the student's markup ran, no unsafe URL is in the page, and the
    student's formula is MathML."""
    from nbgrader.api import Gradebook

    from grader_tests.batch import alembic_on_path

    alembic_on_path()
    with Gradebook(f"sqlite:///{markup_course / 'gradebook.db'}", "attention-kit") as gb:
        submission = gb.find_submission_notebook("attention", "attention", "student_markup").id
    port, token = free_port(), secrets.token_hex(16)
    env = nbgrader_env()
    for var, sub in (("JUPYTER_CONFIG_DIR", "jupyter_config"),
                     ("JUPYTER_RUNTIME_DIR", "jupyter_runtime")):
        env[var] = str(tmp_path / sub)
        (tmp_path / sub).mkdir()
    env.pop("JUPYTER_TOKEN", None)
    log_path = tmp_path / "jupyter_server.log"
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "jupyter_server", "--no-browser",
             "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
             "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
             "--ServerApp.allow_root=True", f"--ServerApp.root_dir={markup_course}"],
            cwd=markup_course, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            base = f"http://127.0.0.1:{port}"
            url = f"{base}/formgrader/submissions/{submission}?token={token}"
            deadline = time.monotonic() + SERVER_START
            while True:
                assert server.poll() is None, log_path.read_text()[-3000:]
                try:
                    with urllib.request.urlopen(url, timeout=10) as r:
                        assert r.status == 200
                    break
                except (urllib.error.URLError, ConnectionError, OSError):
                    assert time.monotonic() < deadline, log_path.read_text()[-3000:]
                    time.sleep(0.5)
            with sync_api.sync_playwright() as p:
                browser, context = offline_context(p, [], allow=(base + "/",))
                try:
                    page = context.new_page()
                    seen = open_and_collect(page, url)
                    page.locator(".text_cell_render", has_text="My notes").first \
                        .scroll_into_view_if_needed()
                    page.screenshot(path=str(screenshots / "09_formgrader_student_markup.png"))
                finally:
                    browser.close()
        finally:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=20)
    assert "|" not in seen["title"] and seen["dialogs"] == [], seen
    assert seen["unsafe"] == [], seen
    assert seen["notes"] is not None and "My notes" in seen["notes"], seen
    assert seen["maths"] >= 1, seen

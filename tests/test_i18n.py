"""The messages the kit's code writes, in the course's language (grader_tests/i18n.py).

The Italian catalogue is complete and current (every msgid the code marks is in it,
translated, not fuzzy, with the same placeholders, and the committed ``.mo`` is the
``.po`` compiled); the course's setting chooses the language; grading a buggy submission
in Italian gives the same points, checks and fault ids as in English, and its report holds
no English sentence of the catalogue.
"""

import gettext
import re
import string
from pathlib import Path

import pytest

from grader_tests import i18n
from grader_tests.faults import FAULTS, TRAPS, explain, trap_line
from grader_tests.report import format_result
from grader_tests.runner import grade_namespace
from tests.catalogue import build_namespace
from tests.catalogue.buggy import BUGS
from authoring import i18n as catalogues

BUG = next(b for b in BUGS if b.id == "sdpa-mask-after-softmax")


def test_italian_catalogue_is_complete_and_current():
    # untranslated, fuzzy, missing or stale msgids, placeholders, the .po's form, the .mo
    assert catalogues.problems("it") == []


def test_catalogue_holds_every_marked_message():
    marked = {m.id for m in catalogues.extract() if m.id}
    kept = {m.id for m in catalogues.read("it") if m.id}
    assert marked == kept
    # the graders' teaching text is marked: every fault's explanation and trap title
    assert set(FAULTS.values()) <= marked
    assert {title for _n, title in TRAPS.values()} <= marked
    assert "  FAIL  {check}  [{fault}]" in marked


# An Italian article, or a preposition joined to one, agrees with the word after it ("dei
# 7", "degli 8"; "di" + "il tuo notebook" is "del tuo notebook"), which a placeholder does
# not know: a translation puts no article and no "di" directly before a placeholder whose
# value may be a number or start with its own article.
ARTICLE_BEFORE_PLACEHOLDER = re.compile(
    r"\b(?:i|gli|dei|degli|delle|ai|agli|dai|dagli|sui|sugli|nei|negli)\s+\{(?!name\b)\w+"
    r"|\bdi\s+\{whose\b", re.IGNORECASE)


def test_no_italian_article_sits_before_a_number_or_a_phrase_with_its_own():
    found = []
    for message in catalogues.read("it"):
        texts = message.string if isinstance(message.string, tuple) else (message.string,)
        found += [text for text in texts if text and ARTICLE_BEFORE_PLACEHOLDER.search(text)]
    assert found == []
    assert ARTICLE_BEFORE_PLACEHOLDER.search("quanti dei {count} studenti")
    assert ARTICLE_BEFORE_PLACEHOLDER.search("le funzioni di {whose}")


def test_problems_names_an_untranslated_entry(tmp_path, monkeypatch):
    po = tmp_path / "it" / "LC_MESSAGES" / "attention_kit.po"
    po.parent.mkdir(parents=True)
    catalog = catalogues.read("it")
    msgid = "  PASS  {check}"
    catalog[msgid].string = ""
    po.write_bytes(catalogues.po_bytes(catalog))
    monkeypatch.setattr(catalogues, "po_path", lambda lang: po)
    assert catalogues.problems("it") == [f"it: untranslated: {msgid!r}"]
    catalog[msgid].string = "  OK  {controllo}"
    po.write_bytes(catalogues.po_bytes(catalog))
    assert catalogues.problems("it") == [
        f"it: placeholders ['controllo'] instead of ['check']: {msgid!r}"]


def test_course_language_is_the_setting(tmp_path):
    assert i18n.course_language(str(tmp_path)) == "en"  # no nbgrader_config.py
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\n")
    assert i18n.course_language(str(tmp_path)) == "en"  # no setting
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\nc.AttentionKit.language = 'it'\n")
    assert i18n.course_language(str(tmp_path)) == "it"
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\nc.AttentionKit.language = 'fr'\n")
    with pytest.raises(ValueError, match="'en', 'it'"):
        i18n.course_language(str(tmp_path))


def test_a_missing_catalogue_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setattr(i18n, "LOCALE_DIR", str(tmp_path))
    i18n.translation.cache_clear()
    try:
        with pytest.raises(FileNotFoundError):
            i18n.translation("it")
        assert isinstance(i18n.translation("en"), gettext.NullTranslations)
    finally:
        monkeypatch.undo()
        i18n.translation.cache_clear()


def test_language_is_scoped():
    assert i18n.current_language() == "en"
    with i18n.use_language("it"):
        assert i18n._("  PASS  {check}") == "  OK      {check}"
        assert i18n._("") == ""
        with i18n.use_language("en"):
            assert i18n._("  PASS  {check}") == "  PASS  {check}"
        assert i18n.current_language() == "it"
    assert i18n.current_language() == "en"
    assert trap_line("mask-after-softmax") == (
        "Re-read trap 2 of the introduction (mask applied after the softmax).")


def _traps_of_the_introduction(path: Path, heading: str) -> dict[int, str]:
    """The numbered list under ``### <heading>`` of a notebook's jupytext source: number ->
    the trap's text, with its LaTeX and code marks written plainly (``$1/\\sqrt{d_k}$`` as
    ``1/sqrt(d_k)``), lower-case."""
    text = path.read_text(encoding="utf-8")
    section = text.split(f"# ### {heading}\n", 1)[1].split("\n# ###", 1)[0]
    items = dict(re.findall(r"^# (\d+)\. (.+)$", section, flags=re.M))
    assert items, f"no list of traps under {heading} in {path}"

    def plain(item: str) -> str:
        item = re.sub(r"\\sqrt\{([^}]*)\}", r"sqrt(\1)", item)
        return re.sub(r"[$`\\]", "", item).lower()

    return {int(n): plain(item) for n, item in items.items()}


@pytest.mark.parametrize("language, notebook, heading", [
    ("en", "notebooks/attention.py", "The traps"),
    ("it", "notebooks/it/attention.py", "Le trappole"),
])
def test_each_faults_trap_is_the_one_the_introduction_lists(language, notebook, heading):
    """The number and title the feedback gives a fault's trap (``faults.TRAPS``) are those
    of the notebook's own list of traps, read from the document, in both languages: a trap
    renumbered or retitled in the introduction fails here until the graders follow."""
    from tests.helpers import ROOT

    listed = _traps_of_the_introduction(ROOT / notebook, heading)
    assert sorted(listed) == list(range(1, len(listed) + 1)) and len(listed) >= 6
    with i18n.use_language(language):
        for fault, (number, title) in TRAPS.items():
            assert number in listed, (fault, number)
            assert listed[number].startswith(i18n._(title).lower()), (fault, listed[number])
            assert f"trap {number} " in trap_line(fault) or \
                f"trappola {number} " in trap_line(fault)
    # the transposed causal mask (fault mask-wrong-axis) is what trap 5 names
    assert "transposed" in _traps_of_the_introduction(ROOT / "notebooks/attention.py",
                                                       "The traps")[TRAPS["mask-wrong-axis"][0]]


def test_every_fault_is_explained_in_italian():
    with i18n.use_language("it"):
        italian = {fault: explain(fault) for fault in FAULTS}
        traps = {fault: trap_line(fault) for fault in TRAPS}
    for fault, text in italian.items():
        assert text and text != FAULTS[fault], fault
    assert traps["mask-after-softmax"] == (
        "Rileggi la trappola 2 dell'introduzione (maschera applicata dopo la softmax).")
    assert explain("no-such-fault") == "a fault id the kit does not know"


# Three words in a row: prose, not code (``padding_mask(lengths=``, ``batch, bytes``).
PROSE = re.compile(r"[A-Za-z]{2,} [A-Za-z]{2,} [A-Za-z]{2,}")


def _english_fragments() -> set[str]:
    """The literal text of every msgid whose translation differs from it, cut at its
    placeholders, keeping the pieces that read as a sentence (three words in a row)."""
    fragments = set()
    for m in catalogues.read("it"):
        if not m.id or m.string == m.id:
            continue
        for msgid in (m.id if isinstance(m.id, tuple) else (m.id,)):  # plural forms
            for literal, _field, _spec, _conv in string.Formatter().parse(msgid):
                for piece in literal.split("\n"):
                    piece = piece.strip(" .,;:()")
                    if PROSE.search(piece):
                        fragments.add(piece)
    return fragments


def _wordy(line: str) -> bool:
    return len(re.findall(r"[A-Za-z]{2,}", line)) >= 4


@pytest.fixture(scope="module")
def both_languages():
    namespace = build_namespace([BUG.source], BUG.id)
    reports = {}
    for lang in ("en", "it"):
        with i18n.use_language(lang):
            results = grade_namespace(namespace, assignment="attention")
            reports[lang] = (results, "\n".join(format_result(r) for r in results.values()))
    return reports


def test_italian_grading_gives_the_same_points_and_faults(both_languages):
    english, _ = both_languages["en"]
    italian, _ = both_languages["it"]
    assert list(english) == list(italian)
    for name in english:
        e, i = english[name], italian[name]
        assert (e.score, e.max_score) == (i.score, i.max_score), name
        assert [(c.name, c.passed, c.fault) for c in e.checks] == \
            [(c.name, c.passed, c.fault) for c in i.checks], name
    sdpa = italian[BUG.function]
    assert sdpa.faults == ["mask-after-softmax"]
    assert (sdpa.score, sdpa.max_score) == (pytest.approx(7.2), 12.0)
    assert sum(r.score for r in italian.values()) == sum(r.score for r in english.values())


def test_italian_report_holds_no_english_sentence(both_languages):
    _, english_text = both_languages["en"]
    _, italian_text = both_languages["it"]
    found = sorted(f for f in _english_fragments() if f in italian_text)
    assert found == []
    # nor a line of the English report that reads as text (marked or not)
    english_lines = {line.strip() for line in english_text.splitlines() if _wordy(line)}
    same = [line for line in italian_text.splitlines() if line.strip() in english_lines]
    assert same == []
    # the Italian report is the Italian catalogue's text
    assert "Rileggi la trappola 2 dell'introduzione (maschera applicata dopo la softmax)." \
        in italian_text
    assert "[mask-after-softmax]" in italian_text
    assert "punti" in italian_text and "points" not in italian_text


def test_english_report_is_the_code_text(both_languages):
    _, english_text = both_languages["en"]
    assert "Re-read trap 2 of the introduction (mask applied after the softmax)." in english_text
    assert "scaled_dot_product_attention: 7.20 / 12 points (6 of 10 checks passed)" in \
        english_text
    assert not any(f in english_text for f in ("Rileggi", "punti", "Causa probabile"))


def test_unlock_report_in_italian():
    from types import SimpleNamespace

    from grader_tests import unlock

    cells = sorted(unlock.HIDDEN_CHECKS)

    def submission(pending):
        grades = [SimpleNamespace(name=c, needs_manual_grade=True) for c in cells[:pending]]
        return SimpleNamespace(notebooks=[SimpleNamespace(name="attention", flagged=False,
                                                          grades=grades)])

    english = unlock.review_pending(submission(1))
    assert english == f"1 hidden-check cell needs a manual grade ({cells[0]})"
    with i18n.use_language("it"):
        assert unlock.review_pending(submission(1)) == (
            f"1 cella di controlli nascosti richiede un voto manuale ({cells[0]})")
        assert unlock.review_pending(submission(5)).startswith(
            "5 celle di controlli nascosti richiedono un voto manuale (")
        assert unlock.review_pending(submission(5)).endswith(" e altre 2)")
        assert unlock.describe_threshold(("percent", 95.0), 100.0) == "95 % di 100 = 95.00 punti"
    assert unlock.describe_threshold(("percent", 95.0), 100.0) == "95 % of 100 = 95.00 points"


def test_unlock_command_speaks_the_course_language(tmp_path, capsys):
    from grader_tests import unlock

    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\nc.AttentionKit.language = 'it'\n"
        "c.CourseDirectory.course_id = 'attention-kit'\n")
    status = unlock.main(["--root", str(tmp_path), "--db", "sqlite:///" + str(
        tmp_path / "gradebook.db"), "--no-exchange", "--release", str(tmp_path)])
    assert status == 2
    assert capsys.readouterr().err.strip() == (
        f"{tmp_path} non contiene training.ipynb: esegui prima "
        f"`nbgrader generate_assignment training`")
    assert i18n.current_language() == "en"


@pytest.mark.slow
def test_nbgrader_grades_an_italian_course_like_an_english_one(tmp_path):
    """nbgrader's own autograde and generate_feedback in a course whose setting is "it",
    its source made as tools.build_all makes it (the notebook from the Italian document, the
    kernel catalogue beside it), the example class's English-built submissions graded:
    the points and fault ids of example/EXPECTED.json, the hidden cells' reports and the
    visible tests' messages in Italian, none of the catalogue's English sentences in them;
    a catalogue the student put in their submission is replaced by the course's."""
    import json

    import nbformat
    from nbgrader.api import Gradebook

    from grader_tests.notebook import RESULT_MIME
    from tests.helpers import ROOT, graded_course
    from authoring import build_notebooks
    from authoring.build_all import kernel_files
    from authoring.notebook_cells import KERNEL_CATALOGUE

    student = "student_mask_after_softmax"
    expected = json.loads((Path(ROOT) / "example" / "EXPECTED.json").read_text())[
        "students"][student]
    catalogue = kernel_files("it")[KERNEL_CATALOGUE]
    assert catalogue
    course = graded_course(tmp_path, [student], language="it",
                           beside_source={"attention.ipynb": build_notebooks.render("it"),
                                          KERNEL_CATALOGUE: catalogue},
                           submitted_extra={KERNEL_CATALOGUE: b"not a catalogue"})
    assert (course / "release" / "attention" / KERNEL_CATALOGUE).read_bytes() == catalogue
    assert (course / "autograded" / student / "attention" / KERNEL_CATALOGUE
            ).read_bytes() == catalogue
    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        notebook = gb.find_submission_notebook("attention", "attention", student)
        scores = {g.name[: -len("_hidden_checks")]: g.score for g in notebook.grades
                  if g.name.endswith("_hidden_checks")}
        assert gb.find_submission("attention", student).score == pytest.approx(
            expected["score"])
    assert scores == pytest.approx(expected["functions"])
    autograded = nbformat.read(str(course / "autograded" / student / "attention" /
                                   "attention.ipynb"), as_version=4)
    reports, faults = [], {}
    for cell in autograded.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                reports.append(out["text"])
            result = out.get("data", {}).get(RESULT_MIME)
            if result:
                failed = {c["fault"] for c in result["checks"] if not c["passed"]}
                if failed:
                    name = cell.metadata["nbgrader"]["grade_id"][: -len("_hidden_checks")]
                    faults[name] = sorted(failed)
    assert faults == expected["faults"]
    text = "\n".join(reports)
    assert "Rileggi la trappola 2 dell'introduzione (maschera applicata dopo la softmax)." \
        in text
    assert "scaled_dot_product_attention: 7.20 / 12 punti (6 controlli superati su 10)" in text
    assert sorted(f for f in _english_fragments() if f in text) == []
    page = (course / "feedback" / student / "attention" / "attention.html").read_text()
    assert "maschera applicata dopo la softmax" in page and "Re-read trap" not in page
    # the page's own labels, nbgrader's words in its template, are Italian too
    assert "attention (Punteggio: " in page and "Cella valutata: <code>" in page
    assert "Risposta dello studente" in page and "(Inizio)" in page
    assert not [w for w in ("Score:", "Grade cell", "Student's answer", "Student&#39;s answer",
                            "(Top)", "Comments:") if w in page]


def test_a_message_marked_inside_an_fstring_is_reported(tmp_path, monkeypatch):
    module = tmp_path / "module.py"
    module.write_text('from grader_tests.i18n import _\n\nx = 3\nprint(f"{_(\'hidden\')}: {x}")\n')
    monkeypatch.setattr(catalogues, "ROOT", tmp_path)
    monkeypatch.setattr(catalogues, "source_files", lambda: [module])
    assert catalogues.hidden_marks() == [
        "module.py:4: _() inside an f-string is not extracted"]
    assert [m.id for m in catalogues.extract() if m.id] == []


def _class_results():
    from grader_tests import dashboard

    parts = {"softmax": 10.0, "scaled_dot_product_attention": 12.0}
    students = [
        dashboard.StudentResult("ada", 22.0, 22.0, {
            "softmax": dashboard.Part("softmax", 10.0, 10.0, []),
            "scaled_dot_product_attention": dashboard.Part(
                "scaled_dot_product_attention", 12.0, 12.0, [])}, source="autograded"),
        dashboard.StudentResult("bob", 17.2, 22.0, {
            "softmax": dashboard.Part("softmax", 10.0, 10.0, []),
            "scaled_dot_product_attention": dashboard.Part(
                "scaled_dot_product_attention", 7.2, 12.0, ["mask-after-softmax"])},
            flagged=True, source=None),
    ]
    return dashboard.ClassResults("attention-kit", "attention", parts, students, ["cy"])


def test_dashboard_page_in_italian(tmp_path):
    from grader_tests import dashboard

    data = _class_results()
    svgs = {stem: b"<svg/>" for stem in dashboard.FIGURES}
    english = dashboard.page_html(data, svgs, tmp_path, "2026-01-01 00:00 UTC")
    with i18n.use_language("it"):
        italian = dashboard.page_html(data, svgs, tmp_path, "2026-01-01 00:00 UTC")
        figure = dashboard.figure_faults(data)
        texts = [t.get_text() for t in figure.axes[0].texts] + [figure.axes[0].get_title()]
    assert '<html lang="en">' in english and '<html lang="it">' in italian
    assert "<h1>attention: cruscotto della classe</h1>" in italian
    assert "<th>identificativo di errore</th>" in italian
    assert dashboard.html.escape(explain("mask-after-softmax")) in english
    with i18n.use_language("it"):
        meaning = dashboard.html.escape(explain("mask-after-softmax"))
    assert meaning in italian and "softmax" in meaning
    # the same table, the same numbers and fault ids
    for needle in ("<code>mask-after-softmax</code>", "17.20 / 22", "7.20/12", "ada", "cy"):
        assert needle in english and needle in italian
    found = sorted(f for f in _english_fragments() if dashboard.html.escape(f) in italian)
    assert found == []
    assert "Studenti per identificativo di errore" in texts
    assert any(t.startswith("la maschera azzera i pesi dopo la softmax") for t in texts)


def test_dashboard_figures_print_scores_with_two_decimals():
    """The figures write each score as the page does, with 2 decimals: the histogram's
    mean and median (19.60 of 22), the heat map's cells (7.20, 10.00)."""
    from grader_tests import dashboard

    data = _class_results()
    scores = dashboard.figure_scores(data)
    labels = scores.axes[0].get_legend_handles_labels()[1]
    assert labels == ["mean 19.60", "median 19.60"]
    heatmap = dashboard.figure_heatmap(data)
    cells = sorted(t.get_text() for t in heatmap.axes[0].texts)
    assert cells == ["10.00", "10.00", "12.00", "7.20"]


def _one_bug_per_fault():
    seen = {}
    for bug in BUGS:
        if bug.gap is None:
            seen.setdefault(bug.fault, bug)
    return sorted(seen.values(), key=lambda b: b.fault)


@pytest.mark.parametrize("bug", _one_bug_per_fault(), ids=lambda b: b.id)
def test_every_fault_reads_in_italian_with_the_english_verdict(bug):
    """One catalogue entry per fault id, its function graded in both languages: the same
    verdict check by check, and the Italian messages free of the catalogue's English."""
    from grader_tests.runner import grade_function

    namespace = build_namespace([bug.source], bug.id)
    english = grade_function(bug.function, namespace)
    with i18n.use_language("it"):
        italian = grade_function(bug.function, namespace)
        text = format_result(italian)
    assert (italian.score, italian.max_score) == (english.score, english.max_score)
    assert [(c.name, c.passed, c.fault) for c in italian.checks] == \
        [(c.name, c.passed, c.fault) for c in english.checks]
    assert bug.fault in italian.faults
    assert sorted(f for f in _english_fragments() if f in text) == []


def test_a_batch_job_grades_in_the_language_it_is_handed():
    """The unit a batch runs in each grading process (local pool or Dask worker), in the
    jail: the language comes as an argument, never from a file of the submission."""
    from tests.helpers import ROOT
    from grader_tests.job import grade_job

    path = str(Path(ROOT) / "example" / "submitted" / "student_mask_after_softmax" /
               "attention" / "attention.ipynb")
    record = grade_job("student_mask_after_softmax", path, "attention", language="it")
    sdpa = record["report"]["functions"]["scaled_dot_product_attention"]
    failed = [c for c in sdpa["checks"] if not c["passed"]]
    assert {c["fault"] for c in failed} == {"mask-after-softmax"}
    assert sdpa["score"] == pytest.approx(7.2)
    assert all("Causa probabile" in c["message"] for c in failed)
    # check names stay the code's (English) text in the record, as in an English course
    assert failed[0]["name"] == "causal mask: masked weights are exactly 0 and rows still sum to 1"
    assert i18n.current_language() == "en"


@pytest.mark.slow  # runs the demo's command
def test_the_demo_reports_its_progress_in_the_course_language(tmp_path):
    """The demo's progress lines come from the catalogue, in the language of the course it
    runs: an Italian course without a source notebook, where nbgrader cannot generate the
    release, is told so in Italian, and no line is left in English."""
    import subprocess
    import sys

    from grader_tests.config import nbgrader_env

    with i18n.use_language("it"):  # a line the demo prints per student, from the catalogue
        assert i18n._("autograded, feedback written") == "valutato, feedback scritto"
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\nc.AttentionKit.language = 'it'\n"
        "c.CourseDirectory.course_id = 'another-course'\n")
    done = subprocess.run([sys.executable, "-m", "tools.demo", "--root", str(tmp_path)],
                          cwd=Path(__file__).resolve().parents[1], env=nbgrader_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=300, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith(
        f"demo: cartella del corso {tmp_path}\n"
        f"demo: {tmp_path} non è la classe d'esempio (attention-kit-example): non si "
        "cancella nulla, nbgrader rivaluta sul posto\n"), done.stdout
    assert done.stderr.strip().endswith(
        "demo: nbgrader generate_assignment è fallito (uscita 1)"), done.stderr
    for english in ("course directory", "is not the example class", "failed (exit"):
        assert english not in done.stdout + done.stderr

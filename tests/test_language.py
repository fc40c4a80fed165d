"""The notebooks in the course's language (``c.AttentionKit.language``, ``authoring/notebook_language.py``).

* each Italian document (``notebooks/it/``) has the English document's cells: the same ids,
  types, nbgrader metadata and tags, placeholders, and the same code in every solution,
  visible-test and graded cell;
* a translation that loses, adds or reorders a cell, or changes what is graded, stops the
  check with a message naming the cell; a translated comment, docstring or printed label
  does not;
* built in Italian, each notebook keeps every cell id, grade id and point of the English
  one, and no sentence of the English markdown is left in it: every markdown cell is
  translated, and the lesson is named and linked at the top; the code cells the student is
  handed (the stubs, with their docstrings, the visible tests and the graded cells) hold
  no English in their comments and docstrings, found by English function words;
* the setting: English by default, ``"it"`` read from the course's ``nbgrader_config.py``,
  anything else an error that stops ``python -m tools.build_all`` before it writes;
* (slow) in a copy of the kit whose course is Italian, both assignments generate, nbgrader
  validates each source and fails every test of each release, and the example class's
  ``student_correct`` and ``student_mask_after_softmax``, handed in on the Italian release,
  get the scores and fault ids of ``example/EXPECTED.json``.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import nbformat
import pytest

from authoring import build_notebooks, build_training_notebook, make_submissions
from authoring.i18n import KERNEL_KEYWORDS, KERNEL_SOURCES, extract, kernel_catalogue
from authoring.notebook_cells import KERNEL_CATALOGUE, translated_document, validate_helpers
from authoring.notebook_language import (check_same_structure, code_shape, course_language,
                                         translated_code,
                                         document_path, points_label, with_docstring)

ROOT = Path(__file__).resolve().parent.parent
BUILDERS = {"attention": build_notebooks, "training": build_training_notebook}
LESSON_LINK = "[federicocalo.dev](https://federicocalo.dev)"
# The lesson's title, the same (Italian) in both languages: not an English sentence.
LESSON_FULL_TITLE = ("*L'attenzione, derivata per intero: query, chiave, valore e il blocco "
                     "Transformer scritto da zero*")
# English words that no Italian sentence of the notebooks uses: a markdown cell holding one
# outside code, math and names has English left in it.
ENGLISH_WORDS = ("the", "which", "with", "when", "your", "this", "that", "does", "every")


# English function words, none of them an Italian word: a comment or docstring that holds one
# (outside code spans) is English left in an Italian notebook, whatever its sentence.
ENGLISH_FUNCTION_WORDS = frozenset((
    "the", "of", "and", "is", "are", "to", "with", "which", "when", "your", "this", "that",
    "does", "every", "from", "into", "its", "be", "has", "have", "must", "should", "than",
    "then", "each", "by", "on", "or", "at", "it", "if", "not", "for", "an", "args",
    "returns", "raises"))
# The comment of the stub nbgrader writes in place of a solution region, by language
# (``LanguageClearSolutions``; nbgrader's own in English).
CODE_STUB = {"en": "# YOUR CODE HERE", "it": "# IL TUO CODICE QUI"}


def nbgrader_of(cell) -> dict:
    return dict(cell.metadata.get("nbgrader", {}))


def sentences(markdown: str) -> list[str]:
    """The prose sentences of a markdown text: its lines joined, split after ``.``, ``:``,
    ``;``, ``?`` or ``!``, kept when they hold at least six words of letters outside code,
    math and addresses (a formula or a table row is not a sentence); the lesson's title,
    Italian in both languages, left out."""
    text = " ".join(line.strip() for line in markdown.splitlines()
                    if line.strip() and not line.strip().startswith(("|", "$$")))
    text = flat(text).replace(LESSON_FULL_TITLE, " ")
    parts = re.split(r"(?<=[.:;?!])\s+", text)
    return [p for p in parts if len(re.findall(r"\b[A-Za-z]{2,}\b", prose(p))) >= 6]


def prose(markdown: str) -> str:
    """``markdown`` without code spans, math and links' addresses: the words a reader reads."""
    text = re.sub(r"`[^`]*`", " ", markdown)
    text = re.sub(r"\$\$.*?\$\$|\$[^$]*\$", " ", text, flags=re.S)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return text


def flat(text: str) -> str:
    return " ".join(text.split())


def handed_out(notebook) -> list:
    """The code cells of ``notebook`` whose text the student reads as the kit wrote it:
    the solution cells (the stubs), the visible tests and the graded cells."""
    return [c for c in notebook.cells if c.cell_type == "code" and (
        nbgrader_of(c).get("solution") or nbgrader_of(c).get("grade")
        or "visible-test" in c.metadata.get("tags", []))]


def code_prose(source: str) -> list[str]:
    """The comments and docstrings of a code cell as the release hands it out: the
    solution and hidden-test regions (which the release replaces or removes) left out."""
    kept, inside = [], False
    for line in source.split("\n"):
        marker = line.strip()
        if marker in ("### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS"):
            inside = True
        elif marker in ("### END SOLUTION", "### END HIDDEN TESTS"):
            inside = False
        elif not inside:
            kept.append(line)
    text = "\n".join(kept)
    out = [tok.string for tok in tokenize.generate_tokens(io.StringIO(text).readline)
           if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) \
                and ast.get_docstring(node) is not None:
            out.append(ast.get_docstring(node))
    return out


def english_words(text: str) -> set[str]:
    """The English function words of ``text`` outside its code spans and math (a word in
    capitals, such as the logical AND, is a name, not prose)."""
    text = re.sub(r"``.*?``", " ", text, flags=re.S)
    words = re.findall(r"\b[A-Za-z][a-z]*\b", prose(text))
    return {word.lower() for word in words} & ENGLISH_FUNCTION_WORDS


def every_code_cell(notebook) -> list:
    """The code cells of ``notebook``: the setup, the gate, the given and lesson cells too."""
    return [c for c in notebook.cells if c.cell_type == "code"]


def english_in_code(notebook, cells=handed_out) -> dict[str, list[str]]:
    """``{cell id: [English function words]}`` of the comments and docstrings of the cells
    ``cells(notebook)`` (default: ``handed_out``), for the cells that hold any."""
    found = {c.id: sorted(set().union(*map(english_words, code_prose(c.source))))
             for c in cells(notebook)}
    return {cell: words for cell, words in found.items() if words}


@pytest.mark.parametrize("assignment", sorted(BUILDERS))
def test_the_italian_document_has_the_cells_of_the_english_one(assignment):
    english, italian = document_path(assignment, "en"), document_path(assignment, "it")
    assert italian == ROOT / "notebooks" / "it" / f"{assignment}.py"
    check_same_structure(english, italian)  # raises on any difference
    import jupytext

    a = jupytext.read(english, fmt="py:percent").cells
    b = jupytext.read(italian, fmt="py:percent").cells
    assert len(a) == len(b) >= 40
    assert [(c.cell_type, c.metadata) for c in a] == [(c.cell_type, c.metadata) for c in b]
    for x, y in zip(a, b):
        meta = nbgrader_of(x)
        if x.cell_type == "markdown":
            assert x.source != y.source, f"{meta['grade_id']} is not translated"
        elif "setup" in x.metadata.get("tags", []):
            # the same code and strings, every comment and docstring translated
            assert translated_code(x.source, y.source, "setup") == y.source
            assert without_docstrings(x.source) == without_docstrings(y.source)
            assert x.source != y.source, "the setup cell is not translated"
        elif meta.get("solution") or meta.get("grade") or "visible-test" in x.metadata.get(
                "tags", []):
            # the same code and strings (the catalogue's keys); comments and docstring
            # translated: every visible test and graded cell starts with one of them
            assert code_shape(x.source, False) == code_shape(y.source, False), meta["grade_id"]
            if not meta.get("solution"):
                assert x.source != y.source, f"{meta['grade_id']} is not translated"


def replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


@pytest.mark.parametrize("old, new, said", [
    # a cell left out
    ('# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_cost_text"',
     '# %% [markdown] nbgrader={"grade": false, "grade_id": "removed"',
     "missing ['lesson_cost_text'], extra ['removed']"),
    # points, or any other nbgrader metadata
    ('"grade_id": "causal_mask_visible_test", "locked": true',
     '"grade_id": "causal_mask_visible_test", "locked": false',
     "cell 11 (causal_mask_visible_test): its metadata"),
    # the code of a visible test, even one number
    ('assert np.allclose(p, [0.25, 0.75]), (',
     'assert np.allclose(p, [0.25, 0.76]), (',
     "(softmax_visible_test): its code differs"),
    # a visible test's and a graded cell's code and strings are the same in every language
    # (a message's English is its key in the catalogue), and so are nbgrader's markers;
    # the setup cell's code and strings are the same, its docstrings translated
    ('"causal_mask(1) should be [[True]]: a token sees itself"',
     '"causal_mask(1) deve essere [[True]]: un token vede se stesso"',
     "(causal_mask_visible_test): its code differs"),
    ('problem = before_grading("softmax", np.zeros((2, 3)))',
     'problem = before_grading("softmax", np.zeros((2, 4)))',
     "(softmax_hidden_checks): its code differs"),
    ('assert problem is None, problem\n### BEGIN HIDDEN TESTS\nfrom grader_tests import grade\n'
     'grade("softmax", globals())',
     'assert problem is None, problem\n### INIZIO TEST NASCOSTI\nfrom grader_tests import grade\n'
     'grade("softmax", globals())',
     "(softmax_hidden_checks): its code differs"),
    ('"""Setup: gli import e gli aiuti usati dai test. Esegui per prima questa cella."""',
     '"""Setup: imports and the helpers used by the tests. Run this cell first."""',
     "cell 2 (setup) (the setup cell): not translated: 'Setup: imports and the helpers"),
    ("    keep = size > floor\n", "    keep = size >= floor\n",
     "cell 2 (setup) (the setup cell): its code differs"),
    ('raise ValueError(f"gradient of shape {a.shape}, expected {n.shape}")',
     'raise ValueError(f"gradiente di forma {a.shape}, attesa {n.shape}")',
     "cell 2 (setup) (the setup cell): its code differs"),
    # what a given cell computes
    ("n_draws, T = 400, 64", "n_draws, T = 40, 64", "(lesson_scaling): its code differs"),
    # a placeholder lost in the text
    ("## 2. `causal_mask` ({{ points: causal_mask }})", "## 2. `causal_mask` (3 punti)",
     "(causal_mask_text): its placeholders"),
    # a solution placeholder
    ("# {{ solution: padding_mask }}", "# {{ solution: causal_mask }}",
     "(padding_mask_solution): its placeholders"),
])
def test_a_translation_out_of_step_is_refused_naming_the_cell(tmp_path, old, new, said):
    italian = document_path("attention", "it")
    broken = tmp_path / "attention.py"
    broken.write_text(replace_once(italian.read_text(encoding="utf-8"), old, new),
                      encoding="utf-8")
    with pytest.raises(ValueError) as caught:
        check_same_structure(document_path("attention", "en"), broken)
    assert str(broken) in str(caught.value) and said in str(caught.value), str(caught.value)


def test_a_translation_may_change_comments_docstrings_and_printed_labels(tmp_path):
    text = document_path("attention", "it").read_text(encoding="utf-8")
    text = replace_once(text, '"""La lezione, dal vivo: maschera prima della softmax (-inf) contro pesi azzerati dopo."""',
                        '"""La lezione, dal vivo: la maschera prima e dopo la softmax."""')
    text = replace_once(text, "# trappola 2: azzera il futuro dopo la softmax",
                        "# la trappola 2")
    text = replace_once(text, 'print("somme delle righe, prima:"', 'print("somme per riga, prima:"')
    # in a visible test and a graded cell, the comments and the docstring
    text = replace_once(text, "# sequenza 0: lunghezza 2", "# la sequenza 0 ha lunghezza 2")
    text = replace_once(text, '"""Controlli visibili di causal_mask: dtype, forma e triangolo '
                        'inferiore."""', '"""Controlli visibili di causal_mask."""')
    text = replace_once(text, "# I controlli nascosti di softmax girano quando il tuo notebook "
                        "viene valutato.", "# I controlli nascosti di softmax.")
    edited = tmp_path / "attention.py"
    edited.write_text(text, encoding="utf-8")
    check_same_structure(document_path("attention", "en"), edited)
    with pytest.raises(FileNotFoundError, match="no such document"):
        check_same_structure(document_path("attention", "en"), tmp_path / "missing.py")


# The tests that read the notebooks ``built`` makes run on one worker, which builds them once.
BUILT = pytest.mark.xdist_group("language-built")


@pytest.fixture(scope="module")
def built():
    """``{assignment: (English notebook, Italian notebook)}``, as the builders make them."""
    return {name: (module.build_notebook("en"), module.build_notebook("it"))
            for name, module in BUILDERS.items()}


@BUILT
@pytest.mark.parametrize("assignment", sorted(BUILDERS))
def test_the_italian_notebook_is_the_english_one_in_italian(built, assignment):
    english, italian = built[assignment]
    assert [c.id for c in english.cells] == [c.id for c in italian.cells]
    assert [nbgrader_of(c) for c in english.cells] == [nbgrader_of(c) for c in italian.cells]
    assert sum(nbgrader_of(c).get("points", 0) for c in italian.cells) == 100
    for e, i in zip(english.cells, italian.cells):
        if e.id == "gate":  # the same code, but for the digests of its language's cells
            assert without_docstrings(without_digests(e.source)) == \
                without_docstrings(without_digests(i.source))
        elif e.cell_type == "code" and (nbgrader_of(e)["locked"] is False
                                        or nbgrader_of(e)["grade"]
                                        or "visible-test" in e.metadata.get("tags", [])):
            # the same code and strings; the comments and docstrings are the language's
            assert without_docstrings(e.source) == without_docstrings(i.source), e.id
    english_md = [c for c in english.cells if c.cell_type == "markdown"]
    italian_md = [c for c in italian.cells if c.cell_type == "markdown"]
    # no English sentence left, taken from the English notebook itself
    italian_text = flat("\n".join(c.source for c in italian_md))
    english_sentences = [s for c in english_md for s in sentences(c.source)]
    assert len(english_sentences) > 100
    left = [s for s in english_sentences if flat(s) in italian_text]
    assert not left, left[:5]
    for cell in italian_md:
        words = set(re.findall(r"\b[a-z]+\b", prose(cell.source).lower()))
        assert not words & set(ENGLISH_WORDS), (cell.id, sorted(words & set(ENGLISH_WORDS)))
    # the lesson, named and linked at the top in both languages
    for notebook in (english, italian):
        top = flat(notebook.cells[0 if assignment == "attention" else 1].source)
        assert LESSON_FULL_TITLE in top and LESSON_LINK in top
    # what the builder writes is Italian too: the headings' points and the points table
    headings = [c.source.split("\n")[0] for c in italian_md if c.id.endswith("_text")
                and c.source.startswith("## ")]
    assert any(h.endswith(" punti)") for h in headings), headings
    assert not any("points" in h for h in headings), headings
    intro = next(c for c in italian_md if c.id == "intro").source
    assert "| parte | punti |" in intro and "| **totale** | **100** |" in intro
    assert "| part | points |" not in intro


def without_docstrings(source: str) -> str:
    """The syntax tree of ``source`` (comments aside) without its docstrings."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) \
                and ast.get_docstring(node) is not None:
            node.body = node.body[1:]
    return ast.dump(tree)


def without_digests(gate: str) -> str:
    """The gate cell's text with the SHA-256 digests it holds blanked."""
    return re.sub(r'"[0-9a-f]{64}"', '"..."', gate)


@BUILT
@pytest.mark.parametrize("assignment", sorted(BUILDERS))
def test_the_italian_stubs_and_tests_hold_no_english(built, assignment):
    """The comments and docstrings of the stubs (their graded functions' docstrings
    included), the visible tests and the graded cells of the Italian notebook hold no
    English function word; the English notebook's, read the same way, all do (the detector
    sees English wherever it is)."""
    english, italian = built[assignment]
    assert english_in_code(italian) == {}
    cells = [c.id for c in handed_out(english)]
    assert len(cells) >= 20 and sorted(english_in_code(english)) == sorted(cells)
    # every other code cell too: the setup (the Validate helpers), the gate, the given code
    # of solutions/training.py, the lesson's cells
    assert english_in_code(italian, every_code_cell) == {}
    inserted = ["setup", "lesson_figures"] if assignment == "attention" else \
        ["gate", "given_setup", "given_model", "given_adam_init", "given_generate_with_cache",
         "given_training"]
    assert set(inserted) <= set(english_in_code(english, every_code_cell))
    stubs = [c for c in handed_out(italian) if c.source.startswith("def ")]
    assert len(stubs) == (15 if assignment == "attention" else 7)
    for stub, original in zip(stubs, (c for c in handed_out(english)
                                      if c.source.startswith("def "))):
        # the Italian docstring, the signature and the body of solutions/
        tree, other = ast.parse(stub.source).body[0], ast.parse(original.source).body[0]
        assert ast.dump(tree.args) == ast.dump(other.args), stub.id
        assert [ast.dump(n) for n in tree.body[1:]] == [ast.dump(n) for n in other.body[1:]]
        assert ast.get_docstring(tree) != ast.get_docstring(other), stub.id


def test_a_graded_function_without_its_italian_docstring_stops_the_build(tmp_path,
                                                                         monkeypatch):
    from authoring import notebook_language

    source = build_notebooks.function_source("causal_mask")
    assert with_docstring(source, "en") == source
    italian = with_docstring(source, "it")
    assert italian.split("\n")[0] == source.split("\n")[0] and "Maschera causale" in italian
    assert italian.endswith(source[source.index("    ### BEGIN SOLUTION"):])
    text = notebook_language.docstrings_path("it").read_text(encoding="utf-8")
    folder = tmp_path / "notebooks"  # the documents as they are, but for the docstrings
    (folder / "it").mkdir(parents=True)
    for language in ("en", "it"):
        shutil.copy(document_path("attention", language),
                    folder / document_path("attention", language).relative_to(
                        ROOT / "notebooks"))
    monkeypatch.setattr(notebook_language, "DOCUMENTS", folder)
    for broken, said in [
            (text.replace("def causal_mask(T):", "def causal_mask_(T):"),
             "no 'it' docstring of the graded function causal_mask"),
            (text.replace("def causal_mask(T):", "def causal_mask(T, d):"),
             "causal_mask's signature differs"),
            (text.replace(text[text.index('    """Maschera causale'):
                               text.index("def padding_mask")],
                          source[source.index('    """'):source.index("    ### BEGIN")] + "\n"),
             "causal_mask's docstring is still the English one")]:
        (folder / "it" / "docstrings.py").write_text(broken, encoding="utf-8")
        with pytest.raises(ValueError) as caught:
            with_docstring(source, "it")
        assert "docstrings.py" in str(caught.value) and said in str(caught.value)
        with pytest.raises(ValueError, match="causal_mask"):
            build_notebooks.build_notebook("it")
    (folder / "it" / "docstrings.py").unlink()
    with pytest.raises(FileNotFoundError, match="docstrings.py"):
        with_docstring(source, "it")


def test_points_are_worded_in_the_language():
    assert points_label(10, "en") == "10 points" and points_label(1, "en") == "1 point"
    assert points_label(10, "it") == "10 punti" and points_label(1, "it") == "1 punto"
    with pytest.raises(ValueError, match="'fr'"):
        points_label(3, "fr")


def write_config(folder: Path, line: str | None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    body = "c = get_config()  # noqa: F821\n" + (line + "\n" if line else "")
    (folder / "nbgrader_config.py").write_text(body, encoding="utf-8")
    return folder


def test_the_language_is_a_setting_of_the_course(tmp_path):
    assert course_language(ROOT) == "en"
    assert course_language(ROOT / "example") == "en"
    assert course_language(write_config(tmp_path / "unset", None)) == "en"
    assert course_language(write_config(tmp_path / "it", 'c.AttentionKit.language = "it"')) == "it"
    bad = write_config(tmp_path / "fr", 'c.AttentionKit.language = "fr"')
    with pytest.raises(ValueError) as caught:
        course_language(bad)
    message = str(caught.value)
    assert "c.AttentionKit.language = 'fr'" in message and "'en', 'it'" in message
    assert str(bad / "nbgrader_config.py") in message
    with pytest.raises(ValueError, match="'fr'"):
        build_notebooks.build_notebook("fr")


def test_build_all_stops_on_an_unknown_language_before_writing(tmp_path):
    from tests.test_build import copy_course, run

    course = copy_course(tmp_path, ("tools", "authoring", "notebooks", "solutions",
                                    "grader_tests", "source", "nbgrader_config.py",
                                    "requirements-student.txt"))
    config = course / "nbgrader_config.py"
    config.write_text(replace_once(config.read_text(encoding="utf-8"),
                                   'c.AttentionKit.language = "en"',
                                   'c.AttentionKit.language = "italiano"'), encoding="utf-8")
    before = (course / "source" / "attention" / "attention.ipynb").read_bytes()
    done = run(course, "-m", "tools.build_all", timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "c.AttentionKit.language = 'italiano'" in done.stdout, done.stdout
    assert "source/attention/" not in done.stdout  # no step ran
    assert (course / "source" / "attention" / "attention.ipynb").read_bytes() == before


# ---------------------------------------------------------------------------------------
# End to end, in Italian.

STUDENTS = ("student_correct", "student_mask_after_softmax")
EXPECTED = json.loads((ROOT / "example" / "EXPECTED.json").read_text())["students"]


def run_nbgrader(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    from grader_tests.config import nbgrader_env

    return subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=cwd, env=nbgrader_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=900, check=False)


@pytest.fixture(scope="module")
def italian_kit(tmp_path_factory):
    """A copy of the kit whose course (and example class) is Italian: both source notebooks
    built in Italian, both releases generated by nbgrader, and the two example students
    handed in on the Italian attention release."""
    kit = tmp_path_factory.mktemp("kit_it")
    (kit / "nbgrader_config.py").write_text(replace_once(
        (ROOT / "nbgrader_config.py").read_text(encoding="utf-8"),
        'c.AttentionKit.language = "en"', 'c.AttentionKit.language = "it"'), encoding="utf-8")
    # the example class's configuration as it is: its language is the kit's
    (kit / "example").mkdir()
    shutil.copy(ROOT / "example" / "nbgrader_config.py", kit / "example" / "nbgrader_config.py")
    assert course_language(kit) == course_language(kit / "example") == "it"
    for name, module in BUILDERS.items():
        path = kit / "source" / name / f"{name}.ipynb"
        path.parent.mkdir(parents=True)
        path.write_bytes(module.render(course_language(kit)))
        path.with_name(KERNEL_CATALOGUE).write_bytes(kernel_catalogue("it"))  # as build_all
        done = run_nbgrader(kit, "generate_assignment", name, "--force")
        assert done.returncode == 0, done.stdout[-4000:]
    submitted = kit / "example" / "submitted"
    make_submissions.write(root=submitted,
                           release_path=kit / "release" / "attention" / "attention.ipynb",
                           source_path=kit / "source" / "attention" / "attention.ipynb")
    for folder in submitted.iterdir():
        if folder.name not in STUDENTS:
            shutil.rmtree(folder)
    return kit


@pytest.mark.slow
@pytest.mark.parametrize("assignment", sorted(BUILDERS))
def test_italian_release_has_no_english_sentence(italian_kit, assignment):
    release = nbformat.read(str(italian_kit / "release" / assignment / f"{assignment}.ipynb"), 4)
    english = BUILDERS[assignment].build_notebook("en")
    text = flat("\n".join(c.source for c in release.cells if c.cell_type == "markdown"))
    english_sentences = [s for c in english.cells if c.cell_type == "markdown"
                         for s in sentences(c.source)]
    assert not [s for s in english_sentences if flat(s) in text]
    assert "## 1. " in text and " punti)" in text and LESSON_LINK in text
    # the stubs, the visible tests and the graded cells as handed out
    assert english_in_code(release, every_code_cell) == {}
    stubs = [c for c in release.cells if nbgrader_of(c).get("solution")
             and c.source.startswith("def ")]
    assert stubs and all(f"    {CODE_STUB['it']}\n    raise NotImplementedError()" in c.source
                         and CODE_STUB["en"] not in c.source and '"""' in c.source
                         for c in stubs)


@pytest.mark.slow
@pytest.mark.parametrize("assignment", sorted(BUILDERS))
def test_italian_source_validates_and_release_fails_every_test(italian_kit, tmp_path,
                                                               assignment):
    # copies laid out as in source/: the training gate opens on the attention notebook
    # beside it
    for name in ("attention", assignment):
        (tmp_path / name).mkdir(exist_ok=True)
        shutil.copy(italian_kit / "source" / name / f"{name}.ipynb", tmp_path / name)
        shutil.copy(italian_kit / "source" / name / KERNEL_CATALOGUE, tmp_path / name)
    source = run_nbgrader(italian_kit, "validate",
                          str(tmp_path / assignment / f"{assignment}.ipynb"))
    assert source.returncode == 0, source.stdout[-3000:]
    assert "Success! Your notebook passes all the tests." in source.stdout, source.stdout[-3000:]
    release = tmp_path / f"release_{assignment}.ipynb"
    shutil.copy(italian_kit / "release" / assignment / f"{assignment}.ipynb", release)
    inverted = run_nbgrader(italian_kit, "validate", "--invert", str(release))
    assert "NOTEBOOK PASSED ON" not in inverted.stdout, inverted.stdout[-3000:]
    assert "Success! The notebook does not pass any tests." in inverted.stdout, \
        inverted.stdout[-3000:]


@pytest.mark.slow
def test_the_example_class_in_italian_gets_the_expected_scores_and_faults(italian_kit):
    from grader_tests.config import nbgrader_env

    example = italian_kit / "example"
    done = subprocess.run([sys.executable, "-m", "tools.demo", "--root", str(example)],
                          cwd=ROOT, env=nbgrader_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stdout[-5000:]
    summary = json.loads((example / "class_summary.json").read_text())
    results = summary["results"]
    # nothing flagged for review: the Italian cells the kit hands out are read as the kit's
    assert "flagged for review" not in done.stdout, done.stdout[-5000:]
    assert summary["training_unlocked"] == ["student_correct"]
    unlocked = nbformat.read(str(example / "unlocked" / "student_correct" / "training"
                                 / "training.ipynb"), 4)
    assert unlocked.cells[1].source.startswith("# Compito `training`")
    assert sorted(results) == sorted(STUDENTS)
    for student in STUDENTS:
        expected, got = EXPECTED[student], results[student]
        assert got["score"] == pytest.approx(expected["score"], abs=1e-6), done.stdout[-5000:]
        for name, points in expected["functions"].items():
            assert got["functions"][name]["score"] == pytest.approx(points, abs=1e-6), (
                student, name, got["functions"][name])
        for name, faults in expected["faults"].items():
            assert set(faults) <= set(got["functions"][name]["faults"]), (
                student, name, got["functions"][name]["faults"])
    # the notebooks graded were the Italian ones
    graded = nbformat.read(str(example / "autograded" / "student_correct" / "attention"
                               / "attention.ipynb"), 4)
    assert graded.cells[0].source.startswith("# Compito `attention`")


@BUILT
@pytest.mark.parametrize("language", ["en", "it"])
def test_the_training_gate_holds_the_digests_of_the_attention_notebook_of_its_language(
        built, language):
    import hashlib

    attention, training = (built[name][language == "it"] for name in ("attention", "training"))
    gate = training.cells[0].source
    for grade_id in ("setup", "softmax_visible_test", "kv_cache_bytes_visible_test"):
        cell = next(c for c in attention.cells if c.id == grade_id)
        digest = hashlib.sha256(cell.source.strip().encode("utf-8")).hexdigest()
        assert f'"{grade_id}": "{digest}"' in gate, grade_id


def test_build_all_of_an_english_course_notes_a_translation_out_of_step(tmp_path, monkeypatch):
    import io

    import authoring.build_all as build_all

    broken = tmp_path / "attention.py"
    broken.write_text(replace_once(document_path("attention", "it").read_text(encoding="utf-8"),
                                   '"grade_id": "lesson_cost_text"', '"grade_id": "gone"'),
                      encoding="utf-8")
    real = build_all.document_path
    monkeypatch.setattr(build_all, "document_path", lambda assignment, language: broken
                        if (assignment, language) == ("attention", "it")
                        else real(assignment, language))
    for step in ("step_notebook", "step_release", "step_submissions"):  # only the preamble
        monkeypatch.setattr(build_all, step, lambda *args: [])
    out = io.StringIO()
    assert build_all.run(True, out) == 0  # an English course still builds
    text = out.getvalue()
    assert "language of the notebooks: en" in text
    assert "note: the 'it' translation is out of step" in text
    assert "missing ['lesson_cost_text'], extra ['gone']" in text
    assert text.count("note:") == 1  # the training translation is in step


# ---------------------------------------------------------------------------------------
# The messages of the code that runs in the student's kernel.

def english_fragments() -> list[str]:
    """The English text of every message of the notebooks' code (``tr()``), cut at its
    ``{placeholders}`` and line breaks: the pieces of four words or more."""
    pieces = []
    for message in extract([ROOT / rel for rel in KERNEL_SOURCES], KERNEL_KEYWORDS):
        if message.id:
            pieces += [p.strip() for p in re.split(r"\{[^{}]*\}|\n", message.id)
                       if len(p.split()) >= 4]
    assert len(pieces) > 150
    return pieces


def test_the_kernel_catalogue_holds_only_the_notebooks_messages_all_translated():
    import gettext
    import io

    catalogue = gettext.GNUTranslations(io.BytesIO(kernel_catalogue("it")))
    messages = [m.id for m in extract([ROOT / rel for rel in KERNEL_SOURCES], KERNEL_KEYWORDS)
                if m.id]
    assert len(messages) > 150 and set(catalogue._catalog) - {""} == set(messages)
    for message in messages:  # (one with no words of its own may stay as it is)
        if re.search(r"[a-z]{2}", re.sub(r"\{[^{}]*\}", "", message)):
            assert catalogue.gettext(message) != message, message
    assert catalogue.gettext("{name} is still the stub.") == "{name} è ancora lo stub."
    assert kernel_catalogue("it") == kernel_catalogue("it")  # the same bytes every build
    with pytest.raises(ValueError, match="no catalogue"):
        kernel_catalogue("en")


def test_the_italian_gate_speaks_italian_beside_its_catalogue(tmp_path, monkeypatch):
    gate = build_training_notebook.build_notebook("it").cells[0].source
    english = build_training_notebook.build_notebook("en").cells[0].source
    # the same code and messages (the catalogue's keys), its comments and docstrings Italian
    assert without_docstrings(without_digests(gate)) == \
        without_docstrings(without_digests(english))
    assert gate.startswith('"""IL CANCELLO. Esegui per prima questa cella')
    (tmp_path / KERNEL_CATALOGUE).write_bytes(kernel_catalogue("it"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ATTENTION_NOTEBOOK", str(tmp_path / "nowhere" / "attention.ipynb"))
    namespace = {"__name__": "__main__"}
    with pytest.raises(Exception) as info:
        exec(compile(gate, "gate", "exec"), namespace)
    message = str(info.value)
    assert type(info.value).__name__ == "GateClosed"
    assert message.startswith("Il cancello è chiuso: non ha trovato il tuo notebook attention "
                              "(il percorso in ATTENTION_NOTEBOOK):")
    assert str(tmp_path / "nowhere" / "attention.ipynb") in message
    assert not [p for p in english_fragments() if p in message]
    with pytest.raises(Exception, match="esegui la prima cella di questo notebook"):
        namespace["require_gate"]()


@pytest.mark.slow
def test_an_italian_release_validates_in_italian(italian_kit, tmp_path):
    """The Italian release, beside the catalogue nbgrader released with it, handed in with
    one trap (the mask applied after the softmax) and the other parts left as stubs: the
    Validate messages (the visible test of the trap, the stub parts, the summary) are
    Italian and hold no English message of the notebooks' code."""
    from nbclient import NotebookClient

    release = italian_kit / "release" / "attention"
    assert (release / KERNEL_CATALOGUE).read_bytes() == kernel_catalogue("it")
    trap = nbformat.read(str(italian_kit / "example" / "submitted"
                             / "student_mask_after_softmax" / "attention" / "attention.ipynb"), 4)
    stubs = nbformat.read(str(release / "attention.ipynb"), 4)
    keep = {"softmax_solution", "scaled_dot_product_attention_solution"}
    for cell in trap.cells:  # every other part back to the release's stub
        if cell.metadata.get("nbgrader", {}).get("solution") and cell.id not in keep:
            cell.source = next(c.source for c in stubs.cells if c.id == cell.id)
    folder = tmp_path / "attention"
    folder.mkdir()
    nbformat.write(trap, str(folder / "attention.ipynb"))
    shutil.copy(release / KERNEL_CATALOGUE, folder)
    # the messages as a student reads them in the notebook
    NotebookClient(trap, timeout=300, allow_errors=True,
                   resources={"metadata": {"path": str(folder)}}).execute()
    outputs = {c.id: c.get("outputs", []) for c in trap.cells if c.cell_type == "code"}
    errors = {cell: o["evalue"] for cell, out in outputs.items() for o in out
              if o["output_type"] == "error"}
    said = "\n".join(list(errors.values()) + [
        o.get("text", "") for out in outputs.values() for o in out if o["output_type"] == "stream"])
    assert errors["scaled_dot_product_attention_visible_test"].startswith(
        "con la maschera [[True, False]] i pesi sono [[0.25, 0]]: il peso mascherato è stato "
        "azzerato dopo la softmax")
    assert errors["causal_mask_hidden_checks"] == "causal_mask è ancora lo stub."
    assert errors["scaled_dot_product_attention_hidden_checks"].startswith(
        "i controlli visibili di scaled_dot_product_attention falliscono:")
    assert "softmax: controlli visibili superati" in said
    summary = said[said.index("\nsuperati ("):]
    assert summary.startswith("\nsuperati (1): softmax\nfalliti ("), summary
    assert re.search(r"\nfalliti \(\d+\): (.*, )?scaled_dot_product_attention[,\n]", summary), summary
    assert "\nancora stub (" in summary and "\nnon eseguiti (" in summary, summary
    # the exercises, not answered, are neither failures nor stubs
    assert "\nsenza risposta (2): exercise_weight_ratio, exercise_decoder_budget\n" in summary, summary
    assert not re.search(r"\nfalliti \(\d+\): [^\n]*exercise_", summary), summary
    assert not [p for p in english_fragments() if p in said]
    # and through nbgrader's Validate
    done = run_nbgrader(italian_kit, "validate", str(folder / "attention.ipynb"))
    assert "causal_mask è ancora lo stub." in done.stdout, done.stdout[-3000:]
    # the check's message once, without a second exception name before it
    assert "i controlli visibili di scaled_dot_product_attention falliscono:\n" \
        "    con la maschera [[True, False]] i pesi sono [[0.25, 0]]: il peso mascherato è\n" \
        "    stato azzerato dopo la softmax" in done.stdout, done.stdout[-3000:]
    assert "AssertionError: AssertionError" not in done.stdout
    assert "\n    AssertionError: con la maschera" not in done.stdout


# --- The code the builders insert: the Validate helpers, the gate, the given code -------------

ENGLISH_CODE = '''
def f(x):
    """Twice ``x``: the value every caller of this function expects."""
    # double the value and return it to the caller
    return 2 * x  # (B, T)
'''
ITALIAN_CODE = '''
def f(x):
    """Il doppio di ``x``: il valore che si aspetta chi chiama questa funzione."""
    # raddoppia il valore e lo restituisce
    return 2 * x  # (B, T)
'''


@pytest.mark.parametrize("old, new, said", [
    ("return 2 * x", "return x * 2", "its code differs"),          # code
    ("def f(x):", "def f(y):", "its code differs"),                 # a name
    ("# raddoppia il valore e lo restituisce",
     "# double the value and return it to the caller", "not translated: '# double the value"),
    ('"""Il doppio di ``x``: il valore che si aspetta chi chiama questa funzione."""',
     '"""Twice ``x``: the value every caller of this function expects."""',
     "not translated: 'Twice ``x``"),
    ("return 2 * x", "return 2 * x +", "not Python"),
])
def test_inserted_code_is_the_english_code_with_only_its_words_translated(old, new, said):
    assert translated_code(ENGLISH_CODE, ITALIAN_CODE, "here") == ITALIAN_CODE
    # a short comment (a shape, a linter's directive) may stay as it is
    assert "# (B, T)" in ITALIAN_CODE
    with pytest.raises(ValueError, match=re.escape(said)) as caught:
        translated_code(ENGLISH_CODE, ITALIAN_CODE.replace(old, new), "notebooks/it/x.py")
    assert str(caught.value).startswith("notebooks/it/x.py: ")
    # a string is code too: a message's English text is its key in the catalogue
    with pytest.raises(ValueError, match="its code differs"):
        translated_code('print(tr("the gate is open"))', 'print(tr("il cancello è aperto"))',
                        "here")


@pytest.fixture
def documents(tmp_path, monkeypatch):
    """A copy of ``notebooks/`` that the builders read in its place."""
    from authoring import notebook_cells

    copy = tmp_path / "notebooks"
    shutil.copytree(ROOT / "notebooks", copy)
    monkeypatch.setattr(notebook_cells, "DOCUMENTS", copy)
    monkeypatch.setattr(build_training_notebook, "DOCUMENTS", copy)
    assert inserted("given.py", "it") != inserted("given.py", "en")
    return copy


@pytest.mark.parametrize("document, old, new, said", [
    ("validate_helpers.py",
     '"""Stampa una riga per ogni parte valutata: test visibili superati, falliti, funzione\n'
     '    ancora da scrivere, esercizio ancora senza risposta, oppure non eseguiti dopo la cella\n'
     '    di setup."""',
     '"""Print one line per graded part: its visible checks passed, failed, still a stub, an\n'
     '    exercise not answered yet, or not run since the setup cell."""',
     "validate_helpers.py: not translated"),
    ("validate_helpers.py", "top not in GRADING_MODULES", "top in GRADING_MODULES",
     "validate_helpers.py: its code differs"),
    ("gate.py", "# l'ultima cella dice quanto tempo ha richiesto il notebook",
     "# the last cell reports how long the notebook took", "gate.py: not translated"),
    ("gate.py", "with time_limit(60):", "with time_limit(600):", "gate.py: its code differs"),
    ("given.py", "    return np.concatenate([arrays[k].ravel() for k in keys])\n",
     "    return np.concatenate([arrays[k].flatten() for k in keys])\n",
     "given.py: flatten: its code differs"),
    ("given.py", "# il token separatore", "# the separator token",
     "given.py: SEP: not translated"),
])
def test_an_inserted_translation_out_of_step_stops_the_italian_build(documents, document, old,
                                                                     new, said):
    path = documents / "it" / document
    text = path.read_text(encoding="utf-8")
    assert text.count(old) >= 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")
    for language in ("en", "it"):  # English reads none of them
        with contextlib.ExitStack() as stack:
            if language == "it":
                stack.enter_context(pytest.raises(ValueError, match=re.escape(said)))
            inserted(document, language)


def inserted(document: str, language: str) -> str:
    """What the builders insert from ``document`` in ``language`` (the gate's fingerprints
    left out: they need the attention notebook built)."""
    if document == "validate_helpers.py":
        return validate_helpers(["softmax"], ["numpy"], language)
    if document == "gate.py":
        return translated_document("gate.py", language)
    return build_training_notebook.given("flatten", "init_params", language=language) + \
        build_training_notebook.constants(["SEP", "EVAL_SEED"], language)


@pytest.mark.parametrize("document", ["validate_helpers.py", "gate.py", "given.py"])
def test_a_missing_inserted_translation_stops_the_italian_build(documents, document):
    (documents / "it" / document).unlink()
    with pytest.raises(FileNotFoundError, match=f"notebooks/it/{document}: no such document"):
        inserted(document, "it")
    if document == "given.py":  # the whole build stops (its first use: the constants)
        with pytest.raises(FileNotFoundError, match="notebooks/it/given.py: no such document"):
            build_training_notebook.build_notebook("it")


@pytest.mark.parametrize("language, own, stub", [
    ("it", None, "    # IL TUO CODICE QUI\n    raise NotImplementedError()"),
    ("en", None, "    # YOUR CODE HERE\n    raise NotImplementedError()"),
    # a course's own stub is kept, whatever its language
    ("it", "# TODO\nraise NotImplementedError()", "    # TODO\n    raise NotImplementedError()"),
])
def test_the_release_stubs_speak_the_course_language(language, own, stub):
    from traitlets.config import Config

    from authoring.notebook_language import LanguageClearSolutions

    config = Config()
    config.AttentionKit.language = language
    if own is not None:
        config.ClearSolutions.code_stub = {"python": own}
    cell = nbformat.v4.new_code_cell(
        "def f(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION\n",
        metadata={"nbgrader": {"solution": True, "grade": False, "locked": False,
                               "grade_id": "f", "schema_version": 3}})
    notebook = nbformat.v4.new_notebook(cells=[cell], metadata={"kernelspec": {
        "display_name": "Python 3", "language": "python", "name": "python3"}})
    cleared, _ = LanguageClearSolutions(config=config).preprocess(notebook, {})
    assert cleared.cells[0].source == "def f(x):\n" + stub + "\n"


def test_an_unknown_course_language_stops_the_release():
    from traitlets.config import Config

    from authoring.notebook_language import LanguageClearSolutions

    config = Config()
    config.AttentionKit.language = "fr"
    with pytest.raises(ValueError, match="'fr'"):
        LanguageClearSolutions(config=config).preprocess(nbformat.v4.new_notebook(), {})

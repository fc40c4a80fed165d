"""The language of a course's notebooks: which document each builder reads, how the
builder words what it computes (points, the points table), and the check that a
translated document is the English one with only its words changed.

The course chooses its language with one setting of its ``nbgrader_config.py``::

    c.AttentionKit.language = "en"   # or "it"

English (``"en"``, the default) is written in ``notebooks/<assignment>.py``; every other
language in ``notebooks/<language>/<assignment>.py``, a jupytext percent document with
exactly the English document's cells (``notebooks/README.md``). What may differ between
the two is the teaching text: the markdown cells, the comments and docstrings, and the
strings that the given code cells print (table headers, labels), the stubs'
docstrings (``notebooks/<language>/docstrings.py``, ``with_docstring``), and the comments and
docstrings of the code the builders insert: the Validate helpers, the training gate and the
given code of ``solutions/training.py`` (``notebooks/<language>/validate_helpers.py``,
``gate.py``, ``given.py``, each checked by ``translated_code``). Everything nbgrader
and the graders read is the same: cell ids, grade ids, cell types, nbgrader metadata and
tags, the placeholders, the code and strings of the setup cell, and the code, strings and
``###`` lines of the solution, visible-test and graded cells (their comments and leading
docstring are the language's; the training gate of each language holds the digests of its
own attention notebook's setup and visible tests). A
translated document that is missing a cell, has one more, or changes any of these stops
the build with a message naming the document and the cell (``check_same_structure``): an
Italian notebook never silently keeps English text, nor differs in what is graded.
"""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from collections.abc import Mapping
from pathlib import Path

import jupytext
from nbgrader.preprocessors import ClearSolutions

from grader_tests.config import course_config

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = ROOT / "notebooks"
DEFAULT_LANGUAGE = "en"
LANGUAGES = ("en", "it")

# The words the builders write into the notebooks, by language.
WORDS: Mapping[str, Mapping[str, str]] = {
    "en": {"point": "point", "points": "points", "part": "part", "total": "total",
           "code_stub": "# YOUR CODE HERE", "text_stub": "YOUR ANSWER HERE",
           "exercise_weight_ratio": "Exercise 1 (weight ratio)",
           "exercise_decoder_budget": "Exercise 2 (decoder budget)"},
    "it": {"point": "punto", "points": "punti", "part": "parte", "total": "totale",
           "code_stub": "# IL TUO CODICE QUI", "text_stub": "LA TUA RISPOSTA QUI",
           "exercise_weight_ratio": "Esercizio 1 (rapporto dei pesi)",
           "exercise_decoder_budget": "Esercizio 2 (budget del decoder)"},
}

# The second line of the stub nbgrader puts in place of a solution region (the first is the
# language's ``code_stub`` comment): running it is how a function says it is not written yet.
STUB_RAISE = "raise NotImplementedError()"


def code_stubs() -> tuple[str, ...]:
    """The comment line of the solution stub, in every language (``WORDS``)."""
    return tuple(WORDS[language]["code_stub"] for language in LANGUAGES)


class LanguageClearSolutions(ClearSolutions):
    """nbgrader's ``ClearSolutions`` (``nbgrader generate_assignment``) writing its stubs in
    the course's language (``c.AttentionKit.language``): a Python solution region becomes
    ``# IL TUO CODICE QUI`` / ``raise NotImplementedError()`` in Italian, nbgrader's own
    ``# YOUR CODE HERE`` in English. A ``c.ClearSolutions.code_stub`` or ``text_stub`` the
    course sets itself is kept."""

    def preprocess(self, nb, resources):
        """Set the stubs from the course's language, then clear the solutions as nbgrader
        does.

        Raises:
            ValueError: for a language not in ``LANGUAGES``.
        """
        language = check_language(self.config.AttentionKit.get("language", DEFAULT_LANGUAGE))
        words = WORDS[language]
        if "code_stub" not in self.config.ClearSolutions:
            self.code_stub = dict(self.code_stub, python=f"{words['code_stub']}\n{STUB_RAISE}")
        if "text_stub" not in self.config.ClearSolutions:
            self.text_stub = words["text_stub"]
        return super().preprocess(nb, resources)


# ``{{ key }}`` / ``{{ key: args }}`` anywhere in a cell (authoring/notebook_cells.py's syntax).
PLACEHOLDER = re.compile(r"\{\{ (\w+)(?:: ([^{}\n]*?))? \}\}")


def check_language(language: object, where: str = "c.AttentionKit.language") -> str:
    """``language`` if it is one of ``LANGUAGES``.

    Raises:
        ValueError: for anything else, naming ``where`` and the allowed values.
    """
    if language not in LANGUAGES:
        raise ValueError(f"{where} = {language!r}: the notebooks are written in "
                         f"{', '.join(repr(x) for x in LANGUAGES)} only")
    return str(language)


def course_language(root: str | os.PathLike[str] = ROOT) -> str:
    """The language of the course at ``root``: ``c.AttentionKit.language`` of its
    ``nbgrader_config.py``, ``"en"`` when unset.

    Raises:
        ValueError: for a value that is not one of ``LANGUAGES`` (the message names the
            configuration file).
    """
    language = course_config(str(root), "AttentionKit").get("language", DEFAULT_LANGUAGE)
    return check_language(language, f"{Path(root) / 'nbgrader_config.py'}: "
                                    "c.AttentionKit.language")


def document_path(assignment: str, language: str) -> Path:
    """The document of ``assignment`` (``"attention"``, ``"training"``) in ``language``:
    ``notebooks/<assignment>.py`` for English, ``notebooks/<language>/<assignment>.py``
    otherwise.

    Raises:
        ValueError: for a language not in ``LANGUAGES``.
    """
    check_language(language)
    if language == DEFAULT_LANGUAGE:
        return DOCUMENTS / f"{assignment}.py"
    return DOCUMENTS / language / f"{assignment}.py"


def points_label(points: float, language: str) -> str:
    """``"10 points"`` / ``"1 point"`` in English, ``"10 punti"`` / ``"1 punto"`` in
    Italian."""
    words = WORDS[check_language(language)]
    return f"{points} {words['point'] if points == 1 else words['points']}"


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


class _NoDocstring(ast.NodeTransformer):
    """Drops the docstring a cell starts with."""

    def visit_Module(self, node: ast.Module) -> ast.AST:
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:]
        return self.generic_visit(node)


class _NoWords(_NoDocstring):
    """Drops the docstring and every string's text, f-strings reduced to what they format:
    the code with its words taken out."""

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return ast.Constant("") if isinstance(node.value, str) else node

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
        values = [self.visit(v.value) for v in node.values if isinstance(v, ast.FormattedValue)]
        return ast.Tuple(elts=values, ctx=ast.Load())

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        if node.body and isinstance(node.body[0], ast.Expr) \
                and isinstance(node.body[0].value, ast.Constant) \
                and isinstance(node.body[0].value.value, str):
            node.body = node.body[1:] or [ast.Pass()]
        return self.generic_visit(node)


def code_shape(source: str, words_free: bool) -> str:
    """What must be the same in two languages' versions of a code cell: its syntax tree
    without comments and without the docstring it starts with; with ``words_free``, also
    without the text of its strings.

    Raises:
        SyntaxError: if ``source`` is not Python.
    """
    tree = ast.parse(source)
    tree = (_NoWords() if words_free else _NoDocstring()).visit(tree)
    return ast.dump(tree, include_attributes=False)


def _markers(source: str) -> list[str]:
    """The lines of ``source`` that nbgrader or the builder reads: ``### ...`` markers and
    ``# {{ ... }}`` placeholders."""
    return [line.strip() for line in source.split("\n")
            if line.strip().startswith(("###", "# {{"))]


def _same_but_words(source: str, other: str) -> bool:
    """Whether two versions of a solution, visible-test or graded cell differ only in their
    comments and the docstring they start with: the same syntax tree (strings included:
    a message's text is its key in the catalogue) and the same marker lines."""
    try:
        return code_shape(source, False) == code_shape(other, False) \
            and _markers(source) == _markers(other)
    except SyntaxError:
        return False


class _NoDocstrings(ast.NodeTransformer):
    """Drops every docstring: the module's, each class's and each function's."""

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
        return super().generic_visit(node)


def prose(source: str) -> list[str]:
    """The comments (``# ...``, the hash included) and docstrings of the Python ``source``,
    in order: the words a translation changes.

    Raises:
        SyntaxError: if ``source`` is not Python.
    """
    comments = [tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                if tok.type == tokenize.COMMENT]
    docstrings: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node, clean=False)
            if text is not None:
                docstrings.append(text)
    return comments + docstrings


# A comment or docstring of a translation with this many words (of two letters or more) that
# is the English one, word for word, was left untranslated; a shorter one (a linter directive,
# ``# (B, T, d)``) may be the same in every language.
UNTRANSLATED_WORDS = 3


def translated_code(english: str, translated: str, where: str) -> str:
    """``translated`` if it is the Python code ``english`` with only its words translated:
    the same syntax tree once comments and every docstring (module, class, function) are
    set aside, strings included (a message's text is its key in the kit's catalogue), and
    no comment or docstring of ``UNTRANSLATED_WORDS`` words or more still the English one.

    Args:
        english: the English source (a cell, ``notebooks/validate_helpers.py``, a given
            definition of ``solutions/``).
        translated: its translation.
        where: what it is (document and cell), for the message.

    Returns:
        ``translated``, unchanged.

    Raises:
        ValueError: naming ``where``, if either is not Python, if their code differs, or
            quoting the first comment or docstring left in English.
    """
    try:
        same = ast.dump(_NoDocstrings().visit(ast.parse(english))) == \
            ast.dump(_NoDocstrings().visit(ast.parse(translated)))
        english_prose, translated_prose = set(prose(english)), prose(translated)
    except SyntaxError as exc:
        raise ValueError(f"{where}: not Python ({exc})") from exc
    if not same:
        raise ValueError(f"{where}: its code differs from the English one (a translation "
                         "changes only comments and docstrings; code and strings stay)")
    for text in translated_prose:
        if text in english_prose and \
                len(re.findall(r"[A-Za-z]{2,}", text)) >= UNTRANSLATED_WORDS:
            first = text.strip().split("\n")[0]
            raise ValueError(f"{where}: not translated: {first!r}")
    return translated


def _cells(path: Path) -> list[dict]:
    out = []
    for cell in jupytext.read(path, fmt="py:percent").cells:
        meta = dict(cell.metadata)
        nbgrader = dict(meta.get("nbgrader") or {})
        out.append({"id": nbgrader.get("grade_id"), "type": cell.cell_type, "meta": meta,
                    "source": cell.source, "nbgrader": nbgrader})
    return out


def check_same_structure(english: Path, translated: Path) -> None:
    """Raise unless ``translated`` has the cells of ``english`` with only their words
    changed.

    Same: the cells' ids (grade ids), in order; their types; their metadata (nbgrader's,
    points and tags included); the placeholders of each cell, in order; the code and strings
    of the setup cell, every comment and docstring of it translated (``translated_code``);
    the code, strings and marker lines of every solution, visible-test and
    graded cell, its comments and the docstring it starts with aside; the code of every
    other code cell with its comments, docstrings and the text of its strings aside (a
    printed label may be translated, not what is computed).

    Raises:
        ValueError: naming the translated document and the first cell that differs, or the
            missing or extra cells; FileNotFoundError if ``translated`` does not exist.
    """
    shown = _shown(translated)
    if not translated.is_file():
        raise FileNotFoundError(f"{shown}: no such document; the course's language needs "
                                f"its translation of {_shown(english)}")
    ours, theirs = _cells(english), _cells(translated)
    ids, other_ids = [c["id"] for c in ours], [c["id"] for c in theirs]
    if ids != other_ids:
        missing = [i for i in ids if i not in other_ids]
        extra = [i for i in other_ids if i not in ids]
        if missing or extra:
            raise ValueError(f"{shown}: its cells differ from {_shown(english)}'s: "
                             f"missing {missing}, extra {extra}")
        at = next(n for n, (a, b) in enumerate(zip(ids, other_ids)) if a != b)
        raise ValueError(f"{shown}: cell {at + 1} is {other_ids[at]}, where "
                         f"{_shown(english)} has {ids[at]} (the cells' order differs)")
    for number, (a, b) in enumerate(zip(ours, theirs), start=1):
        where = f"{shown}, cell {number} ({a['id']})"
        if a["type"] != b["type"]:
            raise ValueError(f"{where}: a {b['type']} cell, where {_shown(english)} has a "
                             f"{a['type']} cell")
        if a["meta"] != b["meta"]:
            raise ValueError(f"{where}: its metadata {b['meta']} differ from "
                             f"{_shown(english)}'s {a['meta']}")
        keys = [m.group(0) for m in PLACEHOLDER.finditer(a["source"])]
        other_keys = [m.group(0) for m in PLACEHOLDER.finditer(b["source"])]
        if keys != other_keys:
            raise ValueError(f"{where}: its placeholders {other_keys} differ from "
                             f"{_shown(english)}'s {keys}")
        if a["type"] != "code":
            continue
        tags = a["meta"].get("tags") or []
        if "setup" in tags:
            translated_code(a["source"], b["source"], f"{where} (the setup cell)")
            continue
        if a["nbgrader"].get("solution") or a["nbgrader"].get("grade") \
                or "visible-test" in tags:
            if a["source"] != b["source"] and not _same_but_words(a["source"], b["source"]):
                raise ValueError(f"{where}: its code differs from {_shown(english)}'s (a "
                                 "solution, visible-test or graded cell differs only in its "
                                 "comments and the docstring it starts with; its code, its "
                                 "strings and its ### lines are the same in every language)")
            continue
        try:
            same = code_shape(a["source"], True) == code_shape(b["source"], True)
        except SyntaxError as exc:
            raise ValueError(f"{where}: not Python ({exc})") from exc
        if not same:
            raise ValueError(f"{where}: its code differs from {_shown(english)}'s (only "
                             "comments, docstrings and the text of strings may be "
                             "translated in a given cell)")


def checked_document(assignment: str, language: str) -> Path:
    """The document of ``assignment`` in ``language``, checked against the English one
    (``check_same_structure``) when it is a translation.

    Raises:
        ValueError, FileNotFoundError: as ``check_same_structure``, or for an unknown
            language.
    """
    path = document_path(assignment, language)
    if language != DEFAULT_LANGUAGE:
        check_same_structure(document_path(assignment, DEFAULT_LANGUAGE), path)
    return path


# The docstrings of the graded functions in a language other than English, which the
# builders put in place of the English ones of ``solutions/`` (``# {{ solution: NAME }}``).
DOCSTRINGS = "docstrings.py"


def docstrings_path(language: str) -> Path:
    """``notebooks/<language>/docstrings.py``: each graded function of both assignments as
    its signature and its docstring in ``language``, written by the author as text.

    Raises:
        ValueError: for an unknown language or English (whose docstrings are those of
            ``solutions/``).
    """
    if check_language(language) == DEFAULT_LANGUAGE:
        raise ValueError("the English docstrings are those of solutions/")
    return DOCUMENTS / language / DOCSTRINGS


def _signature(function: ast.FunctionDef) -> str:
    return ast.dump(function.args, include_attributes=False)


def _docstring_node(function: ast.FunctionDef) -> ast.Expr | None:
    first = function.body[0] if function.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
            and isinstance(first.value.value, str):
        return first
    return None


def translated_docstrings(language: str) -> dict[str, tuple[str, list[str]]]:
    """The docstrings of ``docstrings_path(language)``: function name -> (its signature,
    as ``ast.dump`` of its arguments; the docstring's source lines, indentation and quotes
    included).

    Raises:
        FileNotFoundError: if the file is missing.
        ValueError: if it is not Python, or one of its functions has no docstring or is
            written twice (the message names the file and the function).
    """
    path = docstrings_path(language)
    if not path.is_file():
        raise FileNotFoundError(f"{_shown(path)}: no such file; a course in {language!r} "
                                "needs the docstrings of its graded functions there")
    text = path.read_text(encoding="utf-8")
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise ValueError(f"{_shown(path)}: not Python ({exc})") from exc
    lines = text.split("\n")
    out: dict[str, tuple[str, list[str]]] = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        doc = _docstring_node(node)
        if doc is None or node.name in out:
            raise ValueError(f"{_shown(path)}: {node.name} has no docstring or is written "
                             "twice")
        out[node.name] = (_signature(node), lines[doc.lineno - 1:doc.end_lineno])
    return out


def with_docstring(source: str, language: str) -> str:
    """The graded function ``source`` (a whole top-level ``def`` of ``solutions/``) with its
    docstring in ``language``: its signature and body as they are, its docstring the one
    of ``docstrings_path(language)``. English: ``source`` unchanged.

    Raises:
        ValueError: if the language's file has no docstring for the function, or one
            that is still the English text, or one under another signature (a missing
            translation stops the build, naming the function); FileNotFoundError if the
            file is missing.
    """
    if check_language(language) == DEFAULT_LANGUAGE:
        return source
    function = ast.parse(source).body[0]
    doc = _docstring_node(function) if isinstance(function, ast.FunctionDef) else None
    if not isinstance(function, ast.FunctionDef) or doc is None:
        raise ValueError(f"{source.split(chr(10))[0]}: not a function with a docstring")
    name, shown = function.name, _shown(docstrings_path(language))
    table = translated_docstrings(language)
    if name not in table:
        raise ValueError(f"{shown}: no {language!r} docstring of the graded function {name} "
                         "(write it there, under the function's signature)")
    signature, doc_lines = table[name]
    if signature != _signature(function):
        raise ValueError(f"{shown}: {name}'s signature differs from the one in solutions/ "
                         "(copy the signature of solutions/ and translate its docstring)")
    lines = source.split("\n")
    if lines[doc.lineno - 1:doc.end_lineno] == doc_lines:
        raise ValueError(f"{shown}: {name}'s docstring is still the English one")
    return "\n".join(lines[:doc.lineno - 1] + doc_lines + lines[doc.end_lineno:])

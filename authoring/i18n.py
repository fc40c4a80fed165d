"""Keep the kit's message catalogues: extract the marked messages, update each language's
``.po``, compile its ``.mo``, check that all of it is current. With Babel (the ``lint``
extra of ``pyproject.toml``).

The English text is the code's own (``_()``, ``ngettext()``, ``N_()`` of
``grader_tests.i18n``, in the files of ``SOURCES``; ``tr()`` in the code that runs in the
student's kernel, whose messages ``kernel_catalogue`` compiles apart); each other language of
``grader_tests.i18n.LANGUAGES`` has ``grader_tests/locale/<lang>/LC_MESSAGES/
attention_kit.po`` (written by a translator) and its compiled ``attention_kit.mo``, both
committed, so that grading needs no Babel. After changing a marked message::

    python -m tools.i18n update    # the .po gains the new msgids (empty) and loses the old
    # translate the empty entries of the .po, then
    python -m tools.i18n compile   # writes the .mo
    python -m tools.i18n check     # exit 1, naming what is stale or untranslated (a test runs it)

``extract`` prints the template (the ``.pot``) on standard output; no template is kept.
"""

from __future__ import annotations

import argparse
import datetime
import io
import sys
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_file
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "grader_tests"
# Where the marked messages are: the graders and every module of the package, the
# instructor's tools that print for people; and the code that runs in the student's kernel,
# whose messages are ``tr()``: the Validate helpers, the visible tests of the English
# notebook documents (the translations' have the same strings) and the training gate.
SOURCES = ("grader_tests/**/*.py", "tools/demo.py",
           "notebooks/validate_helpers.py", "notebooks/attention.py", "notebooks/training.py",
           "notebooks/gate.py", "authoring/build_training_notebook.py")
KEYWORDS = {"_": None, "N_": None, "ngettext": (1, 2), "tr": None}
# The code that runs in the student's kernel, where the kit's package may not be: its
# messages (``tr()``) are shipped beside each notebook of a course in another language, as
# the catalogue ``authoring.notebook_cells.KERNEL_CATALOGUE`` (``kernel_catalogue``), which
# the Validate helpers read.
KERNEL_SOURCES = ("notebooks/validate_helpers.py", "notebooks/attention.py",
                  "notebooks/training.py", "notebooks/gate.py")
KERNEL_KEYWORDS = {"tr": None}
DOMAIN = "attention_kit"
# Fixed header dates: the catalogue's bytes change only when its messages do.
STAMP = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
TRANSLATED = ("it",)


def source_files() -> list[Path]:
    """The files messages are extracted from, sorted (relative order fixes the template's)."""
    files: set[Path] = set()
    for pattern in SOURCES:
        files.update(p for p in ROOT.glob(pattern) if "locale" not in p.parts)
    return sorted(files)


def _catalog(locale: str | None = None) -> Catalog:
    return Catalog(locale=locale, domain=DOMAIN, project="attention-kit", version="0.1.0",
                   creation_date=STAMP, revision_date=STAMP, fuzzy=False,
                   charset="utf-8")


def extract(files: list[Path] | None = None, keywords: dict | None = None) -> Catalog:
    """The template: every message marked in ``files`` (default ``source_files()``), with
    its locations.

    Args:
        files: the Python files to read.
        keywords: the marking functions, as Babel takes them (default ``KEYWORDS``).

    Raises:
        SyntaxError: a source file does not parse.
    """
    keywords = KEYWORDS if keywords is None else keywords
    template = _catalog()
    for path in source_files() if files is None else files:
        rel = path.relative_to(ROOT).as_posix()
        for lineno, message, comments, context in extract_from_file(
                "python", str(path), keywords=keywords, strip_comment_tags=True):
            template.add(message, None, [(rel, lineno)], auto_comments=comments,
                         context=context)
    return template


def hidden_marks() -> list[str]:
    """Messages marked inside an f-string, which extraction cannot see (Python 3.11
    tokenizes an f-string as one string): one ``"<file>:<line>: ..."`` line each."""
    import ast

    found = []
    for path in source_files():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.JoinedStr):
                continue
            for inner in ast.walk(node):
                func = getattr(inner, "func", None)
                name = getattr(func, "id", None) or getattr(func, "attr", None)
                if isinstance(inner, ast.Call) and name in KEYWORDS:
                    found.append(f"{path.relative_to(ROOT).as_posix()}:{inner.lineno}: "
                                 f"{name}() inside an f-string is not extracted")
    return found


def kernel_catalogue(lang: str) -> bytes:
    """The compiled catalogue of the messages that run in the student's kernel
    (``tr()`` in ``KERNEL_SOURCES``), in ``lang``, from its ``.po``: only
    those messages (nothing of the graders' is handed to students). The builders write it
    as ``authoring.notebook_cells.KERNEL_CATALOGUE`` beside each notebook of a course in
    ``lang``.

    Args:
        lang: a language of ``TRANSLATED``.

    Returns:
        bytes of a gettext ``.mo`` file (the same bytes for the same catalogue).

    Raises:
        ValueError: a kernel message has no translation in the ``.po`` of ``lang`` (or a
            fuzzy one), or ``lang`` is not translated.
    """
    if lang not in TRANSLATED:
        raise ValueError(f"no catalogue for the language {lang!r} (translated: "
                         f"{', '.join(TRANSLATED)})")
    wanted = extract([ROOT / rel for rel in KERNEL_SOURCES], KERNEL_KEYWORDS)
    catalog = read(lang)
    out = _catalog(lang)
    missing = []
    for message in wanted:
        if not message.id:
            continue
        kept = catalog.get(message.id)
        if kept is None or not kept.string or kept.fuzzy:
            missing.append(message.id)
            continue
        out.add(message.id, kept.string)
    if missing:
        raise ValueError(f"{po_path(lang).relative_to(ROOT)}: {len(missing)} message(s) of the "
                         f"notebooks' code untranslated (python -m tools.i18n update, translate, "
                         f"compile): " + "; ".join(repr(m) for m in missing[:5]))
    return mo_bytes(out)


def po_path(lang: str) -> Path:
    """``grader_tests/locale/<lang>/LC_MESSAGES/attention_kit.po``."""
    return PACKAGE / "locale" / lang / "LC_MESSAGES" / f"{DOMAIN}.po"


def read(lang: str) -> Catalog:
    """The ``.po`` of ``lang`` (an empty catalogue when there is none yet)."""
    path = po_path(lang)
    if not path.exists():
        return _catalog(lang)
    with path.open("rb") as f:
        return read_po(f, locale=lang, domain=DOMAIN)


def po_bytes(catalog: Catalog) -> bytes:
    """The ``.po`` text of ``catalog``, as the repository keeps it: each message with the
    files it is marked in, without line numbers (an edit elsewhere in a file leaves the
    catalogue as it is)."""
    out = io.BytesIO()
    write_po(out, catalog, width=88, sort_output=False, ignore_obsolete=True,
             include_previous=False, include_lineno=False)
    return out.getvalue()


def mo_bytes(catalog: Catalog) -> bytes:
    """The compiled ``.mo`` of ``catalog`` (fuzzy entries left out)."""
    out = io.BytesIO()
    write_mo(out, catalog, use_fuzzy=False)
    return out.getvalue()


def update(lang: str) -> Catalog:
    """The ``.po`` of ``lang`` brought to the template: new msgids added untranslated, the
    msgids no longer marked dropped, locations refreshed. No fuzzy matching: a changed
    English message is translated again, never guessed from a neighbour."""
    catalog = read(lang)
    catalog.update(extract(), no_fuzzy_matching=True, update_header_comment=False)
    catalog.revision_date = STAMP
    catalog.creation_date = STAMP
    return catalog


def problems(lang: str) -> list[str]:
    """What is wrong with the catalogue of ``lang``, one line each (empty: current).

    A message marked inside an f-string (``hidden_marks``), a msgid marked in the code
    but missing from the ``.po``, one of the ``.po`` no longer
    marked, an empty or fuzzy translation, a translation that drops or adds a ``{name}``
    placeholder, a ``.po`` not in the form ``update`` writes, a ``.mo`` that is not the
    ``.po`` compiled.
    """
    import string

    found: list[str] = hidden_marks()
    template = extract()
    catalog = read(lang)
    marked = {m.id for m in template if m.id}
    kept = {m.id for m in catalog if m.id}

    def key(msgid: object) -> str:
        return msgid if isinstance(msgid, str) else " | ".join(msgid)  # type: ignore[arg-type]

    for msgid in sorted(marked - kept, key=key):
        found.append(f"{lang}: not in the catalogue: {key(msgid)!r}")
    for msgid in sorted(kept - marked, key=key):
        found.append(f"{lang}: no longer marked in the code: {key(msgid)!r}")

    def fields(text: str) -> set[str]:
        try:
            return {f for _, f, _, _ in string.Formatter().parse(text) if f is not None}
        except ValueError:
            return {"<malformed>"}

    for m in catalog:
        if not m.id:
            continue
        strings = m.string if isinstance(m.string, (tuple, list)) else (m.string,)
        ids = m.id if isinstance(m.id, (tuple, list)) else (m.id,)
        if m.fuzzy:
            found.append(f"{lang}: fuzzy: {key(m.id)!r}")
        if not all(strings):
            found.append(f"{lang}: untranslated: {key(m.id)!r}")
            continue
        wanted = set().union(*(fields(str(i)) for i in ids))
        for s in strings:
            if fields(str(s)) != wanted:
                found.append(f"{lang}: placeholders {sorted(fields(str(s)))} instead of "
                             f"{sorted(wanted)}: {key(m.id)!r}")
    if not found:
        path = po_path(lang)
        if path.read_bytes() != po_bytes(update(lang)):
            found.append(f"{lang}: {path.relative_to(ROOT)} is not as `update` writes it")
        mo = path.with_suffix(".mo")
        if not mo.exists() or mo.read_bytes() != mo_bytes(catalog):
            found.append(f"{lang}: {mo.relative_to(ROOT)} is not the .po compiled "
                         f"(python -m tools.i18n compile)")
    return found


def main(argv: list[str] | None = None) -> int:
    """``python -m tools.i18n extract|update|compile|check [--lang LANG]``.

    Returns:
        int, the exit status: 0, or 1 when ``check`` found something (each on stderr) or
        ``compile`` met an untranslated or fuzzy entry.
    """
    parser = argparse.ArgumentParser(prog="python -m tools.i18n", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("command", choices=("extract", "update", "compile", "check"))
    parser.add_argument("--lang", action="append", choices=TRANSLATED,
                        help="a language (default: every one)")
    args = parser.parse_args(argv)
    langs = args.lang or list(TRANSLATED)
    if args.command == "extract":
        sys.stdout.buffer.write(po_bytes(extract()))
        return 0
    status = 0
    for lang in langs:
        path = po_path(lang)
        if args.command == "update":
            path.parent.mkdir(parents=True, exist_ok=True)
            catalog = update(lang)
            path.write_bytes(po_bytes(catalog))
            missing = sum(1 for m in catalog if m.id and not m.string)
            print(f"{path.relative_to(ROOT)}: {len(catalog)} messages, {missing} to translate")
        elif args.command == "compile":
            catalog = read(lang)
            left = [m.id for m in catalog if m.id and (m.fuzzy or not m.string
                                                       or not all(m.string))]
            if left:
                for msgid in left:
                    print(f"{lang}: untranslated or fuzzy: {msgid!r}", file=sys.stderr)
                status = 1
                continue
            path.with_suffix(".mo").write_bytes(mo_bytes(catalog))
            print(f"{path.with_suffix('.mo').relative_to(ROOT)}: {len(catalog)} messages")
        else:
            for line in problems(lang):
                print(line, file=sys.stderr)
                status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())

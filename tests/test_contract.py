"""The contract is in the repository (docs/contract.md), and whatever the kit cites is
there: every function of the reference with its parameters, every fault id, every section
a file cites; no file cites a document the repository does not contain."""

import inspect
import re
import subprocess

from grader_tests.faults import FAULTS
from solutions import attention as reference
from tests.helpers import ROOT

CONTRACT = ROOT / "docs" / "contract.md"
TEXT = CONTRACT.read_text(encoding="utf-8")
SECTIONS = {int(n) for n in re.findall(r"^## (\d+)\. ", TEXT, re.MULTILINE)}


def _tracked():
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()
    return [ROOT / p for p in listed if p.endswith((".py", ".md", ".ipynb", ".j2", ".sh",
                                                    ".toml", ".yml", ".json", ".cfg"))
            or p in ("Makefile", ".ci/run")]


def test_every_function_of_the_reference_is_in_the_contract_with_its_parameters():
    for name in reference.SPEC_FUNCTIONS:
        parameters = list(inspect.signature(getattr(reference, name)).parameters)
        entry = re.search(rf"`{name}\(([^`]*)\)`", TEXT)
        assert entry, f"docs/contract.md has no entry `{name}(...)`"
        written = [p.split("=")[0].strip() for p in entry.group(1).split(",") if p.strip()]
        assert written == parameters, (name, written, parameters)


def test_every_fault_id_is_in_the_contract():
    faults_table = TEXT[TEXT.index("| fault id | meaning |"):]  # the table of fault ids
    faults_table = faults_table[:faults_table.find("\n\n")] if "\n\n" in faults_table \
        else faults_table
    table = dict(re.findall(r"^\| `([a-z-]+)` \| (.+) \|$", faults_table, re.MULTILINE))
    assert set(table) == set(FAULTS), sorted(set(table) ^ set(FAULTS))


def test_no_file_cites_a_document_the_repository_does_not_contain():
    cited = re.compile(r"\bSPEC( section| trap|:|\.md)|\.\./shared|docs/contract\.md §(\d+)")
    wrong = []
    for path in _tracked():
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            for m in cited.finditer(line):
                if m.group(2) is None or int(m.group(2)) not in SECTIONS:
                    wrong.append(f"{path.relative_to(ROOT)}:{number}: {m.group(0)}")
    assert wrong == [], "\n".join(wrong[:40])

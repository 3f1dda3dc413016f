"""Nomad job corpora: how many job files validate, as ``herder validate`` checks them, and how many
run with every key honoured.

    python bench/nomad_corpus.py                    # the corpus under tests/core/jobspec/corpus/
    python bench/nomad_corpus.py --nomad [SOURCE]   # Nomad's own job files

The first reads the real-shaped Nomad 1.x job files kept with the tests, and replaces the "Nomad job
corpus" section of ``bench/RESULTS.md``: the share that validates and a table of the failures with
their reasons.

The second reads the job files of Nomad's repository at its newest commit (``HEAD``): every
``.nomad`` / ``.hcl`` file under ``e2e/``, ``demo/`` and ``website/`` that declares a ``job``.
SOURCE is a clone (a work tree or a bare git directory) or a git URL, cloned shallow into a
temporary directory (default: Nomad's repository on GitHub). It replaces the "Nomad repository job
files" section: how many validate, how many of those run with no key ignored (no warning at all),
the warnings left grouped by key (how many files each costs), and the files that do not validate.

Each file goes through the job file loader and the installed drivers' config schemas, with
``file()`` reading beside the file, as ``herder job run`` reads it.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from pathlib import Path

from herder.errors import JobError
from herder.jobspec import load_job, validate_task_configs
from herder.model import Job
from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import write_section

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "core" / "jobspec" / "corpus"
SUFFIXES = (".hcl", ".nomad", ".json")
WHY = {
    "overlapping-ports.nomad.hcl": "by design: Nomad 0.6's fixture of port labels differing only in case, "
                                   "which Nomad refuses too",
    "csi-volume.nomad.hcl": "herder has no CSI (host volumes only): the csi volume is refused, naming it",
}
"""Why a file of the corpus fails, where it is meant to or herder lacks the feature."""

NOMAD_URL = "https://github.com/hashicorp/nomad"
NOMAD_DIRS = ("e2e", "demo", "website")
"""Where Nomad keeps job files written to be run: its end-to-end suite, its demos, its documentation."""
_JOB = re.compile(r'^\s*job\s+"', re.MULTILINE)
IGNORING = "ignoring stanzas herder does not implement: "


def corpus_files() -> list[Path]:
    """The job files of the corpus, by name."""
    return sorted(path for path in CORPUS.iterdir() if path.suffix in SUFFIXES)


def checked(path: Path, hooks: Hooks) -> tuple[Job | None, list[str]]:
    """The job at ``path`` and what ``herder validate`` would report for it (nothing when it validates)."""
    try:
        job = load_job(path)
    except JobError as exc:
        return None, exc.errors
    return job, validate_task_configs(job, hooks.task_schemas(), hooks.plugins.unavailable())


def problems_of(path: Path, hooks: Hooks) -> list[str]:
    """What ``herder validate`` would report for ``path`` (nothing when it validates)."""
    return checked(path, hooks)[1]


def warned_keys(warnings: list[str]) -> list[str]:
    """What each warning of a job leaves out: the keys of "ignoring stanzas ...", each other warning
    by its text up to its first colon or parenthesis, the indexes of a path in it left out (so that
    ``job.groups[0].tasks[1].x is ignored`` counts as one key whichever task it names)."""
    keys: list[str] = []
    for warning in warnings:
        if warning.startswith(IGNORING):
            keys += warning[len(IGNORING):].split(", ")
        else:
            keys.append(re.sub(r"\[\d+\]", "[]", re.split(r"[:(]", warning, maxsplit=1)[0].strip()))
    return sorted(set(keys))


def local_corpus(hooks: Hooks) -> None:
    files = corpus_files()
    failures = {path.name: found for path in files if (found := problems_of(path, hooks))}
    valid = len(files) - len(failures)
    meant = [name for name in failures if WHY.get(name, "").startswith("by design")]
    lines = [f"{valid} of {len(files)} job files validate ({100 * valid / len(files):.0f}%); of the "
             f"{len(files) - len(meant)} that Nomad accepts, {valid} ({100 * valid / (len(files) - len(meant)):.0f}%).",
             ""]
    if failures:
        lines += ["| File | Why | Problems |", "|---|---|---|"]
        for name, found in failures.items():
            reasons = "; ".join(problem.replace(str(CORPUS) + "/", "") for problem in found)
            escaped = reasons.replace("|", "\\|")
            lines.append(f"| `{name}` | {WHY.get(name, 'unexpected')} | {escaped} |")
    body = "\n".join(lines)
    print(body)
    write_section("Nomad job corpus", "python bench/nomad_corpus.py", body)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def nomad_tree(source: str, into: Path) -> tuple[Path, str]:
    """Nomad's ``e2e``, ``demo`` and ``website`` at ``HEAD`` of ``source`` (a clone or a URL), written
    under ``into``; and the commit."""
    repo = Path(source)
    if not repo.exists():
        repo = into / "clone"
        subprocess.run(["git", "clone", "--quiet", "--depth", "1", "--no-checkout", source, str(repo)], check=True)
    commit = git(repo, "rev-parse", "HEAD").strip()
    present = [name for name in NOMAD_DIRS if git(repo, "ls-tree", "--name-only", "HEAD", name).strip()]
    tree = into / "tree"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", "HEAD", *present],
                             check=True, capture_output=True).stdout
    tar_path = into / "tree.tar"
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(tree, filter="data")
    return tree, commit


def job_files(tree: Path) -> list[Path]:
    """The files under ``tree`` that declare a Nomad job."""
    found = []
    for path in sorted(tree.rglob("*")):
        if path.is_file() and not path.is_symlink() and path.name.endswith((".nomad", ".hcl")):
            text = path.read_text(errors="replace")
            if _JOB.search(text):
                found.append(path)
    return found


def nomad_repository(hooks: Hooks, source: str) -> None:
    with tempfile.TemporaryDirectory(prefix="nomad-corpus-") as temp:
        tree, commit = nomad_tree(source, Path(temp))
        files = job_files(tree)
        invalid: dict[str, str] = {}
        honoured = 0
        costs: Counter[str] = Counter()
        for path in files:
            job, problems = checked(path, hooks)
            name = str(path.relative_to(tree))
            if job is None or problems:
                invalid[name] = problems[0].replace(str(tree) + "/", "") if problems else "no job"
                continue
            keys = set(warned_keys(job.warnings))
            costs.update(keys)
            honoured += not keys
    valid = len(files) - len(invalid)
    lines = [f"Nomad's repository at {commit[:12]} ({', '.join(f'`{d}/`' for d in NOMAD_DIRS)}): "
             f"{len(files)} job files; {valid} validate ({100 * valid / len(files):.0f}%); "
             f"**{honoured} run with every key honoured ({100 * honoured / len(files):.0f}%)**, "
             f"{valid - honoured} lose something with a warning.", ""]
    if costs:
        lines += ["What the warnings leave out, by key (files that lose it; a file may lose several):", "",
                  "| Key | Files |", "|---|---|"]
        lines += [f"| `{key}` | {count} |" for key, count in sorted(costs.items(), key=lambda kv: (-kv[1], kv[0]))]
        lines.append("")
    if invalid:
        lines += ["Files that do not validate (the first problem of each):", "", "| File | Problem |", "|---|---|"]
        lines += [f"| `{name}` | {problem.replace('|', chr(92) + '|')} |" for name, problem in invalid.items()]
    body = "\n".join(lines)
    print(body)
    write_section("Nomad repository job files", "python bench/nomad_corpus.py --nomad SOURCE", body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nomad", nargs="?", const=NOMAD_URL, metavar="SOURCE",
                        help="measure Nomad's own job files: a clone of its repository, or a git URL "
                             f"(default {NOMAD_URL})")
    arguments = parser.parse_args()
    hooks = Hooks(load_plugins())
    if arguments.nomad is None:
        local_corpus(hooks)
    else:
        nomad_repository(hooks, arguments.nomad)


if __name__ == "__main__":
    main()

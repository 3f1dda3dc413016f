"""Nomad job corpus: how many of the real-shaped Nomad 1.x job files under
``tests/core/jobspec/corpus/`` validate, as ``herder validate`` checks them.

    python bench/nomad_corpus.py

Each file goes through the job file loader and the installed drivers' config
schemas (the built-in raw_exec, exec and docker). The result replaces the
"Nomad job corpus" section of ``bench/RESULTS.md``: the share that validates
and a table of the failures with their reasons.
"""

from __future__ import annotations

import sys
from pathlib import Path

from herder.errors import JobError
from herder.jobspec import load_job, validate_task_configs
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


def corpus_files() -> list[Path]:
    """The job files of the corpus, by name."""
    return sorted(path for path in CORPUS.iterdir() if path.suffix in SUFFIXES)


def problems_of(path: Path, hooks: Hooks) -> list[str]:
    """What ``herder validate`` would report for ``path`` (nothing when it validates)."""
    try:
        job = load_job(path)
    except JobError as exc:
        return exc.errors
    return validate_task_configs(job, hooks.task_schemas(), hooks.plugins.unavailable())


def main() -> None:
    hooks = Hooks(load_plugins())
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


if __name__ == "__main__":
    main()

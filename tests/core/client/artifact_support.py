"""Building archives and git repositories at test time, and a task context to fetch artifacts into."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from herder.client.hooks.artifacts import ArtifactsConfig, ArtifactsPlugin
from herder.context import TaskContext, TaskDir
from herder.model import Artifact, Task
from herder.objects import TaskEvent


def tar_bytes(members: list[tarfile.TarInfo | tuple[str, bytes]], compression: str = "") -> bytes:
    """A tar archive of ``(name, content)`` files and ready-made ``TarInfo`` members."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=f"w:{compression}" if compression else "w") as tar:
        for member in members:
            if isinstance(member, tarfile.TarInfo):
                tar.addfile(member)
            else:
                name, content = member
                info = tarfile.TarInfo(name)
                info.size = len(content)
                info.mode = 0o755 if name.endswith(".sh") else 0o644
                tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def tar_link(name: str, target: str, *, hard: bool = False) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.LNKTYPE if hard else tarfile.SYMTYPE
    info.linkname = target
    return info


def tar_special(name: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.devmajor, info.devminor = 1, 3
    return info


def zip_bytes(files: list[tuple[str, bytes]], links: list[tuple[str, str]] = ()) -> bytes:  # type: ignore[assignment]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, content in files:
            zf.writestr(name, content)
        for name, target in links:
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o120777 << 16)
            zf.writestr(info, target)
    return buffer.getvalue()


@dataclass
class Context:
    """A task context on a real task directory, recording its events."""

    root: Path
    ctx: TaskContext = field(init=False)
    events: list[TaskEvent] = field(default_factory=list)

    def __post_init__(self) -> None:
        alloc = self.root / "alloc"
        task = self.root / "task"
        for path in (alloc / "data", alloc / "logs", task / "local", task / "secrets", task / "tmp"):
            path.mkdir(parents=True, exist_ok=True)
        sink = open(self.root / "out.log", "wb")  # noqa: SIM115 (closed with the test's tmp dir)
        self.ctx = TaskContext(
            alloc_id="a1", alloc_name="j.g[0]", alloc_index=0, job_name="j", group_name="g", task_name="t",
            env={"NOMAD_PORT_http": "8080", "HOME_DIR": "/home/x"},
            task_dir=TaskDir(dir=task, local_dir=task / "local", secrets_dir=task / "secrets",
                             tmp_dir=task / "tmp", alloc_dir=alloc, logs_dir=alloc / "logs"),
            ports=[], stdout=sink, stderr=sink, emitter=self.events.append,
        )

    @property
    def task_dir(self) -> Path:
        return self.ctx.task_dir.dir

    def types(self) -> list[str]:
        return [event.type for event in self.events]

    def details(self, type: str) -> list[dict[str, Any]]:
        return [event.details for event in self.events if event.type == type]


def tree(root: Path) -> dict[str, str]:
    """Every file and link under ``root``: relative path -> content or ``-> target``."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        if path.is_symlink():
            out[key] = f"-> {path.readlink()}"
        elif path.is_file():
            out[key] = path.read_bytes().decode(errors="replace")
    return out


def fetch(context: Context, *artifacts: Artifact, config: ArtifactsConfig | None = None) -> None:
    """Run the artifacts plugin's prestart for a task with ``artifacts``."""
    plugin = ArtifactsPlugin(config or ArtifactsConfig())
    try:
        plugin.herder_task_prestart(Task(name="t", driver="raw_exec", artifacts=artifacts), context.ctx)
    finally:
        plugin.close()


ENV = {"PATH": os.environ["PATH"], "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1",
       "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
       "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}


def run_git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=ENV, check=True, capture_output=True,
                          text=True).stdout.strip()


class Repo:
    """A work tree to commit in, pushed to the bare repository ``bare`` that is served."""

    def __init__(self, root: Path, name: str = "repo.git") -> None:
        self.work = root / "work" / name
        self.bare = root / "served" / name
        self.work.mkdir(parents=True)
        run_git(self.work, "init", "--quiet", "--initial-branch=main")

    def commit(self, files: dict[str, str], message: str = "change", links: dict[str, str] | None = None) -> str:
        for name, content in files.items():
            path = self.work / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
            path.chmod(0o755 if name.endswith(".sh") else 0o644)
        for name, target in (links or {}).items():
            (self.work / name).symlink_to(target)
        run_git(self.work, "add", "--all")
        run_git(self.work, "commit", "--quiet", "--allow-empty", "--message", message)
        return run_git(self.work, "rev-parse", "HEAD")

    def publish(self) -> None:
        if not self.bare.exists():
            self.bare.parent.mkdir(parents=True, exist_ok=True)
            run_git(self.work.parent, "init", "--quiet", "--bare", str(self.bare))
        run_git(self.work, "push", "--quiet", "--force", "--tags", str(self.bare), "+refs/heads/*:refs/heads/*")
        run_git(self.bare, "symbolic-ref", "HEAD", "refs/heads/main")

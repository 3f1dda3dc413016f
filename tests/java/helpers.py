"""Helpers for the java driver's tests: the test application, compiled at test time, and the plugin
that puts it into every task's local directory."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

APP_SOURCE = Path(__file__).resolve().parent / "app" / "HerderTestApp.java"
MAIN_CLASS = "HerderTestApp"
JAR = "local/app.jar"
"""Where the test application's jar is in every task directory (:func:`build` and the plugin put it there)."""
CLASSES = "local/classes"
LIB = "local/lib"

PLAIN = {"isolation": "none"}
ISOLATED = {"isolation": "exec"}
"""The two ways a JVM runs, as ``[plugin.java]`` tables."""


def build(where: Path) -> Path:
    """Compile the test application into ``where``: ``classes/``, ``app.jar`` (its main class in the
    manifest) and ``lib/herder-test-app.jar`` (without one). ``where`` itself."""
    javac, jar = shutil.which("javac"), shutil.which("jar")
    assert javac and jar, "javac and jar are needed"
    classes = where / "classes"
    subprocess.run([javac, "-nowarn", "-d", str(classes), str(APP_SOURCE)], check=True, capture_output=True,
                   timeout=120)
    subprocess.run([jar, "--create", "--file", str(where / "app.jar"), "--main-class", MAIN_CLASS,
                    "-C", str(classes), "."], check=True, capture_output=True, timeout=120)
    (where / "lib").mkdir()
    subprocess.run([jar, "--create", "--file", str(where / "lib" / "herder-test-app.jar"), "-C", str(classes), "."],
                   check=True, capture_output=True, timeout=120)
    return where


PLUGIN = '''
"""A lifecycle plugin of the java driver's tests: copies the test application into every task's local
directory before the driver's prestart, as an artifact would fetch it."""

import shutil
from pathlib import Path

from herder import hookimpl

BUILD = Path({build!r})


class JavaAppFiles:
    def __init__(self, config):
        pass

    @hookimpl
    def herder_task_prestart(self, task, ctx):
        local = ctx.task_dir.local_dir
        shutil.copy(BUILD / "app.jar", local / "app.jar")
        shutil.copytree(BUILD / "classes", local / "classes", dirs_exist_ok=True)
        shutil.copytree(BUILD / "lib", local / "lib", dirs_exist_ok=True)
'''


def plugin_source(build_dir: Path) -> str:
    return PLUGIN.format(build=str(build_dir))


def app(*args: str, **config: Any) -> dict[str, Any]:
    """A java task config running the test application's jar with ``args``."""
    return {"jar_path": JAR, "args": list(args), **config}

"""herder's template engine against Go's own text/template, byte for byte.

A small Go program (``gotemplate_go/main.go``) is built with ``go build`` at
test time and renders every row of ``test_gotemplate.py``'s tables, and
consul-template-style uses of the functions that need no network (written as
plain Go there), with the same data; herder's engine must print the same
bytes, and fail where Go fails. Without ``go`` the test is skipped, unless
HERDER_REQUIRE names ``go``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from herder.client.hooks.gotemplate import Template, TemplateError
from herder.client.hooks.template_functions import PURE_FUNCTIONS
from tests.core.client.test_gotemplate import DATA, ERRORS, TABLE
from tests.support.require import require

PROGRAM = Path(__file__).parent / "gotemplate_go" / "main.go"
ENV = {"HOME": "/home/app", "EMPTY": ""}

NEEDS_GO: dict[str, tuple[tuple[int, int], str]] = {
    "{{ range 3 }}{{ . }}{{ end }}": ((1, 22), "range over an integer"),
    "{{ with .empty }}x{{ else with .name }}{{ . }}{{ end }}": ((1, 23), "{{else with}}"),
    "{{with 0}}{{.}}{{else with false}}{{.}}{{else with `notempty`}}{{.}}{{end}}": ((1, 23), "{{else with}}"),
}
"""Rows of text/template features newer than some Go releases: compared only with a Go that has them."""

DIFFERENT_WORDS: dict[str, str] = {
    "{{true|printf}}": "Go checks an argument's type before the call (\"wrong type for value; expected string; "
                       "got bool\"); herder's functions are Python, and the error is the call's",
    "{{ .name.x }}": "Go names the static type of the map's values (\"in type interface {}\"); herder's values "
                     "have only their own type (\"in type string\")",
}
"""Error rows where herder fails where Go fails, in other words; why."""

FUNCTION_ROWS: list[str] = [
    '{{ env "HOME" }}|{{ env "EMPTY" }}|{{ env "NONE" }}',
    '{{ "web" | toUpper }} {{ "WEB" | toLower }} {{ "hello web-app" | toTitle }} [{{ "  x \\n" | trimSpace }}]',
    '{{ .map | toJSON }} {{ .list | toJSON }} {{ .people | toJSON }} {{ .name | toJSON }}',
    "{{ .nested | toJSONPretty }}",
    '{{ split "," "a,b,c" }} {{ split "," "" | len }} {{ "a:b" | split ":" | join "-" }}',
    '{{ join "," .list }} {{ .nums | join "+" }}',
    '{{ "a-b-c" | replaceAll "-" "." }}',
    '{{ if .list | contains "b" }}has b{{ end }} {{ contains "eb" .name }} {{ in .list "z" }}',
    '{{ "42" | parseInt }} {{ parseInt " 7 " | printf "%d" }} {{ "1.50" | parseFloat }} {{ "true" | parseBool }}',
    '{{ "web:8080" | base64Encode }} {{ "d2ViOjgwODA=" | base64Decode }}',
    '{{ range $i, $s := split "," "x,y" }}{{ $i }}{{ $s | toUpper }}{{ end }}',
]


def _go_version(go: str) -> tuple[int, int]:
    text = subprocess.run([go, "version"], capture_output=True, text=True, check=True, timeout=60).stdout
    match = re.search(r"go(\d+)\.(\d+)", text)
    assert match, text
    return int(match.group(1)), int(match.group(2))


@pytest.fixture(scope="module")
def go_render(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[int, int]]:
    """The Go program, built; and the Go version it was built with."""
    go = shutil.which("go")
    require("go", go is not None, "go is not installed (Debian: apt-get install golang-go)")
    assert go is not None
    binary = tmp_path_factory.mktemp("gotemplate") / "render"
    subprocess.run([go, "build", "-o", str(binary), str(PROGRAM)], check=True, timeout=600,
                   capture_output=True, cwd=PROGRAM.parent)
    return binary, _go_version(go)


def _go(binary: Path, templates: list[str]) -> list[dict[str, str]]:
    request = {"data": DATA, "env": ENV, "cases": [{"template": text, "left": "", "right": ""} for text in templates]}
    done = subprocess.run([str(binary)], input=json.dumps(request), capture_output=True, text=True, check=True,
                          timeout=120)
    results: list[dict[str, str]] = json.loads(done.stdout)
    return results


def _herder(text: str) -> dict[str, str]:
    functions: dict[str, Any] = {**PURE_FUNCTIONS, "env": lambda name: ENV.get(name, "")}
    try:
        return {"output": Template(text, name="t", functions=functions).execute(DATA)}
    except TemplateError as exc:
        return {"output": "", "error": str(exc)}


def _comparable(go_version: tuple[int, int], templates: list[str]) -> list[str]:
    return [text for text in templates if go_version >= NEEDS_GO.get(text, ((0, 0), ""))[0]]


def test_every_row_of_the_table_renders_as_go_renders_it(go_render: tuple[Path, tuple[int, int]]) -> None:
    binary, version = go_render
    templates = _comparable(version, [text for text, _ in TABLE] + FUNCTION_ROWS)
    assert len(templates) >= len(TABLE) + len(FUNCTION_ROWS) - len(NEEDS_GO)
    differ = [(text, go, _herder(text)) for text, go in zip(templates, _go(binary, templates), strict=True)
              if go != _herder(text)]
    assert differ == []


def test_every_error_row_is_an_error_in_go_with_the_same_words(go_render: tuple[Path, tuple[int, int]]) -> None:
    binary, _ = go_render
    results = _go(binary, [text for text, _ in ERRORS])
    missing = [(text, message, go) for (text, message), go in zip(ERRORS, results, strict=True)
               if not go.get("error") or (message not in go["error"] and text not in DIFFERENT_WORDS)]
    assert missing == []

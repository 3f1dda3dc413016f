"""HCL is parsed once, by python-hcl2, through its public API only; the templates of JSON and YAML files and
heredoc bodies go through python-hcl2 too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import herder
import herder.jobspec
from herder.jobspec.hcl_eval import HclSyntaxError, Interpolation, Reference, Template
from herder.jobspec.hcl_tree import parse_template
from tests.core.jobspec.helpers import load, problems, task_hcl

SOURCES = sorted(path for path in Path(herder.__file__).parent.rglob("*.py")
                 if "hcl2" in (text := path.read_text(encoding="utf-8")) or "lark" in text)
"""Every module of herder that works with python-hcl2's (or lark's) objects."""


def _private_uses(path: Path) -> list[str]:
    """``x._name`` uses in ``path`` (dunders, and ``self``'s and ``cls``'s own, excepted), ``getattr(x, "_name")``,
    and imports of private hcl2 names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") and \
                not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            found.append(f"{path.name}:{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hcl2"):
            found += [f"{path.name}:{node.lineno}: {alias.name}" for alias in node.names if alias.name.startswith("_")]
            if any(part.startswith("_") for part in (node.module or "").split(".")):
                found.append(f"{path.name}:{node.lineno}: {node.module}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" and \
                len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and str(node.args[1].value)[:1] == "_":
            found.append(f"{path.name}:{node.lineno}: getattr(..., {node.args[1].value!r})")
    return found


def test_the_job_file_reader_uses_no_private_attribute() -> None:
    assert {path.name for path in SOURCES} >= {"hcl.py", "hcl_tree.py"}
    assert [use for path in SOURCES for use in _private_uses(path)] == []


def test_the_private_attribute_check_finds_them(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("from hcl2.rules._x import y\nline = getattr(rule, '_meta', None)\nstart = rule._meta.start\n")
    assert len(_private_uses(sample)) == 3


def test_there_is_no_second_expression_parser() -> None:
    source = (Path(herder.jobspec.__file__).parent / "hcl_eval.py").read_text(encoding="utf-8")
    assert "class _Parser" not in source and "def parse_expression" not in source


def test_template_text_is_parsed_by_python_hcl2() -> None:
    template = parse_template('say "${upper("hi")}" to $${HOME}\n and ${NOMAD_PORT_http}')
    assert template.parts[0] == 'say "'
    assert template.parts[2] == '" to ${HOME}\n and '
    assert template.parts[3] == Interpolation(Reference("NOMAD_PORT_http"), "NOMAD_PORT_http")
    assert parse_template("no interpolation") == Template(("no interpolation",))
    with pytest.raises(HclSyntaxError):
        parse_template("${unclosed")


def test_a_heredoc_keeps_its_quotes_and_backslashes_and_evaluates_its_interpolations() -> None:
    text = task_hcl('''
      config { command = "/bin/true" }
      template {
        destination = "local/a"
        data = <<-EOT
          say "${upper("hi")}" \\n {{ env "X" }} $${HOME} ${NOMAD_PORT_http}
          EOT
      }
''')
    data = load(text).groups[0].tasks[0].templates[0].data
    assert data == 'say "HI" \\n {{ env "X" }} ${HOME} ${NOMAD_PORT_http}\n'


@pytest.mark.parametrize(("value", "construct"), [
    ("[for s in var.l : s][*]", "splat expressions"),
    ('"%{ if true }x%{ endif }"', "template directives"),
])
def test_an_expression_herder_cannot_evaluate_is_an_error_with_its_line(value: str, construct: str) -> None:
    text = task_hcl(f'      config {{ command = "/bin/true" }}\n      meta {{ a = {value} }}')
    [error] = problems(text)
    assert error.startswith("job.hcl:8: a: ") and construct in error

"""Constraint operators with Nomad's semantics: the cases of Nomad's own ``scheduler/feasible`` tests
(``TestCheckConstraint``, ``TestCheckOrder``, ``TestCheckVersionConstraint``,
``TestCheckSemverConstraint``, ``TestCheckRegexpConstraint``), a missing side written None."""

from __future__ import annotations

import pytest

from herder.client.constraints import check, meets, resolve
from herder.client.node import Node
from herder.model import Constraint

NODE = Node(name="node-1", datacenter="dc1", id="1234", node_class="gpu",
            attributes={"kernel.name": "linux", "cpu.numcores": "8", "driver.docker": "1",
                        "kernel.version": "5.15.0-91-generic"},
            meta={"rack": "r12", "tags": "ssd, fast,gpu", "empty": ""})


def side(value: str | None) -> tuple[str, bool]:
    return ("", False) if value is None else (value, True)


@pytest.mark.parametrize(("operator", "left", "right", "expected"), [
    ("=", "foo", "foo", True), ("is", "foo", "foo", True), ("==", "foo", "foo", True),
    ("==", "foo", None, False), ("==", None, "foo", False), ("==", None, None, False),
    ("!=", "foo", "foo", False), ("!=", "foo", "bar", True), ("!=", None, "foo", True),
    ("!=", "foo", None, True), ("!=", None, None, False), ("not", "foo", "bar", True),
    ("version", "1.2.3", "~> 1.0", True), ("version", None, "~> 1.0", False),
    ("regexp", "foobarbaz", r"[\w]+", True), ("regexp", None, r"[\w]+", False),
    ("<", "foo", "bar", False), ("<", None, "bar", False),
    ("set_contains", "foo,bar,baz", "foo,  bar  ", True), ("set_contains", "foo,bar,baz", "foo,bam", False),
    ("set_contains_all", "foo,bar,baz", "baz,foo", True), ("set_contains_any", "foo,bar", "bam, bar", True),
    ("set_contains_any", "foo,bar", "bam,baz", False), ("set_contains_any", None, "foo", False),
    ("is_set", "foo", None, True), ("is_set", None, None, False),
    ("is_not_set", None, None, True), ("is_not_set", "foo", None, False),
    ("distinct_hosts", None, None, True), ("distinct_property", "x", "2", True),
    ("no_such_operator", "foo", "foo", False),
])
def test_check_constraint(operator: str, left: str | None, right: str | None, expected: bool) -> None:
    assert check(operator, side(left), side(right)) is expected


@pytest.mark.parametrize(("operator", "left", "right", "expected"), [
    ("<", "bar", "foo", True), ("<=", "foo", "foo", True), (">", "bar", "foo", False), (">=", "bar", "bar", True),
    (">", "1", "foo", False), ("<", "10", "1", False), ("<", "1", "10", True), ("<", "10.5", "1.5", False),
    ("<", "1.5", "10.5", True), ("<", "9", "10.0", True), (">=", "-3", "-4", True),
])
def test_order_is_numeric_where_both_sides_are_numbers(operator: str, left: str, right: str, expected: bool) -> None:
    assert check(operator, side(left), side(right)) is expected


@pytest.mark.parametrize(("version", "constraint", "expected"), [
    ("1.2.3", "~> 1.0", True), ("1.2.3", ">= 1.0, < 1.4", True), ("2.0.1", "~> 1.0", False),
    ("1.4", ">= 1.0, < 1.4", False), ("1", "~> 1.0", True),
    ("1.3.0-beta1", ">= 0.6.1", False),  # prereleases are never > final releases
    ("1.7.0-alpha1", ">= 1.6.0-beta1", False),  # a prerelease's X.Y.Z must match
    ("1.3.0-beta1+ent", "= 1.3.0-beta1", True),  # metadata is ignored
    ("1.4.7", "~> 1.4.3", True), ("1.5.0", "~> 1.4.3", False), ("1.9", "~> 1.4", True),
    ("5.15.0-91-generic", ">= 3.0", False),  # a distribution's kernel is a prerelease to go-version
    ("1.2.3", "not a constraint", False), ("not a version", ">= 1.0", False), ("1.2.3", "!= 1.2.3", False),
])
def test_version(version: str, constraint: str, expected: bool) -> None:
    assert check("version", side(version), side(constraint)) is expected


@pytest.mark.parametrize(("version", "constraint", "expected"), [
    ("1.2.3", "~> 1.0", False), ("1.2.3", ">= 1.0, < 1.4", True), ("2.0.1", "~> 1.0", False),
    ("1.4", ">= 1.0, < 1.4", False), ("1", "~> 1.0", False),
    ("1.3.0-beta1", ">= 0.6.1", True), ("1.7.0-alpha1", ">= 1.6.0-beta1", True),
    ("1.7.0-beta", ">= 1.7.0", False), ("1.7.0", ">= 1.7.0-dev", True), ("1.7.0-beta.1", ">= 1.7.0-a", True),
    ("1.7.0-rc.1", ">= 1.7.0-dev", True), ("1.3.0-beta1+ent", "= 1.3.0-beta1", True),
    ("5.15.0-91-generic", ">= 3.0", True),
])
def test_semver(version: str, constraint: str, expected: bool) -> None:
    assert check("semver", side(version), side(constraint)) is expected


@pytest.mark.parametrize(("text", "pattern", "expected"), [
    ("foobar", "bar", True), ("foobar", "^foo", True), ("foobar", "^bar", False), ("zipzap", "foo", False),
    ("r12", r"^r\d+$", True), ("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!", "(a+)+$", False),  # RE2: no backtracking
    ("foo", "(?<=f)oo", False),  # lookbehind is not RE2: the pattern matches nothing
])
def test_regexp_is_go_syntax_matching_anywhere(text: str, pattern: str, expected: bool) -> None:
    assert check("regexp", side(text), side(pattern)) is expected


@pytest.mark.parametrize(("target", "expected"), [
    ("${attr.kernel.name}", ("linux", True)), ("${attr.nope}", ("", False)), ("${meta.rack}", ("r12", True)),
    ("${meta.empty}", ("", True)), ("${node.unique.name}", ("node-1", True)), ("${node.datacenter}", ("dc1", True)),
    ("${node.unique.id}", ("1234", True)), ("${node.class}", ("gpu", True)), ("${node.region}", ("global", True)),
    ("${node.pool}", ("default", True)), ("${node.nope}", ("", False)), ("linux", ("linux", True)),
    ("${attr.kernel.name}x", ("", False)), ("${attr.kernel.name", ("", False)),
])
def test_targets_resolve_against_the_node(target: str, expected: tuple[str, bool]) -> None:
    assert resolve(target, NODE) == expected


def test_constraints_against_the_node_with_meta_regexp_and_set_contains() -> None:
    assert meets(Constraint("${meta.rack}", "regexp", "^r[0-9]+$"), NODE)
    assert not meets(Constraint("${meta.rack}", "regexp", "^s[0-9]+$"), NODE)
    assert meets(Constraint("${meta.tags}", "set_contains", "gpu,ssd"), NODE)
    assert not meets(Constraint("${meta.tags}", "set_contains", "gpu,nvme"), NODE)
    assert meets(Constraint("${attr.cpu.numcores}", ">=", "4"), NODE)
    assert not meets(Constraint("${attr.kernel.name}", "=", "windows"), NODE)
    assert meets(Constraint("${attr.driver.docker}", "is_set", ""), NODE)
    assert str(Constraint("${attr.kernel.name}", "=", "windows")) == "${attr.kernel.name} = windows"

"""The template language against a table written from Go's text/template documentation.

Each row is (template, data, expected output). The expectations are what Go's
``text/template`` prints for the same template and data (the package
documentation's examples and rules: trimming, pipelines, variables, truth,
range over maps in key order, printf through fmt, printing of values).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from herder.client.hooks.gotemplate import Template, TemplateError, go_sprintf, render

DATA: dict[str, Any] = {
    "name": "web", "port": 8080, "zero": 0, "empty": "", "list": ["a", "b", "c"], "nums": [3, 1, 2],
    "map": {"b": 2, "a": 1}, "nested": {"inner": {"value": "deep"}}, "flag": True, "pi": 3.14159,
    "none": None, "items": [], "people": [{"Name": "ann", "Age": 31}, {"Name": "bob", "Age": 17}],
}

TABLE: list[tuple[str, str]] = [
    # text and actions
    ("plain text", "plain text"),
    ("{{ .name }}:{{ .port }}", "web:8080"),
    ("{{.nested.inner.value}}", "deep"),
    ("{{ .missing }}", "<no value>"),
    ("{{ .none }}", "<no value>"),
    ("{{ print .none }}", "<nil>"),
    ("{{ . | len }}", str(len(DATA))),
    ("{{/* a comment */}}x", "x"),
    ("a {{- /* trimmed comment */ -}} b", "ab"),
    # trim markers
    ("a  {{- .name }}", "aweb"),
    ("{{ .name -}}  \n  b", "webb"),
    ("x {{- 3 -}} y", "x3y"),
    ("{{3 -}}\n\n{{- 4}}", "34"),
    ("{{ -3 }}", "-3"),
    # literals
    ('{{ "quoted\\tstring" }}', "quoted\tstring"),
    ("{{ `raw\\n` }}", "raw\\n"),
    ("{{ 'a' }}", "97"),
    ("{{ 0x1F }} {{ 1_000 }} {{ 0o17 }}", "31 1000 15"),
    ("{{ 1.5 }} {{ 3.0 }} {{ 1e6 }} {{ 1e-5 }} {{ 123456.0 }} {{ 0.0001 }}", "1.5 3 1e+06 1e-05 123456 0.0001"),
    ("{{ true }} {{ false }} {{ print nil }}", "true false <nil>"),
    # printing of composite values
    ("{{ .list }}", "[a b c]"),
    ("{{ .map }}", "map[a:1 b:2]"),
    ("{{ .items }}", "[]"),
    # pipelines
    ('{{ "x" | printf "%s-%s" "y" }}', "y-x"),
    ("{{ .list | len }}", "3"),
    ('{{ "abc" | len | printf "%d chars" }}', "3 chars"),
    ('{{ (printf "%s" "inner") | printf "<%s>" }}', "<inner>"),
    ("{{ (index .people 0).Name }}", "ann"),
    # variables
    ("{{ $x := .name }}{{ $x }}", "web"),
    ("{{ $x := 1 }}{{ if true }}{{ $x = 2 }}{{ end }}{{ $x }}", "2"),
    ("{{ with .nested }}{{ $.name }}/{{ .inner.value }}{{ end }}", "web/deep"),
    ("{{ $m := .map }}{{ $m.a }}", "1"),
    # if / else
    ("{{ if .flag }}yes{{ end }}", "yes"),
    ("{{ if .zero }}yes{{ else }}no{{ end }}", "no"),
    ("{{ if .empty }}1{{ else if .items }}2{{ else if .list }}3{{ else }}4{{ end }}", "3"),
    ("{{ if .none }}1{{ else }}nil is false{{ end }}", "nil is false"),
    ("{{ if .map }}non-empty map{{ end }}", "non-empty map"),
    # range
    ("{{ range .list }}[{{ . }}]{{ end }}", "[a][b][c]"),
    ("{{ range $i, $e := .list }}{{ $i }}={{ $e }} {{ end }}", "0=a 1=b 2=c "),
    ("{{ range $k, $v := .map }}{{ $k }}:{{ $v }};{{ end }}", "a:1;b:2;"),
    ("{{ range .items }}x{{ else }}empty{{ end }}", "empty"),
    ("{{ range .none }}x{{ else }}nil{{ end }}", "nil"),
    ("{{ range $e := .nums }}{{ $e }}{{ end }}", "312"),
    ("{{ range 3 }}{{ . }}{{ end }}", "012"),
    ("{{ range .nums }}{{ if eq . 1 }}{{ break }}{{ end }}{{ . }}{{ end }}", "3"),
    ("{{ range .nums }}{{ if eq . 1 }}{{ continue }}{{ end }}{{ . }}{{ end }}", "32"),
    ("{{ range .people }}{{ .Name }}({{ .Age }}) {{ end }}", "ann(31) bob(17) "),
    # with
    ("{{ with .name }}{{ . }}{{ end }}", "web"),
    ("{{ with .empty }}x{{ else }}empty{{ end }}", "empty"),
    ("{{ with .empty }}x{{ else with .name }}{{ . }}{{ end }}", "web"),
    ("{{ with $x := .port }}{{ $x }}{{ end }}", "8080"),
    # define, template, block
    ('{{ define "T" }}<{{ . }}>{{ end }}{{ template "T" .name }}{{ template "T" }}', "<web><<no value>>"),
    ('{{ block "B" .port }}[{{ . }}]{{ end }}', "[8080]"),
    # comparison and logic
    ("{{ eq .port 8080 }} {{ eq .name \"x\" \"web\" }} {{ ne 1 2 }}", "true true true"),
    ("{{ lt 1 2 }} {{ le 2 2 }} {{ gt \"b\" \"a\" }} {{ ge 1.5 2.0 }}", "true true true false"),
    ("{{ and 1 0 2 }} {{ and 1 2 }} {{ or 0 \"\" }} {{ or 0 \"x\" }}", "0 2  x"),
    ("{{ not .flag }} {{ not .empty }}", "false true"),
    ("{{ if and .flag (eq .name \"web\") }}both{{ end }}", "both"),
    ("{{ and .none .none.field }}", "<no value>"),  # and stops at the first false argument
    # built-in functions
    ("{{ len .list }} {{ len .map }} {{ len .name }}", "3 2 3"),
    ('{{ index .list 1 }} {{ index .map "b" }} {{ index .nested "inner" "value" }}', "b 2 deep"),
    ("{{ slice .list 1 }} {{ slice .name 0 2 }}", "[b c] we"),
    ('{{ print "a" 1 2 "b" }}', "a1 2b"),
    ('{{ println "a" 1 }}', "a 1\n"),
    ('{{ html "<a href=\'x\'>" }}', "&lt;a href=&#39;x&#39;&gt;"),
    ('{{html "<script>alert(\\"XSS\\");</script>"}}', "&lt;script&gt;alert(&#34;XSS&#34;);&lt;/script&gt;"),
    ('{{"http://www.example.org/"|urlquery}}', "http%3A%2F%2Fwww.example.org%2F"),
    # rows of Go's own exec tests
    ("{{and false 0}} {{and 1 0}} {{and 0 true}} {{and 1 1}}", "false 0 0 1"),
    ("{{or 0 0}} {{or 1 0}} {{or 0 true}} {{or 1 1}}", "0 1 true 1"),
    ("{{1 | and 1}} {{0 | and 1}} {{1 | or 0}} {{0 | or 0}}", "1 0 1 0"),
    ("{{and 1 .Unknown}} {{or 0 .Unknown}}", "<no value> <no value>"),
    ("{{if true | not | and 1}}TRUE{{else}}FALSE{{end}}", "FALSE"),
    ('{{or .items "slice is empty"}} {{or .list "x"}}', "slice is empty [a b c]"),
    ("{{print 1234}} {{print 12_34}} {{print 0b101}} {{print 0377}} {{print 0o377}} {{print 0X123ABC}}",
     "1234 1234 5 255 255 1194684"),
    ("{{print 123.4}} {{print 0_0_1_2_3.4}} {{print 1_2_3_4 7.5_00_00_00}}", "123.4 123.4 1234 7.5"),
    ('{{printf "%04x" 127}} {{printf "%g" 3.5}}', "007f 3.5"),
    ('{{"aaa"|printf }}', "aaa"),
    ("{{$x := 1}}{{if true}}{{$x := 2}}{{if true}}{{$x = 3}}{{end}}{{end}}{{$x}}", "1"),
    ("{{if $x := true}}{{with $x := .port}}{{$x}},{{end}}{{$x}}{{end}}", "8080,true"),
    ("{{with 0}}{{.}}{{else with false}}{{.}}{{else with `notempty`}}{{.}}{{end}}", "notempty"),
    ("{{range .list}}-{{.}}-{{break}}NOTREACHED{{else}}EMPTY{{end}}", "-a-"),
    ("{{$i := 0}}{{range $i = .nums}}{{end}}{{$i}}", "2"),
    ("{{$k := 0}}{{$v := 0}}{{range $k, $v = .nums}}{{$k}}={{$v}} {{end}}", "0=3 1=1 2=2 "),
    ("{{with $x := $}}{{$y := $.name}}{{$y}}{{end}}", "web"),
    ('{{ urlquery "a b&c" }}', "a+b%26c"),
    # printf through fmt
    ('{{ printf "%d|%5d|%-5d|%05d" 42 42 42 42 }}', "42|   42|42   |00042"),
    ('{{ printf "%s|%q|%v|%x|%X" "s" "q" .list 255 255 }}', 's|"q"|[a b c]|ff|FF'),
    ('{{ printf "%.2f|%f|%e|%g" .pi .pi 1234.5 1e6 }}', "3.14|3.141590|1.234500e+03|1e+06"),
    ('{{ printf "%t|%c|%%|%v" true 65 .map }}', "true|A|%|map[a:1 b:2]"),
    ('{{ printf "%d" }}', "%!d(MISSING)"),
    ('{{ printf "%d" "x" }}', "%!d(string=x)"),
    ('{{ printf "x" 1 }}', "x%!(EXTRA int=1)"),
]


@pytest.mark.parametrize(("template", "expected"), TABLE, ids=[t for t, _ in TABLE])
def test_go_semantics(template: str, expected: str) -> None:
    assert render(template, DATA) == expected


def test_other_delimiters() -> None:
    assert render("[[ .name ]] {{ .name }}", DATA, left="[[", right="]]") == "web {{ .name }}"
    assert render("<% .name -%> x", DATA, left="<%", right="%>") == "webx"


def test_functions_are_called_with_the_piped_value_last() -> None:
    functions = {"join": lambda sep, items: sep.join(items), "up": str.upper}
    assert render('{{ .list | join "," | up }}', DATA, functions=functions) == "A,B,C"


def test_a_function_called_without_arguments_may_carry_fields() -> None:
    assert render("{{ env.HOME }}", functions={"env": lambda *k: {"HOME": "/root"}}) == "/root"


def test_methods_of_values_are_called() -> None:
    class Service:
        Name = "db"

        def Port(self) -> int:
            return 5432

    assert render("{{ .Name }}:{{ .Port }}", Service()) == "db:5432"


ERRORS: list[tuple[str, str]] = [
    ("{{3 2}}", "can't give argument to non-function 3"),
    ("{{$x := 1}}{{3 | $x}}", "can't give argument to non-function"),
    ("{{$x := nil}}{{$x.anything}}", "nil is not a command"),
    ("{{ nil | print }}", "nil is not a command"),
    ("{{ ge 1.5 2 }}", "incompatible types for comparison"),
    ('{{$x := (1.0)}}{{$x.anything}}', "can't evaluate field anything in type float64"),
    ("{{true|printf}}", "error calling printf"),
    ("{{len 3}}", "len of type int"),
    ("{{slice .list -1}}", "index out of range"),
    ("{{ .name ", "template: t:1: unclosed action"),
    ("{{ if .flag }}x", "unexpected EOF"),
    ("{{ end }}", "unexpected {{end}}"),
    ("{{ nosuch 1 }}", 'function "nosuch" not defined'),
    ("{{ $undefined }}", 'undefined variable "$undefined"'),
    ("{{ break }}", "{{break}} outside {{range}}"),
    ("{{ .name 1 }}", "name is not a method but has arguments"),
    ("{{ .name.x }}", "can't evaluate field x in type string"),
    ("{{ lt 1 \"a\" }}", "incompatible types for comparison"),
    ("{{ index .list 9 }}", "index out of range: 9"),
    ("{{ template \"none\" }}", 'template "none" not defined'),
    ('{{ define "r" }}{{ template "r" }}{{ end }}{{ template "r" }}', "exceeded maximum template depth"),
    ("{{ range true }}{{ end }}", "range can't iterate over true"),
    ("{{/* open", "unclosed comment"),
    ("line1\nline2 {{ .name.x }}", "template: t:2:"),
]


@pytest.mark.parametrize(("template", "message"), ERRORS, ids=[t for t, _ in ERRORS])
def test_errors_are_named_as_go_names_them(template: str, message: str) -> None:
    with pytest.raises(TemplateError) as caught:
        Template(template, name="t").execute(DATA)
    assert message in str(caught.value)


def test_sprintf_padding_and_flags() -> None:
    assert go_sprintf("%+d|% d|%8.3f|%-8s|", 5, 5, 3.14159, "ab") == "+5| 5|   3.142|ab      |"


@pytest.mark.parametrize(("format", "args", "expected"), [
    ("%999999999d", (1,), "%!(NOVERB)%!(EXTRA int=1)"),
    ("a%.99999999fb", (1.5,), "a%!(NOVERB)%!(EXTRA float64=1.5)"),
    ("%*d", (10_000_000, 7), "%!(BADWIDTH)7"),
    ("%.*f", (10_000_000, 1.5), "%!(BADPREC)1.500000"),
    ("%*d|", (3, 7), "  7|"),
])
def test_sprintf_refuses_widths_as_go_does(format: str, args: tuple[Any, ...], expected: str) -> None:
    assert go_sprintf(format, *args) == expected


NESTED = '{{define "t0"}}xxxxxxxxxxxxxxxx{{end}}' + "".join(
    f'{{{{define "t{n}"}}}}{{{{template "t{n - 1}" .}}}}{{{{template "t{n - 1}" .}}}}{{{{end}}}}' for n in range(1, 60))


@pytest.mark.parametrize(("template", "message"), [
    (NESTED + '{{template "t59" .}}', "template output exceeds 1048576 bytes"),
    ('{{ range 100000 }}{{ printf "%999999d" 1 }}{{ end }}', "template output exceeds 1048576 bytes"),
    ("{{ range 1000000000 }}{{ end }}", "template execution exceeds 1000000 steps"),
    ('{{define "r"}}{{template "r" .}}{{end}}{{template "r" .}}', "exceeded maximum template depth (100)"),
])
def test_execution_is_bounded(template: str, message: str) -> None:
    with pytest.raises(TemplateError, match=re.escape(message)):
        render(template)


def test_the_output_limit_counts_bytes_as_written() -> None:
    assert Template("{{ range 4 }}é{{ end }}").execute(limit=8) == "éééé"
    with pytest.raises(TemplateError, match="template output exceeds 7 bytes"):
        Template("{{ range 4 }}é{{ end }}").execute(limit=7)

"""Go's text/template language, as Nomad job files use it through consul-template.

A lexer and a recursive-descent parser build a tree once; executing it with a
data value (the *dot*) and a function table writes the output. What is
covered, with Go's semantics (``text/template`` package documentation):

- text and actions between configurable delimiters, ``{{-`` / ``-}}``
  trimming the whitespace beside them, ``{{/* comments */}}``;
- pipelines ``a | f b``: the value of each command is the last argument of the
  next; arguments: ``.``, ``.Field.Chains``, ``$var.Field``, ``(pipelines)``,
  strings (interpreted and raw), characters, numbers, ``true``, ``false``,
  ``nil``; functions called by name;
- variables: ``$x := pipeline``, ``$x = pipeline``, scoped to the enclosing
  control structure, and ``$`` for the data passed to execute;
- ``if`` / ``else if`` / ``else``, ``range`` (lists, maps in key order,
  integers; ``$i, $e :=``; ``else``; ``break``, ``continue``), ``with`` /
  ``else with`` / ``else``, ``define``, ``template``, ``block``;
- the built-in functions ``and``, ``or`` (short-circuit), ``not``, ``len``,
  ``index``, ``slice``, ``print``, ``printf``, ``println``, ``eq``, ``ne``,
  ``lt``, ``le``, ``gt``, ``ge``, ``html``, ``urlquery``; ``printf`` follows
  Go's ``fmt`` verbs (``%v %s %d %q %f %e %g %x %X %t %c %%`` with flags,
  width and precision);
- values print as Go prints them: ``<no value>`` for a missing one, floats in
  Go's shortest form (``1e+06``), ``[a b]`` for lists and ``map[k:v]`` for maps.

Truth is Go's: false, 0, nil and empty strings, lists and maps are false.
A map's missing key gives ``<no value>``; a missing attribute of any other
value is an error, as a missing struct field is in Go.

A template is text from a job, so executing one is bounded: its output
(:data:`MAX_OUTPUT`, counted as it is written), the depth of ``template``
calls (:data:`MAX_TEMPLATE_DEPTH`) and the work it does (:data:`MAX_STEPS`, :data:`MAX_SECONDS`);
``printf`` refuses widths and precisions as Go's ``fmt`` does (over a
million: ``%!(NOVERB)``, ``%!(BADWIDTH)``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import quote_plus

from herder import deadline

MAX_TEMPLATE_DEPTH = 100
"""How deep ``template`` calls may nest (Go allows 100000; a config file needs a handful)."""
MAX_OUTPUT = 1 << 20
"""The most one render may write, in bytes."""
MAX_STEPS = 1_000_000
"""The most actions, text pieces and loop iterations one render may execute; each looks at
the render's deadline (:mod:`herder.deadline`) too."""
MAX_SECONDS = 5.0
"""The longest one render may take, parse and execution together (CPU seconds, :mod:`herder.deadline`)."""
_MAX_FMT_NUMBER = 1_000_000
"""Go's ``fmt`` refuses a width or precision beyond this (its ``tooLarge``)."""


class TemplateError(Exception):
    """A parse or execution error, as Go words it: ``template: NAME:LINE: message``."""


class _Missing:
    """The value of a map key that is not there: Go's zero interface value."""

    def __repr__(self) -> str:
        return "<no value>"


NO_VALUE = _Missing()


# -- lexing --------------------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<raw>`[^`]*`)
  | (?P<char>'(?:[^'\\\n]|\\.)+')
  | (?P<number>[+-]?(?:0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+
        |(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?))
  | (?P<declare>:=)
  | (?P<assign>=)
  | (?P<pipe>\|)
  | (?P<lparen>\()
  | (?P<rparen>\))
  | (?P<comma>,)
  | (?P<var>\$[A-Za-z_0-9]*)
  | (?P<field>\.[A-Za-z_][A-Za-z_0-9]*)
  | (?P<dot>\.)
  | (?P<ident>[A-Za-z_][A-Za-z_0-9]*)
""", re.VERBOSE)
_SPACE = re.compile(r"[ \t\r\n]+")
_KEYWORDS = {"if", "else", "end", "range", "with", "define", "template", "block", "break", "continue"}


@dataclass(frozen=True)
class _Token:
    kind: str
    value: str
    spaced: bool  # whitespace before it: ``.a.b`` is one chain, ``.a .b`` two arguments
    line: int


@dataclass(frozen=True)
class _Action:
    tokens: list[_Token]
    line: int


def _lex(text: str, left: str, right: str, name: str) -> list[str | _Action]:
    """Text strings and actions, with trim markers applied and comments dropped."""
    items: list[str | _Action] = []
    pos, line = 0, 1
    trim_next = False
    while pos <= len(text):
        start = text.find(left, pos)
        chunk = text[pos:] if start < 0 else text[pos:start]
        if trim_next:
            chunk = chunk.lstrip(" \t\r\n")
        if start < 0:
            if chunk:
                items.append(chunk)
            break
        inner = start + len(left)
        trim_left = text.startswith("-", inner) and inner + 1 < len(text) and text[inner + 1] in " \t\r\n"
        if trim_left:
            chunk = chunk.rstrip(" \t\r\n")
            inner += 1
        if chunk:
            items.append(chunk)
        line += text.count("\n", pos, inner)
        tokens, end, trim_next = _lex_action(text, inner, right, name, line)
        if tokens is not None:
            items.append(_Action(tokens, line))
        line += text.count("\n", inner, end)
        pos = end
    return items


def _lex_action(text: str, pos: int, right: str, name: str, line: int) -> tuple[list[_Token] | None, int, bool]:
    """Tokens of one action from ``pos``; None for a comment. Returns the position after
    the right delimiter and whether it trims the text after it."""
    space = _SPACE.match(text, pos)
    stripped = space.end() if space is not None else pos
    if text.startswith("/*", stripped):
        close = text.find("*/", stripped + 2)
        if close < 0:
            raise TemplateError(f"template: {name}:{line}: unclosed comment")
        after = close + 2
        for trimmed, marker in ((True, " -" + right), (False, right)):
            if text.startswith(marker, after) or (trimmed and text.startswith("\t-" + right, after)):
                return None, after + len(marker), trimmed
        raise TemplateError(f"template: {name}:{line}: comment ends before closing delimiter")
    tokens: list[_Token] = []
    spaced = True
    trim_marker = "-" + right
    while True:
        space = _SPACE.match(text, pos)
        if space is not None:
            blank = space.group()
            if text.startswith(trim_marker, space.end()):
                return tokens, space.end() + len(trim_marker), True
            line += blank.count("\n")
            pos = space.end()
            spaced = True
        if pos >= len(text):
            raise TemplateError(f"template: {name}:{line}: unclosed action")
        if text.startswith(right, pos):
            return tokens, pos + len(right), False
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise TemplateError(f"template: {name}:{line}: unexpected {text[pos]!r} in command")
        kind = match.lastgroup
        assert kind is not None
        value = match.group()
        if kind == "ident" and value in _KEYWORDS:
            kind = "keyword"
        tokens.append(_Token(kind, value, spaced, line))
        line += value.count("\n")
        pos = match.end()
        spaced = False


# -- the tree ------------------------------------------------------------------

@dataclass(frozen=True)
class _Text:
    text: str


@dataclass(frozen=True)
class _Literal:
    value: Any


@dataclass(frozen=True)
class _Dot:
    pass


@dataclass(frozen=True)
class _Field:
    """``.A.B`` on the dot, or on ``base`` (a variable, a call, a parenthesised pipeline)."""

    names: tuple[str, ...]
    base: Any = None


@dataclass(frozen=True)
class _Variable:
    name: str


@dataclass(frozen=True)
class _Function:
    name: str


@dataclass(frozen=True)
class _Command:
    args: tuple[Any, ...]
    line: int


@dataclass(frozen=True)
class _Pipeline:
    commands: tuple[_Command, ...]
    decl: tuple[str, ...] = ()
    assign: bool = False  # ``$x = ...`` rather than ``$x := ...``
    line: int = 0


@dataclass(frozen=True)
class _ActionNode:
    pipe: _Pipeline


@dataclass(frozen=True)
class _Branch:
    kind: str  # if | range | with
    pipe: _Pipeline
    body: list[Any]
    orelse: list[Any]


@dataclass(frozen=True)
class _Call:
    name: str
    pipe: _Pipeline | None
    line: int


@dataclass(frozen=True)
class _Loop:
    kind: str  # break | continue


class _Parser:
    def __init__(self, items: list[str | _Action], name: str, functions: Mapping[str, Any] | None) -> None:
        self.items = items
        self.index = 0
        self.name = name
        self.functions = functions
        self.defines: dict[str, list[Any]] = {}
        self.range_depth = 0

    def error(self, line: int, message: str) -> TemplateError:
        return TemplateError(f"template: {self.name}:{line}: {message}")

    def parse(self) -> list[Any]:
        body, stop = self.nodes(set())
        assert stop is None
        return body

    def nodes(self, stops: set[str]) -> tuple[list[Any], _Action | None]:
        """Nodes up to an action starting with a keyword of ``stops`` (returned) or the end."""
        out: list[Any] = []
        while self.index < len(self.items):
            item = self.items[self.index]
            self.index += 1
            if isinstance(item, str):
                out.append(_Text(item))
                continue
            tokens = item.tokens
            if not tokens:
                raise self.error(item.line, "missing value for command")
            head = tokens[0]
            word = head.value if head.kind == "keyword" else ""
            if word in ("end", "else"):
                if word not in stops:
                    raise self.error(item.line, f"unexpected {{{{{word}}}}}")
                return out, item
            if word in ("if", "range", "with"):
                out.append(self.branch(word, tokens[1:], item.line))
            elif word in ("break", "continue"):
                if self.range_depth == 0:
                    raise self.error(item.line, f"{{{{{word}}}}} outside {{{{range}}}}")
                if len(tokens) > 1:
                    raise self.error(item.line, f"unexpected {tokens[1].value!r} in {word}")
                out.append(_Loop(word))
            elif word == "define":
                name = self.template_name(tokens, item.line)
                if len(tokens) > 2:
                    raise self.error(item.line, "unexpected tokens after define name")
                body, _ = self.until_end(item.line, "define")
                self.defines[name] = body
            elif word in ("template", "block"):
                name = self.template_name(tokens, item.line)
                pipe = self.pipeline(tokens[2:], item.line) if len(tokens) > 2 else None
                if word == "block":
                    body, _ = self.until_end(item.line, "block")
                    self.defines[name] = body
                out.append(_Call(name, pipe, item.line))
            elif head.kind == "keyword":
                raise self.error(item.line, f"unexpected keyword {head.value!r}")
            else:
                out.append(_ActionNode(self.pipeline(tokens, item.line, declare=True)))
        if stops:
            raise self.error(self.last_line(), "unexpected EOF (missing {{end}})")
        return out, None

    def last_line(self) -> int:
        for item in reversed(self.items):
            if isinstance(item, _Action):
                return item.line
        return 1

    def template_name(self, tokens: list[_Token], line: int) -> str:
        if len(tokens) < 2 or tokens[1].kind not in ("string", "raw"):
            raise self.error(line, f"{tokens[0].value} needs a quoted template name")
        return str(self.literal(tokens[1]))

    def until_end(self, line: int, what: str) -> tuple[list[Any], _Action]:
        body, stop = self.nodes({"end"})
        assert stop is not None
        if len(stop.tokens) > 1:
            raise self.error(stop.line, "unexpected tokens after end")
        return body, stop

    def branch(self, kind: str, tokens: list[_Token], line: int) -> _Branch:
        if not tokens:
            raise self.error(line, f"missing value for {kind}")
        if kind == "range":
            self.range_depth += 1
        pipe = self.pipeline(tokens, line, declare=True, pair=kind == "range")
        body, stop = self.nodes({"else", "end"})
        if kind == "range":
            self.range_depth -= 1
        assert stop is not None
        orelse: list[Any] = []
        rest = stop.tokens[1:]
        if stop.tokens[0].value == "else":
            if rest and rest[0].kind == "keyword" and rest[0].value in ("if", "with"):
                # ``else if`` / ``else with``: a nested branch that shares this one's end.
                orelse = [self.branch(rest[0].value, rest[1:], stop.line)]
            elif rest:
                raise self.error(stop.line, f"unexpected {rest[0].value!r} after else")
            else:
                orelse, _ = self.until_end(stop.line, kind)
        elif rest:
            raise self.error(stop.line, "unexpected tokens after end")
        return _Branch(kind, pipe, body, orelse)

    def pipeline(self, tokens: list[_Token], line: int, declare: bool = False, pair: bool = False) -> _Pipeline:
        decl: tuple[str, ...] = ()
        assign = False
        if declare and len(tokens) >= 2 and tokens[0].kind == "var":
            if tokens[1].kind in ("declare", "assign"):
                decl, assign, tokens = (tokens[0].value,), tokens[1].kind == "assign", tokens[2:]
            elif (pair and len(tokens) >= 4 and tokens[1].kind == "comma" and tokens[2].kind == "var"
                  and tokens[3].kind in ("declare", "assign")):
                decl, assign, tokens = (tokens[0].value, tokens[2].value), tokens[3].kind == "assign", tokens[4:]
        commands: list[_Command] = []
        current: list[_Token] = []
        depth = 0
        for token in tokens:
            if token.kind == "lparen":
                depth += 1
            elif token.kind == "rparen":
                depth -= 1
                if depth < 0:
                    raise self.error(token.line, "unexpected right paren")
            if token.kind == "pipe" and depth == 0:
                commands.append(self.command(current, line))
                current = []
            else:
                current.append(token)
        if depth:
            raise self.error(line, "unclosed left paren")
        commands.append(self.command(current, line))
        return _Pipeline(tuple(commands), decl, assign, line)

    def command(self, tokens: list[_Token], line: int) -> _Command:
        if not tokens:
            raise self.error(line, "missing value for command")
        args: list[Any] = []
        position = 0
        while position < len(tokens):
            arg, position = self.operand(tokens, position)
            args.append(arg)
        return _Command(tuple(args), tokens[0].line)

    def operand(self, tokens: list[_Token], position: int) -> tuple[Any, int]:
        token = tokens[position]
        position += 1
        node: Any
        if token.kind == "field":
            names = [token.value[1:]]
            while position < len(tokens) and tokens[position].kind == "field" and not tokens[position].spaced:
                names.append(tokens[position].value[1:])
                position += 1
            return _Field(tuple(names)), position
        if token.kind == "dot":
            node = _Dot()
        elif token.kind == "var":
            node = _Variable(token.value)
        elif token.kind == "ident":
            if token.value in ("true", "false"):
                node = _Literal(token.value == "true")
            elif token.value == "nil":
                node = _Literal(None)
            else:
                if self.functions is not None and token.value not in self.functions:
                    raise self.error(token.line, f'function "{token.value}" not defined')
                node = _Function(token.value)
        elif token.kind in ("string", "raw", "char", "number"):
            node = _Literal(self.literal(token))
        elif token.kind == "lparen":
            depth, end = 1, position
            while end < len(tokens):
                depth += {"lparen": 1, "rparen": -1}.get(tokens[end].kind, 0)
                if depth == 0:
                    break
                end += 1
            node = self.pipeline(tokens[position:end], token.line)
            position = end + 1
        else:
            raise self.error(token.line, f"unexpected {token.value!r} in operand")
        names = []
        while position < len(tokens) and tokens[position].kind == "field" and not tokens[position].spaced:
            names.append(tokens[position].value[1:])
            position += 1
        if names:
            if isinstance(node, _Literal):
                raise self.error(token.line, f"unexpected . after term {token.value!r}")
            node = _Field(tuple(names), node)
        return node, position

    def literal(self, token: _Token) -> Any:
        text = token.value
        try:
            if token.kind == "string":
                return _unquote(text)
            if token.kind == "raw":
                return text[1:-1]
            if token.kind == "char":
                value = _unquote('"' + text[1:-1].replace('"', '\\"') + '"')
                if len(value) != 1:
                    raise ValueError("malformed character constant")
                return ord(value)
            clean = text.replace("_", "")
            if re.fullmatch(r"[+-]?0[xXoObB].*", clean):
                return int(clean, 0)
            if re.fullmatch(r"[+-]?0[0-7]+", clean):  # Go's legacy octal: 0377
                return int(clean, 8)
            if re.fullmatch(r"[+-]?\d+", clean):
                return int(clean)
            return float(clean)
        except ValueError as exc:
            raise self.error(token.line, f"{exc}: {text}") from None


_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", '"': '"',
            "'": "'"}


def _unquote(text: str) -> str:
    """A Go interpreted string literal's value."""
    body, out, i = text[1:-1], [], 0
    if "\\" not in body:
        return body
    while i < len(body):
        char = body[i]
        if char != "\\":
            out.append(char)
            i += 1
            continue
        code = body[i + 1] if i + 1 < len(body) else ""
        if code in _ESCAPES:
            out.append(_ESCAPES[code])
            i += 2
        elif code in ("x", "u", "U"):
            width = {"x": 2, "u": 4, "U": 8}[code]
            out.append(chr(int(body[i + 2:i + 2 + width], 16)))
            i += 2 + width
        elif code.isdigit():
            out.append(chr(int(body[i + 1:i + 4], 8)))
            i += 4
        else:
            raise ValueError(f"unknown escape sequence \\{code}")
    return "".join(out)


# -- values as Go prints them --------------------------------------------------------

def go_float(value: float) -> str:
    """A float64 as Go's ``%v`` prints it (strconv 'g', shortest)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1, value) < 0 else "0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    point = len(text) + exponent  # digits before the decimal point
    exp = point - 1
    prefix = "-" if sign else ""
    if exp < -4 or exp >= 6:  # Go's 'g' with the shortest precision decides at 6
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{prefix}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if point <= 0:
        return f"{prefix}0.{'0' * -point}{text}"
    if point >= len(text):
        return prefix + text + "0" * (point - len(text))
    return f"{prefix}{text[:point]}.{text[point:]}"


def go_str(value: Any) -> str:
    """A value as Go's ``fmt.Sprint`` writes it."""
    if value is None or value is NO_VALUE:
        return "<nil>" if value is None else "<no value>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, (str, int)):
        return str(value)
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, Mapping):
        return "map[" + " ".join(f"{go_str(k)}:{go_str(value[k])}" for k in _sorted_keys(value)) + "]"
    if isinstance(value, (list, tuple)):
        return "[" + " ".join(go_str(item) for item in value) + "]"
    if is_dataclass(value) and not isinstance(value, type):
        return "{" + " ".join(go_str(getattr(value, f.name)) for f in fields(value)) + "}"
    return str(value)


def _sorted_keys(mapping: Mapping[Any, Any]) -> list[Any]:
    try:
        return sorted(mapping)
    except TypeError:
        return sorted(mapping, key=str)


def truth(value: Any) -> bool:
    """Go's template truth: false, zero, nil and empty values are false."""
    if value is None or value is NO_VALUE:
        return False
    if isinstance(value, (bool, int, float, str, bytes, list, tuple, Mapping)):
        return bool(value)
    return True


# -- printf -------------------------------------------------------------------

_VERB = re.compile(r"%([-+# 0]*)(\d+|\*)?(?:\.(\d+|\*)?)?([a-zA-Z%])")


def go_sprintf(format: str, *args: Any) -> str:
    """Go's ``fmt.Sprintf`` for the verbs templates use."""
    out: list[str] = []
    position, index = 0, 0
    for match in _VERB.finditer(format):
        out.append(format[position:match.start()])
        position = match.end()
        flags, width, precision, verb = match.groups()
        if verb == "%":
            out.append("%")
            continue
        if _overflows(width) or _overflows(precision):
            out.append("%!(NOVERB)")  # Go stops reading the format at a number this long
            position = len(format)
            break
        if width == "*":
            width, index = _star(args, index, out, "BADWIDTH")
        if precision == "*":
            precision, index = _star(args, index, out, "BADPREC")
        if index >= len(args):
            out.append(f"%!{verb}(MISSING)")
            continue
        arg = args[index]
        index += 1
        out.append(_pad(_format_one(verb, arg, flags, precision), flags, width, numeric=verb in "dxXobeEfFgG"))
    out.append(format[position:])
    if index < len(args):
        extra = ", ".join(f"{_go_type(a)}={go_str(a)}" for a in args[index:])
        out.append(f"%!(EXTRA {extra})")
    return "".join(out)


def _overflows(digits: str | None) -> bool:
    """Whether Go's ``fmt`` gives up on a width or precision written as ``digits``."""
    number = 0
    for digit in digits if digits and digits != "*" else "":
        if number > _MAX_FMT_NUMBER:
            return True
        number = number * 10 + int(digit)
    return False


def _star(args: Sequence[Any], index: int, out: list[str], refusal: str) -> tuple[str | None, int]:
    """A ``*`` width or precision: the argument at ``index`` if it is a sane int, else
    none (Go writes ``%!(BADWIDTH)`` or ``%!(BADPREC)``); and the index after it."""
    value = args[index] if index < len(args) else None
    if not isinstance(value, int) or isinstance(value, bool) or abs(value) > _MAX_FMT_NUMBER:
        out.append(f"%!({refusal})")
        return None, index + 1
    return str(value), index + 1


def _go_type(value: Any) -> str:
    return {bool: "bool", int: "int", float: "float64", str: "string"}.get(type(value), type(value).__name__)


def _format_one(verb: str, arg: Any, flags: str, precision: str | None) -> str:
    is_int = isinstance(arg, int) and not isinstance(arg, bool)
    plus = "+" if "+" in flags else (" " if " " in flags else "")
    if verb in "vs":
        text = go_str(arg)
        return text[:int(precision)] if precision and verb == "s" else text
    if verb == "d" and is_int:
        return format(arg, f"{plus}d")
    if verb in "xX" and is_int:
        return ("0x" if "#" in flags else "") + format(arg, verb)
    if verb in "xX" and isinstance(arg, str):
        return arg.encode().hex() if verb == "x" else arg.encode().hex().upper()
    if verb in "feEgG" and isinstance(arg, (int, float)) and not isinstance(arg, bool):
        if verb in "gG" and precision is None:
            text = go_float(float(arg))
            return (plus + text if plus and not text.startswith("-") else text)
        spec = f"{plus}.{precision if precision is not None else 6}{verb}"
        return format(float(arg), spec)
    if verb == "t" and isinstance(arg, bool):
        return go_str(arg)
    if verb == "q" and isinstance(arg, str):
        return json.dumps(arg, ensure_ascii=False)
    if verb == "q" and is_int:
        return "'" + chr(arg) + "'"
    if verb == "c" and is_int:
        return chr(arg)
    return f"%!{verb}({_go_type(arg)}={go_str(arg)})"


def _pad(text: str, flags: str, width: str | None, numeric: bool) -> str:
    if not width:
        return text
    size = int(width)
    if "-" in flags:
        return text.ljust(size)
    if "0" in flags and numeric and not text.startswith("%!"):
        sign = text[0] if text[0] in "+-" else ""
        return sign + text[len(sign):].rjust(size - len(sign), "0")
    return text.rjust(size)


# -- built-in functions --------------------------------------------------------

def _compare(name: str, a: Any, b: Any) -> int:
    def kind(value: Any) -> str:  # Go's basic kinds: an int and a float64 do not compare
        if isinstance(value, bool):
            return "bool"
        if isinstance(value, int):
            return "int"
        if isinstance(value, float):
            return "float"
        if isinstance(value, str):
            return "string"
        return "other"

    if kind(a) != kind(b) or kind(a) == "other":
        if name in ("eq", "ne") and (a is None or b is None or kind(a) == kind(b) == "other"):
            return 0 if a == b else 1
        raise ValueError(f"incompatible types for comparison: {_go_type(a)} and {_go_type(b)}")
    if kind(a) == "bool" and name not in ("eq", "ne"):
        raise ValueError("invalid type for comparison")
    return (a > b) - (a < b)


def _eq(first: Any, *others: Any) -> bool:
    if not others:
        raise ValueError("missing argument for comparison")
    return any(_compare("eq", first, other) == 0 for other in others)


def _index(item: Any, *keys: Any) -> Any:
    for key in keys:
        if item is None:
            raise ValueError("index of untyped nil")
        if isinstance(item, Mapping):
            item = item.get(key, NO_VALUE)
        elif isinstance(item, (list, tuple, str)):
            if not isinstance(key, int) or not 0 <= key < len(item):
                raise ValueError(f"index out of range: {key}")
            item = item[key] if not isinstance(item, str) else ord(item[key])
        else:
            raise ValueError(f"can't index item of type {_go_type(item)}")
    return item


def _slice(item: Any, *bounds: int) -> Any:
    if len(bounds) > 2:
        raise ValueError("too many slice indexes")
    start = bounds[0] if bounds else 0
    end = bounds[1] if len(bounds) > 1 else len(item)
    if not 0 <= start <= end <= len(item):
        raise ValueError(f"index out of range: {start}:{end}")
    return item[start:end]


def _length(item: Any) -> int:
    if isinstance(item, (str, list, tuple, Mapping, bytes)):
        return len(item)
    raise ValueError(f"len of type {_go_type(item)}")


_HTML = {"<": "&lt;", ">": "&gt;", "&": "&amp;", "'": "&#39;", '"': "&#34;", "\0": "\ufffd"}


def _html_escape(text: str) -> str:
    """Go's ``template.HTMLEscapeString``."""
    return "".join(_HTML.get(char, char) for char in text)


def _sprint(*args: Any) -> str:
    # fmt.Sprint: a space between operands when neither is a string.
    out = []
    for i, arg in enumerate(args):
        if i and not isinstance(arg, str) and not isinstance(args[i - 1], str):
            out.append(" ")
        out.append(go_str(arg))
    return "".join(out)


_JOINING = frozenset({"print", "printf", "println", "html", "urlquery"})
"""The functions whose result holds each of their arguments."""

BUILTINS: dict[str, Callable[..., Any]] = {
    "not": lambda value: not truth(value),
    "len": _length,
    "index": _index,
    "slice": _slice,
    "print": _sprint,
    "printf": go_sprintf,
    "println": lambda *args: " ".join(go_str(a) for a in args) + "\n",
    "eq": _eq,
    "ne": lambda a, b: _compare("ne", a, b) != 0,
    "lt": lambda a, b: _compare("lt", a, b) < 0,
    "le": lambda a, b: _compare("le", a, b) <= 0,
    "gt": lambda a, b: _compare("gt", a, b) > 0,
    "ge": lambda a, b: _compare("ge", a, b) >= 0,
    "html": lambda *args: _html_escape(_sprint(*args)),
    "urlquery": lambda *args: quote_plus(_sprint(*args)),
}
_SHORT_CIRCUIT = {"and", "or"}


# -- execution ---------------------------------------------------------------

class _Break(Exception):
    pass


class _Continue(Exception):
    pass


@dataclass
class _State:
    functions: Mapping[str, Callable[..., Any]]
    defines: dict[str, list[Any]]
    name: str
    out: list[str] = field(default_factory=list)
    vars: list[tuple[str, Any]] = field(default_factory=list)
    depth: int = 0
    limit: int = MAX_OUTPUT
    size: int = 0
    steps: int = 0

    def write(self, text: str) -> None:
        """Add ``text`` to the output, refused before it passes :attr:`limit` bytes."""
        self.size += len(text) if text.isascii() else len(text.encode())
        if self.size > self.limit:
            raise TemplateError(f"template output exceeds {self.limit} bytes")
        self.out.append(text)

    def step(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise TemplateError(f"template execution exceeds {MAX_STEPS} steps")
        deadline.check()  # every step: one may be a call over a megabyte, repeated by a loop

    def error(self, line: int, message: str) -> TemplateError:
        return TemplateError(f"template: {self.name}:{line}: {message}")

    def lookup(self, name: str, line: int) -> Any:
        for known, value in reversed(self.vars):
            if known == name:
                return value
        raise self.error(line, f'undefined variable "{name}"')

    def assign(self, name: str, value: Any, line: int) -> None:
        for i in range(len(self.vars) - 1, -1, -1):
            if self.vars[i][0] == name:
                self.vars[i] = (name, value)
                return
        raise self.error(line, f'undefined variable "{name}"')


class Template:
    """A parsed template; :meth:`execute` renders it."""

    def __init__(self, text: str, *, name: str = "template", left: str = "{{", right: str = "}}",
                 functions: Mapping[str, Callable[..., Any]] | None = None) -> None:
        self.name = name
        self.functions: dict[str, Callable[..., Any]] = {**BUILTINS, **(functions or {})}
        parser = _Parser(_lex(text, left, right, name), name, {**self.functions, "and": 1, "or": 1})
        self.body = parser.parse()
        self.defines = parser.defines

    def execute(self, data: Any = None, functions: Mapping[str, Callable[..., Any]] | None = None, *,
                limit: int = MAX_OUTPUT) -> str:
        """Render with ``data`` as the dot; ``functions`` replace those given at parse time.
        The output may be ``limit`` bytes at most.

        :raises TemplateError: as Go words it, naming the line; or the output
            exceeds ``limit``, or the work :data:`MAX_STEPS`.
        """
        state = _State({**self.functions, **(functions or {})}, self.defines, self.name, limit=limit)
        state.vars.append(("$", data))
        self._run(state, self.body, data)
        return "".join(state.out)

    def _run(self, state: _State, nodes: Sequence[Any], dot: Any) -> None:
        for node in nodes:
            state.step()
            if isinstance(node, _Text):
                state.write(node.text)
            elif isinstance(node, _ActionNode):
                value = self._pipe(state, node.pipe, dot)
                if not node.pipe.decl:
                    # Go unwraps the interface a nil came in: an action prints it as a missing value.
                    state.write("<no value>" if value is None else go_str(value))
            elif isinstance(node, _Branch):
                self._branch(state, node, dot)
            elif isinstance(node, _Call):
                self._call(state, node, dot)
            elif isinstance(node, _Loop):
                raise _Break() if node.kind == "break" else _Continue()

    def _scoped(self, state: _State, nodes: Sequence[Any], dot: Any) -> None:
        mark = len(state.vars)
        try:
            self._run(state, nodes, dot)
        finally:
            del state.vars[mark:]

    def _branch(self, state: _State, node: _Branch, dot: Any) -> None:
        mark = len(state.vars)
        try:
            if node.kind != "range":
                value = self._pipe(state, node.pipe, dot)
                if truth(value):
                    self._scoped(state, node.body, value if node.kind == "with" else dot)
                else:
                    self._scoped(state, node.orelse, dot)
                return
            value = self._pipe(state, node.pipe, dot, declare=False)
            iterated = False
            for key, element in self._iterate(state, value, node.pipe.line):  # lazily: {{range 1000000000}}
                iterated = True
                state.step()
                inner = len(state.vars)
                if len(node.pipe.decl) == 1:
                    self._declare(state, node.pipe, node.pipe.decl[0], element)
                elif len(node.pipe.decl) == 2:
                    self._declare(state, node.pipe, node.pipe.decl[0], key)
                    self._declare(state, node.pipe, node.pipe.decl[1], element)
                try:
                    self._run(state, node.body, element)
                except _Break:
                    break
                except _Continue:
                    continue
                finally:
                    del state.vars[inner:]
            if not iterated:
                self._scoped(state, node.orelse, dot)
        finally:
            del state.vars[mark:]

    def _declare(self, state: _State, pipe: _Pipeline, name: str, value: Any) -> None:
        if pipe.assign:
            state.assign(name, value, pipe.line)
        else:
            state.vars.append((name, value))

    def _iterate(self, state: _State, value: Any, line: int) -> Iterator[tuple[Any, Any]]:
        if value is None or value is NO_VALUE:
            return
        if isinstance(value, bool):
            raise state.error(line, f"range can't iterate over {go_str(value)}")
        if isinstance(value, int):
            yield from ((i, i) for i in range(value))
        elif isinstance(value, Mapping):
            yield from ((key, value[key]) for key in _sorted_keys(value))
        elif isinstance(value, (list, tuple)):
            yield from enumerate(value)
        else:
            raise state.error(line, f"range can't iterate over {go_str(value)}")

    def _call(self, state: _State, node: _Call, dot: Any) -> None:
        body = state.defines.get(node.name)
        if body is None:
            raise state.error(node.line, f'template "{node.name}" not defined')
        if state.depth >= MAX_TEMPLATE_DEPTH:
            raise state.error(node.line, f"exceeded maximum template depth ({MAX_TEMPLATE_DEPTH})")
        value = self._pipe(state, node.pipe, dot) if node.pipe is not None else None
        saved = state.vars
        state.vars = [("$", value)]
        state.depth += 1
        try:
            self._run(state, body, value)
        finally:
            state.vars = saved
            state.depth -= 1

    def _pipe(self, state: _State, pipe: _Pipeline, dot: Any, declare: bool = True) -> Any:
        value: Any = None
        for position, command in enumerate(pipe.commands):
            value = self._command(state, command, dot, value, final=position > 0)
        if declare and pipe.decl:
            self._declare(state, pipe, pipe.decl[0], value)
        return value

    def _command(self, state: _State, command: _Command, dot: Any, piped: Any, final: bool) -> Any:
        head, args = command.args[0], command.args[1:]
        if isinstance(head, _Literal) and head.value is None:
            raise state.error(command.line, "nil is not a command")
        try:
            if isinstance(head, _Function):
                return self._function(state, head.name, args, dot, piped, final, command.line)
            if args or final:
                if isinstance(head, _Field):
                    target = self._field(state, head, dot, command.line)
                    if callable(target):
                        values = [self._arg(state, arg, dot, command.line) for arg in args]
                        return target(*values, *([piped] if final else []))
                if isinstance(head, _Field):
                    raise state.error(command.line, f"{head.names[-1]} is not a method but has arguments")
                raise state.error(command.line, f"can't give argument to non-function {self._describe(head)}")
            return self._arg(state, head, dot, command.line)
        except TemplateError:
            raise
        except (ValueError, TypeError, KeyError, IndexError, ZeroDivisionError) as exc:
            raise state.error(command.line, f"error calling {self._describe(head)}: {exc}") from None

    @staticmethod
    def _describe(node: Any) -> str:
        if isinstance(node, _Function):
            return node.name
        if isinstance(node, _Field):
            return "." + ".".join(node.names)
        if isinstance(node, _Literal):
            return go_str(node.value)
        return type(node).__name__.strip("_").lower()

    def _function(self, state: _State, name: str, args: Sequence[Any], dot: Any, piped: Any, final: bool,
                  line: int) -> Any:
        if name in _SHORT_CIRCUIT:
            if not args and not final:
                raise state.error(line, f"wrong number of args for {name}: want at least 1 got 0")
            result: Any = None
            for position in range(len(args) + final):
                result = self._arg(state, args[position], dot, line) if position < len(args) else piped
                if truth(result) == (name == "or"):
                    return result
            return result
        function = state.functions.get(name)
        if function is None:
            raise state.error(line, f'function "{name}" not defined')
        values = [self._arg(state, arg, dot, line) for arg in args]
        if final:
            values.append(piped)
        # A value kept in a variable is never output, so the output's bound does not see it: every
        # string a function returns is held to it too, and the functions that join their arguments
        # are refused before they build more (``printf "%s%s..." $big $big ...``).
        if name in _JOINING and sum(len(value) for value in values if isinstance(value, str)) > state.limit:
            raise state.error(line, f"error calling {name}: the result would be longer than {state.limit} characters")
        try:
            result = function(*values)
        except TypeError as exc:
            if "positional argument" in str(exc) or "takes" in str(exc):
                raise state.error(line, f"wrong number of args for {name}: {exc}") from None
            raise
        if isinstance(result, str) and len(result) > state.limit:
            raise state.error(line, f"error calling {name}: the result would be longer than {state.limit} characters")
        return result

    def _arg(self, state: _State, node: Any, dot: Any, line: int) -> Any:
        if isinstance(node, _Literal):
            return node.value
        if isinstance(node, _Dot):
            return dot
        if isinstance(node, _Variable):
            return state.lookup(node.name, line)
        if isinstance(node, _Field):
            value = self._field(state, node, dot, line)
            return value() if callable(value) and not isinstance(value, type) else value
        if isinstance(node, _Function):
            return self._function(state, node.name, (), dot, None, False, line)
        if isinstance(node, _Pipeline):
            return self._pipe(state, node, dot)
        raise state.error(line, f"cannot evaluate {node!r}")

    def _field(self, state: _State, node: _Field, dot: Any, line: int) -> Any:
        value = dot if node.base is None else self._arg(state, node.base, dot, line)
        for name in node.names:
            if value is None or value is NO_VALUE:
                raise state.error(line, f"nil pointer evaluating {go_str(value)}.{name}")
            if isinstance(value, Mapping):
                value = value.get(name, NO_VALUE)
            elif not name.startswith("_") and hasattr(value, name) and not isinstance(value, (str, int, float,
                                                                                               list, tuple)):
                value = getattr(value, name)
            else:
                raise state.error(line, f"can't evaluate field {name} in type {_go_type(value)}")
        return value


def render(text: str, data: Any = None, *, functions: Mapping[str, Callable[..., Any]] | None = None,
           left: str = "{{", right: str = "}}", name: str = "template") -> str:
    """Parse and execute in one step."""
    return Template(text, name=name, left=left, right=right, functions=functions).execute(data)

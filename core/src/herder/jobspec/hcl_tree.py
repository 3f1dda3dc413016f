"""HCL expressions as python-hcl2 parses them, read into :mod:`herder.jobspec.hcl_eval`'s nodes.

python-hcl2 parses a job file once into typed rules (expressions, function
calls, ``for`` expressions, indexing, quoted templates with their
interpolations); :func:`expression` reads those rules into the evaluator's
:data:`~herder.jobspec.hcl_eval.Node` tree. Nothing is parsed a second time
and nothing is lost: a construct herder does not evaluate (splats, template
directives) is an :class:`~herder.jobspec.hcl_eval.HclSyntaxError`.

One small layer covers what python-hcl2 leaves as text: a heredoc's body
(one token for python-hcl2, its interpolations unparsed; python-hcl2's own
value of it loses quoting, see :func:`_heredoc`) and the template strings of
JSON and YAML job files. :func:`parse_template` turns such text
into an HCL quoted string (the literal text escaped, the interpolations kept
as written) and has python-hcl2 parse that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import hcl2
from hcl2.rules.base import AttributeRule
from hcl2.rules.containers import ObjectElemKeyExpressionRule, ObjectRule, TupleRule
from hcl2.rules.expressions import BinaryOpRule, ConditionalRule, ExprTermRule, UnaryOpRule
from hcl2.rules.for_expressions import ForObjectExprRule, ForTupleExprRule
from hcl2.rules.functions import FunctionCallRule
from hcl2.rules.indexing import GetAttrExprTermRule, IndexExprTermRule, ShortIndexRule, SqbIndexRule
from hcl2.rules.literal_rules import FloatLitRule, IdentifierRule, IntLitRule, LiteralValueRule
from hcl2.rules.strings import HeredocTemplateRule, InterpolationRule, StringPartRule, StringRule
from hcl2.utils import SerializationContext, process_escape_sequences
from lark.exceptions import UnexpectedInput

from herder.jobspec.hcl_eval import (
    Binary,
    Call,
    Conditional,
    ForExpr,
    GetAttr,
    HclSyntaxError,
    Index,
    Interpolation,
    ListExpr,
    Literal,
    Node,
    ObjectExpr,
    Reference,
    Template,
    Unary,
)

_SOURCE_OPTIONS = hcl2.SerializationOptions(strip_string_quotes=False, with_comments=False)
_KEYWORDS = {"true": True, "false": False, "null": None}


@dataclass(frozen=True)
class Expression:
    """An attribute value of an HCL file that is not plain data: a template to evaluate with the variables.

    A bare expression (``count = var.n``) is the template of that one
    interpolation, so that it keeps its value's type.
    """

    template: Template

    def text(self) -> str:
        """The expression as template text (``${list(string)}``), as a JSON or YAML file would write it."""
        return "".join(part.replace("${", "$${").replace("%{", "%%{") if isinstance(part, str)
                       else "${" + part.source + "}" for part in self.template.parts)


def value(rule: Any) -> Any:
    """An attribute's value: literals, templates, and lists and objects of them as lists and dicts (a
    template an :class:`Expression` unless it is plain text); any other expression one :class:`Expression`.

    :raises HclSyntaxError: a construct herder does not evaluate.
    """
    node = expression(rule)
    if _is_data(node):
        return _data(node)
    return Expression(Template((Interpolation(node, _source(rule)),)))


def _is_data(node: Node) -> bool:
    if isinstance(node, (Literal, Template)):
        return True
    if isinstance(node, ListExpr):
        return all(_is_data(item) for item in node.items)
    if isinstance(node, ObjectExpr):
        return all(isinstance(_data(key), str) and _is_data(item) for key, item in node.items)
    return False


def _data(node: Node) -> Any:
    """A node that :func:`_is_data` accepts, as data. A template is plain text only where no later reading
    could take a ``${`` or ``%{`` in it for an interpolation."""
    if isinstance(node, Literal):
        return node.value
    if isinstance(node, ListExpr):
        return [_data(item) for item in node.items]
    if isinstance(node, ObjectExpr):
        return {_data(key): _data(item) for key, item in node.items}
    if isinstance(node, Template) and all(isinstance(part, str) for part in node.parts):
        text = "".join(str(part) for part in node.parts)
        if "${" not in text and "%{" not in text:
            return text
    return Expression(node) if isinstance(node, Template) else None


def as_text(value: Any) -> Any:
    """``value`` with each :class:`Expression` in it as its template text, as a JSON or YAML file writes it."""
    if isinstance(value, dict):
        return {key: as_text(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_text(item) for item in value]
    return value.text() if isinstance(value, Expression) else value


def _source(rule: Any) -> str:
    """The text of an expression, as python-hcl2 writes it back: kept for the runtime references
    (``${NOMAD_PORT_http}``) that stay in the job as written."""
    return str(rule.serialize(_SOURCE_OPTIONS, SerializationContext(inside_dollar_string=True)))


def expression(rule: Any) -> Node:
    """The node of one of python-hcl2's expression rules.

    :raises HclSyntaxError: a construct herder does not evaluate.
    """
    if isinstance(rule, ExprTermRule):
        return expression(rule.expression)
    if isinstance(rule, LiteralValueRule):
        return Literal(_KEYWORDS[str(rule.token.value)])
    if isinstance(rule, IntLitRule):
        return Literal(int(str(rule.token.value)))
    if isinstance(rule, FloatLitRule):
        return Literal(float(str(rule.token.value)))
    if isinstance(rule, IdentifierRule):
        return Reference(str(rule.token.value))
    if isinstance(rule, StringRule):
        return _template(rule.string_parts)
    if isinstance(rule, HeredocTemplateRule):
        return _heredoc(rule)
    if isinstance(rule, UnaryOpRule):
        operand = expression(rule.expr_term)
        if rule.operator == "-" and isinstance(operand, Literal) and isinstance(operand.value, (int, float)):
            return Literal(-operand.value)
        return Unary(rule.operator, operand)
    if isinstance(rule, BinaryOpRule):
        term = rule.binary_term
        return Binary(str(term.binary_operator.token.value), expression(rule.expr_term), expression(term.expr_term))
    if isinstance(rule, ConditionalRule):
        return Conditional(expression(rule.condition), expression(rule.if_true), expression(rule.if_false))
    if isinstance(rule, FunctionCallRule):
        arguments = rule.arguments
        args = tuple(expression(arg) for arg in arguments.arguments) if arguments is not None else ()
        name = "::".join(str(identifier.token.value) for identifier in rule.identifiers)
        return Call(name, args, bool(arguments is not None and arguments.has_ellipsis))
    if isinstance(rule, TupleRule):
        return ListExpr(tuple(expression(item) for item in rule.elements))
    if isinstance(rule, ObjectRule):
        return ObjectExpr(tuple((_object_key(element.key), expression(element.expression))
                                for element in rule.elements))
    if isinstance(rule, GetAttrExprTermRule):
        return GetAttr(expression(rule.expr_term), str(rule.get_attr.identifier.token.value))
    if isinstance(rule, IndexExprTermRule):
        return Index(expression(rule.children[0]), _index(rule.children[1]))
    if isinstance(rule, (ForTupleExprRule, ForObjectExprRule)):
        return _for(rule)
    raise HclSyntaxError(f"{_construct(rule)} are not supported")


def _construct(rule: Any) -> str:
    name = rule.lark_name() if hasattr(rule, "lark_name") else type(rule).__name__
    if "splat" in name:
        return "splat expressions ([*], .*)"
    if "template" in name or name in ("string_part",):
        return "template directives (%{ ... })"
    return f"expressions of the kind {name!r}"


def _object_key(rule: Any) -> Node:
    """An object key: a bare name is the text of that name, as in HCL."""
    key = rule.expression if isinstance(rule, ObjectElemKeyExpressionRule) else rule.value
    node = expression(key)
    return Literal(node.name) if isinstance(node, Reference) and not isinstance(rule, ObjectElemKeyExpressionRule) \
        else node


def _index(rule: Any) -> Node:
    if isinstance(rule, ShortIndexRule):
        return Literal(int(str(rule.index.value)))
    if isinstance(rule, SqbIndexRule):
        return expression(rule.index_expression)
    raise HclSyntaxError(f"{_construct(rule)} are not supported")


def _for(rule: ForTupleExprRule | ForObjectExprRule) -> ForExpr:
    intro = rule.for_intro
    first = str(intro.first_iterator.token.value)
    second = str(intro.second_iterator.token.value) if intro.second_iterator is not None else None
    condition = expression(rule.condition.condition_expr) if rule.condition is not None else None
    key_name, value_name = (first, second) if second is not None else (None, first)
    if isinstance(rule, ForTupleExprRule):
        return ForExpr(key_name, value_name, expression(intro.iterable), None, expression(rule.value_expr),
                       condition, False)
    return ForExpr(key_name, value_name, expression(intro.iterable), expression(rule.key_expr),
                   expression(rule.value_expr), condition, rule.ellipsis is not None)


def _template(parts: list[Any]) -> Template:
    out: list[str | Interpolation] = []
    for part in parts:
        content = part.content if isinstance(part, StringPartRule) else part
        if isinstance(content, InterpolationRule):
            out.append(Interpolation(expression(content.expression), _source(content.expression)))
            continue
        if not hasattr(content, "value") or isinstance(content, StringRule):
            raise HclSyntaxError(f"{_construct(content)} are not supported")
        kind = content.lark_name()
        text = str(content.value)
        if kind in ("ESCAPED_INTERPOLATION", "ESCAPED_DIRECTIVE"):
            # $${ and %%{ are a literal ${ and %{; python-hcl2's token runs on to the
            # closing brace, whose text is string characters with their escapes.
            text = process_escape_sequences(text[1:])
        elif kind == "STRING_CHARS":
            text = process_escape_sequences(text)
        else:
            raise HclSyntaxError(f"{_construct(content)} are not supported")
        if out and isinstance(out[-1], str):
            out[-1] += text
        else:
            out.append(text)
    return Template(tuple(out) or ("",))


def _heredoc(rule: HeredocTemplateRule) -> Template:
    """A heredoc's body as a template, read from python-hcl2's token.

    python-hcl2's own value of a heredoc escapes the quotes and backslashes of
    a ``<<-`` one and drops the newline ending the last line; HCL keeps both.
    So the body is cut here: the lines between the markers, each ending with
    its newline, and for ``<<-`` without the indentation they share.
    """
    opener, *lines = str(rule.heredoc.value).rstrip("\r\n").split("\n")
    lines = [line.removesuffix("\r") for line in lines[:-1]]  # the last line is the closing marker's
    if opener.startswith("<<-"):
        indent = min((len(line) - len(line.lstrip(" \t")) for line in lines if line.strip()), default=0)
        lines = [line[indent:] for line in lines]
    return parse_template("".join(line + "\n" for line in lines))


# ---------------------------------------------------------------- text read through python-hcl2


def parse_expression(text: str) -> Node:
    """The whole of ``text`` as one HCL expression (a variable's ``type``, say).

    :raises HclSyntaxError: it is not one.
    """
    try:
        body = hcl2.parses(f"value = {text}\n").body
    except UnexpectedInput as exc:
        raise HclSyntaxError(f"not an expression: {text.strip()!r} (column {exc.column - 8})") from None
    attributes = [child for child in body.children if isinstance(child, AttributeRule)]
    if len(attributes) != 1 or "\n" in text.strip():
        raise HclSyntaxError(f"not one expression: {text.strip()!r}")
    return expression(attributes[0].expression)


def parse_template(text: str) -> Template:
    """Template text (no quotes, no backslash escapes; ``$${`` is a literal ``${``), as python-hcl2 parses it.

    :raises HclSyntaxError: an interpolation is not closed or not valid HCL.
    """
    if "${" not in text and "%{" not in text:
        return Template((text,))
    node = parse_expression(_quoted(text))
    if not isinstance(node, Template):  # pragma: no cover - a quoted string always reads as a template
        raise HclSyntaxError("not a template")
    return node


def _quoted(text: str) -> str:
    """``text`` as an HCL quoted string: literal text escaped, interpolations and directives as written."""
    out = ['"']
    pos = 0
    while pos < len(text):
        if text.startswith(("$${", "%%{"), pos):
            out.append(text[pos:pos + 3])
            pos += 3
        elif text.startswith(("${", "%{"), pos):
            end = _closing_brace(text, pos + 2)
            out.append(text[pos:end + 1])
            pos = end + 1
        else:
            char = text[pos]
            out.append({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char, char))
            pos += 1
    out.append('"')
    return "".join(out)


def _closing_brace(text: str, pos: int) -> int:
    """Where the interpolation opened before ``pos`` closes: braces counted, quoted strings skipped."""
    depth, quoted = 0, False
    while pos < len(text):
        char = text[pos]
        if quoted and char == "\\":
            pos += 1
        elif char == '"':
            quoted = not quoted
        elif not quoted and char == "{":
            depth += 1
        elif not quoted and char == "}":
            if depth == 0:
                return pos
            depth -= 1
        pos += 1
    raise HclSyntaxError(f"an interpolation is not closed: {text[:40]!r}")


def parse_type(source: Any) -> Node:
    """The type in a variable's ``type`` (``list(string)``): an HCL file's expression, or text from JSON/YAML."""
    if isinstance(source, Expression):
        parts = source.template.parts
        if len(parts) == 1 and isinstance(parts[0], Interpolation):
            return parts[0].expression
        raise HclSyntaxError("a type is an expression such as list(string), not a string")
    text = str(source).strip()
    if text.startswith("${") and text.endswith("}"):
        text = text[2:-1]
    return parse_expression(text)

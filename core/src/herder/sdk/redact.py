"""Credentials out of what herder shows: a URL's password and go-getter's ``sshkey``.

A job's author may write credentials into a source URL, as go-getter allows
(``https://user:TOKEN@host/app.tar.gz``, ``git::https://user:TOKEN@host/repo.git``,
``git::ssh://git@host/repo.git?sshkey=BASE64``). Events, logs and error
messages show such a URL as go-getter's ``RedactURL`` does: the password
and the key replaced by ``redacted``, the rest kept so the source can still
be recognised. What a fetcher's own error says (git's stderr, an HTTP
library's exception) may quote a credential in any form, so :func:`redact`
also takes every form of each secret out of a text.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

REDACTED = "redacted"
SECRET_OPTIONS = ("sshkey",)
"""go-getter's query options that carry a secret."""


def _split(url: str) -> tuple[str, str]:
    """``url`` as go-getter's forced getter (``git::``, or "") and the URL itself."""
    head, sep, rest = url.partition("::")
    if sep and "://" not in head and "/" not in head:
        return head + sep, rest
    return "", url


def redact_url(url: str) -> str:
    """``url`` with the password of its user information and the value of each of
    :data:`SECRET_OPTIONS` replaced by ``redacted``; a URL without either as it is."""
    if not secrets_of(url):
        return url
    getter, rest = _split(url)
    try:
        parts = urlsplit(rest)
    except ValueError:  # not a URL after all (an unbalanced bracket): nothing to find by its parts
        return redact(url, secrets_of(url))
    userinfo, at, host = parts.netloc.rpartition("@")
    netloc = f"{userinfo.partition(':')[0]}:{REDACTED}@{host}" if at and ":" in userinfo else parts.netloc
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    query = parts.query
    if any(key in SECRET_OPTIONS for key, _ in pairs):
        query = urlencode([(key, REDACTED if key in SECRET_OPTIONS else value) for key, value in pairs])
    return getter + urlunsplit(parts._replace(netloc=netloc, query=query))


def secrets_of(url: str) -> tuple[str, ...]:
    """The secrets ``url`` carries (its password, its ``sshkey``), as written and decoded."""
    _, rest = _split(url)
    if "://" not in rest:
        return ()
    netloc = rest.partition("://")[2]
    for end in "/?#":
        netloc = netloc.partition(end)[0]
    userinfo, at, _ = netloc.rpartition("@")
    found: list[str] = []
    if at and ":" in userinfo:
        found.append(userinfo.partition(":")[2])
    query = rest.partition("?")[2].partition("#")[0]
    for key, _, raw in (pair.partition("=") for pair in query.split("&")):
        if key in SECRET_OPTIONS:
            found += [raw, unquote(raw.replace("+", " "))]
    forms = {form for secret in found for form in (secret, unquote(secret), quote(secret, safe=""))}
    return tuple(sorted((form for form in forms if form), key=len, reverse=True))


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each of ``secrets`` replaced by ``redacted``
    (the longest first, so a secret that contains another goes whole)."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


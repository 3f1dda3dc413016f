"""Credentials out of what herder shows: a source URL's password and ``sshkey``, as go-getter's RedactURL."""

from __future__ import annotations

import pytest

from herder.sdk import redact, redact_url, secrets_of


@pytest.mark.parametrize(("url", "shown"), [
    ("https://ci:s3cret@example.com/app.tar.gz", "https://ci:redacted@example.com/app.tar.gz"),
    ("git::http://ci:s3cret@127.0.0.1:8080/repo.git?ref=v1", "git::http://ci:redacted@127.0.0.1:8080/repo.git?ref=v1"),
    ("git::ssh://git@example.com/repo.git?ref=main&sshkey=QUJD", "git::ssh://git@example.com/repo.git?ref=main&sshkey=redacted"),
    ("https://ci:p%40ss:word@example.com/x", "https://ci:redacted@example.com/x"),
    ("https://ci@example.com/x", "https://ci@example.com/x"),  # a user is no secret, as for go-getter
    ("https://example.com/x?archive=false", "https://example.com/x?archive=false"),
    ("/srv/files/app.tar", "/srv/files/app.tar"),
])
def test_a_url_is_shown_without_its_password_or_key(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_every_form_of_a_secret_is_taken_out_of_a_text() -> None:
    url = "git::https://ci:p%40ss@example.com/repo.git?sshkey=QUJD%2B"
    assert set(secrets_of(url)) >= {"p%40ss", "p@ss", "QUJD%2B", "QUJD+"}
    said = "fatal: unable to access 'https://ci:p@ss@example.com/repo.git': key QUJD+ refused"
    assert redact(said, secrets_of(url)) == ("fatal: unable to access 'https://ci:redacted@example.com/repo.git': "
                                             "key redacted refused")
    assert redact_url(url) == "git::https://ci:redacted@example.com/repo.git?sshkey=redacted"


def test_a_broken_url_is_still_redacted() -> None:
    assert redact_url("https://ci:s3cret@[::1/x") == "https://ci:redacted@[::1/x"
    assert secrets_of("no url at all") == ()

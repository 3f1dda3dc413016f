"""Text from the agent made safe to print on a terminal.

What a job's author wrote (a service's name and tags, shown by ``herder service``) reaches the
operator's terminal through the agent: an escape sequence in it would be run by the terminal
(retitle the window, clear or rewrite what is shown, answer back into its input), and a
bidirectional override would show text other than what is there. Such characters are shown
as Python writes them in a string, ``\\x1b``, ``\\u202e``.
"""

from __future__ import annotations


def printable(text: str) -> str:
    """``text`` with each character a terminal would not just show (controls, formats, separators other
    than the space) written as its escape."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)

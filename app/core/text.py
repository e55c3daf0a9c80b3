"""Text that a person or a handler wrote, made safe to print on a terminal.

Names, notes, handler args and error texts are stored as given; a name holding an escape
sequence would clear the screen or rewrite earlier lines when printed raw. `safe` shows
every character that is not printable as its Python escape (`\\x1b`, `\\n`, `\\u202e`).

    >>> safe("nightly\\x1b[2J")
    'nightly\\\\x1b[2J'
"""

from __future__ import annotations


def safe(text: object) -> str:
    """`text` as a string with each non-printable character escaped; spaces stay."""
    value = str(text)
    if value.isprintable():
        return value
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in value)


def safe_lines(text: str) -> str:
    """Like `safe`, but line breaks stay (log lines with a traceback)."""
    return "\n".join(safe(line) for line in text.split("\n"))

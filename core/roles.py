"""A person's role or title as people state it ("I'm now research lead", "Aisha made me design
manager", "Ravi was made team lead", "I have accepted a Readership at York", "I'm the social
media coordinator at Glowbar"): what frames compare as the one-value attribute ~role."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

ROLE_NOUNS = (
    "lead|manager|engineer|designer|researcher|lecturer|reader|readership|professor|director|"
    "coordinator|analyst|developer|scientist|consultant|architect|editor|officer|head|chief|"
    "intern|associate|specialist|administrator|nurse|teacher|founder|cto|ceo|cfo|vp|president|"
    "fellow|producer|strategist|recruiter|accountant|paralegal|lawyer|librarian"
)
_ROLE = rf"(?:a\s+|an\s+|the\s+)?(?P<role>(?:[a-z][\w-]*\s+){{0,3}}?(?:{ROLE_NOUNS}))\b"
_ORG = r"(?:the\s+)?(?P<org>[\w&'’-]+(?:\s+(?!(?:at|in|on|here|there|and|since|now|for)\b)[A-Z][\w&'’-]+){0,3})"
"""Where a role is held ("at glowbar", "at Nordkap Logistics")."""


@cache
def _stated() -> tuple[re.Pattern[str], ...]:
    """The ways a role is stated, compiled on first use (a command that reads no statement
    never pays for these large patterns)."""
    return tuple(
        re.compile(pattern, re.IGNORECASE)
        for pattern in (
            rf"\b(?:made|promoted|named|appointed)\s+(?P<me>me\s+)?(?:to\s+|as\s+)?{_ROLE}",
            rf"\b(?P<me>i'?m|i am)\s+now\s+{_ROLE}",
            rf"\b(?P<me>i'?m|i am)\s+{_ROLE}\s+(?:(?:at|for|with)\s+{_ORG}|in|of|on)\b",
            rf"\baccepted\s+{_ROLE}",
            rf"\b(?:he|she|they)(?:'s|\s+is|\s+was|\s+are)\s+{_ROLE}\s+(?:at|for|with)\s+{_ORG}",
        )
    )


_NOT_ROLE = frozenset({"my", "our", "your", "his", "her", "their", "new", "the", "a", "an"})


@dataclass(frozen=True)
class Role:
    """A role a statement gives: the role (folded), whether it is the speaker's own ("made me
    …", "I'm …") and where it is held, when it says ("" otherwise)."""

    role: str
    mine: bool
    org: str = ""


def stated_role(text: str) -> Role | None:
    """The role a statement gives, or None when it states none."""
    for pattern in _stated():
        m = pattern.search(text)
        if m is None:
            continue
        words = [w for w in m["role"].casefold().split() if w not in _NOT_ROLE]
        if words:
            found = m.groupdict()
            return Role(" ".join(words), bool(found.get("me")), (found.get("org") or "").casefold())
    return None

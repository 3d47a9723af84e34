"""The cue data of rule-mode distillation: fact kinds with their category and importance, the
regexes and trigger words that mark each kind, and the word lists of names and filler."""

from __future__ import annotations

import re

KINDS = ("lesson", "decision", "preference", "person", "task", "event", "technical", "note")
CATEGORY = {
    "lesson": "lessons",
    "decision": "decisions",
    "preference": "owner/preferences",
    "person": "people",
    "task": "tasks",
    "event": "events",
    "technical": "technical",
    "note": "notes",
}
IMPORTANCE = {
    "lesson": 0.85,
    "decision": 0.8,
    "preference": 0.75,
    "person": 0.7,
    "task": 0.6,
    "technical": 0.6,
    "event": 0.55,
    "note": 0.45,
}
CUE_PATTERNS: dict[str, str] = {
    "lesson": r"lessons? learn[et]|learn[et] that|\blesson\b|note to self|never again|mistake was|"
    r"gotcha|pitfall|(?:always|never) (?:\w+ ){0,2}(?:test|check|run|use|deploy|push|commit|"
    r"forget|trust|store|back ?up|verify|ask)|don'?t ever|make sure to|remember to",
    "decision": r"\bdecided\b|\bdecide to\b|\bdecision\b|\bwe'?ll go with\b|\bgoing with\b|"
    r"\bagreed\b|\bsettled on\b|\bchose\b|\bchoose to\b|\blet'?s (?:use|go with|stick with)\b|"
    r"\bopted\b|\bswitch(?:ed|ing)? to\b|\bwill use\b|\bwe use\b",
    "preference": r"\bi (?:really )?(?:prefer|like|love|hate|dislike|enjoy|don'?t like|"
    r"can'?t stand)\b|\bprefers?\b|\bfavou?rite\b|\bcall me\b|\bi want you to\b|"
    r"\bplease (?:always|never)\b",
    "person": r"\bmy (?:wife|husband|partner|daughter|son|kids?|mom|mother|dad|father|brother|"
    r"sister|boss|manager|friend|colleague|cofounder|co-founder)\b|\bbirthday\b|\bborn\b",
    "task": r"\btodo\b|\bto-do\b|\bneed to\b|\bneeds to\b|\bnext step|\bfollow[ -]up\b|"
    r"\bremind me\b|\baction item|\bdon'?t forget to\b|\bi'?ll\b|\bwe'?ll\b|\bplan to\b|"
    r"\btomorrow\b|\bby (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b|\[ \]",
    "event": r"\bdeployed\b|\bshipped\b|\breleased\b|\blaunched\b|\bfixed\b|\bfinished\b|"
    r"\bcompleted\b|\bmerged\b|\bmet (?:with )?\b|\bmeeting\b|\bdeadline\b|\bdue\b|"
    r"\bscheduled\b|\bbooked\b|\binstalled\b|\bupgraded\b|\bmigrated\b|\bhappened\b|"
    r"\byesterday\b|\btoday\b|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*"
    r"\.? \d{1,2}\b|\b\d{4}-\d{2}-\d{2}\b|\[x\]",
}
CUES = {k: re.compile(v, re.I) for k, v in CUE_PATTERNS.items()}
TRIGGERS: dict[str, frozenset[str]] = {
    "lesson": frozenset(
        [
            "lesson",
            "lessons",
            "learned",
            "learnt",
            "note",
            "never",
            "mistake",
            "gotcha",
            "pitfall",
            "pitfalls",
            "always",
            "don't",
            "dont",
            "make",
            "remember",
        ]
    ),
    "decision": frozenset(
        [
            "decided",
            "decide",
            "decision",
            "we'll",
            "going",
            "agreed",
            "settled",
            "chose",
            "choose",
            "let's",
            "lets",
            "opted",
            "switch",
            "switched",
            "switching",
            "will",
            "use",
        ]
    ),
    "preference": frozenset(["i", "prefer", "prefers", "favorite", "favourite", "call", "please"]),
    "person": frozenset(["my", "birthday", "born"]),
    "task": frozenset(
        [
            "todo",
            "to-do",
            "need",
            "needs",
            "next",
            "follow",
            "follow-up",
            "remind",
            "action",
            "don't",
            "i'll",
            "we'll",
            "plan",
            "tomorrow",
            "by",
        ]
    ),
    "event": frozenset(
        [
            "deployed",
            "shipped",
            "released",
            "launched",
            "fixed",
            "finished",
            "completed",
            "merged",
            "met",
            "meeting",
            "deadline",
            "due",
            "scheduled",
            "booked",
            "installed",
            "upgraded",
            "migrated",
            "happened",
            "yesterday",
            "today",
        ]
    ),
}
MONTHS = frozenset(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
)
CRITICAL = re.compile(r"\b(?:critical|urgent|important|must|never|password|credential)\b", re.I)
WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")
BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?")
FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[ \t]*$", re.M | re.S)
NAME = re.compile(
    r"\b(?:with|met|told|asked|call(?:ed)?|email(?:ed)?|ping(?:ed)?|thank(?:ed)?|from|and|by)"
    r"\s+([A-Z][a-z]{2,}(?: [A-Z][a-z]{2,})?)\b"
    r"|\b([A-Z][a-z]{2,})(?:'s\b| (?:said|says|told|asked|wants|thinks|mentioned|suggested|"
    r"agreed|approved|prefers|likes)\b| \((?:wife|husband|partner|daughter|son|boss|friend|"
    r"colleague|mom|dad|mother|father|sister|brother)\b)"
)
NOT_NAMES = frozenset(
    [
        "I",
        "You",
        "We",
        "They",
        "He",
        "She",
        "It",
        "The",
        "This",
        "That",
        "These",
        "Those",
        "There",
        "Then",
        "When",
        "Where",
        "What",
        "Why",
        "How",
        "Who",
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
        "Today",
        "Tomorrow",
        "Yesterday",
        "User",
        "Agent",
        "Assistant",
        "Also",
        "And",
        "But",
        "Yes",
        "Sure",
        "Thanks",
        "Thank",
        "Okay",
        "Please",
        "Let",
        "Just",
        "Maybe",
        "Here",
        "Now",
        "Next",
        "Done",
        "Note",
        "Todo",
        "Our",
        "Your",
        "My",
        "His",
        "Her",
        "Their",
        "Its",
        "Git",
        "Docker",
        "Python",
        "Linux",
        "Windows",
        "Github",
        "Google",
        "Slack",
    ]
)
FILLER = frozenset(
    [
        "lesson",
        "lessons",
        "learned",
        "learnt",
        "always",
        "decided",
        "decide",
        "decision",
        "agreed",
        "chose",
        "let",
        "lets",
        "let's",
        "we'll",
        "i'll",
        "we",
        "i",
        "you",
        "use",
        "using",
        "need",
        "needs",
        "going",
        "go",
        "will",
        "would",
        "should",
        "must",
        "also",
        "really",
        "just",
        "please",
        "todo",
        "note",
        "today",
    ]
)

# Lead-ins that carry no knowledge: "Also remember that X" is X; "TODO: X" is the task X.
FILLER_LEAD = re.compile(
    r"^(?:(?:also|and|so|oh|ok(?:ay)?|btw|by the way|one more thing)[,:]?\s+)*"
    r"(?:please\s+)?(?:(?:remember|note|keep in mind|don'?t forget|make a note|fyi)"
    r"(?:\s+that|\s*:)|for the record[,:]?)\s+",
    re.I,
)
TASK_LEAD = re.compile(r"^(?:todo|to-do|fixme|action item)\s*[:\-–—]\s*", re.I)
ECHO_OVERLAP = 0.6
"""The share of an assistant decision's content words that a recent user decision must hold
for the assistant's sentence to be an echo of it (merged, not kept twice)."""

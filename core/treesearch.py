"""LLM tree search: the model reads the category tree and says where to look.

The tree (paths, descriptions, warm/cold counts) and the query go to the OpenAI-compatible
endpoint configured under `[llm]` (core/llm.py); the model answers with the relevant paths, a
score (0..1) and a reason for each. Retrieval then fetches from those categories and every
result carries the model's reason. Any failure — no endpoint configured, timeout, HTTP error,
an answer that is not the JSON asked for, or no path that exists — raises `TreeSearchError`, and
the caller falls back to keyword mode and says why.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tiermem.core.errors import TreeSearchError as TreeSearchError
from tiermem.core.llm import LLMError, LLMSettings, chat_json
from tiermem.core.tree import TreeIndex

MAX_QUERY_CHARS = 2000
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "paths": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "score": {"type": "number"},
                    "reason": {"type": "string"},
                },
                "required": ["path", "score", "reason"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["paths"],
    "additionalProperties": False,
}
SYSTEM_PROMPT = (
    "You are the retrieval step of a long-term memory. Memories are filed under the categories "
    "of a tree. Given the tree and a query, choose the categories most likely to hold memories "
    "that answer the query. Answer only with JSON: "
    '{"paths": [{"path": "<a path from the tree>", "score": <relevance 0..1>, '
    '"reason": "<one short sentence>"}]}, the most relevant first, at most {max_paths} paths, '
    "only paths that appear in the tree. Choosing a path includes its subcategories."
)

Complete = Callable[[list[dict[str, str]]], str]
"""messages → the assistant's text (the endpoint, or anything that speaks like it)."""


@dataclass(frozen=True)
class PathChoice:
    path: str
    score: float
    reason: str

    def describe(self) -> str:
        return f"{self.path} ({self.score:.2f}): {self.reason}"


def messages_for(tree: TreeIndex, query: str, max_paths: int) -> list[dict[str, str]]:
    nodes = [
        {
            "path": path,
            "description": tree.nodes[path].description,
            "warm": tree.nodes[path].warm,
            "cold": tree.nodes[path].cold,
        }
        for path in sorted(tree.nodes)
    ]
    body = {"query": query[:MAX_QUERY_CHARS], "tree": nodes}
    return [
        {"role": "system", "content": SYSTEM_PROMPT.replace("{max_paths}", str(max_paths))},
        {"role": "user", "content": json.dumps(body, ensure_ascii=False)},
    ]


def parse_choices(text: str, tree: TreeIndex, max_paths: int) -> list[PathChoice]:
    """The valid choices of an answer, best first; unknown paths are dropped."""
    try:
        data = json.loads(_strip_fence(text))
        items = data["paths"]
        if not isinstance(items, list):
            raise TypeError
    except (ValueError, KeyError, TypeError, RecursionError):
        raise TreeSearchError("the model's answer is not the JSON asked for") from None
    choices: dict[str, PathChoice] = {}
    for item in items:
        if not isinstance(item, dict):
            continue
        path, score, reason = item.get("path"), item.get("score"), item.get("reason")
        if not isinstance(path, str) or isinstance(score, bool):
            continue
        if not isinstance(score, int | float):
            continue
        path = path.strip().strip("/").casefold()
        if path in tree.nodes and path not in choices:
            clean = " ".join(str(reason or "").split())[:300]
            choices[path] = PathChoice(path, min(1.0, max(0.0, float(score))), clean)
    if not choices:
        raise TreeSearchError("the model chose no category that exists in the tree")
    ranked = sorted(choices.values(), key=lambda c: (-c.score, c.path))
    return ranked[:max_paths]


def choose_paths(
    tree: TreeIndex, query: str, complete: Complete, max_paths: int = 5
) -> list[PathChoice]:
    if not tree.nodes:
        raise TreeSearchError("the tree has no categories to choose from")
    return parse_choices(complete(messages_for(tree, query, max_paths)), tree, max_paths)


def endpoint(settings: LLMSettings) -> Complete:
    """The configured endpoint as a `Complete` (raises TreeSearchError when it fails)."""
    if not settings.configured:
        raise TreeSearchError(
            "no LLM endpoint configured ([llm] base_url and model, or TIERMEM_LLM_BASE_URL "
            "and TIERMEM_LLM_MODEL)"
        )

    def complete(messages: list[dict[str, str]]) -> str:
        try:
            return chat_json(settings, messages, SCHEMA)
        except LLMError as exc:
            raise TreeSearchError(str(exc)) from None

    return complete


def _strip_fence(text: str) -> str:
    """Models sometimes wrap JSON in a ``` fence despite being asked not to."""
    body = text.strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0]
    return body

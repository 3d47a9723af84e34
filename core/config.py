"""Typed configuration. Every limit and constant of the memory model lives here with the original
design's value as its default; `config.toml` in the home overrides any of them.

A bad file is a one-line `ConfigError` naming the file and the key.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import msgspec

from tiermem.core.errors import ConfigError
from tiermem.core.paths import read_text

Positive = Annotated[int, msgspec.Meta(gt=0)]
Fraction = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
PositiveFloat = Annotated[float, msgspec.Meta(gt=0.0)]


class HotConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Hot memory: always in the agent's context, rendered as MEMORY.md."""

    max_bytes: Positive = 5120
    """Hard limit of the serialized hot state and of MEMORY.md, in bytes."""
    max_lessons: Positive = 20
    """Critical lessons kept; the lowest-importance one goes first."""
    max_events: Positive = 10
    """Recent events kept (the newest ones)."""
    max_pending_tasks: Positive = 10
    """Pending tasks kept; the oldest pending one goes first."""
    event_days: Positive = 30
    """Events older than this many days leave hot memory for warm (recent events are recent)."""
    task_days: Positive = 60
    """Tasks older than this many days leave hot memory for warm."""


class ScoringConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """score = importance × exp(-age_days / tau_days) × (1 + reinforcement × access_count)."""

    tau_days: PositiveFloat = 30.0
    """Decay time constant in days (the half-life is tau × ln 2 ≈ 20.8 days)."""
    reinforcement: Annotated[float, msgspec.Meta(ge=0.0)] = 0.1
    """Score boost per access."""
    hot_threshold: Fraction = 0.7
    """Score at or above which a warm fact is promoted into hot memory."""
    warm_threshold: Fraction = 0.3
    """Score at or above which a fact stays warm."""
    cold_threshold: Fraction = 0.05
    """Score at or above which an evicted fact is cold; below it, frozen."""


class WarmConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Warm memory: recent distilled facts with decay scoring."""

    max_bytes: Positive = 51200
    """Total warm size; above it the lowest-scored facts are evicted first."""
    retention_days: PositiveFloat = 30.0
    """Facts older than this whose score is under warm_threshold leave warm."""


class ColdConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Cold memory: the archive, searchable and never bulk-loaded."""

    retention_years: PositiveFloat = 10.0
    """Frozen facts older than this are deleted by monthly consolidation."""


class TreeConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The category tree index that retrieval navigates."""

    max_nodes: Positive = 50
    """Nodes in the tree (the root is not counted)."""
    max_depth: Positive = 4
    """Path segments of the deepest node."""
    max_children: Positive = 10
    """Children of one node (the root included)."""
    max_bytes: Positive = 2048
    """Serialized size of the tree index (paths and descriptions)."""
    prune_idle_days: PositiveFloat = 60.0
    """Daily consolidation removes nodes with no activity for this long."""


class RetrievalConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Retrieval: tree match + FTS5 BM25 with a length prior, time cues, an optional vector
    index, and a weak tier-score tie-break."""

    default_limit: Positive = 5
    """Results returned when no limit is given."""
    candidate_pool: Positive = 30
    """BM25 candidates re-ranked per query (and vector candidates fused in hybrid mode)."""
    category_boost: Annotated[float, msgspec.Meta(ge=0.0)] = 0.25
    """Relative relevance bonus for a memory inside a category the tree matched."""
    tier_tiebreak: Annotated[float, msgspec.Meta(ge=0.0)] = 0.01
    """Weight of the tier score: a tie-break only, never a relevance signal."""
    max_query_terms: Positive = 32
    """Distinct query terms used; the rest of a very long query is ignored."""
    length_penalty: Annotated[float, msgspec.Meta(ge=0.0, le=2.0)] = 0.3
    """Exponent of the length prior: BM25 × tokens^-length_penalty (0 = plain BM25). A long
    memory that mentions a word once is less about it than a short one; the prior applies in
    full only where the candidates' lengths spread (`length_spread_min`, `length_spread_full`)."""
    length_spread_min: Annotated[float, msgspec.Meta(ge=0.0)] = 0.8
    """The length prior adapts to the candidates: at or below this spread of their lengths
    (standard deviation of ln tokens) it is off, since memories alike in length are not more or
    less about a word for their length."""
    length_spread_full: Annotated[float, msgspec.Meta(ge=0.0)] = 1.1
    """The spread from which the full `length_penalty` applies (linear in between); 0 = a fixed
    prior whatever the lengths."""
    adjacent_pairs: bool = False
    """Also search two query words that stand side by side in the query as a phrase, so a
    memory holding them side by side ("cocktail recipe") ranks above one holding them apart
    (off by default: under a point of MRR on most conversation shapes, up to a fifth more
    query time on a large store)."""
    temporal_boost: Annotated[float, msgspec.Meta(ge=0.0)] = 0.25
    """Relative bonus for a memory dated inside a window the query names ("last week",
    "in May", "three days ago"); 0 turns time cues off (their words are then searched)."""
    mode: Annotated[str, msgspec.Meta(pattern="^(keyword|vector|hybrid)$")] = "keyword"
    """Default mode: keyword, vector (embedding similarity) or hybrid (both fused). The vector
    and hybrid modes need the `vector` extra and the libSQL driver."""
    vector_fallback: bool = False
    """In keyword mode, add vector results when the keyword search finds fewer than
    `fallback_min_results` memories (keyword results stay first)."""
    fallback_min_results: Positive = 2
    """Keyword results below which the vector fallback runs (the original design's minPrimaryResults)."""
    fallback_min_coverage: Fraction = 0.0
    """The fallback also runs when the best keyword result contains less than this share of
    the query's terms (0 = only the count above decides)."""
    hybrid_vector_weight: Fraction = 0.5
    """Hybrid mode: weight of the embedding similarity against keyword relevance (each
    min-max normalised over its candidates), when the two are fused."""
    hybrid_keyword_coverage: Fraction = 0.3
    """Hybrid mode is keyword first: when the best keyword result contains more than this share
    of the query's terms, its ranking is kept (vector-only results after it); at or below it
    (the query words are not the memories' words) both rankings are fused. 1 = always fuse."""
    own_boost: Annotated[float, msgspec.Meta(ge=1.0, le=10.0)] = 1.2
    """When the agent includes shared spaces (`tiermem spaces`), its own memories' scores are
    multiplied by this: its own memory first, the spaces as fallback (1 = no preference)."""


class DedupConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Deduplication on every write. An exact duplicate (same normalized text: same content
    hash) always reinforces the stored memory; a near-duplicate does too when `near` is on."""

    near: bool = True
    """Also merge near-duplicates (normalized text similarity ≥ `similarity`)."""
    similarity: Annotated[float, msgspec.Meta(gt=0.0, le=1.0)] = 0.9
    """difflib ratio of the normalized texts (case, punctuation, spacing ignored) from which two
    facts count as one. Facts that differ in a number, a URL or a negation never merge."""
    window: Positive = 2000
    """Near-duplicates are looked for among this many newest warm memories of the agent."""


class DistillConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Distillation: raw conversation → structured facts → one-line summary."""

    mode: Annotated[str, msgspec.Meta(pattern="^(rule|llm)$")] = "rule"
    """Default mode: rule (regex/heuristics, no LLM) or llm (an OpenAI-compatible endpoint)."""
    max_facts: Positive = 20
    """Facts kept from one conversation (the most important first)."""
    summary_bytes: Positive = 30
    """The core summary is shorter than this many UTF-8 bytes (the step from facts to the one-line summary)."""
    min_words: Positive = 3
    """A message or line with fewer meaningful words (stopwords aside) is trivial: skipped."""


class LLMConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """An OpenAI-compatible chat endpoint for `--mode llm`. The environment variables
    TIERMEM_LLM_BASE_URL, TIERMEM_LLM_MODEL and TIERMEM_LLM_API_KEY override these keys (keep the
    key in the environment rather than in this file)."""

    base_url: str = ""
    """e.g. http://127.0.0.1:8080/v1 (the path before /chat/completions)."""
    model: str = ""
    api_key: str = ""
    timeout_seconds: PositiveFloat = 30.0
    """Per connect/read; a slower answer falls back to rule mode."""
    max_input_chars: Positive = 48000
    """A longer conversation is distilled in rule mode (and says so)."""


class IngestConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Daily notes (memory/YYYY-MM-DD.md) and the watcher."""

    daily_dir: str = ""
    """Folder of the daily notes; empty means `memory/` inside the memory home."""
    debounce_seconds: Annotated[float, msgspec.Meta(gt=0.0, le=60.0)] = 0.5
    """The watcher ingests a file once it has been quiet for this long."""


class SyncConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Encrypted sync: full restore, pruning of old remote versions, the background push."""

    keep_versions: Positive = 1
    """`sync prune` keeps this many newest versions of each remote record, whatever their age
    (1: the newest alone)."""
    keep_days: Annotated[float, msgspec.Meta(ge=0.0, le=36500.0)] = 30.0
    """`sync prune` also keeps every version younger than this many days: point-in-time
    restores reach back that far (0: versions are kept by `keep_versions` alone)."""
    prune_every_hours: Annotated[float, msgspec.Meta(ge=0.0, le=8760.0)] = 24.0
    """The daemon prunes the vault (by `keep_versions` and `keep_days`, compacting the
    manifests) when the last prune of any device is this many hours old (0: never)."""
    restore_page_rows: Positive = 1000
    """Remote rows per request when a full restore or `sync check` streams the vault."""
    push_budget_seconds: Annotated[float, msgspec.Meta(gt=0.0, le=86400.0)] = 300.0
    """How long the background push after a conversation keeps retrying (with the backoff
    schedule) before it gives up; what it could not send stays queued for the next one."""


class HygieneConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Session hygiene: what agents keep using rises into hot memory."""

    reaccess_counts: Positive = 2
    """Accesses of one memory within one session that count toward its promotion (a memory
    is promoted at 3 counted uses): 1 counts each session once however often it re-reads the
    memory; 2 lets a memory re-read within a session count twice."""


class WorkingConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Working memory: the agent's scratch state for the task of one session."""

    max_tokens: Positive = 2000
    """Largest working memory of one session (its JSON, in tokens); a bigger one is refused."""


class SkillsConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Procedural memory: repeated action sequences proposed as skills."""

    min_conversations: Positive = 3
    """Conversations that must repeat the same sequence of commands or tool calls before it is
    proposed as a skill."""
    min_steps: Annotated[int, msgspec.Meta(ge=2)] = 2
    """Shortest sequence (in actions) that counts."""
    max_steps: Annotated[int, msgspec.Meta(ge=2, le=20)] = 8
    """Longest sequence looked for."""


class EpisodesConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Episodic memory: one episode (summary, topics, participants, abstract) per conversation."""

    ttl_days: PositiveFloat = 90.0
    """Days an episode is kept; consolidation deletes expired ones."""
    summary: Annotated[str, msgspec.Meta(pattern="^(rule|llm)$")] = "rule"
    """How the summary is written: rule (extractive, offline) or llm (the `[llm]` endpoint,
    falling back to rule on any failure)."""
    summary_chars: Positive = 600
    """Longest summary, in characters."""


class GraphConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The knowledge graph of entities and relations extracted from episodes and facts."""

    extractor: Annotated[str, msgspec.Meta(pattern="^(rule|llm)$")] = "rule"
    """rule (patterns, offline) or llm (the `[llm]` endpoint, falling back to rule)."""
    retrieval_signal: bool = True
    """Retrieval raises memories that mention an entity the query names (or its neighbours)
    and memories of episodes that match the query, and says so in each explanation."""
    entity_boost: Annotated[float, msgspec.Meta(ge=0.0)] = 0.2
    """Relative bonus of a memory reached through an entity of the query."""
    episode_boost: Annotated[float, msgspec.Meta(ge=0.0)] = 0.1
    """Relative bonus of a memory of an episode that matches the query."""
    near_duplicate: Fraction = 0.9
    """Name similarity (0..1) from which a new entity is taken for a known one of its kind."""


class DreamingConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Dreaming: unpromoted episodes synthesised into long-term warm facts."""

    min_episodes: Positive = 5
    """Unpromoted episodes needed before consolidation synthesises them."""
    debounce_minutes: Annotated[float, msgspec.Meta(ge=0.0)] = 10.0
    """Least time between two dreaming runs of one agent."""
    max_episodes: Positive = 10
    """Episodes synthesised per run (the oldest first)."""
    synthesis: Annotated[str, msgspec.Meta(pattern="^(rule|llm)$")] = "rule"
    """rule (extraction and frequency, offline) or llm (falling back to rule)."""


class ContextConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """`tiermem context`: what is injected before the agent answers."""

    threshold: Fraction = 0.35
    """Least relevance a memory needs to be injected: the share of the message's search terms
    it contains (0..1). 0.35 (more than a third) was best on the hand-labelled set in
    tests/fixtures/context_relevance.json (`python -m benchmarks.context_threshold`)."""
    episode_tokens: Annotated[int, msgspec.Meta(ge=0)] = 200
    """Token budget of the episode abstracts injected (0 = none)."""


class AgentConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One agent's switches, as `[agents.NAME]`."""

    memory: bool = True
    """false turns memory off for the agent: stores and searches are refused, its context
    block is empty, nothing is written."""


class Config(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """All settings of one memory home."""

    hot: HotConfig = msgspec.field(default_factory=HotConfig)
    scoring: ScoringConfig = msgspec.field(default_factory=ScoringConfig)
    warm: WarmConfig = msgspec.field(default_factory=WarmConfig)
    cold: ColdConfig = msgspec.field(default_factory=ColdConfig)
    tree: TreeConfig = msgspec.field(default_factory=TreeConfig)
    retrieval: RetrievalConfig = msgspec.field(default_factory=RetrievalConfig)
    dedup: DedupConfig = msgspec.field(default_factory=DedupConfig)
    distill: DistillConfig = msgspec.field(default_factory=DistillConfig)
    llm: LLMConfig = msgspec.field(default_factory=LLMConfig)
    ingest: IngestConfig = msgspec.field(default_factory=IngestConfig)
    sync: SyncConfig = msgspec.field(default_factory=SyncConfig)
    episodes: EpisodesConfig = msgspec.field(default_factory=EpisodesConfig)
    graph: GraphConfig = msgspec.field(default_factory=GraphConfig)
    dreaming: DreamingConfig = msgspec.field(default_factory=DreamingConfig)
    context: ContextConfig = msgspec.field(default_factory=ContextConfig)
    hygiene: HygieneConfig = msgspec.field(default_factory=HygieneConfig)
    working: WorkingConfig = msgspec.field(default_factory=WorkingConfig)
    skills: SkillsConfig = msgspec.field(default_factory=SkillsConfig)
    agents: dict[str, AgentConfig] = msgspec.field(default_factory=dict)
    """Per-agent switches by agent id (`[agents.NAME]`)."""

    def memory_on(self, agent_id: str) -> bool:
        """Whether memory is on for `agent_id` (`[agents.NAME] memory`, on by default)."""
        agent = self.agents.get(agent_id)
        return agent is None or agent.memory

    def __post_init__(self) -> None:
        s = self.scoring
        if not s.hot_threshold >= s.warm_threshold >= s.cold_threshold:
            raise ValueError("scoring thresholds must satisfy hot >= warm >= cold")


def config_from_mapping(data: dict[str, Any], source: str) -> Config:
    """Validate a parsed mapping; errors name `source` and the offending key."""
    try:
        return msgspec.convert(data, Config, strict=True)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{source}: {_key_message(str(exc))}") from None
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def read_config_mapping(path: Path) -> dict[str, Any]:
    """`config.toml` parsed but not yet validated; a missing file is an empty mapping."""
    if not path.exists():
        return {}
    import tomllib  # only a home with a config.toml parses TOML

    try:
        return tomllib.loads(read_text(path, ConfigError))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc})") from None
    except RecursionError:  # tomllib parses nested arrays and tables recursively
        raise ConfigError(f"{path}: invalid TOML (nested too deeply)") from None


def load_config(path: Path) -> Config:
    """Read `config.toml`, over the original `config.json` when the home holds one (read in
    place: each key it has is honoured, or named in a one-line warning on stderr); missing
    files mean all defaults."""
    legacy = path.parent / SEED_CONFIG
    mapping: dict[str, Any] = {}
    source = str(path)
    if legacy.exists():
        mapping, ignored = seed_config_to_mapping(_read_json(legacy), with_ignored=True)
        for message in ignored:
            _warn(f"{legacy}: {message}")
        source = f"{legacy} + {path}" if path.exists() else str(legacy)
    if not mapping and not path.exists():
        return Config()
    for section, block in read_config_mapping(path).items():
        if isinstance(block, dict) and isinstance(mapping.get(section), dict):
            mapping[section] = mapping[section] | block
        else:
            mapping[section] = block
    return config_from_mapping(mapping, source)


SEED_CONFIG = "config.json"
"""The original layout's config file, read in place from the home."""
_warned: set[str] = set()


def _warn(message: str) -> None:
    """A warning on stderr, once per process (no front end is there to show it)."""
    if message not in _warned:
        _warned.add(message)
        sys.stderr.write(f"warning: {message}\n")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_text(path, ConfigError))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return data


def _key_message(message: str) -> str:
    """msgspec says 'Expected `int`, got `str` - at `$.hot.max_bytes`'; lead with the key."""
    text, _, where = message.partition(" - at `$.")
    text = text.replace("`", "")
    if where:
        return f"{where.rstrip('`')}: {text}"
    return text


_SCHEDULE = {"warm_eviction": "hourly", "tree_prune": "daily", "tree_rebuild": "monthly"}
"""The original schedule, which `tiermem service install` runs (quick hourly, daily, monthly)."""


def seed_config_to_mapping(seed: dict[str, Any], with_ignored: bool = False) -> Any:
    """Translate the original config.json layout (v2.x) into this config's shape.

    With `with_ignored`, also the one-line reasons for the keys it does not apply: every key
    is either translated, matches what this implementation does anyway (the consolidation
    schedule, `cold.backend`, the agent), or is named."""
    out: dict[str, Any] = {}
    ignored: list[str] = []

    def put(section: str, key: str, value: Any) -> None:
        out.setdefault(section, {})[key] = value

    for (section, key), (dest_section, dest_key) in _RENAMES.items():
        block = seed.get(section)
        if isinstance(block, dict) and key in block:
            put(dest_section, dest_key, block[key])
    warm = seed.get("warm")
    if isinstance(warm, dict) and "max_kb" in warm:
        put("warm", "max_bytes", _kb_to_bytes(warm["max_kb"]))
    distillation = seed.get("distillation")
    if isinstance(distillation, dict) and "mode" in distillation:
        put("distill", "mode", distillation["mode"])
    for section, block in seed.items():
        keys: list[str | None] = list(block) if isinstance(block, dict) else [None]
        ignored += [r for r in (_ignored(section, key, block) for key in keys) if r]
    return (out, ignored) if with_ignored else out


_RENAMES = {
    ("hot", "max_bytes"): ("hot", "max_bytes"),
    ("hot", "max_lessons"): ("hot", "max_lessons"),
    ("hot", "max_events"): ("hot", "max_events"),
    ("hot", "max_tasks"): ("hot", "max_pending_tasks"),
    ("warm", "retention_days"): ("warm", "retention_days"),
    ("warm", "eviction_threshold"): ("scoring", "warm_threshold"),
    ("cold", "retention_years"): ("cold", "retention_years"),
    ("scoring", "half_life_days"): ("scoring", "tau_days"),
    ("scoring", "reinforcement_boost"): ("scoring", "reinforcement"),
    ("tree", "max_nodes"): ("tree", "max_nodes"),
    ("tree", "max_depth"): ("tree", "max_depth"),
    ("tree", "max_size_bytes"): ("tree", "max_bytes"),
}


def _ignored(section: str, key: str | None, block: Any) -> str | None:
    """Why a key of the original config is not applied (None: it is, or it changes nothing)."""
    name = section if key is None else f"{section}.{key}"
    if (section, key) in _RENAMES or section.startswith("_") or name == "warm.max_kb":
        return None
    if name == "distillation.mode":
        return None
    if name == "agent_id":
        return (
            None
            if block == "default"
            else (f"agent_id {block!r} ignored: choose the agent with --agent-id")
        )
    if name == "cold.backend":
        return (
            None
            if block.get(key) in ("turso", "sqlite", "libsql")
            else (
                f"cold.backend {block.get(key)!r} ignored: cold memory lives in the home's libSQL file"
            )
        )
    if section == "consolidation" and key in _SCHEDULE:
        value = block.get(key)
        return (
            None
            if value == _SCHEDULE[key]
            else (
                f"{name} {value!r} ignored: the schedule is {_SCHEDULE[key]} "
                "(tiermem service install)"
            )
        )
    return f"{name} ignored: no such setting here (see config.toml)"


def _kb_to_bytes(value: Any) -> Any:
    return (
        int(value * 1024)
        if isinstance(value, int | float) and not isinstance(value, bool)
        else value
    )


def render_toml(config: Config) -> str:
    """The config as a TOML document (used by `import` to write the translated config.json)."""
    lines: list[str] = []
    blocks = msgspec.structs.asdict(config)
    named = {f"agents.{name}": agent for name, agent in blocks.pop("agents").items()}
    for section, block in (blocks | named).items():
        lines.append(f"[{section}]")
        for key, value in msgspec.structs.asdict(block).items():
            shown = json.dumps(value) if isinstance(value, bool | str) else repr(value)
            lines.append(f"{key} = {shown}")
        lines.append("")
    return "\n".join(lines)

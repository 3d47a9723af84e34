"""The warm-memory score and the tier it implies.

score = importance × exp(-age_days / τ) × (1 + reinforcement × access_count)

τ is a time constant, not a half-life: the score halves every τ·ln 2 days (≈ 20.8 d for τ = 30).
"""

from __future__ import annotations

import math
from typing import Literal

from tiermem.core.config import ScoringConfig

DAY = 86400.0
ScoreTier = Literal["hot", "warm", "cold", "frozen"]


def score(
    importance: float, created_at: float, access_count: int, now: float, cfg: ScoringConfig
) -> float:
    age_days = max(0.0, (now - created_at) / DAY)
    return importance * decay(age_days, cfg) * reinforcement(access_count, cfg)


def decay(age_days: float, cfg: ScoringConfig) -> float:
    return math.exp(-age_days / cfg.tau_days)


def reinforcement(access_count: int, cfg: ScoringConfig) -> float:
    return 1.0 + cfg.reinforcement * access_count


def classify(value: float, cfg: ScoringConfig) -> ScoreTier:
    if value >= cfg.hot_threshold:
        return "hot"
    if value >= cfg.warm_threshold:
        return "warm"
    if value >= cfg.cold_threshold:
        return "cold"
    return "frozen"


def half_life_days(cfg: ScoringConfig) -> float:
    return cfg.tau_days * math.log(2)

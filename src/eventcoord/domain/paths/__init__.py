"""Path patterns for file claims: normalisation, validation, matching and exact overlap.

Pure (no I/O). ``syntax`` is the pattern language (normalise, validate, parse),
``matching`` the reference semantics for one file path, ``overlap`` the exact test of two
patterns (``globs``: the same glob rules at the level of segments and of characters, each
step counted), ``charsets`` the character sets they share, ``memo`` the caches bounded in bytes.
"""

from __future__ import annotations

from eventcoord.domain.paths.matching import matches
from eventcoord.domain.paths.overlap import DECISION_STEPS, Work, WorkExceeded, overlaps, overlaps_within
from eventcoord.domain.paths.syntax import (
    MAX_PATH_CHARS,
    MAX_PATTERN_CHARS,
    MAX_WILDCARDS,
    PathError,
    literal_prefix,
    normalise_path,
)

__all__ = [
    "DECISION_STEPS",
    "MAX_PATH_CHARS",
    "MAX_PATTERN_CHARS",
    "MAX_WILDCARDS",
    "PathError",
    "Work",
    "WorkExceeded",
    "literal_prefix",
    "matches",
    "normalise_path",
    "overlaps",
    "overlaps_within",
]

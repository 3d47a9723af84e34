"""Where a memory home lives and what is inside it."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from tiermem.core.environment import Environment, environment
from tiermem.core.errors import InvalidInput, NotFound, StorageError, TiermemError

DEFAULT_AGENT = "default"
_AGENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def read_text(path: Path, error: type[TiermemError]) -> str:
    """A user-supplied text file, or `error` with a one-line reason."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise error(f"{path}: not UTF-8 text") from None


def validate_agent_id(agent_id: str) -> str:
    """Agent ids name files (MEMORY-<id>.md), so they are restricted to a safe alphabet."""
    if not _AGENT_ID.match(agent_id):
        raise InvalidInput(
            f"invalid agent id {agent_id!r}: use 1-64 letters, digits, '.', '_' or '-'"
        )
    return agent_id


def suggestion(name: str, candidates: list[str]) -> str:
    """' (did you mean 'x'?)' for the candidate closest to `name`, or ''."""
    import difflib  # only a misspelt name needs suggestions: start-up stays fast

    close = difflib.get_close_matches(name, candidates, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def writable(path: Path) -> bool:
    """Whether `path` may be written: by access and by its owner-write bit (root ignores the
    bits, but a home made read-only is meant as read-only, for root too)."""
    try:
        info = path.stat()
    except OSError:
        return False
    return os.access(path, os.W_OK) and bool(info.st_mode & stat.S_IWUSR)


def default_home(env: Environment | None = None) -> Path:
    """`--home` beats `TIERMEM_HOME`, which beats the platform's user data folder."""
    home = (env if env is not None else environment()).home
    if home is not None:
        return home
    import platformdirs  # only a home without --home or TIERMEM_HOME: a slow import

    return platformdirs.user_data_path("tiermem", appauthor=False)


@dataclass(frozen=True)
class Home:
    """A memory home: one database for all agents plus human-readable mirrors."""

    root: Path

    @property
    def db_path(self) -> Path:
        return self.root / "tiermem.db"

    @property
    def config_path(self) -> Path:
        return self.root / "config.toml"

    def memory_md(self, agent_id: str) -> Path:
        """MEMORY.md for the default agent, MEMORY-<id>.md for the others (the original layout)."""
        name = "MEMORY.md" if agent_id == DEFAULT_AGENT else f"MEMORY-{agent_id}.md"
        return self.root / name

    def require(self) -> bool:
        """An existing home with a database, for a read (a read never creates one); True when
        it is read-only (the folder or the database file cannot be written)."""
        if not self.db_path.is_file():
            raise self.missing()
        return not (writable(self.root) and writable(self.db_path))

    def missing(self) -> NotFound:
        """The error of a read in a home that does not exist, naming a close sibling home."""
        root = self.root.expanduser().absolute()
        what = "memory home at" if not root.exists() else "memory database in"
        try:
            names = [p.name for p in root.parent.iterdir() if (p / "tiermem.db").is_file()]
        except OSError:
            names = []
        import difflib  # only a misspelt name needs suggestions: start-up stays fast

        close = difflib.get_close_matches(root.name, names, n=1)
        hint = f" (did you mean {root.parent / close[0]}?)" if close else ""
        return NotFound(
            f"no {what} {root}{hint}: reads never create one (check --home or "
            "$TIERMEM_HOME; a write such as `tiermem store` creates it)"
        )

    def ensure(self) -> Home:
        """Create the home (0700) if needed and check that it is a writable folder."""
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise StorageError(f"cannot create memory home {self.root}: {exc.strerror}") from None
        if not self.root.is_dir():
            raise StorageError(f"memory home {self.root} is not a folder")
        if not os.access(self.root, os.R_OK | os.W_OK | os.X_OK) or not writable(self.root):
            raise StorageError(
                f"memory home {self.root} is read-only: reads work, this command writes"
            )
        if self.db_path.exists() and not writable(self.db_path):
            raise StorageError(
                f"database {self.db_path} is read-only: reads work, this command writes"
            )
        return self

"""The settings model: every `TIERMEM_*` variable typed and documented, one precedence
(flag > environment > config.toml > default), one-line errors, secrets kept out of `repr`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.sentinels import SENTINEL_PASSPHRASE, SENTINEL_TOKEN
from tiermem.core import db, environment
from tiermem.core.config import Config
from tiermem.core.environment import VARIABLES, Environment, environment_reference
from tiermem.core.errors import ConfigError
from tiermem.core.llm import settings_from
from tiermem.core.paths import default_home
from tiermem.core.settings import Settings

REPO = Path(__file__).resolve().parents[2]
CONFIGURATION_PAGE = REPO / "docs" / "configuration.md"
API_KEY = "sk-sentinel-api-key-9Rt4Wq"


def write_config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text, encoding="utf-8")


def test_flag_beats_environment_beats_file_beats_default(tmp_path: Path) -> None:
    env = {"TIERMEM_LLM_MODEL": "env-model"}
    flags = {"llm.model": "flag-model"}
    assert Settings.load(tmp_path).config.llm.model == ""  # the default
    write_config(tmp_path, '[llm]\nmodel = "file-model"\n')
    assert Settings.load(tmp_path, environ={}).config.llm.model == "file-model"
    assert Settings.load(tmp_path, environ=env).config.llm.model == "env-model"
    loaded = Settings.load(tmp_path, flags=flags, environ=env)
    assert loaded.config.llm.model == "flag-model"
    empty = {"TIERMEM_LLM_MODEL": ""}  # an empty variable does not override
    assert Settings.load(tmp_path, environ=empty).config.llm.model == "file-model"


def test_a_flag_sets_keys_no_variable_covers(tmp_path: Path) -> None:
    write_config(tmp_path, '[distill]\nmode = "llm"\nmax_facts = 7\n')
    loaded = Settings.load(tmp_path, flags={"distill.mode": "rule"}, environ={})
    assert (loaded.config.distill.mode, loaded.config.distill.max_facts) == ("rule", 7)


def test_home_flag_beats_environment_beats_platform_default(tmp_path: Path) -> None:
    env = {"TIERMEM_HOME": str(tmp_path / "from-env")}
    assert Settings.load(tmp_path / "flag", environ=env).home == tmp_path / "flag"
    assert Settings.load(environ=env).home == tmp_path / "from-env"
    assert default_home(environment.environment(env)) == tmp_path / "from-env"
    assert default_home(environment.environment({})).name == "tiermem"


def test_llm_settings_take_the_environment_over_the_file(tmp_path: Path) -> None:
    write_config(tmp_path, '[llm]\nbase_url = "http://file/v1"\nmodel = "m"\n')
    cfg = Settings.load(tmp_path, environ={}).config.llm
    got = settings_from(cfg, {"TIERMEM_LLM_BASE_URL": "http://env/v1/"})
    assert (got.base_url, got.model) == ("http://env/v1", "m")


@pytest.mark.parametrize(
    ("name", "value"),
    [("TIERMEM_DRIVER", "postgres"), ("TIERMEM_SECRET_STORE", "vault")],
)
def test_an_invalid_value_is_a_one_line_config_error(name: str, value: str) -> None:
    env = environment.environment({name: value})
    with pytest.raises(ConfigError) as caught:
        env.validate()
    message = str(caught.value)
    assert "\n" not in message and name in message and repr(value) in message


def test_a_bad_driver_fails_opening_a_database(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERMEM_DRIVER", "postgres")
    with pytest.raises(ConfigError, match="TIERMEM_DRIVER"):
        db.available_driver()
    monkeypatch.setenv("TIERMEM_DRIVER", " SQLite3 ")
    assert db.available_driver() == "sqlite3"


def test_a_bad_flag_or_file_value_names_its_source(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^command line: distill.mode"):
        Settings.load(tmp_path, flags={"distill.mode": "magic"}, environ={})
    write_config(tmp_path, "[hot]\nmax_bytes = 0\n")
    with pytest.raises(ConfigError, match=r"config.toml: hot.max_bytes"):
        Settings.load(tmp_path, environ={})


def test_secrets_stay_out_of_repr_and_str(tmp_path: Path) -> None:
    values = {
        "TIERMEM_SYNC_TOKEN": SENTINEL_TOKEN,
        "TIERMEM_PASSPHRASE": SENTINEL_PASSPHRASE,
        "TIERMEM_LLM_API_KEY": API_KEY,
        "TIERMEM_SYNC_URL": "libsql://db.example",
    }
    write_config(tmp_path, f'[llm]\napi_key = "{API_KEY}"\n')
    env = environment.environment(values)
    loaded = Settings.load(tmp_path, environ=values)
    for shown in (repr(env), str(env), repr(loaded), str(loaded)):
        for secret in (SENTINEL_TOKEN, SENTINEL_PASSPHRASE, API_KEY):
            assert secret not in shown
    assert "libsql://db.example" in repr(env) and "<secret>" in repr(env)
    assert sorted(env.secrets()) == sorted([SENTINEL_TOKEN, SENTINEL_PASSPHRASE, API_KEY])
    assert env.sync_token == SENTINEL_TOKEN and loaded.config.llm.api_key == API_KEY


def test_empty_and_unset_differ_where_it_matters() -> None:
    assert environment.environment({"TIERMEM_SYNC_TOKEN": ""}).sync_token == ""  # "no token"
    assert environment.environment({}).sync_token is None
    assert environment.environment({"TIERMEM_SYNC_URL": ""}).sync_url is None
    with pytest.raises(KeyError):
        Environment().get("TIERMEM_NOT_A_VARIABLE")


def test_the_documented_table_lists_every_variable_and_is_current() -> None:
    table = environment_reference()
    for var in VARIABLES:
        assert f"| `{var.name}` |" in table and var.meaning in table
    text = CONFIGURATION_PAGE.read_text(encoding="utf-8")
    found = re.search(
        r"<!-- BEGIN GENERATED environment:[^\n]*\n(.*?)<!-- END GENERATED environment -->",
        text,
        re.S,
    )
    assert found and found.group(1) == table, (
        "docs/configuration.md: regenerate the environment table"
    )


def test_every_variable_the_product_mentions_is_in_the_model() -> None:
    """A new `TIERMEM_*` read must be added to `VARIABLES` (and so to the documented table)."""
    root = REPO
    mentioned = {
        name
        for folder in ("core", "sync", "ops", "tui")
        for path in (root / folder).rglob("*.py")
        for name in re.findall(r"(?<![A-Z_])TIERMEM_[A-Z_]+", path.read_text(encoding="utf-8"))
        if not name.endswith("_")  # "TIERMEM_LLM_*" names a family, not a variable
    }
    assert mentioned and mentioned <= set(environment.BY_NAME), mentioned - set(environment.BY_NAME)


def test_every_config_key_a_variable_overrides_exists() -> None:
    config = Config()
    for var in VARIABLES:
        if var.config_key:
            section, key = var.config_key.split(".")
            assert hasattr(getattr(config, section), key), var.name

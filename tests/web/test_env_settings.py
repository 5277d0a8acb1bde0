"""Settings come from the environment; a value that cannot be understood stops start-up."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from optiml_web.env import (
    celery_broker,
    channel_layers,
    env_bool,
    env_int,
    env_rate,
    env_secret,
    evaluator_setting,
    parse_database_url,
    secret_key,
)


def test_a_full_postgres_url_becomes_a_django_database():
    database = parse_database_url("postgres://optiml:s%40cret@db.internal:6543/studio")

    assert database == {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "studio",
        "USER": "optiml",
        "PASSWORD": "s@cret",
        "HOST": "db.internal",
        "PORT": "6543",
        "OPTIONS": {},
    }


def test_a_postgres_url_without_password_or_port_uses_the_defaults():
    database = parse_database_url("postgresql://postgres@127.0.0.1/test?sslmode=require")

    assert database["USER"] == "postgres"
    assert database["PASSWORD"] == ""
    assert database["PORT"] == "5432"
    assert database["OPTIONS"] == {"sslmode": "require"}


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("mysql://root@localhost/test", "scheme 'mysql' is not supported"),
        ("postgres://postgres@localhost", "names no database"),
        ("postgres://postgres@localhost:port/test", "bad port"),
        ("postgres:///test", "names no host"),
        ("localhost:5432/test", "is not supported"),
    ],
)
def test_a_bad_database_url_is_improperly_configured(url, complaint):
    with pytest.raises(ImproperlyConfigured, match=complaint):
        parse_database_url(url)


def test_env_secret_reads_the_file_named_by_name_file(tmp_path):
    secret = tmp_path / "password"
    secret.write_text("hunter2\n")

    value = env_secret("DB_PASSWORD", environ={"DB_PASSWORD_FILE": str(secret)})

    assert value == "hunter2"


def test_env_secret_refuses_a_value_and_a_file_at_once(tmp_path):
    with pytest.raises(ImproperlyConfigured, match="not both"):
        env_secret("TOKEN", environ={"TOKEN": "a", "TOKEN_FILE": str(tmp_path / "t")})


def test_env_secret_names_a_secret_file_that_cannot_be_read(tmp_path):
    with pytest.raises(ImproperlyConfigured, match="TOKEN_FILE"):
        env_secret("TOKEN", environ={"TOKEN_FILE": str(tmp_path / "missing")})


def test_env_secret_falls_back_to_its_default():
    assert env_secret("TOKEN", "fallback", environ={}) == "fallback"


@pytest.mark.parametrize(("raw", "value"), [("true", True), ("0", False), ("On", True), ("", True)])
def test_env_bool_reads_the_usual_spellings(raw, value):
    assert env_bool("FLAG", True, environ={"FLAG": raw}) is value


def test_env_bool_refuses_anything_else():
    with pytest.raises(ImproperlyConfigured, match="FLAG='maybe' is not a boolean"):
        env_bool("FLAG", False, environ={"FLAG": "maybe"})


def test_env_int_refuses_a_non_integer():
    assert env_int("N", 3, environ={"N": "12"}) == 12
    with pytest.raises(ImproperlyConfigured, match="N='twelve'"):
        env_int("N", 3, environ={"N": "twelve"})


@pytest.mark.parametrize(("raw", "value"), [("60/hour", "60/hour"), ("5/m", "5/minute"), (" 1/DAY ", "1/day"),
                                             ("off", None), ("", "9/hour")])
def test_env_rate_reads_a_rate_per_period_or_off(raw, value):
    assert env_rate("RATE", "9/hour", environ={"RATE": raw}) == value


@pytest.mark.parametrize("raw", ["60", "0/hour", "-1/hour", "60/fortnight", "lots/hour", "²/hour", "60/"])
def test_env_rate_refuses_anything_else(raw):
    with pytest.raises(ImproperlyConfigured, match="RATE=.* is not a rate"):
        env_rate("RATE", "9/hour", environ={"RATE": raw})


def test_without_a_secret_key_production_refuses_to_start(tmp_path):
    with pytest.raises(ImproperlyConfigured, match="OPTIML_SECRET_KEY"):
        secret_key(debug=False, var_dir=tmp_path, environ={})


def test_in_debug_a_random_secret_key_is_made_once_and_kept(tmp_path):
    first = secret_key(debug=True, var_dir=tmp_path / "var", environ={})
    second = secret_key(debug=True, var_dir=tmp_path / "var", environ={})
    elsewhere = secret_key(debug=True, var_dir=tmp_path / "other", environ={})

    assert first == second
    assert len(first) >= 50
    assert elsewhere != first
    assert (tmp_path / "var" / "secret_key").stat().st_mode & 0o077 == 0


def test_a_given_secret_key_wins(tmp_path):
    assert secret_key(debug=True, var_dir=tmp_path, environ={"OPTIML_SECRET_KEY": "k"}) == "k"
    assert not (tmp_path / "secret_key").exists()


@pytest.mark.parametrize("value", ["gate", "recorded:tests/fixtures/recorded/schema-h200.json"])
def test_the_evaluator_setting_accepts_the_gate_or_recordings(value):
    assert evaluator_setting(value) == value


@pytest.mark.parametrize("value", ["", "recorded:", "replay", "Gate"])
def test_the_evaluator_setting_refuses_anything_else(value):
    with pytest.raises(ImproperlyConfigured, match="OPTIML_EVALUATOR"):
        evaluator_setting(value)


def test_without_redis_celery_passes_messages_through_files_under_var(tmp_path):
    url, transport = celery_broker("", tmp_path)

    assert url == "filesystem://"
    assert transport["data_folder_in"] == transport["data_folder_out"]
    assert (tmp_path / "celery" / "queue").is_dir()
    assert channel_layers("")["default"]["BACKEND"] == "channels.layers.InMemoryChannelLayer"


def test_with_redis_celery_and_channels_both_use_it(tmp_path):
    url, transport = celery_broker("redis://127.0.0.1:6379/0", tmp_path)

    assert url == "redis://127.0.0.1:6379/0"
    assert transport == {}
    assert not (tmp_path / "celery").exists()
    layer = channel_layers("redis://127.0.0.1:6379/0")["default"]
    assert layer["BACKEND"] == "optiml_web.channel_layer.WaitingRedisChannelLayer"
    [host] = layer["CONFIG"]["hosts"]
    assert host["address"] == "redis://127.0.0.1:6379/0"


def test_the_channel_layer_outwaits_its_own_blocking_receive():
    from channels_redis.core import RedisChannelLayer

    [host] = channel_layers("redis://127.0.0.1:6379/0")["default"]["CONFIG"]["hosts"]

    # A read timeout at or under BZPOPMIN's own wait cuts every idle viewer (issue 34).
    assert host["socket_timeout"] > RedisChannelLayer.brpop_timeout
    assert host["socket_keepalive"] and host["health_check_interval"] > 0

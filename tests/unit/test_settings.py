"""Settings defaults, environment parsing and the schedule interval."""


import pytest

from sensors.schedules import interval_cron
from ultron.settings import Settings, SettingsError


def test_documented_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = Settings.from_env({})
    assert s.home == tmp_path / ".ultron"
    assert s.database_url is None and s.uses_embedded_database
    assert s.inbox == (tmp_path / ".ultron" / "inbox",)
    assert s.decay_interval_hours == 6
    assert s.archive_max_bytes == 10 * 1024 * 1024
    assert s.pgdata == tmp_path / ".ultron" / "pgdata"


def test_environment_overrides(tmp_path):
    env = {
        "ULTRON_HOME": str(tmp_path / "h"),
        "ULTRON_DATABASE_URL": "postgresql://u:p@db:5432/ultron",
        "ULTRON_INBOX": f"{tmp_path / 'a'}:{tmp_path / 'b'}",
        "ULTRON_DECAY_INTERVAL_HOURS": "2",
    }
    s = Settings.from_env(env)
    assert s.home == tmp_path / "h"
    assert s.inbox == (tmp_path / "a", tmp_path / "b")
    assert s.decay_interval_hours == 2 and not s.uses_embedded_database


@pytest.mark.parametrize("env", [{"ULTRON_DECAY_INTERVAL_HOURS": "soon"}, {"ULTRON_DECAY_INTERVAL_HOURS": "0"},
                                 {"ULTRON_MAX_LINE_BYTES": "12"}])
def test_bad_values_name_the_variable(env):
    with pytest.raises(SettingsError, match=next(iter(env))):
        Settings.from_env(env)


@pytest.mark.parametrize("hours, cron", [
    (6, "0 */6 * * *"), (1, "0 * * * *"), (24, "0 0 * * *"), (48, "0 0 */2 * *"),
    (0.5, "*/30 * * * *"), (5, "0 0,5,10,15,20 * * *"),
])
def test_schedule_interval(hours, cron):
    assert interval_cron(hours) == cron


def test_skills_export_dir_is_optional_and_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert Settings.from_env({}).skills_export_dir is None
    assert Settings.from_env({"ULTRON_SKILLS_EXPORT_DIR": " "}).skills_export_dir is None
    s = Settings.from_env({"ULTRON_SKILLS_EXPORT_DIR": "~/.claude/skills"})
    assert s.skills_export_dir == tmp_path / ".claude" / "skills"

"""mnemo.toml: defaults, and every kind of bad value reported by key with the default kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemo.config import ConfigProblem, Settings, load_settings, settings_from_dict


def test_missing_file_gives_defaults(tmp_path: Path) -> None:
    settings, problems = load_settings(tmp_path)
    assert problems == []
    assert settings == Settings()
    assert settings.search.max_results == 6
    assert settings.search.min_score == 0.0  # a floor only; the cut is relative to the best hit
    assert settings.embedding.provider == "auto"  # MiniLM, or USE-m3 for a mostly-CJK workspace
    assert settings.index.max_file_bytes == 5_000_000
    assert ".git" in settings.index.ignore


def test_good_values_are_read(tmp_path: Path) -> None:
    (tmp_path / "mnemo.toml").write_text(
        '[search]\nmax_results = 3\nmin_score = 0\ndecay = "off"\n'
        '[index]\nextra_paths = ["notes"]\ninclude_sessions = false\n'
        '[embedding]\nprovider = "none"\ntimeout_s = 5\n',
        encoding="utf-8",
    )
    settings, problems = load_settings(tmp_path)
    assert problems == []
    assert settings.search.max_results == 3
    assert settings.search.min_score == 0.0 and isinstance(settings.search.min_score, float)
    assert settings.search.decay == "off"
    assert settings.index.extra_paths == ["notes"]
    assert settings.index.include_sessions is False
    assert settings.embedding.provider == "none"
    assert settings.embedding.timeout_s == 5.0


def _one_problem(raw: dict) -> tuple[Settings, ConfigProblem]:
    settings, problems = settings_from_dict(raw)
    assert len(problems) == 1, problems
    return settings, problems[0]


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("search", "max_results", "ten"),  # wrong type
        ("search", "max_results", 2.5),  # float for an int
        ("search", "max_results", True),  # bool is not an int
        ("search", "min_score", "high"),
        ("search", "mmr", 1),  # int is not a bool
        ("index", "ignore", "node_modules"),  # str for a list
        ("index", "ignore", [1, 2]),  # list of the wrong type
        ("embedding", "provider", "cohere"),  # not one of the choices
        ("embedding", "model", 7),
        ("search", "max_results", 0),  # out of range
        ("search", "max_results", 100_000),
        ("search", "min_score", 1.5),
        ("search", "min_score", -0.1),
        ("chunking", "overlap", 0.9),
        ("server", "debounce_ms", -1),
    ],
)
def test_bad_value_names_key_and_keeps_default(section: str, key: str, value: object) -> None:
    settings, problem = _one_problem({section: {key: value}})
    assert problem.key == f"{section}.{key}"
    assert f"{section}.{key}" in str(problem)
    assert "default" in problem.message
    default = getattr(getattr(Settings(), section), key)
    assert getattr(getattr(settings, section), key) == default


def test_out_of_range_message_gives_the_range() -> None:
    _, problem = _one_problem({"search": {"min_score": 2.0}})
    assert "range" in problem.message and "2.0" in problem.message


def test_unknown_key_and_section() -> None:
    settings, problems = settings_from_dict(
        {"search": {"max_resluts": 3, "max_results": 4}, "serach": {"x": 1}, "index": "oops"}
    )
    by_key = {p.key: p for p in problems}
    assert set(by_key) == {"search.max_resluts", "serach", "index"}
    assert "unknown setting" in by_key["search.max_resluts"].message
    assert "max_results" in by_key["search.max_resluts"].message  # lists the known keys
    assert "unknown section" in by_key["serach"].message
    assert "[index]" in by_key["index"].message
    # The good key next to the bad one still applies.
    assert settings.search.max_results == 4
    assert settings.index == Settings().index


def test_bad_keys_do_not_affect_other_keys(tmp_path: Path) -> None:
    (tmp_path / "mnemo.toml").write_text(
        '[search]\nmax_results = "x"\nmin_score = 0.5\nhalf_life_days = 0\n', encoding="utf-8"
    )
    settings, problems = load_settings(tmp_path)
    assert sorted(p.key for p in problems) == ["search.half_life_days", "search.max_results"]
    assert settings.search.min_score == 0.5
    assert settings.search.max_results == 6
    assert settings.search.half_life_days == 30.0


@pytest.mark.parametrize(
    "content",
    [b"[search\nmax_results = 3\n", b"max_results = = 3\n", b"[search]\nmin_score = 0.5\n\xff\xfe bad"],
)
def test_unparsable_file_uses_all_defaults(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "mnemo.toml").write_bytes(content)
    settings, problems = load_settings(tmp_path)
    assert len(problems) == 1
    assert problems[0].key == "(file)"
    assert "parsed" in problems[0].message and "defaults" in problems[0].message
    assert settings == Settings()


def test_defaults_are_not_shared_between_instances() -> None:
    a, _ = settings_from_dict({"index": {"ignore": ["x"]}})
    b = Settings()
    assert a.index.ignore == ["x"]
    assert b.index.ignore != ["x"]


def test_template_toml_parses_without_problems() -> None:
    template = Path(__file__).resolve().parents[2] / "workspace-template"
    settings, problems = load_settings(template)
    assert problems == []
    assert settings == Settings()

"""The generated reference pages of the docs site (docsgen/) follow the code."""

from __future__ import annotations

from pathlib import Path

from docsgen import commands_page, openapi_page, settings_table

ROOT = Path(__file__).resolve().parent.parent


def test_every_setting_read_in_the_source_has_a_description():
    assert not settings_table.undescribed(), (
        "describe these in docsgen/settings.yaml: " + ", ".join(settings_table.undescribed())
    )
    assert not settings_table.stale(), "no source reads these any more: " + ", ".join(
        settings_table.stale()
    )


def test_the_settings_reader_finds_every_kind_of_read(tmp_path, monkeypatch):
    source = tmp_path / "settings.py"
    source.write_text(
        "import os\n"
        "from cairn.env import envint, envstr\n"
        'A = envint("CAIRN_A", 6 * 3600)\n'
        'B = envstr("CAIRN_B", "x")\n'
        'if os.environ.get("CAIRN_C"):\n'
        '    C = os.environ["CAIRN_C"]\n'
        'D = os.environ["CAIRN_D"]\n'
    )
    monkeypatch.setattr(settings_table, "ROOT", tmp_path)
    read = {s.name: s.default for s in settings_table.settings_read(source)}
    assert read == {"CAIRN_A": "21600", "CAIRN_B": "x", "CAIRN_C": "", "CAIRN_D": ""}


def test_the_configuration_page_lists_every_setting_with_its_default():
    page = settings_table.markdown()
    for setting in settings_table.all_settings():
        assert f"| `{setting.name}` |" in page
    assert "| `CAIRN_RECALL_TEXT_WEIGHT` | `0.7` |" in page


def test_the_api_page_renders_every_operation_of_the_schema_without_a_database():
    spec = openapi_page.schema()  # placeholder DATABASE_URL: this would fail if it connected
    page = openapi_page.markdown(spec)
    for path, item in spec["paths"].items():
        for method in openapi_page.METHODS:
            if method in item:
                assert f"### `{method.upper()} {path}`" in page
    assert "/api/v1/outcomes/" in page


def test_the_commands_page_has_each_commands_help():
    helps = commands_page.helps()
    assert {"cairn_setup", "create_agent", "create_user", "import_conversations"} <= set(helps)
    page = commands_page.markdown(helps)
    assert "usage: manage.py create_agent" in page


def test_readme_stays_short_and_links_only_existing_pages():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    import re

    for target in re.findall(r"\]\(((?:docs|bench)/[^)#]+)", readme):
        assert (ROOT / target).exists(), target

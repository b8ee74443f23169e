"""Sections of a SKILL.md body: slugs, digests and one section's text."""

from memory.skills.skillmd import body_sections, section_text

BODY = """# Triage inbox

Sort new mail.

## Escalation
Wait 72 hours.

```
## not a heading
```

### Sub rule
Nested.

## Drafting replies
Keep replies short.
"""


def test_a_section_runs_to_the_next_heading_of_its_level_or_higher():
    escalation = section_text(BODY, "escalation")
    assert escalation["first_line"] == 5
    assert escalation["text"].startswith("## Escalation\nWait 72 hours.")
    assert "## not a heading" in escalation["text"] and "### Sub rule" in escalation["text"]
    assert "Drafting replies" not in escalation["text"]
    assert section_text(BODY, "sub-rule")["text"] == "### Sub rule\nNested."
    assert (
        section_text(BODY, "drafting-replies")["text"] == "## Drafting replies\nKeep replies short."
    )
    assert section_text(BODY, "missing") is None


def test_the_sections_and_their_texts_agree():
    slugs = [s["slug"] for s in body_sections(BODY)]
    assert slugs == ["triage-inbox", "escalation", "sub-rule", "drafting-replies"]
    assert all(section_text(BODY, slug) for slug in slugs)


def test_a_body_without_headings_is_one_section():
    assert [s["slug"] for s in body_sections("just text\nmore")] == ["body"]
    assert section_text("just text\nmore", "body") == {"text": "just text\nmore", "first_line": 1}

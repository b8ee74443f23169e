import pytest

from cairn.errors import ApplicationError
from memory.core.secrets import find_secret, refuse_secrets, scan_fields

# Shapes built at run time so this file does not itself look like it holds secrets.
SECRETS = {
    "openai": "my key is sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2",
    "openai_plain": "sk-" + "abcdefghijklmnopqrstuvwxyz0123",
    "aws": "aws id " + "AKIA" + "IOSFODNN7EXAMPLE",
    "github": "token " + "ghp_" + "a1B2" * 9,
    "github_pat": "github_pat_" + "11ABCDEFG0123456789_abcdefghijk",
    "slack": "xoxb-" + "1234567890-abcdefghijKLMN",
    "jwt": "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0" + ".dozjgNryP4J3jVmNHl0w5N_XgL0",
    "private_key": "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA",
    "openssh_key": "-----BEGIN " + "OPENSSH PRIVATE KEY-----",
    "url_password": "connect to postgres://admin:" + "hunter22" + "@db.internal:5432/app",
    "assignment": "set password=" + "hunter22" + " in the env file",
    "json_secret": '{"client_secret": "' + "s3cr3tValue" + '"}',
    "secret_mixed": "secret=" + "a8f3k2m9q7",
    "token_entropy": 'token: "' + "QwErTyUiOpAsDfGh" + '"',
    "password_letters": "password='" + "hunterhunter" + "'",
    "bearer": "curl -H 'Authorization: Bearer " + "abcdefghijklmnop12345" + "'",
}

ORDINARY = [
    "use port 5432",
    "the password policy requires 12 chars",
    "Password must be at least 12 characters and rotated yearly",
    "The token expired; run `gh auth login` again",
    "postgres://app:${DB_PASSWORD}@db/app is the connection string template",
    "password=<your password> goes in .env",
    "api_key = os.environ['OPENAI_API_KEY']",
    "set max_tokens=4096 for long answers",
    "we use scikit-learn (sklearn) and sk-learn style pipelines",
    "ssh git@github.com:owner/repo.git",
    "redis://localhost:6379/0",
    "email sarah.chen@example.com about the AKIA rotation policy",
    "the API key is stored in the vault under ci/deploy",
    'here is a secret: "grant agency staff hate grant writers,"',
    "my secret = 'I never liked the office coffee'",
    "the secret: 'practice every day'",
    "a token: 'of our appreciation'",
    "token=thanks",
]


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_it_finds_each_secret_shape(name):
    assert find_secret(SECRETS[name]) is not None


@pytest.mark.parametrize("text", ORDINARY)
def test_it_lets_ordinary_text_through(text):
    assert find_secret(text) is None


def test_it_names_nested_metadata_fields():
    found = scan_fields({"content": "fine", "metadata": {"auth": {"token": SECRETS["github"]}}})
    assert list(found) == ["metadata.auth.token"]


def test_it_refuses_with_422_naming_the_field_without_echoing_the_secret():
    with pytest.raises(ApplicationError) as caught:
        refuse_secrets({"content": SECRETS["aws"], "domain": "ops"})
    error = caught.value
    assert error.status_code == 422
    assert error.code == "credential_refused"
    assert list(error.fields) == ["content"]
    assert "IOSFODNN7EXAMPLE" not in error.message + str(error.fields)


def test_it_passes_clean_fields():
    refuse_secrets({"content": "use port 5432", "metadata": {"note": "ok"}})


@pytest.mark.parametrize(
    "text, found",
    [
        ("login with password: hunter2hunter2", True),
        ("api_key: 9f8e7d6c5b4a3210", True),
        ("password: see the vault entry ci/deploy", False),
        ("password policy: requires 12 characters", False),
        ("token: ${DEPLOY_TOKEN}", False),
    ],
)
def test_the_unquoted_colon_form_needs_a_secret_looking_value(text, found):
    assert (find_secret(text) is not None) is found


def test_texts_seen_clean_are_remembered_by_digest_and_secrets_never(monkeypatch):
    from memory.core import secrets

    monkeypatch.setattr(secrets, "_CLEAN", {})
    for _ in range(2):  # the second round answers from the digests
        for text in ORDINARY:
            assert find_secret(text) is None, text
        for name, text in SECRETS.items():
            assert find_secret(text) is not None, name
    # One digest per ordinary text and nothing for a secret: no text is kept.
    assert len(secrets._CLEAN) == len(ORDINARY)
    assert all(isinstance(key, bytes) and len(key) == 16 for key in secrets._CLEAN)
    # A secret hidden by a zero-width space, after the visible text was seen clean.
    visible = "set password=" + "hunter22"
    assert find_secret(visible) is not None
    assert find_secret("set pass\u200bword=" + "hunter22") is not None


def test_the_clean_digests_are_bounded(monkeypatch):
    from memory.core import secrets

    monkeypatch.setattr(secrets, "_CLEAN", {})
    monkeypatch.setattr(secrets, "_CLEAN_MAX", 5)
    for i in range(12):
        assert find_secret(f"note {i}") is None
        assert len(secrets._CLEAN) <= 5
    assert find_secret("text with a lone surrogate \ud800 in it") is None


@pytest.mark.parametrize(
    "metadata, found",
    [
        ({"password": "hunter2hunter2"}, ["metadata.password"]),
        ({"db": {"Client-Secret": "s3cr3tValue"}}, ["metadata.db.Client-Secret"]),
        ({"auth.token": "QwErTyUiOpAsDfGh"}, ["metadata.auth.token"]),
        ({"note": "hunter2hunter2"}, []),  # the same value under an ordinary key
        ({"token": "of our appreciation"}, []),  # prose under a weak name
    ],
)
def test_a_key_naming_a_credential_makes_its_value_an_assignment(metadata, found):
    assert list(scan_fields({"metadata": metadata})) == found


# An AWS access key id read out or pasted from a table, with separators between groups.
SPACED_AWS_KEY_IDS = [
    "AKIA IOSF ODNN 7EXA MPLE",
    "the key is AKIA-IOSF-ODNN-7EXA-MPLE, use it",
    "AKIA.IOSF.ODNN.7EXA.MPLE",
    "AKIA_IOSF_ODNN_7EXA_MPLE",
    "key: AKIA  IOSF  ODNN  7EXA  MPLE",
    "AKIA\tIOSF\tODNN\t7EXA\tMPLE",
    "AKIA IOSFODNN7EXAMPLE",
    "ASIA 4XQR T2ZB 9KLM WPD3",
    "AKIA-BCDE-FGHI-JKLM-NOPQ",  # no digit, but written as a key is read out
    "AKIA I O S F O D N N 7 E X A M P L E",
]

# Capitals after "ASIA" or "AKIA" in prose, which the spaced pattern must leave alone.
PROSE_WITH_KEY_PREFIXES = [
    "ASIA PACIFIC REGION SALE NOW",
    "ASIA IS BIG AND THE PACIFIC IS BIGGER",
    "ASIA BANK LOAN DESK OPEN",
    "The AKIA prefix marks long-term AWS keys; ASIA marks temporary ones.",
    "Q3 REPORT: ASIA 2024 SALES UP 12 PERCENT",
    "EURASIA 1234 5678 9ABC DEFG",
    "ASIA - EMEA - AMER - LATAM - APAC",
]


@pytest.mark.parametrize("text", SPACED_AWS_KEY_IDS)
def test_a_spaced_out_aws_key_id_is_refused(text):
    finding = find_secret(text)
    assert finding is not None and finding.kind == "AWS access key id"
    with pytest.raises(ApplicationError) as refused:
        refuse_secrets({"content": text})
    assert refused.value.code == "credential_refused"


@pytest.mark.parametrize("text", PROSE_WITH_KEY_PREFIXES)
def test_capitals_after_a_key_prefix_in_prose_pass(text):
    assert find_secret(text) is None

"""The generated secret key file is created with its mode (issue 56, item 7): never
readable by others, not even between a write and a chmod."""

from __future__ import annotations

import os
import pathlib
import stat

import cairn.settings


def test_the_key_file_is_born_0600_without_a_chmod(tmp_path, monkeypatch):
    monkeypatch.setenv("CAIRN_VAR_DIR", str(tmp_path))
    monkeypatch.delenv("SECRET_KEY", raising=False)

    def no_chmod(self, mode, **kwargs):
        raise AssertionError(f"{self} was chmod-ed after it was written")

    monkeypatch.setattr(pathlib.Path, "chmod", no_chmod)
    old = os.umask(0o000)  # the most permissive umask: the mode must come from os.open
    try:
        key = cairn.settings._secret_key()
    finally:
        os.umask(old)
    path = tmp_path / "secret_key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(key) >= 50 and path.read_text().strip() == key
    # A second start reads the same key instead of writing another.
    assert cairn.settings._secret_key() == key

"""Reading settings from the environment: an unset or empty variable takes the default."""

import os


def envbool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def envint(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    return int(value) if value.strip() else default


def envfloat(name: str, default: float) -> float:
    value = os.environ.get(name, "")
    return float(value) if value.strip() else default


def envstr(name: str, default: str) -> str:
    return os.environ.get(name) or default

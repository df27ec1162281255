"""Where the configuration lives. Kept free of heavy imports: the command line checks agent names against it
before anything else is loaded."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from .errors import ConfigError

CONFIG_DIR_ENV = "RETRIEVAL_NODE_CONFIG_DIR"
#: the files a configuration directory may hold (see ``config.py``)
CONFIG_FILES = ("agents.yaml", "contracts.yaml", "glossary.yaml", "retrieval.yaml", "risk_signals.yaml", "weights.yaml", "zones.yaml")


def checkout_config_dir() -> Path | None:
    """The repository's top-level ``configs/`` when running from a source checkout (editable install, tests)."""
    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and (root / "configs").is_dir():
        return root / "configs"
    return None


def packaged_config_dir() -> Path:
    """The copy of ``configs/`` shipped inside the wheel as ``retrieval_node/configs``."""
    return Path(str(resources.files("retrieval_node") / "configs"))


def default_config_dir() -> Path:
    """``$RETRIEVAL_NODE_CONFIG_DIR``, else the checkout's ``configs/``, else the copy shipped with the package.

    Raises :class:`ConfigError` naming what to set when none of them exists.
    """
    env = os.environ.get(CONFIG_DIR_ENV)
    if env:
        path = Path(env)
        if not path.is_dir():
            raise ConfigError(f"{CONFIG_DIR_ENV}={env}: no such directory; point it at a folder holding "
                              f"{', '.join(CONFIG_FILES)} (a copy of the repository's configs/), or unset it")
        return path
    checkout = checkout_config_dir()
    if checkout is not None:
        return checkout
    packaged = packaged_config_dir()
    if packaged.is_dir():
        return packaged
    raise ConfigError(
        f"no configuration found: {packaged} does not exist (an installation without its package data) and "
        f"{CONFIG_DIR_ENV} is not set; set {CONFIG_DIR_ENV} to a folder holding {', '.join(CONFIG_FILES)} "
        "(a copy of the repository's configs/), or reinstall retrieval-node from a wheel"
    )


__all__ = ["CONFIG_DIR_ENV", "CONFIG_FILES", "checkout_config_dir", "default_config_dir", "packaged_config_dir"]

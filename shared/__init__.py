"""Code every Threadline service shares: settings, logging, message contracts, subjects, tables."""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _package_version


def version() -> str:
    """The installed Threadline version ("0" when running from an uninstalled tree)."""
    try:
        return _package_version("threadline")
    except PackageNotFoundError:
        return "0"

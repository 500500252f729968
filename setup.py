"""The package list of the `tabd` wheel, derived from the folders: each top-level folder is one `tabd.*` package and
every folder below it with an __init__.py is a subpackage, found here rather than listed by hand (a hand-kept list
left `tabd.daemon.edits` out of the wheel, and only an installed wheel noticed). Everything else is in pyproject.toml;
tests/server/test_wheel.py builds and runs the wheel.
"""
from setuptools import find_packages, setup

# import name -> folder: the one declaration of the mapping (`tabd` itself is a namespace package)
ROOTS = {
    "tabd.daemon": "daemon",
    "tabd.cache": "cache",
    "tabd.lsp": "lsp",
    "tabd.predictor": "predictor",
}


def packages() -> list[str]:
    """Each root and every package below its folder, by import name (a subpackage's folder is found through its
    root's)."""
    return [name + sub for name, folder in ROOTS.items() for sub in ["", *("." + p for p in find_packages(folder))]]


setup(packages=packages(), package_dir=ROOTS)

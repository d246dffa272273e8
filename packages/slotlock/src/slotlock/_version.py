"""This distribution's version: ``slotlock.__version__``, and what the build reads (``pyproject.toml``).

A module of its own, importing nothing, so that a module of the package that names the version (an error's
message) imports it from here rather than from the package, which imports every module.
"""

__version__ = "1.0.0"

"""Upstream FastReID's configs, shipped in the wheel as the package ``fastreid.configs``.

The folder stays at the repository root (``--config-file configs/Market1501/...`` from a checkout);
``pyproject.toml`` maps it to ``fastreid.configs`` and ``fastreid.config.locate`` finds a config
named on a command line here when the working directory has no such file.
"""

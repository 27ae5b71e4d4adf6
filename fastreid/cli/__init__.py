"""The command line: every console script is a module here — ``fastreid-train`` (train.py),
``fastreid-convert``, ``fastreid-visualize``, ``fastreid-build-cache``, ``fastreid-platform``,
``fastreid-extract``, ``fastreid-search``, ``fastreid-export``, ``fastreid-tune`` and ``fastreid-report``.

They sit above every other package; ``tools/*.py`` are thin wrappers around them for a checkout.
:mod:`fastreid.cli.train` imports nothing heavy at module level: it decides the OpenMP settings
before torch is loaded.
"""

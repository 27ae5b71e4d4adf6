"""The command-line tools installed as console scripts: ``fastreid-train``, ``fastreid-convert``,
``fastreid-visualize``, ``fastreid-build-cache``, ``fastreid-tune``, ``fastreid-report`` (the inference
tools live in :mod:`fastreid.inference`).

They sit above :mod:`fastreid.engine`; ``tools/*.py`` are thin wrappers around them for a checkout.
:mod:`fastreid.cli.train` imports nothing heavy at module level: it decides the OpenMP settings
before torch is loaded.
"""

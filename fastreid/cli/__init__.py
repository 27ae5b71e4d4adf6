"""The command-line tools installed as console scripts (``fastreid-train``, ``fastreid-convert``).

They sit above :mod:`fastreid.engine`; ``tools/*.py`` are thin wrappers around them for a checkout.
Nothing here imports torch at import time: the training tool decides OpenMP settings first.
"""

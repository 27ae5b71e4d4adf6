from . import verification  # noqa: F401

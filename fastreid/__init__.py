"""fastreid: FastReID-compatible person re-identification that trains the same everywhere."""

__version__ = "1.5.0"

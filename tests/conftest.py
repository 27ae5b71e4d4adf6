"""Fixtures shared by every test folder."""

import logging

import pytest


@pytest.fixture
def fr_log(caplog):
    """caplog that also sees the "fastreid" logger when setup_logger() stopped its propagation."""
    logger = logging.getLogger("fastreid")
    old_level = logger.level
    logger.addHandler(caplog.handler)
    logger.setLevel(logging.INFO)
    caplog.handler.setLevel(logging.INFO)
    yield caplog
    logger.removeHandler(caplog.handler)
    logger.setLevel(old_level)

"""Fixtures shared by the modeling tests."""

import logging

import pytest
import torch


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models run faster on one thread (no OpenMP hand-offs), most of all on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


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

import logging

import torch

from fastreid.utils import comm
from fastreid.utils.collect_env import collect_env_info
from fastreid.utils.logger import log_first_n, setup_logger


def test_comm_without_distributed():
    assert comm.get_world_size() == 1 and comm.get_rank() == 0 and comm.get_local_rank() == 0
    assert comm.is_main_process()
    comm.synchronize()
    comm.barrier()
    assert comm.all_gather({"a": 1}) == [{"a": 1}]
    assert comm.gather(3) == [3]
    d = {"x": torch.tensor(2.0)}
    assert comm.reduce_dict(d) is d
    assert isinstance(comm.shared_random_seed(), int)


def test_setup_logger_writes_file(tmp_path):
    logger = setup_logger(str(tmp_path), name="fastreid.test_file")
    logger.info("hello file")
    for h in logger.handlers:
        h.flush()
    assert "hello file" in (tmp_path / "log.txt").read_text()


def test_other_ranks_log_to_their_own_file_only(tmp_path, capsys):
    logger = setup_logger(str(tmp_path), distributed_rank=1, name="fastreid.test_rank")
    logger.info("from rank one")
    for h in logger.handlers:
        h.flush()
    assert "from rank one" in (tmp_path / "log.txt.rank1").read_text()
    assert "from rank one" not in capsys.readouterr().out


def test_log_first_n(tmp_path):
    logger = setup_logger(str(tmp_path / "x.log"), name="fastreid.test_first_n")
    for _ in range(5):
        log_first_n(logging.INFO, "once only", n=1, name="fastreid.test_first_n")
    for h in logger.handlers:
        h.flush()
    assert (tmp_path / "x.log").read_text().count("once only") == 1


def test_collect_env_info_mentions_versions():
    info = collect_env_info()
    assert "PyTorch" in info and torch.__version__ in info and "CUDA available" in info


def test_a_second_run_in_the_same_process_logs_to_its_own_folder_only(tmp_path, capsys):
    """A notebook or a Ray worker runs one training after another: the second run's lines must not
    also go into the first run's log.txt, nor twice to stdout; handlers added by others stay."""
    name = "fastreid.test_second_run"
    mine = logging.NullHandler()
    logging.getLogger(name).addHandler(mine)
    first = setup_logger(str(tmp_path / "run1"), name=name)
    first.info("first run")
    second = setup_logger(str(tmp_path / "run2"), name=name)
    second.info("second run")
    setup_logger(str(tmp_path / "run2"), name=name).info("same run again")
    for h in second.handlers:
        h.flush()
    assert "second run" not in (tmp_path / "run1" / "log.txt").read_text()
    run2 = (tmp_path / "run2" / "log.txt").read_text()
    assert "second run" in run2 and "first run" not in run2 and run2.count("same run again") == 1
    assert capsys.readouterr().out.count("same run again") == 1
    assert mine in second.handlers and len(second.handlers) == 3  # stdout, run2's file, the caller's
    for h in list(second.handlers):
        second.removeHandler(h)
        h.close()

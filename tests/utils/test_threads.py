"""The thread decision: passive OpenMP waiting before torch loads, never over a user's own choice."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from fastreid.utils import threads

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(code: str, **env_updates: str) -> str:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in threads.WAIT_VARIABLES and k != "FASTREID_OMP_WAIT_SET"
    }
    env.update(env_updates)
    env["PYTHONPATH"] = REPO
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return out.stdout.strip()


def test_importing_the_module_does_not_load_torch():
    assert _run("import sys, fastreid.utils.threads; print('torch' in sys.modules)") == "False"


@pytest.mark.slow
def test_passive_wait_is_set_before_torch_is_imported():
    out = _run("""
        import os
        from fastreid.utils.threads import configure_openmp
        d = configure_openmp()
        import torch
        print(os.environ["OMP_WAIT_POLICY"], os.environ["GOMP_SPINCOUNT"], d.wait_source)
    """)
    assert out == "PASSIVE 3000 fastreid"


@pytest.mark.parametrize(
    "name,value", [("OMP_WAIT_POLICY", "ACTIVE"), ("GOMP_SPINCOUNT", "100000"), ("KMP_BLOCKTIME", "0")]
)
def test_a_users_wait_variable_is_never_overridden(name, value):
    out = _run(
        """
        import os
        from fastreid.utils.threads import configure_openmp
        d = configure_openmp()
        print(os.environ.get("OMP_WAIT_POLICY"), os.environ.get("GOMP_SPINCOUNT"), d.wait_source)
    """,
        **{name: value},
    )
    policy = value if name == "OMP_WAIT_POLICY" else "None"
    spin = value if name == "GOMP_SPINCOUNT" else "None"
    assert out == f"{policy} {spin} user"


def test_too_late_after_torch_is_imported_says_so_and_sets_nothing():
    env: dict[str, str] = {}
    import torch  # noqa: F401  (the runtime is loaded: too late to choose)

    d = threads.configure_openmp(env)
    assert env == {}
    assert "OMP_WAIT_POLICY=PASSIVE" in d.wait_source


def test_child_processes_report_the_inherited_decision():
    out = _run("""
        import os, subprocess, sys
        from fastreid.utils.threads import configure_openmp
        configure_openmp()
        code = "from fastreid.utils.threads import configure_openmp; print(configure_openmp().wait_source)"
        code += "; import os; print(os.environ['GOMP_SPINCOUNT'])"
        print(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip())
    """)
    assert out.splitlines() == ["fastreid, inherited from the parent process", "3000"]


def test_intra_op_threads_follow_user_value_and_ranks_per_machine():
    cpus = threads.available_cpus()
    assert threads.intra_op_threads(environ={"OMP_NUM_THREADS": "3"}) == 3
    assert threads.intra_op_threads(environ={}) == cpus
    assert threads.intra_op_threads(environ={"LOCAL_WORLD_SIZE": str(cpus * 2)}) == 1
    assert threads.intra_op_threads(ranks_per_machine=2, environ={}) == max(1, cpus // 2)


def test_cgroup_quota_is_read(tmp_path):
    f = tmp_path / "cpu.max"
    f.write_text("150000 100000\n")
    assert threads._cgroup_cpu_limit(str(f)) == 2
    f.write_text("max 100000\n")
    assert threads._cgroup_cpu_limit(str(f)) is None
    assert threads._cgroup_cpu_limit(str(tmp_path / "missing")) is None


@pytest.mark.slow
def test_train_net_decides_before_torch_loads(tmp_path):
    """The real tool: configure_openmp runs before the engine (and torch) is imported."""
    out = _run(f"""
        import sys
        sys.path.insert(0, {os.path.join(REPO, "tools")!r})
        import train_net
        code = train_net.run(["--config-file", {str(tmp_path / "missing.yml")!r}])
        from fastreid.utils import threads
        print(code, threads.describe().split(";")[0])
    """)
    assert out.endswith("OpenMP wait: PASSIVE, GOMP_SPINCOUNT=3000 (fastreid)")


@pytest.mark.slow
@pytest.mark.parametrize("tool", ["tune", "report"])
def test_the_other_tools_that_decide_do_it_before_torch_loads(tool, tmp_path):
    """fastreid-tune and fastreid-report decide too, before the code that imports torch (a bad
    argument or folder stops them right after the decision)."""
    argv = {
        "tune": ["--config-file", str(tmp_path / "missing.yml"), "--space", "x.yml"],
        "report": [str(tmp_path)],
    }
    out = _run(f"""
        from fastreid.cli import {tool}
        try:
            {tool}.run({argv[tool]!r})
        except SystemExit:
            pass
        from fastreid.utils import threads
        print(threads.describe().split(";")[0])
    """)
    assert out.endswith("OpenMP wait: PASSIVE, GOMP_SPINCOUNT=3000 (fastreid)")


def test_a_loading_thread_stays_out_of_the_compute_pool():
    """Thread workers and the background generator use one OpenMP thread each; the thread that
    trains keeps its intra-op threads (the setting is per thread, not process-wide)."""
    import threading

    import torch

    from fastreid.data.loading.threads import ThreadLoaderIter

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        seen: list[tuple[str, int]] = []

        class Probe:
            def __len__(self):
                return 4

            def __getitem__(self, i):
                seen.append((threading.current_thread().name, torch.get_num_threads()))
                return torch.zeros(1)

        batches = list(ThreadLoaderIter(Probe(), [[0, 1], [2, 3]], torch.stack, num_threads=2))
        assert len(batches) == 2 and len(seen) == 4
        assert {n for _, n in seen} == {1}, seen
        assert torch.get_num_threads() == 2  # the caller's compute pool is unchanged
        # a thread started afterwards still gets the process's default, not the loaders' one
        later: list[int] = []
        t = threading.Thread(target=lambda: later.append(torch.get_num_threads()))
        t.start()
        t.join()
        assert later == [2]
    finally:
        torch.set_num_threads(before)

"""bench/budget.py: the cores a process may use (affinity, a cgroup v2 quota), the counts a sweep
tries, and which of mmfeed's stages count as single-threaded for the Amdahl ceiling."""
import os

import pytest

import budget


def cgroup(tmp_path, path: str, quotas: dict[str, str]):
    """A cgroup v2 tree under tmp_path/fs with cpu.max where `quotas` says, and a membership file
    naming `path` as this process's cgroup."""
    root = tmp_path / "fs"
    for where, quota in quotas.items():
        folder = root / where.strip("/")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "cpu.max").write_text(quota + "\n")
    (root / path.strip("/")).mkdir(parents=True, exist_ok=True)
    membership = tmp_path / "cgroup"
    membership.write_text(f"1:cpu:/\n0::{path}\n")
    return root, membership


def test_cgroup_limit_is_quota_over_period(tmp_path):
    assert budget.cgroup_cpu_limit(*cgroup(tmp_path, "/job", {"/job": "150000 100000"})) == 1.5


def test_cgroup_limit_is_the_smallest_on_the_way_to_the_root(tmp_path):
    quotas = {"/": "max 100000", "/a": "200000 100000", "/a/b": "400000 100000"}
    assert budget.cgroup_cpu_limit(*cgroup(tmp_path, "/a/b", quotas)) == 2.0


def test_cgroup_without_a_quota_has_no_limit(tmp_path):
    assert budget.cgroup_cpu_limit(*cgroup(tmp_path, "/", {"/": "max 100000"})) is None
    assert budget.cgroup_cpu_limit(*cgroup(tmp_path, "/x", {})) is None  # cpu.max absent: v1 or no controller
    assert budget.cgroup_cpu_limit(tmp_path / "fs", tmp_path / "absent") is None


def test_cores_available_is_at_most_the_affinity():
    assert 1 <= budget.cores_available() <= len(os.sched_getaffinity(0))


def test_doubling_ends_at_the_count_itself():
    assert budget.doubling(1) == [1]
    assert budget.doubling(2) == [1, 2]
    assert budget.doubling(6) == [1, 2, 4, 6]
    assert budget.doubling(16) == [1, 2, 4, 8, 16]


def test_pin_refuses_more_cores_than_allowed():
    allowed = len(os.sched_getaffinity(0))
    with pytest.raises(ValueError, match=f"cannot pin to {allowed + 1} cores: this process may use {allowed}"):
        budget.pin(allowed + 1)


STAGES = {"wall_s": 2.0,
          "process": {"items": 8, "threads": 2, "busy_s": 3.0},
          "pixels": {"items": 8, "threads": 3, "busy_s": 1.0},
          "assemble": {"items": 2, "threads": 1, "busy_s": 0.1},
          "consumer_wait": {"items": 3, "threads": 1, "busy_s": 1.5}}


def test_single_thread_stages_are_those_marked_one_thread_never_waits():
    assert budget.single_thread_stages(STAGES) == ["assemble"]


def test_single_thread_stages_default_to_assemble_when_unmarked():
    unmarked = {name: {k: v for k, v in stage.items() if k != "threads"} if isinstance(stage, dict) else stage
                for name, stage in STAGES.items()}
    assert budget.single_thread_stages(unmarked) == ["assemble"]


def test_serial_share_reads_the_stages_from_the_widest_run():
    # With one worker the pool's stages are on one thread too; the 2-worker run says which are not.
    one = {name: dict(stage, threads=1) if isinstance(stage, dict) else stage for name, stage in STAGES.items()}
    runs = [{"workers": 1, "cpu_seconds": 5.0, "stages": one}, {"workers": 2, "cpu_seconds": 4.0, "stages": STAGES}]
    budget.serial_share(runs)
    assert [r["single_thread_stages"] for r in runs] == [["assemble"], ["assemble"]]
    assert [r["single_thread_share"] for r in runs] == [0.1 / 5.0, 0.1 / 4.0]
    assert runs[1]["amdahl_ceiling"] == 40.0

"""Compiling on a real local Dask cluster (a scheduler and two worker processes): a wheel of both backends is
byte-identical to a local build, a worker with another toolchain is refused by name, kernel sources
travel with the task, and addresses that cannot work are refused before anything compiles."""

import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aotpack import build
from aotpack.backends import recipes as recipe
from aotpack.backends import targets_of
from aotpack.commands import tune, tune_cluster, tune_keys, tune_measure
from aotpack.commands.new import scaffold
from aotpack.errors import UsageError
from aotpack.pipeline import distributed
from aotpack.plan import variants as plan

dask = pytest.importorskip("distributed")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster():
    # The scheduler serves HTTP (metrics) even without a dashboard, on 8787 unless told: a port of the
    # system's choosing keeps this from failing when another cluster (another test run) holds 8787.
    with dask.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as c:
        yield c


def test_a_wheel_built_on_the_cluster_is_byte_identical_to_a_local_build(cluster, tmp_path):
    """The scaffold's project (a Triton kernel and a CUDA C++ one, 134 variants): both backends' compiles travel
    to the workers. (The demo, 1,120 variants, built twice here took half an hour of a 2-core host's CI time.)"""
    scaffold("cluster_kit", tmp_path / "kit")
    recipe_path = tmp_path / "kit" / "recipe.yaml"
    local = build(recipe_path, tmp_path / "local", jobs=2, use_cache=False).wheel
    remote = build(recipe_path, tmp_path / "remote", use_cache=False, executor=cluster.scheduler_address).wheel
    assert remote.name == local.name
    assert remote.read_bytes() == local.read_bytes()


def test_a_worker_with_another_toolchain_is_refused_by_name(cluster, small_recipe, tmp_path):
    with dask.Client(cluster.scheduler_address) as client:
        worker = sorted(client.scheduler_info()["workers"])[0]

        def other_release():
            setattr(distributed, "__version__", "0.0.0+other")  # noqa: B010 (the module does not export it)

        client.run(other_release, workers=[worker])
        try:
            with pytest.raises(UsageError) as caught:
                build(small_recipe, tmp_path, use_cache=False, executor=cluster.scheduler_address)
        finally:
            client.restart()  # fresh worker processes for the other tests
    message = str(caught.value)
    assert f"worker {worker} has another toolchain" in message
    assert "aotpack: 0.0.0+other there, " in message
    assert not list(tmp_path.glob("*.whl"))


@pytest.mark.parametrize(
    ("address", "says"),
    [("ray://head:10001", "expected dask://HOST:PORT"), ("dask://127.0.0.1:9", "cannot reach the Dask scheduler")],
)
def test_addresses_that_cannot_work(small_recipe, tmp_path, address, says):
    with pytest.raises(UsageError, match=says):
        build(small_recipe, tmp_path, use_cache=False, executor=address)


def test_kernel_sources_travel_with_the_task(small_recipe, tmp_path):
    """A task made from a recipe whose folder is gone by the time the worker runs it still compiles."""
    folder = tmp_path / "gone"
    shutil.copytree(ROOT / "examples", folder)
    text = small_recipe.read_text().replace(str(ROOT / "examples"), str(folder))
    (folder / "small.yaml").write_text(text)
    rec = recipe.load(folder / "small.yaml")
    variant = plan.plan_variants(rec)[0]
    settings = distributed.Settings(targets_of(rec.kernels), None, False, None)
    task = distributed.task(settings, variant)
    assert {name for name, _ in task.files} >= {"add.py", "softmax.py", "matmul.py"}
    shutil.rmtree(folder)
    (tmp_path / "task.pickle").write_bytes(pickle.dumps(task))
    worker = (  # a process of its own, as a worker is (compiling sets process-wide Triton settings)
        "import pickle, sys; from aotpack.pipeline import distributed; "
        "o = distributed.run(pickle.loads(open(sys.argv[1], 'rb').read())); "
        "print(type(o).__name__, o.variant_id, o.image[:4] == b'\\x7fELF')"
    )
    done = subprocess.run([sys.executable, "-c", worker, str(tmp_path / "task.pickle")], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["Artifact", variant.id, "True"]


# ---------------------------------------------------------------- tuning on the cluster (no GPU here)


def test_tuning_refuses_workers_without_a_gpu_by_name(cluster, tmp_path):
    """Every worker is asked first; one that cannot tune (here: no GPU) is named, nothing is written."""
    with pytest.raises(
        UsageError,
        match=r"--executor tcp://.*: worker tcp://\S+ cannot tune demo_kernels: .*; each worker needs a CUDA GPU, torch and the wheel of demo_kernels installed",
    ):
        tune.tune(ROOT / "recipes" / "demo.yaml", tmp_path, tune_measure.Options(kernels=("add",)),
                  executor=cluster.scheduler_address)  # fmt: skip
    assert not list(tmp_path.iterdir())


class Reports:
    """A Dask client's answers, as check_gpus asks for them."""

    def __init__(self, threads: dict[str, int], reports: dict[str, dict[str, str]]) -> None:
        self.threads, self.reports = threads, reports

    def scheduler_info(self):
        return {"workers": {w: {"nthreads": n} for w, n in self.threads.items()}}

    def run(self, function, *args):
        assert function is tune_cluster.gpu_fingerprint and args == ("pkg",)
        return self.reports


GPU = {"device": "NVIDIA H200", "driver_cuda": "13.0", "torch": "2.11", "aotpack": "0.1.0", "package": "ab12"}


@pytest.mark.parametrize(
    "threads, reports, message",
    [
        ({"tcp://a:1": 1, "tcp://b:1": 2}, {}, "worker tcp://b:1 runs 2 tasks at once; tuning needs one per GPU"),
        (
            {"tcp://a:1": 1},
            {"tcp://a:1": {**GPU, "gpu": "h/0"}, "tcp://b:1": {**GPU, "gpu": "h/0"}},
            "workers tcp://a:1 and tcp://b:1 share one GPU",
        ),
        (
            {"tcp://a:1": 1},
            {"tcp://a:1": {**GPU, "gpu": "h/0"}, "tcp://b:1": {**GPU, "gpu": "h/1", "package": "cd34"}},
            "worker tcp://b:1 has another toolchain.*\n  package: cd34 there, ab12 here",
        ),
        (
            {"tcp://a:1": 1},
            {"tcp://a:1": {**GPU, "gpu": "h/0"}, "tcp://b:1": {**GPU, "gpu": "h/1", "device": "NVIDIA H100"}},
            "worker tcp://b:1 has another toolchain.*\n  device: NVIDIA H100 there, NVIDIA H200 here",
        ),
        ({"tcp://a:1": 1}, {}, "the cluster has no workers"),
    ],
)
def test_tuning_workers_are_one_kind_of_gpu_one_build_one_task_each(threads, reports, message):
    with pytest.raises(UsageError, match=message):
        tune_cluster.check_gpus(Reports(threads, reports), "pkg", "dask://x:1")
    ok = {"tcp://a:1": {**GPU, "gpu": "h/0"}, "tcp://b:1": {**GPU, "gpu": "h/1"}}
    assert (
        tune_cluster.check_gpus(Reports({"tcp://a:1": 1, "tcp://b:1": 1}, ok), "pkg", "dask://x:1")["device"]
        == "NVIDIA H200"
    )


def test_tuning_takes_devices_or_an_executor_not_both(tmp_path):
    with pytest.raises(UsageError, match=r"give --devices .* or --executor .*, not both"):
        tune.tune(ROOT / "recipes" / "demo.yaml", tmp_path, devices="all", executor="dask://localhost:1")


def test_a_tuning_task_carries_its_hooks_to_the_worker(tmp_path):
    """The hooks' folder travels as bytes (pickled, as Dask sends it); on the worker the kernel's hooks
    point into the materialized copy, and the inputs hook runs from there."""
    project = tmp_path / "project"
    shutil.copytree(ROOT / "examples", project / "examples")
    shutil.copytree(ROOT / "recipes", project / "recipes")
    rec = recipe.load(project / "recipes" / "demo.yaml")
    kernel = next(k for k in rec.kernels if k.name == "add")
    binding, key = tune_keys.units(kernel)[0]
    sent = pickle.dumps(tune_cluster.tune_task(rec.package, kernel, binding, key, tune_measure.Options()))
    shutil.rmtree(project)
    task = pickle.loads(sent)
    moved = tune_cluster.localized(task)
    assert moved.tune is not None and moved.tune.inputs.path is not None and moved.tune.inputs.path.is_file()
    assert moved.tune.inputs.path.name == "tuning.py" and not moved.tune.inputs.path.is_relative_to(tmp_path)
    assert moved.tune.reference is not None and moved.tune.reference.path == moved.tune.inputs.path

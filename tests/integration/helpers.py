"""What the integration tests share: installing a built wheel into a plain folder (put it on
PYTHONPATH), and running Python code against it on the fake driver."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from .machines import Machine


def install_wheel(wheel: Path, target: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target),
                    str(wheel)], check=True)  # fmt: skip
    return target


def run_on_fake_driver(code: str, site: Path, fake_driver: "Path | Machine", log: Path, **env: str,
                       ) -> tuple[list[str], list[str]]:  # fmt: skip
    """Run `code` (dedented) with the fake libcuda, on this host or on a Machine (its Python and its fake
    driver); returns its stdout lines and the driver's log lines."""
    machine = fake_driver if isinstance(fake_driver, Machine) else None
    driver = machine.fake_driver if machine else fake_driver
    python = machine.python if machine else (sys.executable,)
    environment = {**os.environ, **(machine.env if machine else {}), "PYTHONPATH": str(site),
                   "LD_LIBRARY_PATH": str(driver), "FAKE_CUDA_LOG": str(log), **env}  # fmt: skip
    proc = subprocess.run([*python, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=environment, timeout=240 if machine and machine.prefix else 120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines(), (log.read_text().splitlines() if log.exists() else [])


# Code for run_on_fake_driver: a __cuda_array_interface__ producer at a made-up device address
CAI_ARRAY = """
class Array:
    def __init__(self, ptr, shape, typestr="<f2", strides=None):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": typestr,
                                         "strides": strides, "version": 3}
A = 0x100000000
"""


def recorded_variants(recipe):
    """The planned variants of a recorded recipe that are a recorded row itself (its exact class), not a floor."""
    from aotpack.plan import variants as plan

    return [
        v
        for v in plan.plan_variants(recipe)
        if any((p.binding, p.config, p.states) == (v.binding, v.config, v.spec.states) for p in v.kernel.points)
    ]


def add_recipe(package: str, targets: tuple[str, ...]) -> str:
    """A recipe of the example vector add (two types, two block sizes) for these targets: a small build."""
    root = Path(__file__).resolve().parents[2]
    return f"""
package: {package}
version: 0.1.0
targets: [{", ".join(targets)}]
kernels:
  add:
    triton: {root}/examples/add.py:add_kernel
    types: {{T: [fp32, fp16]}}
    args:
      x_ptr: {{type: "*T", extent: n_elements}}
      y_ptr: "*T"
      out_ptr: "*T"
      n_elements: {{type: i32, default: numel(out_ptr)}}
    constexprs: {{BLOCK: [512, 1024]}}
    grid: ["cdiv(n_elements, BLOCK)"]
    key: [n_elements]
"""

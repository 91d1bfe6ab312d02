"""The manifest's one shape: what codegen writes validates against the shipped JSON Schema, what the
schema refuses is refused, the generated runtime reads only declared fields, and docs/build.md names them."""

import copy
import re
from pathlib import Path

import jsonschema
import pytest

from aotpack import manifest, runtime
from aotpack.codegen import python as codegen_py

from .test_codegen import fake_build

ROOT = Path(__file__).resolve().parents[2]


def declared(schema: dict) -> set[str]:
    """Every property name the schema declares, at any depth."""
    names: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            names |= set(node.get("properties", {}))
            stack += list(node.values())
        elif isinstance(node, list):
            stack += node
    return names


@pytest.fixture
def written(kernel_dir):
    return codegen_py.manifest(fake_build(kernel_dir, prune="sm_80"), "0.1.0")


def test_what_codegen_writes_is_a_valid_manifest(written):
    schema = manifest.json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(written, schema)
    assert written["schema"] == manifest.SCHEMA == schema["properties"]["schema"]["const"]
    assert written["kernels"]["add"]["pruned"], "the fixture covers pruned variants too"


@pytest.mark.parametrize(
    "damage",
    [
        lambda m: m.pop("toolchain"),
        lambda m: m.update(extra=1),
        lambda m: m.update(schema="aotpack-manifest/0"),
        lambda m: m["kernels"]["add"].pop("variants"),
        lambda m: m["kernels"]["add"]["variants"][0].update(num_warps="4"),
        lambda m: m["kernels"]["add"]["variants"][0].update(image_sha256="xyz"),
        lambda m: m["kernels"]["add"]["args"][0].update(kind="pointer"),
        lambda m: m["kernels"]["add"].update(launch="triton"),  # a drop-in kernel needs its launch fields
    ],
)
def test_the_schema_refuses_a_damaged_manifest(written, damage):
    bad = copy.deepcopy(written)
    damage(bad)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, manifest.json_schema())


def test_the_runtime_reads_only_declared_fields():
    """The runtime's Python ships without aotpack; every key it reads is one the schema declares (or one
    of its own autotune cache file's)."""
    text = "".join((ROOT / "aotpack" / "runtime" / name).read_text()
                   for name in runtime.PYTHON_FILES)  # fmt: skip
    read = set(re.findall(r"""\[["']([A-Za-z_]+)["']\]""", text)) | set(
        re.findall(r"""\.get\(["']([A-Za-z_]+)["']""", text)
    )
    cache_file = {"format", "entries", "kernel", "target", "types", "specialization", "key", "config"}
    not_manifest = {
        "device",
        "sms",
        "run",
        "__init_subclass__",
        "manager_class",
        "off",
    }  # select(device=, sms=), a class's own
    # `run` and hook, the cache manager a program set in Triton's knobs, the tuning mode that is none
    hook = {"fn", "compile", "signature", "constants", "specialization_data"}  # Triton's jit_cache_hook arguments
    own = {"_aotpack_identity", "_aotpack_seeded"}  # what activate() keeps on a function object
    compiling = {"__name__", "hash", "src", "backend", "options", "env_vars"}  # triton.compile's frame (key_parts)
    graphs = {
        "torch",
        "job_id",
        "settings",
        "cpp_kernels",
        "cpp",
        "soabi",
        "cpu",
    }  # a set's own .json (_aotpack_inductor)
    spooled = {"event", "name"}  # a compile worker's list of what it compiled (_aotpack_guard.spooled)
    spec = {"names", "runtime"}  # a runner's spec, made from the manifest (aot_python.h)
    assert {"variants", "bindings", "params", "tuned"} <= read, "the scan finds the runtime's reads"
    unknown = read - declared(manifest.json_schema()) - cache_file - not_manifest - hook - own - compiling - graphs
    unknown -= spooled | spec
    assert unknown == set()


def test_the_docs_name_every_field():
    text = (ROOT / "docs" / "build.md").read_text()
    section = text[text.index("## The manifest") :]
    words = set(re.findall(r"\w+", section))
    assert declared(manifest.json_schema()) - words == set()

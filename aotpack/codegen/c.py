"""The generated C: per-kernel tables and expression functions (kernels.c) and the CPython module
(module.c). The runtime in ``aotpack/runtime`` does the work; this file only describes kernels."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import cast

from .. import backends, expr, facts, limits
from ..errors import RecipeError
from ..model import Arg, Kernel, Rule
from ..plan import classes
from ..plan.classes import Spec
from ..plan.variants import Variant
from ..states import ANY, DIV16, NONE, ONE
from . import BuildInput, KernelBuild, compress

_STATE = {ANY: "AOT_SPEC_ANY", DIV16: "AOT_SPEC_DIV16", ONE: "AOT_SPEC_ONE", NONE: "AOT_SPEC_NONE"}


def c_string(text: str) -> str:
    """A C string literal holding exactly ``text`` (as UTF-8): every byte outside printable ASCII is an
    octal escape, and so are the characters C would read otherwise (quote, backslash, '?' of trigraphs)."""
    out = []
    for byte in text.encode():
        char = chr(byte)
        out.append(char if 0x20 <= byte < 0x7F and char not in '"\\?' else f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def c_bytes(data: bytes, width: int = 96) -> str:
    """A byte string as a C string literal (compiles much faster than an initializer list)."""
    lines = []
    for start in range(0, len(data), width):
        chunk = data[start : start + width]
        lines.append('"' + "".join(f"\\x{b:02x}" for b in chunk) + '"')
    return "\n  ".join(lines) if lines else '""'


def designated(fields: dict[str, str]) -> str:
    """A C initializer naming every field (``{.name = value, ...}``): a value lands in the field it names,
    whatever the struct's order, and a field the struct lacks does not compile."""
    return "{" + ", ".join(f".{name} = {value}" for name, value in fields.items()) + "}"


def int_constexprs(kernel: Kernel) -> tuple[str, ...]:
    """The constexprs the grid and bound expressions may read: those whose every value is an integer
    or a boolean (as 0 and 1)."""
    return tuple(name for name in kernel.constexpr_names if all(isinstance(c.value(name), int) for c in kernel.configs))


def _shape_use(arg: Arg, kernel: Kernel) -> str:
    """How much of a tensor argument's shape the call's checks and expressions read (aot_shape_use):
    sizes and strides for size()/stride() and descriptors, the extent alone (a contiguous tensor's
    element count) for extents, `contiguous` and numel(), nothing otherwise. The binding reads no
    more than that of a tensor: on the per-call path each read is a call into torch."""
    launch = (*kernel.cuda.block, kernel.cuda.shared) if kernel.cuda is not None else ()
    calls = [c for e in (*kernel.call_exprs, *launch) for c in expr.tensor_calls(e)]
    reads = {c.func for c in calls if isinstance(c.args[0], expr.Name) and c.args[0].id == arg.name}
    if arg.block or reads & {"size", "stride"}:
        return "AOT_SHAPE_FULL"
    if arg.extent is not None or arg.contiguous or "numel" in reads:
        return "AOT_SHAPE_SPAN"
    return "AOT_SHAPE_NONE"


def _param(arg: Arg, kernel: Kernel) -> str:
    typevars = [n for n, _ in kernel.types]
    if arg.pointer:
        kind, dtype = "AOT_ARG_PTR", -1 if arg.typevar else facts.dtypes()[arg.dtype].code
    else:
        kind, dtype = str(facts.dtypes()[arg.dtype].arg), -1
    typevar = typevars.index(arg.dtype) if arg.typevar else -1
    keyed = (*arg.jit_states, *((NONE,) if arg.optional else ()))  # what the JIT keys it on, as a bit set
    return designated({
        "name": c_string(arg.name), "kind": kind, "dtype": str(dtype), "typevar": str(typevar),
        "hint": str(arg.hint or 0), "required": str(int(arg.required)), "launch_only": str(int(arg.launch_only)),
        "has_default": str(int(arg.has_default)), "contiguous": str(int(arg.contiguous)),
        "desc_rank": str(len(arg.block)), "optional": str(int(arg.optional)),
        "jit_states": " | ".join(f"1 << {_STATE[s]}" for s in keyed),
        "shape_use": _shape_use(arg, kernel) if arg.pointer else "AOT_SHAPE_NONE",
    })  # fmt: skip


def _folded(variant: Variant) -> int:
    """Bit i: argument i is not a parameter of this variant's code (its backend folded it into a
    constant: Triton's, an argument equal to 1, or None)."""
    return sum(1 << i for i in backends.of(variant.kernel).folded(variant))


def _rule_specs(rule: Rule, specs: tuple[Spec, ...]) -> list[int]:
    """The classes a dispatch row serves: any (-1), one by name, or every class of a hint level."""
    if rule.specialization is None:
        return [-1]
    exact = [i for i, s in enumerate(specs) if s.name == rule.specialization]
    found = exact or [i for i, s in enumerate(specs) if s.level == rule.specialization]
    if not found:
        names = ", ".join(s.name for s in specs)
        raise RecipeError(f"a dispatch row names specialization {rule.specialization!r}, which is not a class of "
                          f"this kernel ({names}); re-run aotpack tune", rule.where)  # fmt: skip
    return found


def _emitter(kernel: Kernel, consts: tuple[str, ...]) -> Callable[[expr.Expr], str]:
    index = {a.name: i for i, a in enumerate(kernel.args)}

    def resolve(name: str) -> str:
        return f"c[{consts.index(name)}]" if name in consts else f"x->i[{index[name]}]"

    return lambda e: expr.to_c(e, resolve, index.__getitem__)


def kernel_c(build: KernelBuild, package: str, images: dict[str, tuple[str, compress.Placement]]) -> str:
    """One kernel's C: its tables, its expression functions, and the aot_kernel that points at them."""
    k = build.kernel
    consts = int_constexprs(k)
    specs = classes.specs(k)
    rules = _rule_rows(k, specs)
    lines = [f"/* ---- kernel {k.name}: {k.source.function} */", *_signature_tables(k, consts)]
    rules_or_none = rules or [f"  {_rule(-1, -1, -1, 0, '0')},"]  # C has no empty arrays
    lines += [f"static const aot_rule {k.name}_rules[] = {{", *rules_or_none, "};"]
    lines += _variant_tables(build, images, specs)
    launch_fns, functions = _expression_functions(k, _emitter(k, consts))
    lines += functions
    lines += _name_tables(k, consts, specs)
    n = k.name
    fields = {
        "name": c_string(n), "package": c_string(package), "nparams": str(len(k.args)), "params": f"{n}_params",
        "ntypevars": str(len(k.types)), "typevar_names": f"{n}_typevars", "nbindings": str(len(k.bindings)),
        "bindings": f"{n}_bindings", "ntargets": str(len(k.targets)), "targets": f"{n}_targets",
        "nconfigs": str(len(k.configs)), "default_config": str(k.configs.index(k.default)),
        "nconsts": str(len(consts)), "consts": f"{n}_consts", "nkey": str(len(k.key)),
        "pow2_buckets": str(int(k.bucket == "pow2")), "nrules": str(len(rules)), "rules": f"{n}_rules",
        "nvariants": str(len(build.variants)), "variants": f"{n}_variants", "variant_of": f"{n}_variant_of",
        "defaults": f"{n}_defaults", "extents": f"{n}_extents", "grid": f"{n}_grid", "key": f"{n}_key",
        "functions": f"{n}_functions", "block": launch_fns[0], "shared": launch_fns[1],
        "config_labels": f"{n}_config_labels", "autotune": str(int(k.autotune)), "memo": f"&{n}_memo",
        "nbound": str(len(k.bound)), "bound_consts": f"{n}_bound_consts", "bound_names": f"{n}_bound_names",
        "bound": f"{n}_bound", "nspecs": str(len(specs)), "specs": f"{n}_specs", "spec_names": f"{n}_spec_names",
        "call_order": f"{n}_call_order", "grid_exprs": f"{n}_grid_exprs",
        "spec_letters": hex(sum(1 << i for i, a in enumerate(k.args) if a in classes.lettered(k))) + "u",
    }  # fmt: skip
    lines.append(f"AOT_API const aot_kernel aot_kernel_{n} = {{")  # the extension reads it from the library
    lines += [f"  .{name} = {value}," for name, value in fields.items()]
    lines.append("};")
    return "\n".join(lines) + "\n"


def _signature_tables(k: Kernel, consts: tuple[str, ...]) -> list[str]:
    """Parameters, type variables and their bindings (dtype codes), targets, and the configs' constexprs."""
    n = k.name
    lines = [f"static const aot_param {n}_params[] = {{", *(f"  {_param(a, k)}," for a in k.args), "};"]
    typevar_names = [c_string(v) for v, _ in k.types] or ["NULL"]
    lines.append(f"static const char *const {n}_typevars[] = {{{', '.join(typevar_names)}}};")
    codes = [str(facts.dtypes()[d].code) for b in k.bindings for _, d in b] or ["0"]
    lines.append(f"static const int8_t {n}_bindings[] = {{{', '.join(codes)}}};")
    lines.append(f"static const aot_target {n}_targets[] = {{")
    for name in k.targets:
        t = facts.target(name)
        fields = {"id": c_string(name), "capability": str(t.arch.capability), "specific": str(int(t.arch.specific)),
                  "ptx": str(int(t.ptx))}  # fmt: skip
        lines.append(f"  {designated(fields)},")
    lines.append("};")
    const_values = [str(int(cast(int, c.value(name)))) for c in k.configs for name in consts] or ["0"]
    lines.append(f"static const int64_t {n}_consts[] = {{{', '.join(const_values)}}};")
    return lines


def _rule(target: int, binding: int, spec: int, config: int, key: str) -> str:
    """One dispatch row: which calls it serves (-1: any target, binding or class), its config and bucketed key."""
    fields = {"target": str(target), "binding": str(binding), "spec": str(spec), "config": str(config),
              "key": f"{{{key}}}"}  # fmt: skip
    return designated(fields)


def _rule_rows(k: Kernel, specs: tuple[Spec, ...]) -> list[str]:
    """The dispatch table's rows: target, binding, class (-1: any) and config per bucketed key."""
    rows = []
    for rule in k.rules:
        target = k.targets.index(rule.arch) if rule.arch else -1
        binding = k.bindings.index(tuple((v, dict(rule.types)[v]) for v, _ in k.types)) if rule.types else -1
        key = ", ".join(str(v) for v in rule.key)
        for spec in _rule_specs(rule, specs):
            rows.append(f"  {_rule(target, binding, spec, k.configs.index(rule.config), key)},")
    return rows


def _variant_tables(
    build: KernelBuild, images: dict[str, tuple[str, compress.Placement]], specs: tuple[Spec, ...]
) -> list[str]:
    """The variants (their images, launch facts and needs, TMA layouts), the (binding, config, target,
    class) -> variant index, and the per-device function slots."""
    k, n = build.kernel, build.kernel.name
    lines = []
    tma_names: dict[str, str] = {}
    for i, (variant, art) in enumerate(build.variants):
        if art.needs.tma is not None:
            tma_names[variant.id] = f"{n}_tma_{i}"
            items = [designated({"box": f"{{{', '.join(map(str, t.box))}}}", "rank": str(len(t.box)),
                                 "swizzle": str(t.swizzle), "elem_type": str(t.elem_type),
                                 "elem_size": str(t.elem_size)})
                     for t in art.needs.tma]  # fmt: skip
            lines.append(f"static const aot_tma {n}_tma_{i}[] = {{{', '.join(items)}}};")
    lines.append(f"static const aot_variant {n}_variants[] = {{")
    for variant, art in build.variants:
        needs = art.needs
        block, where = images[variant.id]  # its block's name, and where in it
        fields = {
            "id": c_string(variant.id), "binding": str(k.bindings.index(variant.binding)),
            "config": str(k.configs.index(variant.config)), "target": str(k.targets.index(variant.target)),
            "spec": str(specs.index(variant.spec)), "block": f"&{block}", "offset": str(where.offset),
            "raw_size": str(where.size), "crc32": f"UINT32_C({where.crc32})", "entry": c_string(art.entry),
            "shared": str(art.shared), "static_shared": str(art.static_shared), "num_warps": str(art.num_warps),
            "extra_ptrs": str(art.extra_pointer_params), "folded": f"UINT64_C({_folded(variant)})",
            "min_driver": str(build.min_driver[variant.target].cuda),
            "scratch": f"{{{needs.scratch[0]}, {needs.scratch[1]}}}",
            "profile_scratch": f"{{{needs.profile_scratch[0]}, {needs.profile_scratch[1]}}}",
            "num_ctas": str(needs.num_ctas), "cooperative": str(int(needs.cooperative)), "pdl": str(int(needs.pdl)),
            "tma": tma_names.get(variant.id, "NULL"),
        }  # fmt: skip
        lines.append(f"  {designated(fields)},")
    lines.append("};")
    index_of = {(v.binding, v.config, v.target, v.spec): i for i, (v, _) in enumerate(build.variants)}
    slots = [", ".join(str(index_of.get((*point, spec), -1)) for spec in specs)
             for point in itertools.product(k.bindings, k.configs, k.targets)]  # fmt: skip
    lines += [f"static const int {n}_variant_of[] = {{", *(f"  {s}," for s in slots), "};"]
    lines.append(f"static void *_Atomic {n}_functions[{max(1, len(build.variants))} * AOT_MAX_DEVICES];")
    return lines


def _expression_functions(k: Kernel, emit: Callable[[expr.Expr], str]) -> tuple[list[str], list[str]]:
    """The recipe's expressions as C functions (defaults, extents, grid, key, CUDA block and shared
    memory, bound constexprs); returns the block and shared-memory functions' names (or NULL) too."""
    n = k.name
    body = [f"  if (!(x->given & (UINT64_C(1) << {i}))) {_default(a, i, emit)};"
            for i, a in enumerate(k.args) if a.has_default]  # fmt: skip
    lines = _function(f"{n}_defaults", "aot_call *x", body)
    body = [f"  out[{i}] = {emit(a.extent) if a.extent is not None else '0'};" for i, a in enumerate(k.args)]
    lines += _function(f"{n}_extents", "aot_call *x, int64_t *out", body)
    body = [f"  grid[{i}] = {emit(g)};" for i, g in enumerate(k.grid)]
    lines += _function(f"{n}_grid", "aot_call *x, const int64_t *c, int64_t grid[3]", body)
    body = [f"  key[{i}] = {emit(e)};" for i, (_, e) in enumerate(k.key)]
    lines += _function(f"{n}_key", "aot_call *x, int64_t *key", body)
    launch_fns = ["NULL", "NULL"]  # Triton: 32 * num_warps threads, the variant's fixed shared memory
    if k.cuda is not None:
        body = [f"  block[{i}] = {emit(b)};" for i, b in enumerate(k.cuda.block)]
        lines += _function(f"{n}_block", "aot_call *x, const int64_t *c, int64_t block[3]", body)
        launch_fns[0] = f"{n}_block"
        if k.cuda.shared != expr.Num(0):
            body = [f"  *bytes = {emit(k.cuda.shared)};"]
            lines += _function(f"{n}_shared", "aot_call *x, const int64_t *c, int64_t *bytes", body)
            launch_fns[1] = f"{n}_shared"
    body = [f"  out[{i}] = {emit(e)};" for i, (_, e) in enumerate(k.bound)]
    lines += _function(f"{n}_bound", "aot_call *x, const int64_t *c, int64_t *out", body)
    return launch_fns, lines


def _name_tables(k: Kernel, consts: tuple[str, ...], specs: tuple[Spec, ...]) -> list[str]:
    """Bound constexprs, config labels, the pick memo, the classes' states and names, the calling
    order and the grid's text (for messages and the Python side)."""
    n = k.name
    bound_consts = [str(consts.index(name)) for name, _ in k.bound] or ["0"]
    bound_names = [c_string(name) for name, _ in k.bound] or ["NULL"]
    states = [_STATE[s] for spec in specs for s in spec.states]
    return [
        f"static const int {n}_bound_consts[] = {{{', '.join(bound_consts)}}};",
        f"static const char *const {n}_bound_names[] = {{{', '.join(bound_names)}}};",
        f"static const char *const {n}_config_labels[] = {{{', '.join(c_string(c.label) for c in k.configs)}}};",
        f"static aot_memo {n}_memo;",
        f"static const uint8_t {n}_specs[] = {{{', '.join(states)}}};",
        f"static const char *const {n}_spec_names[] = {{{', '.join(c_string(s.name) for s in specs)}}};",
        f"static const int8_t {n}_call_order[] = {{{', '.join(map(str, k.call_order))}}};",
        f"static const char *const {n}_grid_exprs[] = {{{', '.join(c_string(expr.unparse(g)) for g in k.grid)}}};",
    ]


def _default(arg: Arg, i: int, emit: Callable[[expr.Expr], str]) -> str:
    """The C statement that fills in argument i's default: floats in the float slot (a constant, or
    an integer expression converted), everything else in the integer slot."""
    if arg.float_default is not None:
        return f"x->f[{i}] = {c_double(arg.float_default)}"
    assert arg.default is not None
    if arg.kind == "float":
        return f"x->f[{i}] = (double)({emit(arg.default)})"
    return f"x->i[{i}] = {emit(arg.default)}"


def c_double(value: float) -> str:
    """A double as a C constant: Python's repr for finite values; C has no literal for inf or NaN."""
    if math.isnan(value):
        return '__builtin_nan("")'
    if math.isinf(value):
        return "-__builtin_inf()" if value < 0 else "__builtin_inf()"
    return repr(value)


def _function(name: str, params: str, body: list[str]) -> list[str]:
    """A static function; every parameter is marked used, since a kernel's expressions may not read it."""
    names = [p.split("*")[-1].split()[-1].split("[")[0] for p in params.split(",")]
    return [f"static void {name}({params}) {{", *(f"  (void){n};" for n in names), *body, "}"]


def kernels_c(build: BuildInput) -> str:
    """kernels.c: dtype tables, cubin images and every kernel's descriptor."""
    dtypes = list(facts.dtypes().values())
    out = [
        "/* Generated by aotpack; do not edit. */",
        '#include "aot_runtime.h"',
        "",
        f"const int aot_num_dtypes = {len(dtypes)};",
        f"const char *const aot_dtype_names[] = {{{', '.join(c_string(d.name) for d in dtypes)}}};",
        f"const char *const aot_dtype_torch_names[] = {{{', '.join(c_string(d.torch) for d in dtypes)}}};",
        "const char *const aot_dtype_typestrs[] = {"
        + ", ".join(c_string(d.typestr) if d.typestr else "NULL" for d in dtypes)
        + "};",
        f"const int aot_dtype_sizes[] = {{{', '.join(str(d.size) for d in dtypes)}}};",
        "const int aot_dtype_dlpack[] = {"
        + ", ".join(str(d.dlpack[0] << 8 | d.dlpack[1]) if d.dlpack else "-1" for d in dtypes)
        + "};",
        "",
    ]
    groups = [[(v, art) for v, art in kb.variants if v.target == t] for kb in build.kernels for t in kb.kernel.targets]
    blocks, placements = compress.pack([[art.image for _, art in group] for group in groups])
    for j, block in enumerate(blocks):
        out.append(f"static const unsigned char block_{j}_data[] =\n  {c_bytes(block.data)};")
        fields = {"data": f"block_{j}_data", "size": str(len(block.data)), "raw_size": str(block.raw_size)}
        out.append(f"static const aot_block block_{j} = {designated(fields)};")
    ordered = [v.id for group in groups for v, _ in group]
    images = {vid: (f"block_{p.block}", p) for vid, p in zip(ordered, placements, strict=True)}
    out.append("")
    for kb in build.kernels:
        out.append(kernel_c(kb, build.recipe.package, images))
    everyone = ", ".join(f"&aot_kernel_{kb.kernel.name}" for kb in build.kernels)
    out.append(f"const aot_kernel *const aot_all_kernels[] = {{{everyone}}};")
    out.append(f"const int aot_num_kernels = {len(build.kernels)};")
    return "\n".join(out)


def text_signature(kernel: Kernel) -> str:
    parts = ["$module"]
    for arg in (kernel.args[i] for i in kernel.call_order):
        parts.append(f"{arg.name}=None" if arg.has_default else arg.name)
    return f"{kernel.name}({', '.join(parts)}, *, stream=None, variant=None)"


def _method(name: str, function: str, flags: str, doc: str) -> str:
    """One row of the module's PyMethodDef table (the name and doc given as C expressions)."""
    return f"  {designated({'ml_name': name, 'ml_meth': function, 'ml_flags': flags, 'ml_doc': doc})},"


def module_c(build: BuildInput, docs: dict[str, str]) -> str:
    """module.c: the CPython extension (limited API) exposing one function per kernel."""
    out = ["/* Generated by aotpack; do not edit. */", '#include "aot_python.h"', ""]
    methods = []
    as_function = "(PyCFunction)(void (*)(void))"  # through void (*)(void): no warning for the keyword signatures
    for kb in build.kernels:
        n = kb.kernel.name
        out.append(f"extern AOT_API const aot_kernel aot_kernel_{n};")
        if kb.caller_launches:  # only its backend's launch syntax: the caller gives grid and config
            out.append(f"static PyObject *py_runner_{n}(PyObject *module, PyObject *spec) {{")
            out.append("  (void)module;")
            out.append(f"  return aot_py_runner(&aot_kernel_{n}, spec);")
            out.append("}")
            runner_doc = c_string("_runner(spec) -> run(*args, grid, warmup, **kwargs): Triton's launch syntax.")
            methods.append(_method(c_string("_runner_" + n), f"{as_function}py_runner_{n}", "METH_O", runner_doc))
            continue
        for prefix, fn in (("", "aot_py_call"), ("_select_", "aot_py_select")):
            out.append(f"static PyObject *py{prefix or '_'}{n}(PyObject *module, PyObject *args, PyObject *kwargs) {{")
            out.append("  (void)module;")
            out.append(f"  return {fn}(&aot_kernel_{n}, args, kwargs);")
            out.append("}")
        out.append(f"static PyObject *py_choose_{n}(PyObject *module, PyObject *args) {{")
        out.append("  (void)module;")
        out.append(f"  return aot_py_choose(&aot_kernel_{n}, args);")
        out.append("}")
        doc = f"{text_signature(kb.kernel)}\n--\n\n{docs[n]}"
        keywords = "METH_VARARGS | METH_KEYWORDS"
        choose_doc = c_string("(key, binding, device) -> the variant id the dispatcher picks for these key values.")
        select_doc = c_string("The id of the variant a call with these arguments would launch.")
        methods += [
            _method(c_string(n), f"{as_function}py_{n}", keywords, c_string(doc)),
            _method(c_string("_choose_" + n), f"{as_function}py_choose_{n}", "METH_VARARGS", choose_doc),
            _method(c_string("_select_" + n), f"{as_function}py_select_{n}", keywords, select_doc),
        ]
    out.append("")
    out.append("static PyMethodDef methods[] = {")
    out += methods
    helpers = [
        ("_autotune", "_autotune(mode): 0 off, 1 per bucket, 2 per key"),
        ("_image", "_image(kernel, variant) -> its cubin or PTX, unpacked"),
        ("_memo", "_memo(kernel) -> the keys tuned in this process"),
        ("_memo_put", "_memo_put(kernel, target, binding, hinted, key, config): remember a tuned key"),
        ("_misses", "_misses(kernel) -> ([(class run, JIT class, calls)], lost)"),
        ("_warn_misses", "_warn_misses(category or None)"),
    ]
    out += [_method(c_string(name), f"aot_py{name}", "METH_VARARGS", c_string(doc)) for name, doc in helpers]
    out.append(_method("NULL", "NULL", "0", "NULL"))
    out.append("};")
    out.append("")
    module_def = {
        "m_base": "PyModuleDef_HEAD_INIT", "m_name": c_string("_native"), "m_doc": c_string(build.recipe.summary),
        "m_size": "-1", "m_methods": "methods", "m_slots": "NULL", "m_traverse": "NULL", "m_clear": "NULL",
        "m_free": "NULL",
    }  # fmt: skip
    out.append(f"static struct PyModuleDef module_def = {designated(module_def)};")
    out.append("")
    out.append("PyMODINIT_FUNC PyInit__native(void) {")
    out.append("  PyObject *module = PyModule_Create(&module_def);")
    out.append("  if (module != NULL && aot_py_init(module) < 0) Py_CLEAR(module);")
    out.append("  return module;")
    out.append("}")
    return "\n".join(out) + "\n"


def _capi_params(kernel: Kernel, package: str) -> list[str]:
    """The C API's parameters, in the kernel's calling order (scalars with a default by pointer)."""
    out = []
    for arg in (kernel.args[i] for i in kernel.call_order):
        if arg.pointer:
            out.append(f"{package}_tensor {arg.name}")
            continue
        c_type = facts.dtypes()[arg.dtype].c
        if arg.has_default or arg.optional:  # NULL: the default, or (optional) None
            out.append(f"const {c_type} *{arg.name}")
        else:
            out.append(f"{c_type} {arg.name}")
    return out


def capi_h(build: BuildInput, docs: dict[str, str]) -> str:
    """The C API header shipped in the wheel (``pkg.get_include()``)."""
    pkg = build.recipe.package
    guard = f"{pkg.upper()}_H"
    lines = [
        f"/* {pkg} {build.recipe.version}: the C API of its kernels, generated by aotpack. Link with",
        f" * lib{pkg}.so (beside the package's __init__.py); it needs only the NVIDIA driver at run time.",
        " * Every function returns 0, or -1 with a message in `error` (when error_size > 0). */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "#include <stdbool.h>",
        "#include <stddef.h>",
        "#include <stdint.h>",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        "",
        "/* A device array: its pointer, dtype, and (ndim >= 0) shape and strides in elements (strides",
        " * NULL: contiguous). ndim < 0: a bare pointer, whose size the kernel cannot check; more than",
        f" * {limits.MAX_DIMS} dimensions: refused. An optional",
        " * argument given {0, 0, -1} (pointer 0, no shape) is None. */",
        "typedef struct {",
        "  uint64_t ptr;",
        "  int dtype;",
        "  int ndim;",
        "  const int64_t *shape;",
        "  const int64_t *strides;",
        f"}} {pkg}_tensor;",
        "",
        "enum {",
        *(f"  {pkg.upper()}_{d.name.upper()} = {d.code}," for d in facts.dtypes().values()),
        "};",
        "",
    ]
    for kb in build.kernels:
        k = kb.kernel
        if kb.caller_launches:  # its backend's launch syntax (grid and config from the caller): Python only
            continue
        params = ", ".join(["void *stream", "int device", *_capi_params(k, pkg)])
        lines += [  # comments carry no recipe text: the kernel's doc is its Python __doc__
            f"/* {k.name}: launch the kernel. Scalars passed by pointer may be NULL: their default. */",
            f"int {pkg}_{k.name}({params}, char *error, size_t error_size);",
            f"/* The id of the variant {pkg}_{k.name} would launch, into `variant`. */",
            f"int {pkg}_{k.name}_select({params}, char *variant, size_t variant_size, char *error, size_t error_size);",
            "",
        ]
    lines += ["#ifdef __cplusplus", "}", "#endif", "#endif"]
    return "\n".join(lines) + "\n"


def capi_c(build: BuildInput) -> str:
    """capi.c: the C API's functions, each filling an aot_call as the Python binding does."""
    pkg = build.recipe.package
    out = ["/* Generated by aotpack; do not edit. */", "#include <stdio.h>", "", '#include "aot_runtime.h"',
           f'#include "{pkg}.h"', "", "#define AOT_EXPORT __attribute__((visibility(\"default\")))", ""]  # fmt: skip
    no_error = designated({"status": "AOT_OK", "message": '""'})
    for kb in build.kernels:
        k = kb.kernel
        if kb.caller_launches:
            continue
        out.append(f"extern const aot_kernel aot_kernel_{k.name};")
        fill = []
        for p, arg in enumerate(k.args):
            slot = "f" if arg.kind == "float" else "i"
            if arg.pointer:
                fill.append(f"  aot_set_tensor(call, {p}, {arg.name}.ptr, {arg.name}.dtype, {arg.name}.ndim, "
                            f"{arg.name}.shape, {arg.name}.strides);")  # fmt: skip
                if arg.optional:
                    fill.append(f"  if ({arg.name}.ptr == 0 && {arg.name}.ndim < 0) call->none |= UINT64_C(1) << {p};")
            elif arg.has_default or arg.optional:
                fill.append(f"  if ({arg.name}) call->{slot}[{p}] = *{arg.name}, call->given |= UINT64_C(1) << {p};")
                if arg.optional:
                    fill.append(f"  else call->none |= UINT64_C(1) << {p}, call->given |= UINT64_C(1) << {p};")
            else:
                fill.append(f"  call->{slot}[{p}] = {arg.name}, call->given |= UINT64_C(1) << {p};")
        params = ", ".join(["void *stream", "int device", *_capi_params(k, pkg)])
        names = ", ".join(k.args[i].name for i in k.call_order)
        out += [
            f"static void fill_{k.name}(aot_call *call, {', '.join(_capi_params(k, pkg))}) {{",
            *fill,
            "}",
            f"AOT_EXPORT int {pkg}_{k.name}({params}, char *error, size_t error_size) {{",
            f"  aot_error err = {no_error};",
            "  aot_call call; /* its ~10 KB of argument slots are not cleared (aot_call_start) */",
            f"  aot_call_start(&call, &aot_kernel_{k.name}, &err);",
            f"  fill_{k.name}(&call, {names});",
            f"  int rc = aot_launch(&aot_kernel_{k.name}, &call, device, (aot_stream)stream, -1);",
            '  if (rc != 0 && error != NULL && error_size > 0) snprintf(error, error_size, "%s", err.message);',
            "  return rc;",
            "}",
            f"AOT_EXPORT int {pkg}_{k.name}_select({params}, char *variant, size_t variant_size, char *error,",
            "                                     size_t error_size) {",
            "  (void)stream;",
            f"  aot_error err = {no_error};",
            "  aot_call call; /* its ~10 KB of argument slots are not cleared (aot_call_start) */",
            f"  aot_call_start(&call, &aot_kernel_{k.name}, &err);",
            f"  fill_{k.name}(&call, {names});",
            f"  int v = aot_select(&aot_kernel_{k.name}, &call, device, -1);",
            "  if (v < 0) {",
            '    if (error != NULL && error_size > 0) snprintf(error, error_size, "%s", err.message);',
            "    return -1;",
            "  }",
            "  if (variant != NULL && variant_size > 0)",
            f'    snprintf(variant, variant_size, "%s", aot_kernel_{k.name}.variants[v].id);',
            "  return 0;",
            "}",
            "",
        ]
    return "\n".join(out)

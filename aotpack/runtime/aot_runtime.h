/* aotpack runtime: loads the NVIDIA driver at run time, keeps one module per device and variant,
 * picks the variant for a call (type binding, problem key, arch, specialization guards) and launches
 * it. Shipped unchanged inside every generated wheel; the tables it reads are generated. Nothing here
 * exits or aborts: every failure comes back as an aot_error. */
#ifndef AOT_RUNTIME_H
#define AOT_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "aot_limits.h"     /* AOT_MAX_ARGS, _KEY, _DIMS, _DEVICES: generated from aotpack/limits.py */
#include "aot_vocabulary.h" /* aot_spec_state, AOT_SPEC_LETTERS, aot_tune_mode: generated (aotpack/codegen/c.py) */
#define AOT_ERR_LEN 768

/* The few driver API types the runtime needs; the driver itself is dlopen'ed. */
typedef int aot_cu_result;
typedef struct aot_cu_stream_st *aot_stream;
typedef struct aot_cu_func_st *aot_function;

/* AOT_E_MISSING: a call in Triton's launch syntax that no built variant matches exactly (the caller may
 * fall back to Triton's JIT) */
typedef enum { AOT_OK = 0, AOT_E_TYPE, AOT_E_VALUE, AOT_E_CUDA, AOT_E_MISSING } aot_status;

typedef struct {
  aot_status status;
  char message[AOT_ERR_LEN];
} aot_error;

typedef enum {
  AOT_ARG_PTR = 0, AOT_ARG_I32, AOT_ARG_I64, AOT_ARG_U32, AOT_ARG_U64, AOT_ARG_F16, AOT_ARG_BF16, AOT_ARG_F32,
  AOT_ARG_F64, AOT_ARG_BOOL
} aot_arg_kind;

/* aot_spec_state (aot_vocabulary.h): what a call's argument is, as Triton's JIT specializes on it (and what a
 * variant assumes of it): anything, 16-divisible (integers) or 16-byte aligned (pointers), equal to 1 (folded into
 * the code), or None (an optional pointer left out, folded too). A variant's assumption of "anything" holds for
 * every value but None. */

typedef struct {
  const char *name;
  uint8_t kind;        /* aot_arg_kind */
  int8_t dtype;        /* pointers: element dtype code, or -1 when a type variable types it */
  int8_t typevar;      /* pointers: index of the kernel's type variable, or -1 */
  uint8_t hint;        /* hinted variants assume: 16: address (pointer) or value % 16 == 0; 1: value == 1 */
  uint8_t required;    /* every variant assumes the hint: calls that break it are refused */
  uint8_t launch_only; /* read by grid/key/checks only; not a kernel parameter */
  uint8_t has_default;
  uint8_t contiguous;  /* pointers: the tensor must be contiguous */
  uint8_t desc_rank;   /* a tensor descriptor of this rank (the caller passes the tensor); 0: not one */
  uint8_t optional;    /* may be passed as None (variants were built for that) */
  uint8_t jit_states;  /* bit per aot_spec_state: what Triton's JIT keys this argument on */
  uint8_t shape_use;   /* pointers: what the call's checks and expressions read of its shape (aot_shape_use) */
} aot_param;

/* How much of a tensor argument's shape a kernel reads: none; its extent (element count and
 * contiguity: extents, `contiguous`, numel()); or its sizes and strides (size(), stride(), descriptors).
 * A binding reads no more of a tensor than this. */
typedef enum { AOT_SHAPE_NONE = 0, AOT_SHAPE_SPAN, AOT_SHAPE_FULL } aot_shape_use;

/* How the launcher encodes one host tensor descriptor (cuTensorMapEncodeTiled), as the compiler
 * laid it out. */
typedef struct {
  uint32_t box[5]; /* outermost dimension first */
  uint8_t rank, swizzle, elem_type, elem_size;
} aot_tma;

/* What the caller passed for a pointer argument. Raw pointers have dtype and ndim -1. */
typedef struct {
  uint64_t ptr;
  int dtype;
  int ndim;
  int64_t shape[AOT_MAX_DIMS];
  int64_t strides[AOT_MAX_DIMS]; /* in elements */
} aot_tensor;

struct aot_kernel;

/* A key the runtime timed itself (autotuning): for this target, binding, specialization and
 * bucketed key, launch this config. */
typedef struct {
  int target, binding, spec, config;
  int64_t key[AOT_MAX_KEY];
} aot_tuned;

/* One pick of the dispatcher (rt_choose() in aot_dispatch.c): a call on the same target and number of
 * multiprocessors (the rule counts waves of them) with the same types, argument states (aot_spec_state, 2 bits
 * per argument) and key gets the same variant. A slot is a sequence lock: an even seq that reads the same before
 * and after a copy is a whole pick. */
typedef struct {
  _Atomic uint32_t seq;
  _Atomic uint32_t stamp; /* when it was kept (the memo's pick_clock): the oldest of a set goes first */
  _Atomic int32_t variant, target, binding, sms;
  _Atomic int32_t miss; /* the pick's class miss (index + 1 into the memo's misses), or 0 */
  _Atomic uint64_t states[2];
  _Atomic int64_t key[AOT_MAX_KEY];
} aot_pick;
/* Distinct calls kept, in sets of AOT_PICK_WAYS (a call's point hashes to one set): a rule between measured keys
 * reads the exact key, and a serving loop may cycle through hundreds of them (a mixture of experts' per-expert
 * shapes, a batch's sequence lengths), each call after the first served from here instead of running the rule
 * (microseconds over a table of thousands of rows). In sets of 4, the oldest evicted: a few hot keys of one set
 * do not evict each other. Cycled keys past a few hundred overfill some sets, whose keys then miss every time
 * (512 layer-norm keys cycled: one call in 7 runs the rule, 2.1 us a call; 8.4 with the 64 direct-mapped slots
 * before). 112 KB per kernel of zeroed memory, its pages touched only where picks are kept. */
#define AOT_PICKS 1024
#define AOT_PICK_WAYS 4

/* A class miss: calls that ran class `spec` where Triton's JIT would have compiled a more specialized
 * one, `jit` (an aot_spec_state per parameter, 2 bits each). Counted per pair, so that a package can
 * report what to add to its recipe (`classes:`). */
typedef struct {
  int32_t spec;
  uint64_t jit[2];
  _Atomic uint64_t calls;
} aot_miss;
#define AOT_MISSES 64 /* pairs kept per kernel; calls of further pairs are counted as lost */

/* What a kernel learns in the process: keys tuned and class misses (under a lock; a miss's count is
 * atomic) and its last picks (lock-free). */
typedef struct {
  aot_tuned *items;
  int n, cap;
  aot_pick picks[AOT_PICKS];
  _Atomic uint32_t pick_clock; /* picks kept so far (wraps): their stamps */
  aot_miss misses[AOT_MISSES];
  int nmisses;
  _Atomic uint64_t lost_misses;
} aot_memo;

/* One call's argument values, indexed by parameter. Expressions read them; a failed expression
 * (division by zero, size() of a raw pointer) records its message in err and the call fails. */
typedef struct aot_call {
  const struct aot_kernel *kernel;
  uint64_t given; /* bit i: argument i was passed by the caller */
  uint64_t none;  /* bit i: argument i (an optional pointer) was passed as None */
  aot_tensor t[AOT_MAX_ARGS];
  int64_t i[AOT_MAX_ARGS];
  double f[AOT_MAX_ARGS];
  /* Triton's launch syntax (kernel[grid](...)): config index + 1 that the caller's constexprs and
   * options chose, and the caller's grid; 0: the dispatcher chooses, and the recipe's grid runs */
  int launch_config;
  int64_t grid[3];
  int new_miss; /* set by aot_launch: the first call of a class miss (index + 1 into the memo's misses), or 0 */
  aot_error *err;
} aot_call;

typedef struct {
  const char *id;
  int capability;
  uint8_t specific; /* an 'a' target: runs only on exactly this capability */
  uint8_t ptx;      /* PTX the driver compiles at load: runs on this capability and newer */
} aot_target;

/* Consecutive images of one kernel and target, compressed together (aotpack/codegen/compress.py). */
typedef struct {
  const unsigned char *data; /* an LZ4 block */
  uint32_t size, raw_size;
} aot_block;

typedef struct {
  const char *id;
  int binding, config, target; /* indices into the kernel's tables */
  int spec;                    /* the specialization class it was compiled for (index into the kernel's) */
  const aot_block *block; /* holds the image, unpacked when the variant first loads (aot_unpack) */
  uint32_t offset, raw_size, crc32; /* where the image lies in the unpacked block; its CRC-32 */
  const char *entry;
  uint32_t shared;        /* dynamic shared memory bytes, when fixed at build time (Triton) */
  uint32_t static_shared; /* shared memory the code declares (CUDA __shared__) */
  uint16_t num_warps;     /* block = 32 * num_warps threads, unless the kernel has a block function */
  uint8_t blocks;         /* blocks resident at once on one multiprocessor (0: not known; the rule's waves) */
  uint8_t extra_ptrs;  /* trailing scratch pointer params, 0 to 2 (Triton's global, then profile) */
  uint64_t folded;     /* bit i: argument i is a constant in this code, not a parameter */
  int min_driver;      /* CUDA driver version, 1000*major + 10*minor */
  uint32_t scratch[2];         /* global scratch: bytes per program (0: none) and alignment */
  uint32_t profile_scratch[2]; /* the profiler's scratch, likewise */
  uint8_t num_ctas;            /* thread-block cluster size along x */
  uint8_t cooperative, pdl;    /* cooperative launch; programmatic dependent launch */
  const aot_tma *tma;          /* per descriptor argument; NULL: descriptors are passed decomposed */
} aot_variant;

typedef struct {
  int target;   /* index into the kernel's targets, or -1: any */
  int binding;  /* index into the kernel's type bindings, or -1: any */
  int spec;     /* the calls' specialization class (index), or -1: any */
  int order;    /* the row's place in the table: of rows that tie, the earlier serves */
  int config;
  int64_t key[AOT_MAX_KEY];
  const double *key_log2; /* log2 of each key value (at least 1), with us_log2 */
  const double *us_log2; /* a tuning table's row: log2 of each config's median microseconds at this key (at least
                          * 1e-3; NaN: not measured), or NULL (a recipe's row) */
  const double *work_log2; /* with us_log2 where the rule scales by work: log2 of each config's work at this key on
                            * the GPU that timed it (the table's multiprocessors, the blocks of the variant it
                            * timed), computed at build time as aotpack/selection.py's log2_work; else NULL */
} aot_rule;

/* A kernel's rows of one target, binding and class (each -1: any), [first, end) of its rules: a call skips
 * the rows of a class it fails in one step. */
typedef struct {
  int32_t spec, first, end;
} aot_rule_block;

/* A key dimension cut by an integer constexpr (aotpack/selection.py): across the grid, or along a loop. */
typedef struct {
  int8_t dim;   /* index into the key */
  int8_t konst; /* index into a config's consts */
  uint8_t loop;
} aot_tile;

typedef struct aot_kernel {
  const char *name;
  const char *package;
  int nparams;
  const aot_param *params;
  int ntypevars;
  const char *const *typevar_names;
  int nbindings;
  const int8_t *bindings;      /* nbindings x ntypevars dtype codes */
  int ntargets;
  const aot_target *targets;
  int nconfigs;
  int default_config;
  int nconsts;
  const int64_t *consts;       /* nconfigs x nconsts: integer constexprs the grid reads */
  int nkey;
  uint8_t pow2_buckets;
  int nrules;
  const aot_rule *rules;
  const int32_t *rule_spans;   /* ntargets x nbindings x [first, end) of rule_blocks: the rows that may serve
                                * such a call (their target and binding, or any), a block per class */
  const aot_rule_block *rule_blocks;
  /* the rule between measured keys (aotpack/selection.py): 0, the nearest row's config; else each config's
   * time predicted from this many nearest rows with times, scaled by the tiles' work to the power `scale` */
  uint8_t neighbours;
  double scale;
  int ntiles;
  const aot_tile *tiles;
  const uint8_t *occupancy;    /* nconfigs: programs per multiprocessor in a wave (0: not in waves), or NULL */
  uint8_t own_occupancy;       /* 1: in waves of the blocks per multiprocessor of the variant each config runs */
  int64_t fixed;               /* a program's cost besides its loops, in elements of their tiles (0: trips) */
  int tuned_sms;               /* the tuning GPU's multiprocessors: select(target=...)'s default */
  int nvariants;
  const aot_variant *variants;
  const int *variant_of;       /* [binding][config][target][spec] -> variant index or -1 */
  void (*defaults)(aot_call *call);
  void (*extents)(aot_call *call, int64_t *out); /* per param: elements the kernel may touch, or 0 */
  void (*grid)(aot_call *call, const int64_t *consts, int64_t grid[3]);
  void (*key)(aot_call *call, int64_t *key);
  void *_Atomic *functions;    /* nvariants x AOT_MAX_DEVICES loaded functions (mutable) */
  /* CUDA kernels: the block shape and dynamic shared memory from the recipe (NULL for Triton) */
  void (*block)(aot_call *call, const int64_t *consts, int64_t block[3]);
  void (*shared)(aot_call *call, const int64_t *consts, int64_t *bytes);
  const char *const *config_labels;
  uint8_t autotune;            /* the recipe allows running it more than once per call */
  aot_memo *memo;              /* keys tuned in this process (mutable, under a lock) */
  /* constexprs a call fixes (`equals:` in the recipe): a config runs a call only when its value is
   * the one bound() computes from the call */
  int nbound;
  const int *bound_consts;      /* their indices into a config's consts */
  const char *const *bound_names;
  void (*bound)(aot_call *call, const int64_t *consts, int64_t *out); /* may read the config's constexprs */
  /* specialization classes, most specialized first: per class, per parameter an aot_spec_state the
   * class's variants assume; a call runs the first class whose assumptions it satisfies */
  int nspecs;
  const uint8_t *specs;         /* nspecs x nparams */
  const char *const *spec_names;
  const int8_t *call_order;     /* positional argument i fills parameter call_order[i] */
  const char *const *grid_exprs; /* the recipe's grid, as text (for errors) */
  uint64_t spec_letters;        /* bit i: a class name has a letter for parameter i (aotpack/plan/classes.py) */
} aot_kernel;

/* What follows is the runtime's interface: exported from lib<package>.so, where it lives once, for the
 * Python extension that links that library (everything else in the library stays hidden). */
#define AOT_API __attribute__((visibility("default")))
#pragma GCC visibility push(default)

/* Dtype names by code, generated from the package's dtype table. */
extern const char *const aot_dtype_names[];
extern const char *const aot_dtype_torch_names[];
extern const char *const aot_dtype_typestrs[]; /* __cuda_array_interface__ typestr, or NULL */
extern const int aot_dtype_sizes[];
extern const int aot_dtype_dlpack[]; /* DLPack type code << 8 | bits, or -1 */
extern const int aot_num_dtypes;

/* Every kernel of the package, generated. */
extern const aot_kernel *const aot_all_kernels[];
extern const int aot_num_kernels;

/* Start a call of kernel k: nothing given yet. The argument slots are not cleared (they are most of
 * the struct's ~10 KB): the runtime reads a slot only when its bit in `given` is set, or after filling it
 * from the argument's default. */
static inline void aot_call_start(aot_call *call, const aot_kernel *k, aot_error *err) {
  call->kernel = k, call->err = err;
  call->given = 0, call->none = 0, call->launch_config = 0, call->new_miss = 0;
}

/* Launch a kernel: bind types, fill defaults, check the call, choose the variant (or take variant
 * `forced` when >= 0, after checking it can run this call), launch on `stream` of `device`.
 * Returns 0, or -1 with err filled in. */
int aot_launch(const aot_kernel *k, aot_call *call, int device, aot_stream stream, int forced);

/* The variant aot_launch would choose, without launching (-1 and err on failure). */
int aot_select(const aot_kernel *k, aot_call *call, int device, int forced);

/* The variant the dispatcher picks for bucketed-or-raw key values and a type binding on a device,
 * for a call in the most specialized class built (-1 and err on failure). */
int aot_choose_key(const aot_kernel *k, const int64_t *key, int binding, int device, aot_error *err);

/* aot_select and aot_choose_key for a GPU that need not be here: of compute capability `capability` (90 for
 * sm_90a) with `sms` multiprocessors. No driver is loaded and nothing is kept: a pick for a GPU not here does
 * not stand for one that is. */
int aot_select_planned(const aot_kernel *k, aot_call *call, int capability, int sms, int forced);
int aot_choose_key_planned(const aot_kernel *k, const int64_t *key, int binding, int capability, int sms,
                           aot_error *err);

/* Runtime autotuning: switch it on (an aot_tune_mode, aot_vocabulary.h) or off, and read or add the tuned keys
 * (for a cache file). */
void aot_autotune_enable(int mode); /* an aot_tune_mode */
int aot_memo_get(const aot_kernel *k, int index, aot_tuned *out);
int aot_memo_put(const aot_kernel *k, const aot_tuned *entry);

/* Class miss i of a kernel (0, or -1 past the last): the class that ran, the JIT's class spelt as class names
 * are (one letter per parameter in spec_letters: D, 1, N or _; `jit` holds AOT_MAX_ARGS + 1 bytes) and the
 * calls. `lost`, when not NULL, receives the calls of pairs past AOT_MISSES. */
int aot_miss_get(const aot_kernel *k, int i, int *spec, char *jit, uint64_t *calls, uint64_t *lost);

/* The index of the variant with this id, or -1 and err. */
int aot_find_variant(const aot_kernel *k, const char *id, aot_error *err);

/* The CUDA device that owns a device pointer (-1 and err when it is not device memory). */
int aot_pointer_device(uint64_t ptr, const char *arg, aot_error *err);

/* Decode the first `want` bytes of an LZ4 block into dst; 0, or -1 when the data is malformed or ends
 * before that. */
int aot_lz4_decode(const unsigned char *src, size_t src_size, unsigned char *dst, size_t want);

/* A variant's image into dst (raw_size + 1 bytes: it is NUL-terminated, as the driver reads PTX as a C
 * string), checked against its CRC-32; 0, or -1 and err. */
int aot_unpack(const aot_variant *var, unsigned char *dst, aot_error *err);

/* Describe a pointer argument (the C API's path; the Python binding reads objects instead): a dtype
 * outside the table, or ndim < 0, leaves that part unknown. */
void aot_set_tensor(aot_call *call, int param, uint64_t ptr, int dtype, int ndim, const int64_t *shape,
                    const int64_t *strides);

/* A value as fp16 bits (rounded to nearest even, as Triton's launcher packs it); -1 when it is too large. */
int32_t aot_f16_bits(double value);

/* Set an error; returns -1. */
int aot_fail(aot_error *err, aot_status status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Expression helpers used by the generated code; they record errors in call->err. */
int64_t aot_add(aot_call *x, int64_t a, int64_t b);
int64_t aot_sub(aot_call *x, int64_t a, int64_t b);
int64_t aot_mul(aot_call *x, int64_t a, int64_t b);
int64_t aot_neg(aot_call *x, int64_t a);
int64_t aot_cdiv(aot_call *x, int64_t a, int64_t b);
int64_t aot_floordiv(aot_call *x, int64_t a, int64_t b);
int64_t aot_mod(aot_call *x, int64_t a, int64_t b);
int64_t aot_next_pow2(aot_call *x, int64_t a);
int64_t aot_numel(aot_call *x, int param);
int64_t aot_size(aot_call *x, int param, int64_t dim);
int64_t aot_stride(aot_call *x, int param, int64_t dim);
/* a * b, or INT64_MAX past int64 (row-major strides of a shape no memory can hold: the span check refuses it) */
static inline int64_t aot_sat_mul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}
static inline int64_t aot_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t aot_max(int64_t a, int64_t b) { return a > b ? a : b; }

#pragma GCC visibility pop
#endif

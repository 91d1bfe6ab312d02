# layernorm:layernorm_kernel: written out by aotpack with every @triton.jit function and constant it reads
import triton
import triton.language as tl



@triton.jit
def layernorm_kernel(out_ptr, x_ptr, w_ptr, b_ptr, eps, n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_mask = rows < n_rows
    base = rows.to(tl.int64)[:, None] * n_cols
    cols = tl.arange(0, BLOCK)

    total = tl.zeros([ROWS, BLOCK], tl.float32)
    squares = tl.zeros([ROWS, BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        mask = row_mask[:, None] & (c < n_cols)[None, :]
        x = tl.load(x_ptr + base + c[None, :], mask=mask, other=0.0).to(tl.float32)
        total += x
        squares += x * x
    mean = tl.sum(total, axis=1) / n_cols
    var = tl.maximum(tl.sum(squares, axis=1) / n_cols - mean * mean, 0.0)
    rstd = 1.0 / tl.sqrt(var + eps)

    for start in range(0, n_cols, BLOCK):
        c = start + cols
        mask = row_mask[:, None] & (c < n_cols)[None, :]
        x = tl.load(x_ptr + base + c[None, :], mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + c, mask=c < n_cols, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + c, mask=c < n_cols, other=0.0).to(tl.float32)
        y = (x - mean[:, None]) * rstd[:, None] * w[None, :] + b[None, :]
        tl.store(out_ptr + base + c[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


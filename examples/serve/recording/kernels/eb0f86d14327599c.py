# softmax:softmax_kernel: written out by aotpack with every @triton.jit function and constant it reads
import triton
import triton.language as tl



@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    in_row = in_ptr + row * in_row_stride
    out_row = out_ptr + row * out_row_stride
    cols = tl.arange(0, BLOCK)

    running_max = tl.full([BLOCK], float("-inf"), tl.float32)
    running_sum = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(in_row + start + cols, mask=mask, other=float("-inf")).to(tl.float32)
        new_max = tl.maximum(running_max, x)
        # lanes that have seen only -inf keep a zero sum instead of NaN (exp(-inf - -inf))
        scale = tl.where(new_max == float("-inf"), 0.0, tl.exp(running_max - new_max))
        fresh = tl.where(mask & (new_max != float("-inf")), tl.exp(x - new_max), 0.0)
        running_sum = running_sum * scale + fresh
        running_max = new_max

    row_max = tl.max(running_max, axis=0)
    lane_scale = tl.where(running_max == float("-inf"), 0.0, tl.exp(running_max - row_max))
    row_sum = tl.sum(running_sum * lane_scale, axis=0)

    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(in_row + start + cols, mask=mask, other=float("-inf")).to(tl.float32)
        y = tl.exp(x - row_max) / row_sum
        tl.store(out_row + start + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


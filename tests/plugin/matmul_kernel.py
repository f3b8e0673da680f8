"""Triton's tutorial matmul, K-looped, with a downstream retry loop over tiles: the kernel the
emulation tests compile for several architectures, and copy into their pytester projects.

With 8 warps and a 128x128x64 tile Triton pipelines the K loop into shared memory: 4 stages
need 131072 bytes on sm_90 and 98304 on sm_80/sm_89/sm_120, 3 stages 98304 and 65536 (issue
32's table). fp16 in the interpreter: it computes bf16 wrongly through numpy, and both types
take the same shared memory.
"""

import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :] * sak
    b_ptrs = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn,
             acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a, b, tile):
    import torch

    (M, K), (_, N) = a.shape, b.shape
    c = torch.empty(M, N, dtype=a.dtype, device=a.device)
    bm, bn, bk, stages = tile
    matmul_kernel[(triton.cdiv(M, bm), triton.cdiv(N, bn))](
        a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        c.stride(0), c.stride(1), BM=bm, BN=bn, BK=bk, num_warps=8, num_stages=stages)
    return c


TILES = [(128, 128, 64, 4), (128, 128, 64, 3), (64, 64, 32, 2)]


def first_tile_that_loads(a, b):
    """A downstream eager retry loop: the first tile the device does not refuse."""
    refusals = []
    for tile in TILES:
        try:
            return tile, matmul(a, b, tile), refusals
        except triton.runtime.errors.OutOfResources as exc:
            refusals.append(str(exc))
    raise RuntimeError(refusals)


class _Operand:
    """What Triton's specialization reads of a contiguous fp16 tensor."""

    dtype = tl.float16

    def data_ptr(self):
        return 0


def compile_tile(arch, tile):
    """triton.compile of a 128x64 @ 64x128 launch with tile for sm_<arch>, its arguments
    specialized as JITFunction.run specializes them (not loaded: no GPU needed)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    fn, target = matmul_kernel, GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    args = [_Operand(), _Operand(), _Operand(), 128, 128, 64, 64, 1, 128, 1, 128, 1]
    bm, bn, bk, stages = tile
    kwargs = {"BM": bm, "BN": bn, "BK": bk, "num_warps": 8, "num_stages": stages,
              "debug": False}
    bound, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound,
                                                          specialization, options)
    return triton.compile(ASTSource(fn, signature, constexprs, attrs), target=target,
                          options=options.__dict__)

/* RMSNorm forward, one work-group per row (exercise kernels.rmsnorm_forward).
 *
 * Course text: §normalization.rmsnorm and §kernels.reductions (one
 * sum-of-squares reduction per row). The NumPy version is normalization.RMSNorm.
 * Grade with `.venv/bin/grade submit kernels.rmsnorm_forward`.
 *
 * x, y: float32, rows x D, row-major; gamma: D floats; rstd: one float per row.
 *     rstd[row] = 1 / sqrt(mean_j(x[row, j]^2) + eps)
 *     y[row, j] = x[row, j] * rstd[row] * gamma[j]
 *
 * Launch: one work-group of L work-items per row: global size rows * L,
 * local size L, scratch = L floats of __local memory. L is a power of two
 * chosen by the grader; D need NOT be a multiple of L (D may be smaller or
 * larger than L).
 *     row = get_group_id(0), lid = get_local_id(0)
 * [guided]
 * Hints:
 * 1. Each work-item sums x^2 over j = lid, lid + L, lid + 2L, ... < D
 *    (strided loop: this handles any D), then stores its partial sum in
 *    scratch[lid].
 * 2. Tree reduction in scratch: barrier(CLK_LOCAL_MEM_FENCE); then for
 *    s = L/2, L/4, ..., 1: if (lid < s) scratch[lid] += scratch[lid + s];
 *    barrier(CLK_LOCAL_MEM_FENCE); (every work-item must reach every barrier:
 *    no return before the last one). scratch[0] is the row's sum.
 * 3. Every work-item reads scratch[0], computes rstd (rsqrt), writes its y
 *    elements in the same strided loop; work-item 0 writes rstd[row].
 * [/guided]
 * Every work-item must reach every barrier (no return before the last one).
 * Accumulate in float; an all-zero row gives rstd = 1/sqrt(eps), y = 0.
 */
__kernel void rmsnorm_forward(__global const float *x, __global const float *gamma, __global float *y, __global float *rstd, const int D, const float eps, __local float *scratch)
{
    /* TODO: implement */
}

/* LayerNorm forward, one work-group per row (exercise kernels.layernorm_forward).
 *
 * Course text: §normalization.layernorm, §kernels.reductions and
 * §kernels.one-pass (the statistics in one pass, without cancellation). The NumPy
 * version is normalization.LayerNorm over the last axis.
 * Grade with `.venv/bin/grade submit kernels.layernorm_forward`.
 *
 * x, y: float32, rows x D, row-major; gamma, beta: D floats; mean, rstd: one
 * float per row.
 *     mean[row] = (1/D) sum_j x[row, j]
 *     var       = (1/D) sum_j (x[row, j] - mean[row])^2     (biased)
 *     rstd[row] = 1 / sqrt(var + eps)
 *     y[row, j] = (x[row, j] - mean[row]) * rstd[row] * gamma[j] + beta[j]
 *
 * Launch: one work-group of L work-items per row: global size rows * L,
 * local size L, scratch = L floats of __local memory. L is a power of two
 * chosen by the grader; D need NOT be a multiple of L (D may be smaller or
 * larger than L).
 *     row = get_group_id(0), lid = get_local_id(0)
 * [guided]
 * Hints:
 * 1. Two reductions over the row, each: strided partial sums over
 *    j = lid, lid + L, ... < D into scratch[lid], then a tree reduction in
 *    scratch with barrier(CLK_LOCAL_MEM_FENCE) between the halving steps
 *    (s = L/2, ..., 1: if (lid < s) scratch[lid] += scratch[lid + s]).
 *    First the sum of x (-> mean), then the sum of (x - mean)^2 (-> var):
 *    two passes are more accurate in float than E[x^2] - mean^2.
 * 2. Read scratch[0] and put a barrier before reusing scratch for the second
 *    reduction; every work-item must reach every barrier (no early return).
 * 3. Work-item 0 writes mean[row] and rstd[row]; every work-item writes its y
 *    elements in the strided loop.
 * [/guided]
 * Every work-item must reach every barrier (no early return before the last one).
 */
__kernel void layernorm_forward(__global const float *x, __global const float *gamma, __global const float *beta, __global float *y, __global float *mean, __global float *rstd, const int D, const float eps, __local float *scratch)
{
    /* TODO: implement */
}

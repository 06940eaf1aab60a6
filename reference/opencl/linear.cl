// Linear layer, float32, row-major: one tiled matrix product with local memory
// serves the forward pass and both gradients.
//
//   forward  y  = x W^T + b     matmul_tiled(A = x,  B = W, transA 0, transB 1, bias b)
//   backward dx = dy W          matmul_tiled(A = dy, B = W, transA 0, transB 0)
//            dW = dy^T x        matmul_tiled(A = dy, B = x, transA 1, transB 0)
//            db = sum of dy over rows          column_sum(dy)
//
// TILE (default 16) is set with -DTILE=...; a work-group is TILE x TILE.

#ifndef TILE
#define TILE 16
#endif

// C (M, N) = op(A) op(B) (+ bias[j] on every row when bias is not NULL), with
//   op(A)[i][p] = transA ? A[p * M + i] : A[i * K + p]    (A stored (K, M) or (M, K))
//   op(B)[p][j] = transB ? B[j * K + p] : B[p * N + j]    (B stored (N, K) or (K, N))
// Launch: global (ceil(N / TILE) * TILE, ceil(M / TILE) * TILE), local (TILE, TILE);
// dimension 0 runs over the columns j, dimension 1 over the rows i. Each
// work-group walks over K one TILE at a time: every work-item loads one value of
// each tile into local memory (0 past the edges, so M, N, K need not be
// multiples of TILE), then the group multiplies the two tiles.
__kernel void matmul_tiled(__global const float *A, __global const float *B,
                           __global const float *bias, __global float *C,
                           const int M, const int N, const int K,
                           const int transA, const int transB)
{
    __local float As[TILE][TILE];
    __local float Bs[TILE][TILE];
    const int tx = get_local_id(0);
    const int ty = get_local_id(1);
    const int j = get_group_id(0) * TILE + tx;
    const int i = get_group_id(1) * TILE + ty;

    float acc = 0.0f;
    for (int t = 0; t < K; t += TILE) {
        const int pa = t + tx;   // column of op(A) this work-item loads
        const int pb = t + ty;   // row of op(B) this work-item loads
        As[ty][tx] = (i < M && pa < K)
            ? (transA ? A[(size_t)pa * M + i] : A[(size_t)i * K + pa]) : 0.0f;
        Bs[ty][tx] = (pb < K && j < N)
            ? (transB ? B[(size_t)j * K + pb] : B[(size_t)pb * N + j]) : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int p = 0; p < TILE; ++p)
            acc += As[ty][p] * Bs[p][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (i < M && j < N)
        C[(size_t)i * N + j] = bias ? acc + bias[j] : acc;
}

// out[j] = sum over the M rows of A[i][j] (A is (M, N)); one work-item per column j
__kernel void column_sum(__global const float *A, __global float *out, const int M, const int N)
{
    const int j = get_global_id(0);
    if (j >= N) return;
    float s = 0.0f;
    for (int i = 0; i < M; ++i)
        s += A[(size_t)i * N + j];
    out[j] = s;
}

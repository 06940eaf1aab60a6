// RMSNorm over the last axis, float32, one work-group of L threads per row.
// Launch: global rows * L, local L (a power of two), scratch L floats.
// D need not be a multiple of L.
//
//   rstd = 1 / sqrt(mean(x^2) + eps),  y = x * rstd * gamma
//
// The sum of squares is a single pass over x (LayerNorm needs the mean
// first); the output pass reads the row again, from cache when it fits there.
// Rows with D % 4 == 0 are read and written as float4 (16-byte aligned: the
// buffers start aligned and every row starts at a multiple of 4 floats);
// other rows element by element.
//
// Which elements a work-item takes (FOR_ROW): by default the strided ones
// lid, lid + L, ... so that neighbouring work-items touch neighbouring words
// (coalesced on GPUs). Built with -DROW_CHUNKS=1 (CPU devices), each
// work-item takes one contiguous chunk, so each core streams whole cache lines.

#ifndef ROW_CHUNKS
#define ROW_CHUNKS 0
#endif

#if ROW_CHUNKS
#define FOR_ROW(j, n)                                                                 \
    for (int j##_len = ((n) + (int)get_local_size(0) - 1) / (int)get_local_size(0),  \
             j = (int)get_local_id(0) * j##_len, j##_end = min((int)(n), j + j##_len); \
         j < j##_end; ++j)
#else
#define FOR_ROW(j, n) \
    for (int j = (int)get_local_id(0); j < (n); j += (int)get_local_size(0))
#endif

// Sum of v over the work-group: tree reduction in scratch (L floats, L a
// power of two). Every work-item gets the total; scratch is free afterwards.
float block_sum(float v, __local float *scratch)
{
    const int lid = get_local_id(0);
    scratch[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {
        if (lid < s) scratch[lid] += scratch[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float total = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return total;
}

// Every barrier (block_sum) sits outside the D % 4 branches: with a barrier
// inside such a (uniform) branch, PoCL 3.0 corrupted memory at L = 256.

__kernel void rmsnorm_forward(__global const float *x, __global const float *gamma,
                              __global float *y, __global float *rstd,
                              const int D, const float eps, __local float *scratch)
{
    const int row = get_group_id(0);
    const int vec = (D & 3) == 0;
    __global const float *xr = x + (size_t)row * D;
    __global float *yr = y + (size_t)row * D;
    __global const float4 *x4 = (__global const float4 *)xr;

    float ss = 0.0f;
    if (vec) {
        float4 acc = 0.0f;
        FOR_ROW(j, D / 4) acc += x4[j] * x4[j];
        ss = (acc.x + acc.y) + (acc.z + acc.w);
    } else {
        FOR_ROW(j, D) ss += xr[j] * xr[j];
    }
    const float r = rsqrt(block_sum(ss, scratch) / (float)D + eps);
    if (get_local_id(0) == 0) rstd[row] = r;

    if (vec) {
        __global const float4 *g4 = (__global const float4 *)gamma;
        __global float4 *y4 = (__global float4 *)yr;
        FOR_ROW(j, D / 4) y4[j] = x4[j] * r * g4[j];
    } else {
        FOR_ROW(j, D) yr[j] = xr[j] * r * gamma[j];
    }
}

// dx for one row (launch as rmsnorm_forward), with xhat = x * rstd, g = dy * gamma:
//   dx = rstd * (g - xhat * mean(g * xhat))
// dgamma = sum over rows of dy * xhat is a column reduction (normalization.cl).
__kernel void rmsnorm_backward(__global const float *x, __global const float *gamma,
                               __global const float *dy, __global const float *rstd,
                               __global float *dx, const int D, __local float *scratch)
{
    const int row = get_group_id(0);
    const int vec = (D & 3) == 0;
    const size_t base = (size_t)row * D;
    const float r = rstd[row];
    __global const float4 *x4 = (__global const float4 *)(x + base);
    __global const float4 *dy4 = (__global const float4 *)(dy + base);
    __global const float4 *g4 = (__global const float4 *)gamma;

    float s = 0.0f;
    if (vec) {
        float4 acc = 0.0f;
        FOR_ROW(j, D / 4) acc += dy4[j] * g4[j] * x4[j];
        s = (acc.x + acc.y) + (acc.z + acc.w);
    } else {
        FOR_ROW(j, D) s += dy[base + j] * gamma[j] * x[base + j];
    }
    const float c = block_sum(s, scratch) * r * r / (float)D;   // mean(g * xhat) * rstd

    if (vec) {
        __global float4 *dx4 = (__global float4 *)(dx + base);
        FOR_ROW(j, D / 4) dx4[j] = r * (dy4[j] * g4[j] - x4[j] * c);
    } else {
        FOR_ROW(j, D) dx[base + j] = r * (dy[base + j] * gamma[j] - x[base + j] * c);
    }
}

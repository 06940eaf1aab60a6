// LayerNorm over the last axis (the trailing dims flattened to D), float32,
// one work-group of L threads per row.
// Launch: global rows * L, local L (a power of two), scratch L floats.
// D need not be a multiple of L.
//
//   mean = sum(x) / D,  var = sum((x - mean)^2) / D  (biased),
//   rstd = 1 / sqrt(var + eps),  y = (x - mean) * rstd * gamma + beta
//
// The statistics take one pass over the row with shifted sums: with K = the
// row's first value, s1 = sum(x - K), s2 = sum((x - K)^2), mean = K + s1/D,
// var = s2/D - (s1/D)^2. The shift keeps float32 free of the cancellation of
// sum(x^2)/D - mean^2 when |mean| >> std (K is within a few std of the mean).
// The output pass reads the row again, from cache when it fits there
// (16 KiB at D = 4096). Rows with D % 4 == 0 are read and written as float4
// (16-byte aligned); other rows element by element.
//
// Which elements a work-item takes (FOR_ROW): by default the strided ones
// lid, lid + L, ... (coalesced on GPUs); built with -DROW_CHUNKS=1 (CPU
// devices), one contiguous chunk per work-item, so each core streams whole
// cache lines.

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

float sum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }

// Every barrier (block_sum) sits outside the D % 4 branches: with a barrier
// inside such a (uniform) branch, PoCL 3.0 corrupted memory at L = 256.

__kernel void layernorm_forward(__global const float *x, __global const float *gamma,
                                __global const float *beta, __global float *y,
                                __global float *mean, __global float *rstd,
                                const int D, const float eps, __local float *scratch)
{
    const int row = get_group_id(0);
    const int vec = (D & 3) == 0;
    __global const float *xr = x + (size_t)row * D;
    __global float *yr = y + (size_t)row * D;
    __global const float4 *x4 = (__global const float4 *)xr;
    const float K = xr[0];

    float s1 = 0.0f, s2 = 0.0f;
    if (vec) {
        float4 acc1 = 0.0f, acc2 = 0.0f;
        FOR_ROW(j, D / 4) {
            const float4 d = x4[j] - K;
            acc1 += d;
            acc2 += d * d;
        }
        s1 = sum4(acc1);
        s2 = sum4(acc2);
    } else {
        FOR_ROW(j, D) {
            const float d = xr[j] - K;
            s1 += d;
            s2 += d * d;
        }
    }
    const float d1 = block_sum(s1, scratch) / (float)D;
    const float d2 = block_sum(s2, scratch) / (float)D;
    const float mu = K + d1;
    const float r = rsqrt(fmax(d2 - d1 * d1, 0.0f) + eps);
    if (get_local_id(0) == 0) {
        mean[row] = mu;
        rstd[row] = r;
    }

    if (vec) {
        __global const float4 *g4 = (__global const float4 *)gamma;
        __global const float4 *b4 = (__global const float4 *)beta;
        __global float4 *y4 = (__global float4 *)yr;
        FOR_ROW(j, D / 4) y4[j] = (x4[j] - mu) * r * g4[j] + b4[j];
    } else {
        FOR_ROW(j, D) yr[j] = (xr[j] - mu) * r * gamma[j] + beta[j];
    }
}

// dx for one row (launch as layernorm_forward, scratch 2L floats), with
// xhat = (x - mean) * rstd and g = dy * gamma:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
// dgamma, dbeta are column reductions over rows (normalization.cl).
__kernel void layernorm_backward(__global const float *x, __global const float *gamma,
                                 __global const float *dy, __global const float *mean,
                                 __global const float *rstd, __global float *dx,
                                 const int D, __local float *scratch)
{
    const int row = get_group_id(0);
    const int vec = (D & 3) == 0;
    const size_t base = (size_t)row * D;
    const float mu = mean[row];
    const float r = rstd[row];
    __global const float4 *x4 = (__global const float4 *)(x + base);
    __global const float4 *dy4 = (__global const float4 *)(dy + base);
    __global const float4 *g4 = (__global const float4 *)gamma;

    float sg = 0.0f, sgx = 0.0f;
    if (vec) {
        float4 acc_g = 0.0f, acc_gx = 0.0f;
        FOR_ROW(j, D / 4) {
            const float4 g = dy4[j] * g4[j];
            acc_g += g;
            acc_gx += g * (x4[j] - mu) * r;
        }
        sg = sum4(acc_g);
        sgx = sum4(acc_gx);
    } else {
        FOR_ROW(j, D) {
            const float g = dy[base + j] * gamma[j];
            sg += g;
            sgx += g * (x[base + j] - mu) * r;
        }
    }
    const float mean_g = block_sum(sg, scratch) / (float)D;
    const float mean_gx = block_sum(sgx, scratch + get_local_size(0)) / (float)D;

    if (vec) {
        __global float4 *dx4 = (__global float4 *)(dx + base);
        FOR_ROW(j, D / 4) dx4[j] = r * (dy4[j] * g4[j] - mean_g - (x4[j] - mu) * r * mean_gx);
    } else {
        FOR_ROW(j, D) dx[base + j] = r * (dy[base + j] * gamma[j] - mean_g - (x[base + j] - mu) * r * mean_gx);
    }
}

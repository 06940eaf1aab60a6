// BatchNorm, GroupNorm and InstanceNorm (forward and backward), and the
// column reductions that give dgamma/dbeta for every normalisation, float32.
//
// Layout: x is viewed as (N, C, S), row-major, S = product of the spatial
// dims (S = 1 for an (N, C) input). Element (n, c, s) is x[(n * C + c) * S + s].
//
// Column reductions (BatchNorm statistics, dgamma/dbeta of all layers) run in
// two steps: partial sums over blocks of R rows into part[p, c] (P = N / R
// blocks), then a finalize kernel (one work-group) adds the P partial sums.
// For S = 1 and C % 4 == 0 a work-group takes a block of rows and streams it
// row after row, each work-item owning a share of the float4 columns
// (*_rows4 kernels); otherwise work-item (c, p) walks its channel through the
// block (contiguous runs of S values).
//
// Elementwise passes give one work-group to each row of C channels (S = 1)
// or to each plane of S values of one channel (S > 1).
//
// GroupNorm/InstanceNorm give one work-group of L threads to each (sample,
// group): a contiguous row of M = (C / G) * S values, tree-reduced in local
// memory. InstanceNorm is GroupNorm with G = C.

// Which row elements a work-item takes (FOR_ROW, as in rmsnorm.cl): strided
// lid, lid + L, ... by default (GPUs); one contiguous chunk per work-item
// with -DROW_CHUNKS=1 (CPU devices).
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

float sum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }

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

// ---------------------------------------------------------------- BatchNorm

// Partial shifted sums per channel, with K = x[0, c, 0]:
//   s1 = sum(x - K), s2 = sum((x - K)^2) over rows [p R, (p + 1) R) and all s.
// The shift keeps var = s2/m - (s1/m)^2 free of cancellation when |mean| >> std.
// Any S; global (C, P).
__kernel void batchnorm_stats_partial(__global const float *x,
                                      __global float *part_s1, __global float *part_s2,
                                      const int N, const int C, const int S, const int R)
{
    const int c = get_global_id(0);
    const int p = get_global_id(1);
    if (c >= C) return;
    const float K = x[(size_t)c * S];
    const int n_end = min(N, (p + 1) * R);
    float s1 = 0.0f, s2 = 0.0f;
    for (int n = p * R; n < n_end; ++n) {
        __global const float *xs = x + ((size_t)n * C + c) * S;
        for (int s = 0; s < S; ++s) {
            const float d = xs[s] - K;
            s1 += d;
            s2 += d * d;
        }
    }
    part_s1[(size_t)p * C + c] = s1;
    part_s2[(size_t)p * C + c] = s2;
}

// The same for x (N, C), C % 4 == 0, by row blocks: work-group p streams rows
// [p R, (p + 1) R), each work-item accumulating its float4 columns in
// part[p, :] (no barrier: every work-item owns its columns). Global P L, local L.
__kernel void batchnorm_stats_rows4(__global const float4 *x,
                                    __global float4 *part_s1, __global float4 *part_s2,
                                    const int N, const int C4, const int R)
{
    const int p = get_group_id(0);
    const int n_end = min(N, (p + 1) * R);
    __global float4 *s1 = part_s1 + (size_t)p * C4;
    __global float4 *s2 = part_s2 + (size_t)p * C4;
    FOR_ROW(j, C4) {
        s1[j] = 0.0f;
        s2[j] = 0.0f;
    }
    for (int n = p * R; n < n_end; ++n) {
        __global const float4 *xr = x + (size_t)n * C4;
        FOR_ROW(j, C4) {
            const float4 d = xr[j] - x[j];   // shift: row 0
            s1[j] += d;
            s2[j] += d * d;
        }
    }
}

// mean = K + s1/m, var = s2/m - (s1/m)^2 (biased), rstd = 1/sqrt(var + eps);
// running = (1 - momentum) running + momentum * stat, with the unbiased
// variance m/(m-1) var for running_var. One work-group: global L, local L.
__kernel void batchnorm_stats_finalize(__global const float *x,
                                       __global const float *part_s1, __global const float *part_s2,
                                       __global float *mean, __global float *rstd,
                                       __global float *running_mean, __global float *running_var,
                                       const int P, const int C, const int S, const int m,
                                       const float eps, const float momentum)
{
    FOR_ROW(c, C) {
        float s1 = 0.0f, s2 = 0.0f;
        for (int p = 0; p < P; ++p) {
            s1 += part_s1[(size_t)p * C + c];
            s2 += part_s2[(size_t)p * C + c];
        }
        const float d = s1 / (float)m;
        const float var = fmax(s2 / (float)m - d * d, 0.0f);
        const float mu = x[(size_t)c * S] + d;
        mean[c] = mu;
        rstd[c] = rsqrt(var + eps);
        running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * mu;
        running_var[c] = (1.0f - momentum) * running_var[c]
                         + momentum * var * ((float)m / (float)(m - 1));
    }
}

// Eval mode: mean = running_mean, rstd = 1/sqrt(running_var + eps). Global C.
__kernel void batchnorm_eval_stats(__global const float *running_mean,
                                   __global const float *running_var,
                                   __global float *mean, __global float *rstd,
                                   const int C, const float eps)
{
    const int c = get_global_id(0);
    if (c >= C) return;
    mean[c] = running_mean[c];
    rstd[c] = rsqrt(running_var[c] + eps);
}

// y = (x - mean[c]) * rstd[c] * gamma[c] + beta[c], x (N, C): one work-group
// per row n (global N L, local L); float4 when C % 4 == 0.
__kernel void batchnorm_forward_rows(__global const float *x,
                                     __global const float *mean, __global const float *rstd,
                                     __global const float *gamma, __global const float *beta,
                                     __global float *y, const int C)
{
    const size_t base = (size_t)get_group_id(0) * C;
    if ((C & 3) == 0) {
        __global const float4 *x4 = (__global const float4 *)(x + base);
        __global const float4 *m4 = (__global const float4 *)mean;
        __global const float4 *r4 = (__global const float4 *)rstd;
        __global const float4 *g4 = (__global const float4 *)gamma;
        __global const float4 *b4 = (__global const float4 *)beta;
        __global float4 *y4 = (__global float4 *)(y + base);
        FOR_ROW(j, C / 4) y4[j] = (x4[j] - m4[j]) * r4[j] * g4[j] + b4[j];
    } else {
        FOR_ROW(j, C) y[base + j] = (x[base + j] - mean[j]) * rstd[j] * gamma[j] + beta[j];
    }
}

// The same for x (N, C, S), S > 1: one work-group per plane (n, c) of S values
// (global N C L, local L), c = plane % C; float4 when S % 4 == 0.
__kernel void batchnorm_forward_planes(__global const float *x,
                                       __global const float *mean, __global const float *rstd,
                                       __global const float *gamma, __global const float *beta,
                                       __global float *y, const int C, const int S)
{
    const int plane = get_group_id(0);
    const int c = plane % C;
    const size_t base = (size_t)plane * S;
    const float mu = mean[c];
    const float a = rstd[c] * gamma[c];
    const float b = beta[c];
    if ((S & 3) == 0) {
        __global const float4 *x4 = (__global const float4 *)(x + base);
        __global float4 *y4 = (__global float4 *)(y + base);
        FOR_ROW(j, S / 4) y4[j] = (x4[j] - mu) * a + b;
    } else {
        FOR_ROW(j, S) y[base + j] = (x[base + j] - mu) * a + b;
    }
}

// dx = gamma rstd (dy - a - xhat b), xhat = (x - mean) rstd, with
// a = dbeta/m, b = dgamma/m in training (the gradient through the batch
// statistics) and a = b = 0 in eval. x (N, C): one work-group per row n.
__kernel void batchnorm_backward_rows(__global const float *x, __global const float *dy,
                                      __global const float *mean, __global const float *rstd,
                                      __global const float *gamma,
                                      __global const float *dgamma, __global const float *dbeta,
                                      __global float *dx, const int C, const int m,
                                      const int training)
{
    const size_t base = (size_t)get_group_id(0) * C;
    const float t = training ? 1.0f / (float)m : 0.0f;
    if ((C & 3) == 0) {
        __global const float4 *x4 = (__global const float4 *)(x + base);
        __global const float4 *dy4 = (__global const float4 *)(dy + base);
        __global const float4 *m4 = (__global const float4 *)mean;
        __global const float4 *r4 = (__global const float4 *)rstd;
        __global const float4 *g4 = (__global const float4 *)gamma;
        __global const float4 *dg4 = (__global const float4 *)dgamma;
        __global const float4 *db4 = (__global const float4 *)dbeta;
        __global float4 *dx4 = (__global float4 *)(dx + base);
        FOR_ROW(j, C / 4) {
            const float4 r = r4[j];
            dx4[j] = g4[j] * r * (dy4[j] - db4[j] * t - (x4[j] - m4[j]) * r * dg4[j] * t);
        }
    } else {
        FOR_ROW(j, C) {
            const float r = rstd[j];
            dx[base + j] = gamma[j] * r * (dy[base + j] - dbeta[j] * t - (x[base + j] - mean[j]) * r * dgamma[j] * t);
        }
    }
}

// The same for x (N, C, S), S > 1: one work-group per plane (n, c).
__kernel void batchnorm_backward_planes(__global const float *x, __global const float *dy,
                                        __global const float *mean, __global const float *rstd,
                                        __global const float *gamma,
                                        __global const float *dgamma, __global const float *dbeta,
                                        __global float *dx, const int C, const int S, const int m,
                                        const int training)
{
    const int plane = get_group_id(0);
    const int c = plane % C;
    const size_t base = (size_t)plane * S;
    const float t = training ? 1.0f / (float)m : 0.0f;
    const float mu = mean[c];
    const float r = rstd[c];
    const float gr = gamma[c] * r;
    const float a = dbeta[c] * t;
    const float b = dgamma[c] * t * r;
    if ((S & 3) == 0) {
        __global const float4 *x4 = (__global const float4 *)(x + base);
        __global const float4 *dy4 = (__global const float4 *)(dy + base);
        __global float4 *dx4 = (__global float4 *)(dx + base);
        FOR_ROW(j, S / 4) dx4[j] = gr * (dy4[j] - a - (x4[j] - mu) * b);
    } else {
        FOR_ROW(j, S) dx[base + j] = gr * (dy[base + j] - a - (x[base + j] - mu) * b);
    }
}

// ------------------------------------------------- dgamma, dbeta (all layers)

// Partial sums per channel c over rows [p R, (p + 1) R) and all s:
//   sum(dy * xhat) and sum(dy), xhat = (x - mean[k]) * rstd[k],
// with the statistics index k = n * stat_n + c / Cg:
//   BatchNorm  stat_n = 0, Cg = 1       (k = c)
//   GroupNorm  stat_n = G, Cg = C / G   (k = n G + group of c)
//   LayerNorm  stat_n = 1, Cg = C (= D) (k = n, one row per sample)
// has_mean = 0 (RMSNorm) treats mean as 0. Any S; global (C, P).
__kernel void channel_grad_partial(__global const float *x, __global const float *dy,
                                   __global const float *mean, __global const float *rstd,
                                   __global float *part_g, __global float *part_b,
                                   const int N, const int C, const int S, const int R,
                                   const int Cg, const int stat_n, const int has_mean)
{
    const int c = get_global_id(0);
    const int p = get_global_id(1);
    if (c >= C) return;
    const int group = c / Cg;
    const int n_end = min(N, (p + 1) * R);
    float sg = 0.0f, sb = 0.0f;
    for (int n = p * R; n < n_end; ++n) {
        const int k = n * stat_n + group;
        const float mu = has_mean ? mean[k] : 0.0f;
        const float r = rstd[k];
        const size_t base = ((size_t)n * C + c) * S;
        for (int s = 0; s < S; ++s) {
            const float g = dy[base + s];
            sg += g * (x[base + s] - mu) * r;
            sb += g;
        }
    }
    part_g[(size_t)p * C + c] = sg;
    part_b[(size_t)p * C + c] = sb;
}

// The same for S = 1 and C % 4 == 0 by row blocks (as batchnorm_stats_rows4):
// per_row = 1 takes the statistics of row n (LayerNorm, RMSNorm), per_row = 0
// those of each column (BatchNorm1d). Global P L, local L.
__kernel void column_grad_rows4(__global const float4 *x, __global const float4 *dy,
                                __global const float *mean, __global const float *rstd,
                                __global float4 *part_g, __global float4 *part_b,
                                const int N, const int C4, const int R,
                                const int per_row, const int has_mean)
{
    const int p = get_group_id(0);
    const int n_end = min(N, (p + 1) * R);
    __global float4 *pg = part_g + (size_t)p * C4;
    __global float4 *pb = part_b + (size_t)p * C4;
    __global const float4 *m4 = (__global const float4 *)mean;
    __global const float4 *r4 = (__global const float4 *)rstd;
    FOR_ROW(j, C4) {
        pg[j] = 0.0f;
        pb[j] = 0.0f;
    }
    for (int n = p * R; n < n_end; ++n) {
        const float mu_n = (per_row && has_mean) ? mean[n] : 0.0f;
        const float r_n = per_row ? rstd[n] : 0.0f;
        __global const float4 *xr = x + (size_t)n * C4;
        __global const float4 *dyr = dy + (size_t)n * C4;
        FOR_ROW(j, C4) {
            const float4 mu = per_row ? (float4)(mu_n) : (has_mean ? m4[j] : (float4)(0.0f));
            const float4 r = per_row ? (float4)(r_n) : r4[j];
            const float4 g = dyr[j];
            pg[j] += g * (xr[j] - mu) * r;
            pb[j] += g;
        }
    }
}

// dgamma[c] = sum_p part_g[p, c], dbeta[c] = sum_p part_b[p, c].
// One work-group: global L, local L.
__kernel void channel_grad_finalize(__global const float *part_g, __global const float *part_b,
                                    __global float *dgamma, __global float *dbeta,
                                    const int P, const int C)
{
    FOR_ROW(c, C) {
        float sg = 0.0f, sb = 0.0f;
        for (int p = 0; p < P; ++p) {
            sg += part_g[(size_t)p * C + c];
            sb += part_b[(size_t)p * C + c];
        }
        dgamma[c] = sg;
        dbeta[c] = sb;
    }
}

// ------------------------------------------------ GroupNorm / InstanceNorm

// One work-group per row = (n, g): M = Cg * S contiguous values; element
// k S + s of row n G + g belongs to channel g Cg + k.
//   mean = sum(x)/M, var = sum((x - mean)^2)/M, rstd = 1/sqrt(var + eps),
//   y = (x - mean) rstd gamma[c] + beta[c],
// the statistics in one pass of shifted sums (K = the row's first value).
// Launch: global (N G) L, local L, scratch L floats. With S % 4 == 0 every
// channel block is float4-aligned and read as float4. Barriers (block_sum)
// stay outside the S % 4 branches (see rmsnorm.cl).
__kernel void groupnorm_forward(__global const float *x, __global const float *gamma,
                                __global const float *beta, __global float *y,
                                __global float *mean, __global float *rstd,
                                const int M, const int S, const int Cg, const int G,
                                const float eps, __local float *scratch)
{
    const int row = get_group_id(0);
    const int vec = (S & 3) == 0;
    const int c0 = (row % G) * Cg;
    __global const float *xr = x + (size_t)row * M;
    __global float *yr = y + (size_t)row * M;
    __global const float4 *x4 = (__global const float4 *)xr;
    __global float4 *y4 = (__global float4 *)yr;

    const float K = xr[0];   // shift, as in layernorm.cl: one pass for both sums
    float s1 = 0.0f, s2 = 0.0f;
    if (vec) {
        float4 acc1 = 0.0f, acc2 = 0.0f;
        FOR_ROW(j, M / 4) {
            const float4 d = x4[j] - K;
            acc1 += d;
            acc2 += d * d;
        }
        s1 = sum4(acc1);
        s2 = sum4(acc2);
    } else {
        FOR_ROW(j, M) {
            const float d = xr[j] - K;
            s1 += d;
            s2 += d * d;
        }
    }
    const float d1 = block_sum(s1, scratch) / (float)M;
    const float d2 = block_sum(s2, scratch) / (float)M;
    const float mu = K + d1;
    const float r = rsqrt(fmax(d2 - d1 * d1, 0.0f) + eps);
    if (get_local_id(0) == 0) {
        mean[row] = mu;
        rstd[row] = r;
    }

    for (int k = 0; k < Cg; ++k) {
        const float a = r * gamma[c0 + k];
        const float b = beta[c0 + k];
        if (vec) {
            FOR_ROW(j, S / 4) y4[k * (S / 4) + j] = (x4[k * (S / 4) + j] - mu) * a + b;
        } else {
            FOR_ROW(j, S) yr[k * S + j] = (xr[k * S + j] - mu) * a + b;
        }
    }
}

// dx per row (n, g), g = dy gamma[c], xhat = (x - mean) rstd:
//   dx = rstd (g - mean(g) - xhat mean(g xhat)).
// Launch as groupnorm_forward, scratch 2L floats.
__kernel void groupnorm_backward(__global const float *x, __global const float *gamma,
                                 __global const float *dy, __global const float *mean,
                                 __global const float *rstd, __global float *dx,
                                 const int M, const int S, const int Cg, const int G,
                                 __local float *scratch)
{
    const int row = get_group_id(0);
    const int vec = (S & 3) == 0;
    const int c0 = (row % G) * Cg;
    const size_t base = (size_t)row * M;
    const float mu = mean[row];
    const float r = rstd[row];
    __global const float4 *x4 = (__global const float4 *)(x + base);
    __global const float4 *dy4 = (__global const float4 *)(dy + base);
    __global float4 *dx4 = (__global float4 *)(dx + base);

    float sg = 0.0f, sgx = 0.0f;
    for (int k = 0; k < Cg; ++k) {
        const float gk = gamma[c0 + k];
        if (vec) {
            float4 acc_g = 0.0f, acc_gx = 0.0f;
            FOR_ROW(j, S / 4) {
                const int i = k * (S / 4) + j;
                const float4 g = dy4[i] * gk;
                acc_g += g;
                acc_gx += g * (x4[i] - mu) * r;
            }
            sg += sum4(acc_g);
            sgx += sum4(acc_gx);
        } else {
            FOR_ROW(j, S) {
                const size_t i = base + k * S + j;
                const float g = dy[i] * gk;
                sg += g;
                sgx += g * (x[i] - mu) * r;
            }
        }
    }
    const float mean_g = block_sum(sg, scratch) / (float)M;
    const float mean_gx = block_sum(sgx, scratch + get_local_size(0)) / (float)M;

    for (int k = 0; k < Cg; ++k) {
        const float gk = gamma[c0 + k];
        if (vec) {
            FOR_ROW(j, S / 4) {
                const int i = k * (S / 4) + j;
                dx4[i] = r * (dy4[i] * gk - mean_g - (x4[i] - mu) * r * mean_gx);
            }
        } else {
            FOR_ROW(j, S) {
                const size_t i = base + k * S + j;
                dx[i] = r * (dy[i] * gk - mean_g - (x[i] - mu) * r * mean_gx);
            }
        }
    }
}

// Inverted dropout, float32, one work-item per element (global n).
// u holds uniform draws in [0, 1); an element is kept where u >= p and then
// scaled by 1 / (1 - p). p = 1 drops everything and gives exact zeros (no NaN).

__kernel void dropout_forward(__global const float *x, __global const float *u,
                              __global float *y, const float p, const int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const int keep = (u[i] >= p) && (p < 1.0f);
    y[i] = keep ? x[i] / (1.0f - p) : 0.0f;
}

// ---------------------------------------------------------------------------
// Dropout with a stateless counter-based generator: Philox4x32-10 from
// Random123 (bundled with pyopencl, which puts its header folder on the
// include path of every build).
//
// One Philox call gives four 32-bit words, so elements come in blocks of four:
// element i uses word i % 4 of
//     philox4x32_10(counter = (i / 4, call, 0, DROPOUT_STREAM), key = (seed_lo, seed_hi)).
// The mask is a function of (seed, call, i) only: it does not depend on the
// device, the local size or the number of threads, and the backward pass
// regenerates it from the same key and counter instead of storing it.
//   u = (word >> 8) * 2^-24 in [0, 1) (24 bits: exact in float32)
//   keep where u >= p; y = x / (1 - p) where kept, else 0 (p = 1 keeps nothing).
// Launch: one work-item per block of four, global >= (n + 3) / 4.

#include <pyopencl-random123/philox.cl>

#define DROPOUT_STREAM 0x64726f70u  /* "drop": keeps these draws apart from init.cl's */

// The top 24 bits of a 32-bit word as a float in [0, 1)
inline float philox_unit_float(const uint word)
{
    return (float)(word >> 8) * (1.0f / 16777216.0f);
}

// The four draws of block b for (seed, call)
inline philox4x32_ctr_t dropout_block(const uint b, const uint seed_lo, const uint seed_hi,
                                      const uint call)
{
    const philox4x32_ctr_t counter = {{b, call, 0u, DROPOUT_STREAM}};
    const philox4x32_key_t key = {{seed_lo, seed_hi}};
    return philox4x32(counter, key);
}

// out = in * [u >= p] / (1 - p) on the block of four of this work-item
inline void dropout_philox_apply(__global const float *in, __global float *out, const float p,
                                 const uint seed_lo, const uint seed_hi, const uint call,
                                 const int n)
{
    const int b = get_global_id(0);
    const int first = 4 * b;
    if (b >= (n + 3) / 4) return;
    const philox4x32_ctr_t r = dropout_block((uint)b, seed_lo, seed_hi, call);
    const float keep_scale = 1.0f - p;
    for (int w = 0; w < 4 && first + w < n; ++w) {
        const int i = first + w;
        out[i] = philox_unit_float(r.v[w]) >= p ? in[i] / keep_scale : 0.0f;
    }
}

// y = x * mask / (1 - p), the mask drawn from (seed, call)
__kernel void dropout_philox_forward(__global const float *x, __global float *y, const float p,
                                     const uint seed_lo, const uint seed_hi, const uint call,
                                     const int n)
{
    dropout_philox_apply(x, y, p, seed_lo, seed_hi, call, n);
}

// dx = dy * mask / (1 - p), the same mask regenerated from (seed, call)
__kernel void dropout_philox_backward(__global const float *dy, __global float *dx,
                                      const float p, const uint seed_lo, const uint seed_hi,
                                      const uint call, const int n)
{
    dropout_philox_apply(dy, dx, p, seed_lo, seed_hi, call, n);
}

// u[i] = the uniform draw that decides element i (for inspection and for
// dropout_forward(x, u, y, p, n), which then gives the same y)
__kernel void dropout_philox_uniform(__global float *u, const uint seed_lo, const uint seed_hi,
                                     const uint call, const int n)
{
    const int b = get_global_id(0);
    const int first = 4 * b;
    if (b >= (n + 3) / 4) return;
    const philox4x32_ctr_t r = dropout_block((uint)b, seed_lo, seed_hi, call);
    for (int w = 0; w < 4 && first + w < n; ++w)
        u[first + w] = philox_unit_float(r.v[w]);
}

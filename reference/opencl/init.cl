// Weight initialisers drawn on the device with Philox4x32-10 (Random123,
// bundled with pyopencl, whose header folder is on every build's include path).
//
// Elements come in blocks of four: block b = i / 4 uses the four words of
//     philox4x32_10(counter = (b, 0, 0, stream), key = (seed_lo, seed_hi)),
// so W is a function of the seed and the element index only (not of the
// device, the local size or the thread count).
//   uniform:  u = (word >> 8) * 2^-24 in [0, 1);  w = bound * (2u - 1) in [-bound, bound)
//   normal:   Box-Muller on two words: u1 = ((word0 >> 8) + 1) * 2^-24 in (0, 1],
//             u2 = (word1 >> 8) * 2^-24, r = sqrt(-2 ln u1),
//             w = std * r * cos(2 pi u2), next w = std * r * sin(2 pi u2)
// Launch: one work-item per block of four, global >= (n + 3) / 4.

#include <pyopencl-random123/philox.cl>

#define UNIFORM_STREAM 0x756e6966u  /* "unif" */
#define NORMAL_STREAM 0x6e6f726du   /* "norm" */
#define TWO_POW_M24 (1.0f / 16777216.0f)

inline philox4x32_ctr_t init_block(const uint b, const uint stream, const uint seed_lo,
                                   const uint seed_hi)
{
    const philox4x32_ctr_t counter = {{b, 0u, 0u, stream}};
    const philox4x32_key_t key = {{seed_lo, seed_hi}};
    return philox4x32(counter, key);
}

// The raw generator: out[4k .. 4k+3] = philox4x32_10(ctr[4k .. 4k+3], key[2k .. 2k+1]),
// k < m (one work-item per k). Used to check the known-answer vectors.
__kernel void philox4x32_10(__global const uint *ctr, __global const uint *key,
                            __global uint *out, const int m)
{
    const int k = get_global_id(0);
    if (k >= m) return;
    const philox4x32_ctr_t c = {{ctr[4 * k], ctr[4 * k + 1], ctr[4 * k + 2], ctr[4 * k + 3]}};
    const philox4x32_key_t kk = {{key[2 * k], key[2 * k + 1]}};
    const philox4x32_ctr_t r = philox4x32(c, kk);
    for (int w = 0; w < 4; ++w) out[4 * k + w] = r.v[w];
}

// w[i] = bound * (2 u_i - 1), u_i in [0, 1) with 24 random bits
__kernel void init_uniform(__global float *w, const float bound, const uint seed_lo,
                           const uint seed_hi, const int n)
{
    const int b = get_global_id(0);
    const int first = 4 * b;
    if (b >= (n + 3) / 4) return;
    const philox4x32_ctr_t r = init_block((uint)b, UNIFORM_STREAM, seed_lo, seed_hi);
    for (int j = 0; j < 4 && first + j < n; ++j) {
        const float u = (float)(r.v[j] >> 8) * TWO_POW_M24;
        w[first + j] = bound * (2.0f * u - 1.0f);
    }
}

// w[i] ~ N(0, std^2) by Box-Muller: words (0, 1) give w[4b], w[4b+1]; words (2, 3) the next two
__kernel void init_normal(__global float *w, const float std, const uint seed_lo,
                          const uint seed_hi, const int n)
{
    const int b = get_global_id(0);
    const int first = 4 * b;
    if (b >= (n + 3) / 4) return;
    const philox4x32_ctr_t r = init_block((uint)b, NORMAL_STREAM, seed_lo, seed_hi);
    float z[4];
    for (int h = 0; h < 2; ++h) {
        const float u1 = (float)((r.v[2 * h] >> 8) + 1u) * TWO_POW_M24;   // (0, 1]: log is finite
        const float u2 = (float)(r.v[2 * h + 1] >> 8) * TWO_POW_M24;
        const float radius = sqrt(-2.0f * log(u1));
        z[2 * h] = radius * cospi(2.0f * u2);
        z[2 * h + 1] = radius * sinpi(2.0f * u2);
    }
    for (int j = 0; j < 4 && first + j < n; ++j) w[first + j] = std * z[j];
}

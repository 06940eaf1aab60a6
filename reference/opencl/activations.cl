// Elementwise activations, float32, one work-item per element (global n).
// Each kernel guards its index: the global size may be rounded up past n.

#define INV_SQRT2 0.70710678118654752440f
#define INV_SQRT_2PI 0.39894228040143267794f

// y = max(0, x)
__kernel void relu_forward(__global const float *x, __global float *y, const int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    y[i] = fmax(x[i], 0.0f);
}

// dx = dy where x > 0, else 0 (the derivative at 0 is 0)
__kernel void relu_backward(__global const float *x, __global const float *dy,
                            __global float *dx, const int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

// y = x * Phi(x), Phi(x) = (1 + erf(x / sqrt(2))) / 2  (exact GELU)
__kernel void gelu_forward(__global const float *x, __global float *y, const int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + erf(v * INV_SQRT2));
}

// dx = dy * (Phi(x) + x * phi(x)), phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
__kernel void gelu_backward(__global const float *x, __global const float *dy,
                            __global float *dx, const int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const float v = x[i];
    const float cdf = 0.5f * (1.0f + erf(v * INV_SQRT2));
    const float pdf = INV_SQRT_2PI * exp(-0.5f * v * v);
    dx[i] = dy[i] * (cdf + v * pdf);
}

// ---------------------------------------------------------------------------
// The eight activations of spec section 3, forward then backward. Scalar
// hyper-parameters come before n. Backward kernels of Sigmoid and Tanh take
// the forward output y (their derivative is a function of y).

#define SQRT_2_OVER_PI 0.79788456080286535588f
#define GELU_TANH_C 0.044715f

// sigma(x) = 1 / (1 + e^-x) through z = e^-|x|, so that nothing overflows
inline float stable_sigmoid(const float v)
{
    const float z = exp(-fabs(v));
    return v >= 0.0f ? 1.0f / (1.0f + z) : z / (1.0f + z);
}

// y = sigma(x)
__kernel void sigmoid_forward(__global const float *x, __global float *y, const int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    y[i] = stable_sigmoid(x[i]);
}

// dx = dy * y * (1 - y), y = sigma(x) from the forward pass
__kernel void sigmoid_backward(__global const float *y, __global const float *dy,
                               __global float *dx, const int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    dx[i] = dy[i] * y[i] * (1.0f - y[i]);
}

// y = tanh(x)
__kernel void tanh_forward(__global const float *x, __global float *y, const int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    y[i] = tanh(x[i]);
}

// dx = dy * (1 - y^2), y = tanh(x) from the forward pass
__kernel void tanh_backward(__global const float *y, __global const float *dy,
                            __global float *dx, const int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

// y = x if x > 0 else slope * x
__kernel void leaky_relu_forward(__global const float *x, __global float *y,
                                 const float slope, const int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const float v = x[i];
    y[i] = v > 0.0f ? v : slope * v;
}

// dx = dy if x > 0 else slope * dy (slope at x = 0)
__kernel void leaky_relu_backward(__global const float *x, __global const float *dy,
                                  __global float *dx, const float slope, const int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    dx[i] = x[i] > 0.0f ? dy[i] : slope * dy[i];
}

// PReLU on x viewed as (outer, C, inner): element i is in channel (i / inner) % C.
// One shared alpha is C = 1, inner = 1.
//   y = x if x > 0 else alpha[c] * x
__kernel void prelu_forward(__global const float *x, __global const float *alpha,
                            __global float *y, const int C, const int inner, const int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const float v = x[i];
    y[i] = v > 0.0f ? v : alpha[(i / inner) % C] * v;
}

// dx = dy if x > 0 else alpha[c] * dy
__kernel void prelu_backward(__global const float *x, __global const float *alpha,
                             __global const float *dy, __global float *dx,
                             const int C, const int inner, const int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    dx[i] = x[i] > 0.0f ? dy[i] : alpha[(i / inner) % C] * dy[i];
}

// dalpha[c] = sum of dy * x over the elements of channel c where x <= 0.
// One work-group of L threads (a power of two) per channel: global C * L,
// local L, scratch L floats. Channel c holds outer * inner elements.
__kernel void prelu_dalpha(__global const float *x, __global const float *dy,
                           __global float *dalpha, const int C, const int inner,
                           const int outer, __local float *scratch)
{
    const int c = get_group_id(0);
    const int lid = get_local_id(0);
    const int L = get_local_size(0);
    const int count = outer * inner;

    float s = 0.0f;
    for (int j = lid; j < count; j += L) {
        const size_t i = ((size_t)(j / inner) * C + c) * inner + (j % inner);
        const float v = x[i];
        if (v <= 0.0f) s += dy[i] * v;
    }
    scratch[lid] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = L / 2; h > 0; h >>= 1) {
        if (lid < h) scratch[lid] += scratch[lid + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) dalpha[c] = scratch[0];
}

// y = x if x > 0 else alpha * (e^x - 1)   (expm1 of min(x, 0): no overflow)
__kernel void elu_forward(__global const float *x, __global float *y,
                          const float alpha, const int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const float v = x[i];
    y[i] = v > 0.0f ? v : alpha * expm1(fmin(v, 0.0f));
}

// dx = dy if x > 0 else dy * alpha * e^x
__kernel void elu_backward(__global const float *x, __global const float *dy,
                           __global float *dx, const float alpha, const int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const float v = x[i];
    dx[i] = v > 0.0f ? dy[i] : dy[i] * alpha * exp(fmin(v, 0.0f));
}

// GELU, approximate="tanh": y = 0.5 x (1 + tanh(z)), z = sqrt(2/pi) (x + 0.044715 x^3).
// Written with 0.5 (1 + tanh(z)) = sigma(2z) and 0.5 (1 - tanh(z)^2) = 2 sigma(2z) sigma(-2z),
// which are the same numbers without the cancellation of 1 + tanh(z) when z << 0.
__kernel void gelu_tanh_forward(__global const float *x, __global float *y, const int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const float v = x[i];
    const float z = SQRT_2_OVER_PI * (v + GELU_TANH_C * v * v * v);
    y[i] = v * stable_sigmoid(2.0f * z);
}

// dx = dy * (0.5 (1 + t) + 0.5 x (1 - t^2) dz/dx), t = tanh(z), dz/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
//    = dy * (s + 2 x s (1 - s) dz/dx), s = sigma(2z), 1 - s = sigma(-2z)
__kernel void gelu_tanh_backward(__global const float *x, __global const float *dy,
                                 __global float *dx, const int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const float v = x[i];
    const float z = SQRT_2_OVER_PI * (v + GELU_TANH_C * v * v * v);
    const float s = stable_sigmoid(2.0f * z);
    const float dz = SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_TANH_C * v * v);
    dx[i] = dy[i] * (s + 2.0f * v * s * stable_sigmoid(-2.0f * z) * dz);
}

// y = x * sigma(beta x)   (Swish; beta = 1 is SiLU)
__kernel void silu_forward(__global const float *x, __global float *y,
                           const float beta, const int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const float v = x[i];
    y[i] = v * stable_sigmoid(beta * v);
}

// dx = dy * (s + beta x s (1 - s)), s = sigma(beta x), 1 - s = sigma(-beta x)
__kernel void silu_backward(__global const float *x, __global const float *dy,
                            __global float *dx, const float beta, const int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const float v = x[i];
    const float s = stable_sigmoid(beta * v);
    dx[i] = dy[i] * (s + beta * v * s * stable_sigmoid(-beta * v));
}

/* Activation kernels (exercises kernels.relu_forward, kernels.relu_backward,
 * kernels.gelu_forward, kernels.gelu_backward).
 *
 * Course text: §kernels.elementwise, §activations.relu and §activations.gelu
 * (`grade read kernels.elementwise`). The NumPy versions are
 * activations.ReLU and activations.GELU (approximate="none").
 * Grade with `.venv/bin/grade submit kernels` (or `.venv/bin/grade submit kernels.gelu_forward`).
 *
 * Buffers are float32, n elements each, row-major.
 * Launch: one work-item per element, global size n (possibly rounded up to
 * a multiple of the work-group size, so a work-item may get
 * i = get_global_id(0) >= n): guard the index (if (i >= n) return;) before
 * touching any buffer.
 */

/* relu_forward: y[i] = max(0, x[i]).
 * [guided]
 * Hint: fmax(x[i], 0.0f), or a comparison.
 * [/guided]
 */
__kernel void relu_forward(__global const float *x, __global float *y, const int n)
{
    /* TODO: implement */
}

/* relu_backward: dx[i] = dy[i] * relu'(x[i]) (the derivative at 0 is 0).
 * [guided]
 * dx[i] = dy[i] if x[i] > 0, else 0.
 * [/guided]
 */
__kernel void relu_backward(__global const float *x, __global const float *dy, __global float *dx, const int n)
{
    /* TODO: implement */
}

/* gelu_forward (exact): y[i] = x * Phi(x), Phi(x) = 0.5 * (1 + erf(x / sqrt(2))).
 * Hint: OpenCL C has erf() built in; M_SQRT1_2_F is 1/sqrt(2) in float. */
__kernel void gelu_forward(__global const float *x, __global float *y, const int n)
{
    /* TODO: implement */
}

/* gelu_backward (exact): dx[i] = dy[i] * gelu'(x[i]), gelu(x) = x * Phi(x).
 * [guided]
 * dx[i] = dy[i] * (Phi(x) + x * phi(x)),
 * phi(x) = exp(-x^2 / 2) / sqrt(2 pi) (the standard normal density).
 * Hint: 1/sqrt(2 pi) = M_2_SQRTPI_F * M_SQRT1_2_F * 0.5f.
 * [/guided]
 */
__kernel void gelu_backward(__global const float *x, __global const float *dy, __global float *dx, const int n)
{
    /* TODO: implement */
}

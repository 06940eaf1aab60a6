/* Inverted dropout forward (exercise kernels.dropout_forward).
 *
 * Course text: §kernels.elementwise and §dropout-weight-decay.dropout
 * (inverted dropout). The NumPy version is dropout.Dropout in training mode.
 * Grade with `.venv/bin/grade submit kernels.dropout_forward`.
 *
 * Buffers are float32, n elements each. u holds uniform random numbers in
 * [0, 1) drawn by the caller (the kernel draws nothing).
 *     y[i] = x[i] / (1 - p)   where u[i] >= p   (kept)
 *     y[i] = 0                otherwise         (dropped)
 * p = 1 drops everything: y must be 0, never NaN (do not compute 0 * (1 / 0)).
 * Launch: one work-item per element, global size n (possibly rounded up to
 * a multiple of the work-group size): guard the index (if (i >= n) return;).
 */
__kernel void dropout_forward(__global const float *x, __global const float *u, __global float *y, const float p, const int n)
{
    /* TODO: implement */
}

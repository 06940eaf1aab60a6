// Optimiser updates, float32, one work-item per parameter element (global n),
// in place on the parameter and its state buffers.

// SGD without momentum:  g = grad + weight_decay * param;  param -= lr * g
__kernel void sgd_step(__global float *param, __global const float *grad,
                       const float lr, const float weight_decay, const int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const float g = grad[i] + weight_decay * param[i];
    param[i] -= lr * g;
}

// SGD with momentum (PyTorch): g = grad + weight_decay * param;
//   buf = g on the first step (first = 1), else momentum * buf + g;  param -= lr * buf
__kernel void sgd_momentum_step(__global float *param, __global const float *grad,
                                __global float *buf, const float lr, const float momentum,
                                const float weight_decay, const int first, const int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const float g = grad[i] + weight_decay * param[i];
    const float b = first ? g : momentum * buf[i] + g;
    buf[i] = b;
    param[i] -= lr * b;
}

// AdamW (PyTorch, decoupled weight decay), step t with
// bias_correction1 = 1 - beta1^t, bias_correction2 = 1 - beta2^t, decay = 1 - lr * weight_decay:
//   param *= decay;  m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;
//   param -= lr * (m / bias_correction1) / (sqrt(v / bias_correction2) + eps)
__kernel void adamw_step(__global float *param, __global const float *grad,
                         __global float *m, __global float *v,
                         const float lr, const float beta1, const float beta2, const float eps,
                         const float decay, const float bias_correction1,
                         const float bias_correction2, const int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const float g = grad[i];
    const float mi = beta1 * m[i] + (1.0f - beta1) * g;
    const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float m_hat = mi / bias_correction1;
    const float v_hat = vi / bias_correction2;
    param[i] = param[i] * decay - lr * m_hat / (sqrt(v_hat) + eps);
}

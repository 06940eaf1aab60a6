"""What each stub must state at every scaffolding level, by the checks that test it.

``REQUIREMENTS[exercise][key]``: phrases that the stub of ``exercise``
(its definition's text, its file's module docstring and ``exercises/__init__.py``'s,
compared in lower case with whitespace collapsed) must hold at every level,
because the checks under ``key`` test them. A check is looked up by its full
name (``running_var``), else by its name up to the first underscore
(``forward_2d`` -> ``forward``), else under ``COMMON`` (the module contract that
``exercises/__init__.py`` states for every layer). tests/course/test_scaffolding.py walks
every check of every exercise through this table.
"""

from __future__ import annotations

# The module contract (exercises/__init__.py): checks every layer has.
COMMON: dict[str, list[str]] = {
    "no_mutation": ["never modify an array you are given"],
    "shape_dtype": ["every output is a float64 array of the shape stated"],
    "backward_twice": ["a second backward after the same forward gives the same dx"],
    "numgrad": ["returns dx = dl/dx for the most recent forward"],
}

_ACTIVATION = {
    "backward": ["backward(dout)`` returns ``dx = dout * f'(x)``"],
    "no_mutation": ["never modify an array you are given in place"],
    "shape_dtype": ["returns an array of the same shape"],
}

REQUIREMENTS: dict[str, dict[str, list[str]]] = {
    "activations.Sigmoid": {
        **_ACTIVATION,
        "forward": ["y = 1 / (1 + e^-x)"],
        "forward_large": ["must not overflow (and must not warn) for abs(x) up to 1e4"],
        "backward_large": ["must not overflow (and must not warn) for abs(x) up to 1e4"],
    },
    "activations.Tanh": {**_ACTIVATION, "forward": ["y = tanh(x)"]},
    "activations.ReLU": {**_ACTIVATION, "forward": ["y = max(0, x)"], "backward": ["the derivative at x = 0 is 0"]},
    "activations.LeakyReLU": {**_ACTIVATION, "forward": ["y = x where x > 0, else negative_slope * x"]},
    "activations.PReLU": {
        **_ACTIVATION,
        "forward": ["y = x where x > 0, else alpha * x", "alpha[c] applies to channel c (axis 1)"],
        "backward": [
            "self.dalpha = dl/dalpha, shape (num_parameters,)",
            "over every axis but axis 1 when num_parameters = c",
        ],
        "constructor": ["self.alpha = np.full(num_parameters, init"],
    },
    "activations.ELU": {
        **_ACTIVATION,
        "forward": ["y = x where x > 0, else alpha * (e^x - 1)"],
        "forward_large": ["no overflow warning for x up to 1e4"],
        "backward_large": ["no overflow warning for x up to 1e4"],
    },
    "activations.GELU": {
        **_ACTIVATION,
        "forward": [
            "y = x * phi(x), phi(x) = 0.5 * (1 + erf(x / sqrt(2)))",
            "y = 0.5 * x * (1 + tanh(u)), u = sqrt(2/pi) * (x + 0.044715 x^3)",
        ],
    },
    "activations.SiLU": {
        **_ACTIVATION,
        "forward": ["y = x * s, s = sigmoid(beta * x)", "without overflow for abs(x) up to 1e4"],
    },
    "linear.Linear": {
        "constructor": ["self.w = rng.uniform(-k, k, size=(out_features, in_features))"],
        "bias_false_b_none": ["self.b = np.zeros(out_features) if bias else none"],
        "forward": ["y = x @ w.t + b (no b when bias=false)", "x (n, in_features) -> y (n, out_features)"],
        "backward": [
            "dx = dl/dx, shape (n, in_features)",
            "self.dw = dl/dw, shape (out_features, in_features)",
            "self.db = dl/db, shape (out_features,) (no db when bias=false)",
        ],
        "no_mutation": ["never modify x", "never modify dout"],
    },
    "normalization.BatchNorm1d": {
        "constructor": ["self.running_var = np.ones(num_features"],
        "forward": [
            "y = gamma * x_hat + beta, x_hat = (x - mu) / sqrt(var + eps)",
            "statistics over axis 0 for x (n, c), over axes 0 and 2 for x (n, c, l)",
            "the variance used to normalise is the biased one",
        ],
        "backward": [
            "dx = dl/dx for the last forward",
            "works in both modes",
            "self.dgamma = dl/dgamma and self.dbeta = dl/dbeta, shape (c,)",
        ],
        "running": [
            "running_mean and running_var as exponential moving averages",
            "the running variance takes the unbiased batch variance",
            "momentum is the weight of the new batch statistic",
        ],
        "eval": ["eval: mu, var = running_mean, running_var; update nothing"],
        "batch_of_one_value": ["with m = 1 the unbiased variance is undefined: raise valueerror"],
        "no_mutation": ["the input x is never modified", "backward leaves dout and the parameters alone"],
    },
    "normalization.BatchNorm2d": {
        "constructor": ["self.running_var = np.ones(num_features"],
        "forward": [
            "as batchnorm1d, with statistics over axes 0, 2, 3",
            "gamma, beta and the statistics broadcast as shape (1, c, 1, 1)",
        ],
        "backward": [
            "as batchnorm1d.backward with sums over axes 0, 2, 3 (dx = dl/dx, both modes)",
            "set self.dgamma, self.dbeta, shape (c,)",
        ],
        "running": ["unbiased running variance, momentum = weight of the new statistic"],
        "eval": ["eval: running statistics, no update"],
        "batch_of_one_value": ["with m = 1 raise valueerror"],
        "no_mutation": ["never modify x"],
    },
    "normalization.LayerNorm": {
        "constructor": ["self.gamma = np.ones(self.normalized_shape"],
        "forward": ["y = gamma * (x - mu) / sqrt(var + eps) + beta", "the trailing dims equal to normalized_shape"],
        "backward": [
            "dx = dl/dx for the last forward",
            "self.dgamma = dl/dgamma and self.dbeta = dl/dbeta, summed over all leading dims, shape normalized_shape",
        ],
        "eval_same_as_train": ["same in train and eval"],
        "no_mutation": ["never modify x"],
    },
    "normalization.RMSNorm": {
        "constructor": ["self.gamma = np.ones(dim"],
        "forward": [
            "y = x / rms(x) * gamma, rms(x) = sqrt(mean(x^2 over the last axis) + eps)",
            "no mean subtraction and no beta",
        ],
        "backward": ["dx = dl/dx for the last forward", "self.dgamma = dl/dgamma over all leading axes, shape (dim,)"],
        "eval_same_as_train": ["same in train and eval"],
        "no_mutation": ["never modify x"],
    },
    "normalization.GroupNorm": {
        "constructor": ["self.gamma = np.ones(num_channels"],
        "forward": [
            "split the c channels into num_groups groups of c / num_groups consecutive channels",
            "over the group's channels and all trailing axes",
        ],
        "backward": ["dx = dl/dx for the last forward", "summed over every axis but axis 1, shape (c,)"],
        "eval_same_as_train": ["same in train and eval"],
        "bad_groups_raises": ["raise valueerror("],
        "no_mutation": ["never modify x"],
    },
    "normalization.InstanceNorm2d": {
        "constructor": ["self.gamma = np.ones(num_features"],
        "forward": ["statistics over axes 2, 3", "one mu and biased var per (sample, channel)"],
        "backward": ["dx = dl/dx for the last forward", "summed over axes 0, 2, 3, shape (c,)"],
        "eval_same_as_train": ["same in train and eval"],
        "no_mutation": ["never modify x"],
    },
    "dropout.Dropout": {
        "values": [
            "inverted dropout, each element kept with probability 1 - p",
            "rescaled so that e[y] = x",
            "keep where self.rng.random(x.shape) >= p",
        ],
        "zero_fraction": ["each element kept with probability 1 - p"],
        "fresh_mask": ["draw a fresh mask from self.rng on every call"],
        "seeded": ["draw a fresh mask from self.rng on every call"],
        "backward": ["dx = dl/dx through the mask of the last forward"],
        "eval": ["eval (self.training false): y = x, and backward is the identity"],
        "p_edges": ["p = 1 drops everything: return zeros with no nan and no warning", "p = 0 returns x"],
        "value_error": ["0 <= p <= 1, else valueerror"],
        "no_mutation": ["never modify x in place", "dout is not modified"],
    },
    "init.xavier_uniform": {
        "shape_dtype": ["new float64 array of shape (fan_out, fan_in)"],
        "uses_rng": ["drawn from ``rng``"],
        "mean": ["w ~ u(-a, a)"],
        "variance": ["pytorch's torch.nn.init.xavier_uniform_"],
        "gain": ["pytorch's torch.nn.init.xavier_uniform_"],
        "distribution": ["w ~ u(-a, a)"],
    },
    "init.xavier_normal": {
        "shape_dtype": ["new float64 array of shape (fan_out, fan_in)"],
        "uses_rng": ["drawn from ``rng``"],
        "mean": ["w ~ n(0, std^2)"],
        "variance": ["pytorch's torch.nn.init.xavier_normal_"],
        "gain": ["pytorch's torch.nn.init.xavier_normal_"],
        "distribution": ["w ~ n(0, std^2)"],
    },
    "init.kaiming_uniform": {
        "shape_dtype": ["new float64 array of shape (fan_out, fan_in)"],
        "uses_rng": ["drawn from ``rng``"],
        "mean": ["w ~ u(-b, b)"],
        "variance": ["pytorch's torch.nn.init.kaiming_uniform_"],
        "mode": ['fan = fan_in when mode == "fan_in"', 'fan_out when mode == "fan_out"'],
        "negative_slope": ["negative_slope is the slope of a leakyrelu"],
        "mode_value_error": ["any other mode is a valueerror"],
        "distribution": ["w ~ u(-b, b)"],
    },
    "init.kaiming_normal": {
        "shape_dtype": ["new float64 array of shape (fan_out, fan_in)"],
        "uses_rng": ["drawn from ``rng``"],
        "mean": ["w ~ n(0, std^2)"],
        "variance": ["pytorch's torch.nn.init.kaiming_normal_"],
        "mode": ["fan = fan_in or fan_out by mode"],
        "negative_slope": ["negative_slope is the slope of a leakyrelu"],
        "mode_value_error": ["valueerror for any other mode"],
        "distribution": ["w ~ n(0, std^2)"],
    },
    "optim.SGD": {
        "plain": ["one step of pytorch's torch.optim.sgd"],
        "momentum": ["b = momentum * b + g", "the buffer holds gradients and is g itself on the first step"],
        "wd": ["weight decay is coupled (l2: added to the gradient, before the momentum buffer)"],
        "in_place": ["update a dict of parameter arrays in place", "never modify the gradients"],
    },
    "optim.AdamW": {
        "defaults": ["one step of pytorch's torch.optim.adamw", "bias-corrected moments", "m, v start at zeros"],
        "weight": ["decoupled weight decay (applied to p before the adam update, not added to the gradient)"],
        "betas": ["one step of pytorch's torch.optim.adamw"],
        "tiny": ["one step of pytorch's torch.optim.adamw"],
        "in_place": ["update a dict of parameter arrays in place", "never modify the gradients"],
    },
    "gradcheck.numerical_gradient": {
        "curved": ["central differences of l(x) = sum(f(x) * dout) with respect to every element of x, step h"],
        "coupled": ["with respect to every element of x"],
        "shape": ["returns an array shaped like x"],
        "dout": ["sum(f(x) * dout)"],
        "h": ["step h"],
        "x_restored": ["x is unchanged when the function returns"],
        "shape_dtype": ["returns an array shaped like x"],
    },
    "gradcheck.rel_error": {
        "pairs": ["max over elements of abs(a - b) / max(1e-8, abs(a) + abs(b)), as a float"],
        "zeros": ["rel_error of two zero arrays is 0.0"],
        "floor": ["max(1e-8, abs(a) + abs(b))"],
        "opposite": ["abs(a) + abs(b)"],
        "max": ["max over elements"],
        "b": ["abs(a) + abs(b)"],
        "scalar": ["as a float"],
    },
    "blocks.MLPBlock": {
        "forward": ["y = drop(act(bn(linear(x)))): call the four sub-layers in that order"],
        "backward": [
            "the sub-layers' backward in reverse order (drop, act, bn, linear)",
            "each sub-layer sets its own gradients",
        ],
        "dropout": ["y = drop(act(bn(linear(x))))"],
        "running": ["training mode for the block and its four sub-layers"],
        "eval": ["evaluation mode for the block and its four sub-layers"],
        "modes": ["training mode for the block and its four sub-layers", "returns self"],
    },
    "blocks.fold_batchnorm": {
        "forward": ["a new linear (with bias) equal, on any input, to ``bn`` in eval mode after ``linear``"],
        "params": ["a new linear (with bias)"],
        "no": ["b = 0 when ``linear`` has no bias"],
        "eps": ["``bn`` in eval mode after ``linear``"],
        "arguments_unchanged": ["do not modify ``linear`` or ``bn``"],
    },
    "approximation.fit_function": {
        "sin": ["graded by the largest abs(g(x) - f(x)) on a dense grid of [0, 1]"],
        "gauss": ["graded by the largest abs(g(x) - f(x)) on a dense grid of [0, 1]"],
        "output_shape": ["returns a callable g: x (n, 1) -> (n, 1)"],
    },
}

_ELEMENTWISE = {"index_guard": ["guard the index (if (i >= n) return;)"], "small": ["global size n"]}
REQUIREMENTS.update(
    {
        "kernels.relu_forward": {**_ELEMENTWISE, "values": ["y[i] = max(0, x[i])"], "zeros": ["y[i] = max(0, x[i])"]},
        "kernels.relu_backward": {
            **_ELEMENTWISE,
            "values": ["dx[i] = dy[i] * relu'(x[i]) (the derivative at 0 is 0)"],
            "zeros": ["the derivative at 0 is 0"],
        },
        "kernels.gelu_forward": {
            **_ELEMENTWISE,
            "values": ["y[i] = x * phi(x), phi(x) = 0.5 * (1 + erf(x / sqrt(2)))"],
            "zeros": ["y[i] = x * phi(x)"],
        },
        "kernels.gelu_backward": {
            **_ELEMENTWISE,
            "values": ["dx[i] = dy[i] * gelu'(x[i]), gelu(x) = x * phi(x)"],
            "zeros": ["gelu(x) = x * phi(x)"],
        },
        "kernels.dropout_forward": {
            "index_guard": ["guard the index (if (i >= n) return;)"],
            "values": ["y[i] = x[i] / (1 - p)   where u[i] >= p   (kept)"],
            "keep_at_u_equal_p": ["where u[i] >= p"],
            "p_one": ["p = 1 drops everything: y must be 0, never nan"],
            "p_zero": ["y[i] = x[i] / (1 - p)"],
        },
        "kernels.rmsnorm_forward": {
            "y": ["y[row, j] = x[row, j] * rstd[row] * gamma[j]"],
            "row_statistics": ["rstd[row] = 1 / sqrt(mean_j(x[row, j]^2) + eps)"],
            "zero_row": ["an all-zero row gives rstd = 1/sqrt(eps), y = 0"],
            "large_mean": ["rstd[row] = 1 / sqrt(mean_j(x[row, j]^2) + eps)"],
            "D_below_L": ["d need not be a multiple of l (d may be smaller or larger than l)"],
            "L128": ["l is a power of two chosen by the grader"],
            "index_guard": ["every work-item must reach every barrier"],
        },
        "kernels.layernorm_forward": {
            "y": ["y[row, j] = (x[row, j] - mean[row]) * rstd[row] * gamma[j] + beta[j]"],
            "row_statistics": ["mean[row] = (1/d) sum_j x[row, j]", "rstd[row] = 1 / sqrt(var + eps)", "(biased)"],
            "zero_row": ["rstd[row] = 1 / sqrt(var + eps)"],
            "large_mean": ["var = (1/d) sum_j (x[row, j] - mean[row])^2"],
            "D_below_L": ["d need not be a multiple of l (d may be smaller or larger than l)"],
            "L128": ["l is a power of two chosen by the grader"],
            "index_guard": ["every work-item must reach every barrier"],
        },
    }
)


def requirement(exercise: str, check: str) -> list[str] | None:
    """The phrases a check of ``exercise`` needs stated (None: the table has no entry for it)."""
    table = REQUIREMENTS.get(exercise, {})
    for key in (check, check.split("_", 1)[0]):
        if key in table:
            return table[key]
    return COMMON.get(check)

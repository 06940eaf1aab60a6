"""Level-neutral hints of known mistakes: the misconception and the property that fails, never the formula.

Where an exercise's stub was released below the ``guided`` scaffolding level
(``grade release --level derive``), a report names a known mistake with its
hint instead of its sentence and fix, which often state the derived formula
the stub no longer gives (:meth:`grader.student.engine.diagnosis.KnownMistake.said`).
A mistake without a hint is named with its sentence alone, without the fix.
"""

from __future__ import annotations

from grader.student.coursetext import mistake_section

_BATCHNORM: dict[str, str] = {
    "bn-biased-running-var": "running_var follows the biased batch variance; the contract asks for the unbiased one,"
    " so after training running_var is too small by the factor that corrects the bias.",
    "bn-running-var-count-batch": "the unbiased correction counts the wrong number of values: on (N, C, L) or"
    " (N, C, H, W) input each channel's statistic is taken over more than N values.",
    "bn-momentum-inverted": "momentum weighs the old running value instead of the new batch statistic: with"
    " momentum = 0.1 your running statistics move 90% of the way instead of 10%.",
    "bn-momentum-ignored": "the running statistics do not move by the constructor's momentum.",
    "bn-backward-missing-mean-term": "your dx does not sum to zero over the statistics axes: the gradient that flows"
    " through the batch mean mu is missing.",
    "bn-backward-missing-xhat-term": "your dx is not orthogonal to x_hat over the statistics axes: the gradient that"
    " flows through the batch variance is missing.",
    "bn-backward-ignores-stats": "backward treats the batch statistics as constants: in training mu and var depend on"
    " x, so dx neither sums to zero nor is orthogonal to x_hat per channel.",
    "bn-eval-backward-through-stats": "in eval mode the running statistics are constants: backward must not"
    " differentiate through batch statistics there.",
    "bn-dx-missing-gamma": "dx does not scale with gamma: the output is gamma * x_hat, so the gradient reaching"
    " x_hat carries gamma.",
    "bn-backward-count-batch": "backward counts N values per channel where each channel's statistics were taken over"
    " more (N * L or N * H * W): dx is wrong for input with more than two axes.",
    "bn-backward-eps-missing": "backward's scale differs from forward's: the eps forward used inside the square root"
    " is missing from backward.",
}
_NORMS: dict[str, str] = {
    "ln-backward-missing-mean-term": "your dx does not sum to zero over each sample's normalised features: the"
    " gradient that flows through the mean mu is missing.",
    "ln-backward-missing-xhat-term": "your dx is not orthogonal to x_hat over each sample's normalised features: the"
    " gradient that flows through the variance is missing.",
    "ln-backward-ignores-stats": "backward treats mu and var as constants, but they depend on x: dx neither sums to"
    " zero nor is orthogonal to x_hat per sample.",
    "ln-backward-wrong-axis": "backward's reductions run over the batch instead of each sample's normalised features"
    " (the axes forward took the statistics over).",
    "ln-dx-missing-gamma": "dx does not scale with gamma: the gradient reaching x_hat carries gamma.",
    "rms-grad-missing-term": "backward treats RMS as a constant, but it depends on x: dx misses the part that"
    " flows through the root mean square.",
    "rms-grad-missing-1-over-d": "the part of dx that flows through RMS is D times too large: the mean over the last"
    " axis divides by D, and so does its derivative.",
    "rms-dx-missing-gamma": "dx does not scale with gamma: the gradient reaching x / RMS carries gamma.",
}
_ACTIVATIONS: dict[str, str] = {
    "sigmoid-grad-incomplete": "your derivative of the sigmoid is not symmetric about x = 0 and does not vanish for"
    " large x: derive it from y = sigmoid(x) again.",
    "sigmoid-grad-of-input": "the derivative is computed from x where the cached output y is needed.",
    "tanh-grad-not-squared": "your derivative of tanh can be negative; tanh is increasing, so its derivative is"
    " positive everywhere: derive it from y = tanh(x) again.",
    "tanh-grad-of-input": "the derivative is computed from x where the cached output y = tanh(x) is needed.",
    "elu-grad-uses-output": "for x <= 0 your derivative does not tend to alpha at 0 (ELU is continuously"
    " differentiable there when alpha = 1): a term is missing.",
    "elu-grad-missing-alpha": "for x <= 0 your derivative does not scale with alpha.",
    "gelu-grad-missing-pdf": "d/dx of x Phi(x) needs the product rule: the term from differentiating Phi is missing.",
    "silu-grad-missing-beta": "your derivative does not depend on beta the way x sigmoid(beta x) does: the chain rule"
    " through beta x is incomplete.",
    "silu-grad-product-rule": "x sigmoid(beta x) is a product: your derivative has only one of the product rule's"
    " two terms.",
    "gelu-erf-missing-sqrt2": "Phi is not the standard normal CDF: its erf argument is not scaled for unit variance.",
    "gelu-tanh-no-cubic": "the tanh approximation lacks its cubic term (see the stub's definition of u).",
}
_INIT: dict[str, str] = {
    "init-uniform-bound-std": "the uniform's bound is its standard deviation: a uniform U(-a, a) has a smaller"
    " variance than a^2, so the weights' variance is too small.",
    "init-kaiming-uniform-bound-std": "the uniform's bound is its standard deviation: a uniform U(-b, b) has a smaller"
    " variance than b^2, so the weights' variance is too small.",
    "init-kaiming-for-xavier": "He's variance (for ReLU, fan_in alone) is used where Glorot's (both fans) is asked.",
    "init-xavier-uniform-kaiming-for-xavier": "He's variance (fan_in alone) is used where Glorot's (both fans)"
    " is asked.",
    "init-xavier-for-kaiming": "Glorot's variance (both fans) is used where He's (one fan, through a ReLU) is asked.",
    "init-xavier-for-kaiming-uniform": "Glorot's variance (both fans) is used where He's (one fan) is asked.",
    "init-variance-as-std": "the variance is passed where rng.normal expects a standard deviation.",
    "init-kaiming-variance-as-std": "the variance is passed where rng.normal expects a standard deviation.",
    "init-gain-inside-sqrt": "the variance scales with gain, not gain^2: gain multiplies the standard deviation.",
    "init-xavier-normal-gain-inside-sqrt": "the variance scales with gain, not gain^2: gain multiplies the standard"
    " deviation.",
    "init-leaky-slope-not-squared": "the LeakyReLU's slope enters the variance the wrong way: the negative side"
    " scales the signal's second moment by the slope squared.",
    "init-kaiming-normal-slope-not-squared": "the LeakyReLU's slope enters the variance the wrong way: the negative"
    " side scales the signal's second moment by the slope squared.",
    "init-kaiming-uniform-missing-2": "the variance is half of He's: the factor that makes up for ReLU zeroing half"
    " of the signal is missing.",
    "init-kaiming-normal-missing-2": "the variance is half of He's: the factor that makes up for ReLU zeroing half"
    " of the signal is missing.",
    "init-xavier-uniform-missing-2": "the variance is half of Glorot's: averaging the two fans' conditions was lost.",
    "init-xavier-normal-missing-2": "the variance is half of Glorot's: averaging the two fans' conditions was lost.",
    "init-xavier-uniform-fan-in-only": "only the forward condition (fan_in) sets the variance; Glorot balances it"
    " with the backward one (fan_out).",
    "init-xavier-normal-fan-in-only": "only the forward condition (fan_in) sets the variance; Glorot balances it"
    " with the backward one (fan_out).",
    "init-normal-for-uniform": "the weights are not uniform on a symmetric interval, as asked.",
}
_OPTIM: dict[str, str] = {
    "sgd-momentum-dampened": "the momentum buffer is an average of gradients; PyTorch's SGD accumulates them"
    " undamped, so your steps are too small.",
    "sgd-nesterov": "Nesterov's look-ahead is used where plain momentum is asked.",
    "adamw-t-from-zero": "the bias corrections divide by zero on the first step: count steps from 1.",
    "adamw-ema-unweighted": "the moving averages do not weight the new gradient: m and v grow without bound"
    " instead of averaging.",
    "adamw-no-sqrt": "the step is not invariant to the gradient's scale: the denominator must have the units of the"
    " gradient, not of its square.",
    "adamw-no-bias-correction": "the first steps are too small: m and v start at zero and are not bias-corrected.",
    "adamw-coupled-wd": "weight decay goes through the adaptive denominator (Adam with L2); AdamW decouples it"
    " from the gradient.",
    "adamw-eps-inside-sqrt": "eps is in the wrong place in the denominator (compare PyTorch's AdamW).",
}
_OTHERS: dict[str, str] = {
    "numgrad-one-sided": "the difference is one-sided, so its error shrinks only linearly with h: use a symmetric one.",
    "numgrad-no-2h": "your gradient is twice the true one: the symmetric difference spans two steps of h.",
    "numgrad-ignores-dout": "the gradient is of sum(f(x)), not of sum(f(x) * dout): dout weighs every output.",
    "dropout-no-rescale": "E[y] is (1 - p) x, not x: the kept activations are not rescaled (inverted dropout).",
    "dropout-backward-unscaled": "backward does not apply the same scaling as forward to the kept elements.",
    "fold-bn-mean-not-scaled": "the folded bias does not match bn on a constant input: the running mean must go"
    " through bn's scale too.",
    "fold-bn-bias-not-scaled": "the folded bias does not match bn when the Linear has a bias: it goes through bn's"
    " scale too.",
    "fold-bn-var-not-sqrt": "the scale divides by the variance: bn divides by a standard deviation.",
    "kernel-gelu-backward-cdf-only": "d/dx of x Phi(x) needs the product rule: the term from differentiating Phi is"
    " missing.",
    "linear-dx-uses-WT": "dx has the wrong shape or values for non-square W: check which side of dout W multiplies.",
    "linear-dW-transposed": "dW does not have W's shape (out_features, in_features).",
}

# Round 3's additions: the classes of mistakes seen in real students' code.
_ROUND3_BATCHNORM: dict[str, str] = {
    "bn-running-var-plus-eps": "the running variance carries eps: eps only guards the division when normalising,"
    " it is no part of the statistic being tracked.",
    "bn-eval-double-mean": "in eval mode the running mean is removed twice: the normalised values are no longer"
    " centred.",
    "bn-stats-no-axis": "one mean and one variance for the whole batch: BatchNorm keeps one pair per channel.",
    "bn-eps-subtracted": "eps lowers the variance instead of raising it: on a constant channel the square root of"
    " a negative number is NaN.",
}
_ROUND3: dict[str, str] = {
    "ln-dgamma-feature-axis": "dgamma and dbeta get one value per sample: a parameter's gradient sums over every"
    " position that shares it, i.e. over the batch, and has the parameter's shape.",
    "ln-dgamma-axes01": "dgamma and dbeta sum over a fixed pair of axes: the number of leading axes varies, and"
    " the gradient must sum over all of them.",
    "ln-dx-mean-over-batch": "a term of dx mixes samples: each sample is normalised on its own, so its gradient"
    " never depends on other samples.",
    "ln-dx-gamma-outside": "gamma is applied after the sums: the gradient reaching x_hat is dout times gamma, and"
    " that product is what the sums see.",
    "ln-dx-diagonal-only": "dx keeps only each feature's effect on its own output: through the mean and the"
    " variance every feature moves every output of its sample.",
    "rms-grad-term-doubled": "the correction through the RMS is twice too strong: the derivative of a square root"
    " carries a factor one half.",
    "rms-grad-term-2rms": "the correction through the RMS has the wrong power of the RMS: check the chain rule"
    " through the square root and the mean.",
    "rms-dx-diagonal-only": "dx keeps only each feature's effect on its own output: through the RMS every feature"
    " moves every output of its row.",
    "rms-dgamma-axes01": "dgamma sums over a fixed pair of axes: the number of leading axes varies, and the"
    " gradient must sum over all of them.",
    "relu-backward-writes-dout": "backward edits the array it was given: dx must be a new array, the caller's"
    " gradient stays as it was.",
    "gelu-grad-half-pdf-term": "the product rule's second term is halved: x Phi(x) differentiates to Phi(x) plus"
    " x times Phi's derivative, with no factor one half.",
    "gelu-grad-rounded-constants": "the gradient is right to six digits only: rounded constants cost more precision"
    " than float64 allows.",
    "gelu-tanh-backward-no-cubic": "the tanh form's derivative treats its argument as linear in x: the cubic term"
    " has a derivative too.",
    "elu-backward-exp-overflow": "backward evaluates the exponential on large positive inputs, where it overflows,"
    " although that branch is thrown away.",
    "dropout-ignores-rng": "the mask does not come from the generator the layer was given: a seeded run cannot be"
    " repeated.",
    "dropout-mask-precedence": "the mask keeps everything: the comparison and the division are evaluated in an"
    " order other than intended.",
    "kernel-layernorm-one-pass-var": "the variance loses its digits on rows with a large mean: two large float32"
    " numbers are subtracted.",
}

HINTS: dict[str, str] = {
    **_BATCHNORM,
    **_ROUND3_BATCHNORM,
    **_NORMS,
    **_ACTIVATIONS,
    **_INIT,
    **_OPTIM,
    **_OTHERS,
    **_ROUND3,
}
HINTS.update(
    {f"{mistake_id}-2d": hint for mistake_id, hint in {**_BATCHNORM, **_ROUND3_BATCHNORM}.items()}
)  # BatchNorm2d's copies


def cited(mistake_id: str, hint: str) -> str:
    """``hint`` followed by the section its mistake's family comes from (``coursetext.mistake_section``: the
    report's "Read §..." line names the same one), when there is one."""
    address = mistake_section(mistake_id)
    return f"{hint} See §{address}." if address else hint


HINTS = {mistake_id: cited(mistake_id, hint) for mistake_id, hint in HINTS.items()}

"""The functions of ``keras.ops`` in Keras 3.15.1, which run on every backend, and the TensorFlow
functions that do what one of them does.

Plain data, imported by the parent, the judge and the grading process alike:
the parent names the ``keras.ops`` function that replaces a TensorFlow call
without importing Keras (which would import a backend); the grading process
records a custom layer's TensorFlow calls as the keras.ops calls they are
(``TF_FUNCTIONS``); the judge's table of operations accounts for every name.
tests/test_backends.py fails when ``NAMES`` no longer matches the installed
Keras, tests/test_op_table.py when a TensorFlow function of the table does not
compute what its keras.ops call computes.
"""

NAMES = frozenset("""
    abs absolute adaptive_average_pool adaptive_max_pool add all allclose amax amin angle any append
    arange arccos arccosh arcsin arcsinh arctan arctan2 arctanh argmax argmin argpartition argsort
    array array_split associative_scan average average_pool bartlett batch_normalization
    binary_crossentropy bincount bitwise_and bitwise_invert bitwise_left_shift bitwise_not
    bitwise_or bitwise_right_shift bitwise_xor blackman broadcast_to cast categorical_crossentropy
    cbrt cdist ceil celu cholesky cholesky_inverse clip concatenate cond conj conjugate conv
    conv_transpose convert_to_numpy convert_to_tensor copy corrcoef correlate cos cosh count_nonzero
    cross ctc_decode ctc_loss cumprod cumsum custom_gradient deg2rad depth_to_space depthwise_conv
    det diag diagflat diagonal diff digitize divide divide_no_nan dot dot_product_attention dsplit
    dstack dtype eig eigh einsum elu empty empty_like equal erf erfc erfinv exp exp2 expand_dims
    expm1 extract_sequences eye fabs fft fft2 flip fliplr flipud floor floor_divide fmax fmin fmod
    fold fori_loop full full_like gcd gelu geomspace get_item glu greater greater_equal hamming
    hanning hard_shrink hard_sigmoid hard_silu hard_swish hard_tanh heaviside histogram hsplit
    hstack hypot i0 identity ifft2 imag in_top_k inner inv irfft is_tensor isclose isfinite isin
    isinf isnan isneginf isposinf isreal istft jvp kaiser kron layer_normalization lcm ldexp
    leaky_relu left_shift less less_equal linspace log log10 log1p log2 log_sigmoid log_softmax
    logaddexp logaddexp2 logdet logical_and logical_not logical_or logical_xor logspace logsumexp
    lstsq lu_factor map matmul matrix_rank max max_pool maximum mean median meshgrid min minimum mod
    moments moveaxis multi_hot multiply nan_to_num nanargmax nanargmin nancumprod nancumsum nanmax
    nanmean nanmedian nanmin nanpercentile nanprod nanquantile nanstd nansum nanvar ndim negative
    nextafter nonzero norm normalize not_equal one_hot ones ones_like outer pad percentile pinv
    polar power prod psnr ptp qr quantile rad2deg ravel real rearrange reciprocal relu relu6 repeat
    reshape rfft right_shift rms_normalization roll rot90 round rsqrt saturate_cast scan scatter
    scatter_update searchsorted segment_max segment_min segment_prod segment_sum select selu
    separable_conv shape sigmoid sign signbit silu sin sinc sinh size slice slice_update slogdet
    soft_shrink softmax softplus softsign solve solve_triangular sort space_to_depth
    sparse_categorical_crossentropy sparse_plus sparse_sigmoid sparsemax split sqrt square
    squareplus squeeze stack std stft stop_gradient subtract sum svd swapaxes swish switch take
    take_along_axis tan tanh tanh_shrink tensordot threshold tile top_k trace transpose trapezoid
    tri tril triu true_divide trunc unfold unique unravel_index unstack vander var vdot vectorize
    vectorized_map view view_as_complex view_as_real vsplit vstack where while_loop zeros zeros_like
""".split())

# keras.ops functions whose result is a plain Python value (a shape, a dtype, a rank), which the child's
# tape carries as a value rather than as a tensor an operation made
VALUES = frozenset({"shape", "dtype", "is_tensor", "ndim"})

# TensorFlow's functions that a custom Keras layer calls, each with the keras.ops call it is, as
# "keras name(argument, ...)". An argument is TensorFlow's name, ">name" where keras.ops calls it
# otherwise, "=value" for what keras.ops gets when TensorFlow's is None, and "|transform" for a
# value keras.ops writes otherwise; "+name=value" is an argument keras.ops gets as it is, "-name" one
# that changes nothing the grader compares (an integer type, a hint). Every other argument of the
# TensorFlow function must keep its default (its name excepted), or the call has no keras.ops
# counterpart; an argument that is None (or that its transform makes None) is left to keras.ops'
# default. The grading process finds each function under every module of TensorFlow that holds
# it (tf.reduce_sum is tf.math.reduce_sum), records a call as its keras.ops call after checking that
# the two give the same tensor, and the parent names keras.ops' function in its messages
# (``grader.backends.keras_ops_for``).
TF_FUNCTIONS = {
    # reductions and scans
    "reduce_sum": "sum(input_tensor>x, axis, keepdims)", "reduce_mean": "mean(input_tensor>x, axis, keepdims)",
    "reduce_max": "max(input_tensor>x, axis, keepdims)", "reduce_min": "min(input_tensor>x, axis, keepdims)",
    "reduce_prod": "prod(input_tensor>x, axis, keepdims)", "reduce_any": "any(input_tensor>x, axis, keepdims)",
    "reduce_all": "all(input_tensor>x, axis, keepdims)", "math.reduce_std": "std(input_tensor>x, axis, keepdims)",
    "math.reduce_variance": "var(input_tensor>x, axis, keepdims)",
    "math.reduce_logsumexp": "logsumexp(input_tensor>x, axis, keepdims)",
    "math.reduce_euclidean_norm": "norm(input_tensor>x, axis, keepdims)",
    "argmax": "argmax(input>x, axis=0, -output_type)", "argmin": "argmin(input>x, axis=0, -output_type)",
    "math.cumsum": "cumsum(x, axis)", "math.cumprod": "cumprod(x, axis)",
    "math.count_nonzero": "count_nonzero(input>x, axis)",
    "math.segment_sum": "segment_sum(data, segment_ids, +sorted=True)",
    "math.segment_max": "segment_max(data, segment_ids, +sorted=True)",
    "math.segment_min": "segment_min(data, segment_ids, +sorted=True)",
    "math.segment_prod": "segment_prod(data, segment_ids, +sorted=True)",
    "math.unsorted_segment_sum": "segment_sum(data, segment_ids, num_segments)",
    "math.unsorted_segment_max": "segment_max(data, segment_ids, num_segments)",
    "math.unsorted_segment_min": "segment_min(data, segment_ids, num_segments)",
    "math.unsorted_segment_prod": "segment_prod(data, segment_ids, num_segments)",
    # element-wise arithmetic, comparisons and logic
    "math.add": "add(x>x1, y>x2)", "subtract": "subtract(x>x1, y>x2)", "multiply": "multiply(x>x1, y>x2)",
    "divide": "divide(x>x1, y>x2)", "math.truediv": "true_divide(x>x1, y>x2)",
    "math.floordiv": "floor_divide(x>x1, y>x2)", "math.floormod": "mod(x>x1, y>x2)", "pow": "power(x>x1, y>x2)",
    "maximum": "maximum(x>x1, y>x2)", "minimum": "minimum(x>x1, y>x2)",
    "math.divide_no_nan": "divide_no_nan(x>x1, y>x2)",
    "math.scalar_mul": "multiply(scalar>x1, x>x2)", "math.atan2": "arctan2(y>x1, x>x2)",
    "abs": "absolute(x)", "negative": "negative(x)", "exp": "exp(x)", "math.log": "log(x)", "math.log1p": "log1p(x)",
    "math.expm1": "expm1(x)", "sqrt": "sqrt(x)", "math.rsqrt": "rsqrt(x)", "square": "square(x)",
    "math.reciprocal": "reciprocal(x)", "sign": "sign(x)", "math.floor": "floor(x)", "math.ceil": "ceil(x)",
    "math.round": "round(x)", "sin": "sin(x)", "cos": "cos(x)", "tan": "tan(x)", "math.asin": "arcsin(x)",
    "math.acos": "arccos(x)", "math.atan": "arctan(x)", "math.sinh": "sinh(x)", "math.cosh": "cosh(x)",
    "math.asinh": "arcsinh(x)", "math.acosh": "arccosh(x)", "math.atanh": "arctanh(x)", "math.erf": "erf(x)",
    "math.erfc": "erfc(x)", "math.erfinv": "erfinv(x)", "math.bessel_i0": "i0(x)",
    "math.is_nan": "isnan(x)", "math.is_inf": "isinf(x)", "math.is_finite": "isfinite(x)",
    "equal": "equal(x>x1, y>x2)", "not_equal": "not_equal(x>x1, y>x2)", "greater": "greater(x>x1, y>x2)",
    "greater_equal": "greater_equal(x>x1, y>x2)", "less": "less(x>x1, y>x2)", "less_equal": "less_equal(x>x1, y>x2)",
    "logical_and": "logical_and(x>x1, y>x2)", "logical_or": "logical_or(x>x1, y>x2)",
    "math.logical_xor": "logical_xor(x>x1, y>x2)", "logical_not": "logical_not(x)",
    "clip_by_value": "clip(t>x, clip_value_min>x_min, clip_value_max>x_max)",
    # activations, normalisations and losses
    "nn.softmax": "softmax(logits>x, axis)", "nn.log_softmax": "log_softmax(logits>x, axis)",
    "nn.relu": "relu(features>x)", "nn.relu6": "relu6(features>x)", "nn.elu": "elu(features>x)",
    "nn.selu": "selu(features>x)", "nn.gelu": "gelu(features>x, approximate)", "sigmoid": "sigmoid(x)",
    "tanh": "tanh(x)", "nn.silu": "silu(features>x)", "nn.leaky_relu": "leaky_relu(features>x, alpha>negative_slope)",
    "nn.softplus": "softplus(features>x)", "nn.softsign": "softsign(features>x)", "math.log_sigmoid": "log_sigmoid(x)",
    "nn.moments": "moments(x, axes, keepdims)",
    "nn.l2_normalize": "normalize(x, axis=None, epsilon|sqrt, +order=2)",
    "nn.batch_normalization": "batch_normalization(x, mean, variance, offset, scale, variance_epsilon>epsilon, "
                              "+axis=-1)",
    "nn.sigmoid_cross_entropy_with_logits": "binary_crossentropy(labels>target, logits>output, +from_logits=True)",
    "nn.softmax_cross_entropy_with_logits": "categorical_crossentropy(labels>target, logits>output, axis, "
                                            "+from_logits=True)",
    "nn.sparse_softmax_cross_entropy_with_logits": "sparse_categorical_crossentropy(labels>target, logits>output, "
                                                   "+from_logits=True)",
    "nn.top_k": "top_k(input>x, k, sorted, -index_type)", "math.in_top_k": "in_top_k(targets, predictions, k)",
    "sort": "sort(values>x, axis)", "argsort": "argsort(values>x, axis, -stable)",
    # casts, constants and shapes
    "cast": "cast(x, dtype)", "convert_to_tensor": "convert_to_tensor(value>x, dtype)",
    "identity": "copy(input>x)", "stop_gradient": "stop_gradient(input>variable)",
    "ones_like": "ones_like(input>x, dtype)", "zeros_like": "zeros_like(input>x, dtype)",
    "ones": "ones(shape, dtype)", "zeros": "zeros(shape, dtype)", "fill": "full(dims>shape, value>fill_value)",
    "range": "arange(start, limit>stop, delta>step, dtype)", "linspace": "linspace(start, stop, num, axis)",
    "eye": "eye(num_rows>N, num_columns>M, dtype)",
    "one_hot": "one_hot(indices>x, depth>num_classes, axis=-1, dtype)", "size": "size(input>x, -out_type)",
    "expand_dims": "expand_dims(input>x, axis)", "squeeze": "squeeze(input>x, axis)",
    "reshape": "reshape(tensor>x, shape>newshape)", "transpose": "transpose(a>x, perm>axes)",
    "linalg.matrix_transpose": "swapaxes(a>x, +axis1=-1, +axis2=-2)",
    "concat": "concatenate(values>xs, axis)", "stack": "stack(values>x, axis)",
    "unstack": "unstack(value>x, num, axis)",
    "split": "split(value>x, num_or_size_splits>indices_or_sections|sections, axis)",
    "tile": "tile(input>x, multiples>repeats)", "repeat": "repeat(input>x, repeats, axis)",
    "broadcast_to": "broadcast_to(input>x, shape)",
    "pad": "pad(tensor>x, paddings>pad_width, mode|lower, constant_values|zero)", "reverse": "flip(tensor>x, axis)",
    "roll": "roll(input>x, shift, axis)", "where": "where(condition, x>x1, y>x2)",
    "gather": "take(params>x, indices, axis=0, -validate_indices)",
    "nn.embedding_lookup": "take(params>x, ids>indices, +axis=0)",
    # products and linear algebra
    "matmul": "matmul(a>x1, b>x2, -a_is_sparse, -b_is_sparse, -grad_a, -grad_b)",
    "einsum": "einsum(equation>subscripts, *inputs>operands, -kwargs)", "tensordot": "tensordot(a>x1, b>x2, axes)",
    "linalg.det": "det(input>x)", "linalg.inv": "inv(input>x)", "linalg.cholesky": "cholesky(input>x)",
    "linalg.solve": "solve(matrix>a, rhs>b)", "linalg.triangular_solve": "solve_triangular(matrix>a, rhs>b, lower)",
    "linalg.trace": "trace(x, +axis1=-2, +axis2=-1)",
    "linalg.diag_part": "diagonal(input>x, k>offset, +axis1=-2, +axis2=-1)",
    "norm": "norm(tensor>x, ord|euclidean, axis, keepdims=False)",
}
# TensorFlow functions that are a few keras.ops calls, which the grading process writes out itself
# (``grader.probe.op_tape``), with the keras.ops function a message names: tf.linalg.band_part(x, -1, 0)
# is keras.ops.tril(x), tf.sequence_mask(lengths, n) is arange(n) < expand_dims(lengths, -1). (A
# tf.matmul with transposed operands is written out the same way: swapaxes, then matmul.)
TF_COMPOSITES = {"linalg.band_part": "tril", "sequence_mask": "arange"}


def tf_call(path: str) -> tuple[str, list[tuple], dict, set, str | None]:
    """(keras.ops name, [(TensorFlow argument, keras.ops argument, (value for None,) or (), transform)],
    {fixed keras.ops argument: value}, {TensorFlow arguments that change nothing compared},
    TensorFlow's variadic argument or None) of ``TF_FUNCTIONS[path]``."""
    import ast

    spec = TF_FUNCTIONS[path]
    name, _, rest = spec.partition("(")
    arguments, fixed, ignored, star = [], {}, set(), None
    for item in [part.strip() for part in rest.rstrip(")").split(",") if part.strip()]:
        if item.startswith("+"):
            key, _, literal = item[1:].partition("=")
            fixed[key] = ast.literal_eval(literal)
            continue
        if item.startswith("-"):
            ignored.add(item[1:])
            continue
        if item.startswith("*"):
            item = item[1:]
            star = item.split(">")[0]
        head, _, transform = item.partition("|")
        head, _, if_none = head.partition("=")
        tf_name, _, keras_name = head.partition(">")
        arguments.append((tf_name, keras_name or tf_name, (ast.literal_eval(if_none),) if if_none else (),
                          transform or None))
    return name, arguments, fixed, ignored, star

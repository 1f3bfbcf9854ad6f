"""The functions of ``keras.ops`` in Keras 3.15.1, which run on every backend.

The parent names the ``keras.ops`` function that replaces a TensorFlow call
without importing Keras (which would import a backend); tests/test_backends.py
fails when this list no longer matches the installed Keras.
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

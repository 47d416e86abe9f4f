# The op ids (declarations only: a kernel that names an op cimports this, not the op table)
# op ids: one per op; the record of each is one defop line in engine/optable.pyx
cdef enum OpId:
    # leaves: materialised when created, never scheduled
    OP_INPUT, OP_PARAM, OP_LOOKUP
    # zero-argument scheduled op
    OP_LOOKUP_BATCH
    # unary elementwise ops that other code names (the API's tanh, exp, ... follow
    # N_FIXED_OPS: made from their kernels/elementwise.h line when the module loads)
    OP_NEG, OP_ADD_CONST, OP_MUL_CONST, OP_RSUB_CONST, OP_RDIV_CONST, OP_NOBACKPROP
    # unary elementwise with random state
    OP_DROPOUT, OP_NOISE
    # binary elementwise with broadcasting
    OP_ADD, OP_SUB, OP_CMULT, OP_CDIV, OP_POW
    # n-ary
    OP_ESUM, OP_AVERAGE, OP_LOGSUMEXP, OP_CONCAT, OP_CONCAT_TO_BATCH, OP_AFFINE
    # matrix multiply (shared left argument -> one gemm per batch)
    OP_MATMUL
    # reductions
    OP_SUM_ELEMS, OP_MEAN_ELEMS, OP_SQUARED_NORM, OP_L2_NORM, OP_DOT,
    OP_SQUARED_DISTANCE, OP_BINARY_LOG_LOSS, OP_MAX_DIM, OP_MIN_DIM, OP_SUM_BATCHES,
    OP_SUM_DIM, OP_MEAN_DIM
    # softmax family and losses
    OP_SOFTMAX, OP_LOG_SOFTMAX, OP_PICKNLS, OP_HINGE
    # fused recurrent cells: gate activations, cell update, hidden output
    OP_LSTM_GATES, OP_LSTM_CELL, OP_LSTM_HIDDEN
    # structure
    OP_PICK, OP_PICK_RANGE, OP_PICK_BATCH_ELEMS, OP_TRANSPOSE, OP_RESHAPE
    # images (H, W, C): convolution (filter and bias shared), max pooling
    OP_CONV2D, OP_MAXPOOL2D
    # selections: index lists and strided ranges (per node in ibuf), k-max pooling
    OP_SELECT_ROWS, OP_SELECT_COLS, OP_STRIDED_SELECT, OP_KMAX_POOLING
    # sparse softmaxes
    OP_SPARSEMAX, OP_CONSTRAINED_SOFTMAX
    # linear algebra and 3-d contractions
    OP_INVERSE, OP_LOGDET, OP_CONTRACT3D_1D, OP_CONTRACT3D_1D_1D
    # filters along the columns of a matrix; circular convolution and correlation
    OP_KMH_NGRAM, OP_FILTER1D_NARROW, OP_CIRC_CONV, OP_CIRC_CORR
    # DyNet's other math: elementwise max/min, rounding (straight-through or zero
    # gradient), Poisson loss, the L1 and Huber distances, dropout with a mask shared
    # along dimensions, cumulative sums and logsumexp along a dimension, log_softmax
    # restricted to some elements, layer normalisation, standard deviations, the
    # one-hot argmax (straight-through or zero gradient)
    OP_BMAX, OP_BMIN, OP_ROUND, OP_CEIL, OP_FLOOR, OP_POISSON_LOSS,
    OP_L1_DISTANCE, OP_HUBER_DISTANCE, OP_DROPOUT_DIM, OP_CUMSUM, OP_LOGSUMEXP_DIM,
    OP_RESTRICTED_LOG_SOFTMAX, OP_LAYER_NORM, OP_STD_DIM, OP_ARGMAX
    N_FIXED_OPS

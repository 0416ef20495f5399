"""ctypes mirrors of the public C structs of sluice/volops.h and
sluice/vloader.h, and the argument types of their functions: the one place
tests and benchmarks that call the C API directly take them from. The C
structs only ever grow at their ends; keep these in step with the headers.

    lib = bind(ctypes.CDLL(os.environ["SL_LIB"]))
"""
import ctypes

I64x3 = ctypes.c_int64 * 3
F64x3 = ctypes.c_double * 3


class Aug(ctypes.Structure):  # sl_vol_aug_t
    _fields_ = [("size", ctypes.c_size_t), ("patch", I64x3),
                ("oversampling", ctypes.c_double), ("flip_prob", ctypes.c_double),
                ("brightness_prob", ctypes.c_double), ("brightness_factor", ctypes.c_double),
                ("noise_prob", ctypes.c_double), ("noise_std", ctypes.c_double)]


class Draw(ctypes.Structure):  # sl_vol_draw_t
    _fields_ = [("size", ctypes.c_size_t), ("foreground", ctypes.c_int), ("cls", ctypes.c_int),
                ("ncomponents", ctypes.c_int), ("component", ctypes.c_int),
                ("box_lo", I64x3), ("box_hi", I64x3), ("adj", I64x3), ("lo", I64x3),
                ("flip", ctypes.c_int * 3), ("brightness", ctypes.c_int),
                ("brightness_mul", ctypes.c_double), ("noise", ctypes.c_int),
                ("noise_sd", ctypes.c_double)]


class Opts(ctypes.Structure):  # sl_vloader_options_t
    _fields_ = [("size", ctypes.c_size_t), ("batch_size", ctypes.c_int),
                ("seed", ctypes.c_uint64), ("threads", ctypes.c_int),
                ("prefetch", ctypes.c_int), ("no_balance", ctypes.c_int),
                ("target_spacing", F64x3), ("cache_bytes", ctypes.c_int64),
                ("aug", Aug), ("memory_bytes", ctypes.c_int64), ("image_bf16", ctypes.c_int),
                ("on_error", ctypes.c_int), ("unlabeled", ctypes.c_int),
                ("start", ctypes.c_int64)]


class Batch(ctypes.Structure):  # sl_vbatch_t
    _fields_ = [("epoch", ctypes.c_int64), ("index", ctypes.c_int64), ("n", ctypes.c_int),
                ("dims", I64x3), ("image", ctypes.POINTER(ctypes.c_float)),
                ("label", ctypes.POINTER(ctypes.c_uint8)),
                ("cases", ctypes.POINTER(ctypes.c_int64)),
                ("image_bf16", ctypes.POINTER(ctypes.c_uint16))]


class Stats(ctypes.Structure):  # sl_vloader_stats_t
    _fields_ = [("size", ctypes.c_size_t)] + [(n, ctypes.c_int64) for n in (
        "batches", "samples", "offline_runs", "cache_hits", "cache_bytes", "wait_ns",
        "predicted_ns", "actual_ns", "latency_p50_ns", "latency_p99_ns", "memory_bytes",
        "memory_peak", "offline_ahead", "offline_split", "offline_helped", "skipped")]


def bind(lib):
    """Sets argtypes/restype of the volume ops and loader functions on a
    ctypes.CDLL of libsluice; returns it."""
    P = ctypes.c_void_p
    L = lib
    L.sl_vol_resample_shape.argtypes = [I64x3, F64x3, F64x3, I64x3]
    L.sl_vol_resample_linear.argtypes = [P, I64x3, P, I64x3]
    L.sl_vol_resample_nearest.argtypes = [P, I64x3, P, I64x3]
    L.sl_vol_normalize.argtypes = [P, ctypes.c_size_t] + [ctypes.c_float] * 4
    L.sl_vol_normalize.restype = None
    L.sl_vol_pad_edge.argtypes = [P, I64x3, ctypes.c_size_t, I64x3, P, I64x3]
    L.sl_vol_aug_init.argtypes = [ctypes.POINTER(Aug)]
    L.sl_vol_aug_init.restype = None
    L.sl_vol_draw.argtypes = [P, I64x3, ctypes.POINTER(Aug), ctypes.c_uint64, ctypes.c_uint64,
                              ctypes.c_uint64, ctypes.POINTER(Draw), ctypes.c_char_p,
                              ctypes.c_size_t]
    L.sl_vol_apply.argtypes = [P, P, I64x3, ctypes.POINTER(Aug), ctypes.POINTER(Draw),
                               ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64, P, P]
    L.sl_vol_to_bf16.argtypes = [P, P, ctypes.c_size_t]
    L.sl_vol_to_bf16.restype = None
    L.sl_vloader_options_init.argtypes = [ctypes.POINTER(Opts)]
    L.sl_vloader_options_init.restype = None
    L.sl_vloader_create.argtypes = [ctypes.c_char_p, ctypes.POINTER(Opts), ctypes.POINTER(P),
                                    ctypes.c_char_p, ctypes.c_size_t]
    L.sl_vloader_next.argtypes = [P, ctypes.POINTER(ctypes.POINTER(Batch)), ctypes.c_char_p,
                                  ctypes.c_size_t]
    L.sl_vloader_release.argtypes = [P, ctypes.POINTER(Batch)]
    L.sl_vloader_release.restype = None
    L.sl_vloader_batches_per_epoch.argtypes = [P]
    L.sl_vloader_batches_per_epoch.restype = ctypes.c_int64
    L.sl_vloader_stats.argtypes = [P, ctypes.POINTER(Stats)]
    L.sl_vloader_skipped_count.argtypes = [P]
    L.sl_vloader_skipped_count.restype = ctypes.c_int64
    L.sl_vloader_skipped_message.argtypes = [P, ctypes.c_int64]
    L.sl_vloader_skipped_message.restype = ctypes.c_char_p
    L.sl_vloader_destroy.argtypes = [P]
    L.sl_vloader_destroy.restype = None
    return L

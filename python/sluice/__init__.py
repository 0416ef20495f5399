"""sluice: a data loader for training, written in C.

    import sluice
    for images, labels in sluice.Loader("data/train", batch_size=256,
                                        image_size=224, dtype="float32"):
        ...   # numpy arrays: N x 3 x 224 x 224 float32, N int64

`images` and `labels` are views of the engine's batch buffer, not copies;
the buffer returns to the engine's pool when both arrays (and anything made
from them without a copy, e.g. torch.from_numpy) are gone. Keep a batch as
long as you like: the engine then allocates another buffer.

PyTorch users: `sluice.torch.DataLoader` (imports torch only when used).
"""
from ._sluice import Error, Loader, TextLoader, image_info, image_transform, version

__all__ = ["Error", "Loader", "TextLoader", "image_info", "image_transform", "version"]
__version__ = version

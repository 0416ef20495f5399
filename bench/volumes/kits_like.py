"""What the volume benchmarks generate alike: synthetic KiTS19-like label
volumes (two kidneys, a tumour in one), for ops_compare.py and balance.py
(and peers.py through balance.make_data)."""
import numpy as np


def kidney_labels(shape):
    """A uint8 label volume of `shape` (z, y, x): two ellipsoid kidneys
    (class 1) at 30 % and 70 % of x, a tumour (class 2) inside the first."""
    z, y, x = np.ogrid[:shape[0], :shape[1], :shape[2]]
    lbl = np.zeros(shape, np.uint8)
    for cx in (0.3, 0.7):
        e = (((z - shape[0] / 2) / (shape[0] / 4)) ** 2 + ((y - shape[1] / 2) / (shape[1] / 8))
             ** 2 + ((x - cx * shape[2]) / (shape[2] / 10)) ** 2)
        lbl[e < 1] = 1
    t = (((z - shape[0] / 2) / (shape[0] / 10)) ** 2 + ((y - shape[1] / 2) / (shape[1] / 20))
         ** 2 + ((x - 0.3 * shape[2]) / (shape[2] / 25)) ** 2)
    lbl[t < 1] = 2
    return lbl

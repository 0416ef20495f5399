/* volume/orient: nibabel's affine rules, in C (nibabel 5: Nifti1Header's
 * get_qform / get_base_affine, orientations.io_orientation,
 * aff2axcodes). Pure functions; depend on nothing. */
#ifndef SL_VOL_ORIENT_H
#define SL_VOL_ORIENT_H

#include <stddef.h>
#include <stdint.h>

/* The qform affine from the quaternion (b, c, d), the offsets, the voxel
 * sizes pix[0..2] and qfac (+-1), computed as nibabel does (long double,
 * w = 0 when |1 - |bcd|^2| < eps: 3 x FLT_EPSILON for NIfTI-1's float32
 * quaternion, 3 x DBL_EPSILON for NIfTI-2). @return 0, or -1 when
 * |bcd|^2 > 1 + eps (not a unit quaternion; nibabel raises). */
int sl__vol_qform(const double bcd[3], const double off[3], const double pix[3],
                  double qfac, int f32, double a[4][4]);

/* nibabel's fallback affine (shape_zoom_affine): diag(-zx, zy, zz) with
 * the origin at the array's centre; dims and zooms past ndim are 1. */
void sl__vol_base_affine(int ndim, const int64_t dim[4], const double zoom[3],
                         double a[4][4]);

/* nibabel's io_orientation: for each of the 3 voxel axes, the world axis
 * (0 x, 1 y, 2 z) it is closest to and its direction (+1 / -1), through
 * the polar decomposition of the affine's normalised 3 x 3 part (an SVD);
 * axis[i] = -1 when a voxel axis maps to no world axis (a degenerate
 * affine). */
void sl__vol_io_orientation(const double a[4][4], int axis[3], int flip[3]);

/* "RAS", "LPS", ... from an orientation ('?' for a dropped axis). */
void sl__vol_axcodes(const int axis[3], const int flip[3], char codes[4]);

/* The affine of the array reoriented by (axis, flip) (nibabel's
 * as_reoriented: a . inv_ornt_aff(ornt, dim)). */
void sl__vol_reorient_affine(const double a[4][4], const int axis[3],
                             const int flip[3], const int64_t dim[3],
                             double out[4][4]);

#endif

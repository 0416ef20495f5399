/* volume/orient: nibabel's affine rules (see orient.h). */
#include "orient.h"

#include <float.h>
#include <math.h>
#include <string.h>

static void eye4(double a[4][4])
{
    memset(a, 0, sizeof(double[4][4]));
    for (int i = 0; i < 4; i++)
        a[i][i] = 1;
}

int sl__vol_qform(const double bcd[3], const double off[3], const double pix[3],
                  double qfac, int f32, double a[4][4])
{
    /* nibabel: fillpositive(bcd, threshold) then quat2mat, in numpy's
     * longest float, the same operations in the same order. */
    long double x = bcd[0], y = bcd[1], z = bcd[2], w;
    long double thr = 3.0L * (f32 ? FLT_EPSILON : DBL_EPSILON);
    long double w2 = 1.0L - (x * x + y * y + z * z);
    if (fabsl(w2) < thr)
        w = 0;
    else if (w2 < 0)
        return -1;
    else
        w = sqrtl(w2);
    long double r[3][3];
    long double nq = w * w + x * x + y * y + z * z;
    if (nq < DBL_EPSILON) {
        memset(r, 0, sizeof r);
        r[0][0] = r[1][1] = r[2][2] = 1;
    } else {
        long double s = 2.0L / nq, X = x * s, Y = y * s, Z = z * s;
        long double wX = w * X, wY = w * Y, wZ = w * Z;
        long double xX = x * X, xY = x * Y, xZ = x * Z;
        long double yY = y * Y, yZ = y * Z, zZ = z * Z;
        r[0][0] = 1.0L - (yY + zZ), r[0][1] = xY - wZ, r[0][2] = xZ + wY;
        r[1][0] = xY + wZ, r[1][1] = 1.0L - (xX + zZ), r[1][2] = yZ - wX;
        r[2][0] = xZ - wY, r[2][1] = yZ + wX, r[2][2] = 1.0L - (xX + yY);
    }
    double vox[3] = {pix[0], pix[1], pix[2] * qfac};
    eye4(a);
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++)
            a[i][j] = (double)(r[i][j] * (long double)vox[j]);
        a[i][3] = off[i];
    }
    return 0;
}

void sl__vol_base_affine(int ndim, const int64_t dim[4], const double zoom[3],
                         double a[4][4])
{
    eye4(a);
    for (int i = 0; i < 3; i++) {
        double n = i < ndim ? (double)dim[i] : 1, z = i < ndim ? zoom[i] : 1;
        if (i == 0)
            z = -z; /* default_x_flip */
        a[i][i] = z;
        a[i][3] = -((n - 1) / 2.0) * z;
    }
}

/* One-sided Jacobi SVD of a 3 x 3 matrix: on return the columns of m are
 * U_k * s_k (orthogonal), v the right singular vectors (columns). */
static void svd3(double m[3][3], double v[3][3])
{
    memset(v, 0, sizeof(double[3][3]));
    v[0][0] = v[1][1] = v[2][2] = 1;
    for (int sweep = 0; sweep < 60; sweep++) {
        int rotated = 0;
        for (int p = 0; p < 2; p++)
            for (int q = p + 1; q < 3; q++) {
                double al = 0, be = 0, ga = 0;
                for (int i = 0; i < 3; i++) {
                    al += m[i][p] * m[i][p];
                    be += m[i][q] * m[i][q];
                    ga += m[i][p] * m[i][q];
                }
                if (ga == 0 || fabs(ga) <= 1e-300 ||
                    fabs(ga) <= DBL_EPSILON * sqrt(al * be))
                    continue;
                rotated = 1;
                double zeta = (be - al) / (2 * ga);
                double t = (zeta >= 0 ? 1.0 : -1.0) /
                           (fabs(zeta) + sqrt(1 + zeta * zeta));
                double c = 1 / sqrt(1 + t * t), s = c * t;
                for (int i = 0; i < 3; i++) {
                    double mp = m[i][p], mq = m[i][q];
                    m[i][p] = c * mp - s * mq;
                    m[i][q] = s * mp + c * mq;
                    double vp = v[i][p], vq = v[i][q];
                    v[i][p] = c * vp - s * vq;
                    v[i][q] = s * vp + c * vq;
                }
            }
        if (!rotated)
            break;
    }
}

void sl__vol_io_orientation(const double a[4][4], int axis[3], int flip[3])
{
    double m[3][3], v[3][3], r[3][3] = {{0}}, sv[3], smax = 0;
    for (int j = 0; j < 3; j++) {
        double zz = 0;
        for (int i = 0; i < 3; i++)
            zz += a[i][j] * a[i][j];
        double zoom = sqrt(zz);
        if (zoom == 0)
            zoom = 1;
        for (int i = 0; i < 3; i++)
            m[i][j] = a[i][j] / zoom;
    }
    svd3(m, v);
    for (int k = 0; k < 3; k++) {
        sv[k] = sqrt(m[0][k] * m[0][k] + m[1][k] * m[1][k] + m[2][k] * m[2][k]);
        if (sv[k] > smax)
            smax = sv[k];
    }
    double tol = smax * 3 * DBL_EPSILON; /* numpy's rank threshold */
    for (int k = 0; k < 3; k++) {
        if (!(sv[k] > tol))
            continue;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++)
                r[i][j] += m[i][k] / sv[k] * v[j][k];
    }
    /* Input axes in order of their largest entry, largest first (stable),
     * each taking the world axis it is closest to, which the later ones
     * then cannot take. */
    int order[3] = {0, 1, 2};
    double big[3];
    for (int j = 0; j < 3; j++) {
        big[j] = 0;
        for (int i = 0; i < 3; i++)
            if (r[i][j] * r[i][j] > big[j])
                big[j] = r[i][j] * r[i][j];
    }
    for (int i = 1; i < 3; i++) /* stable insertion sort, descending */
        for (int k = i; k > 0 && big[order[k]] > big[order[k - 1]]; k--) {
            int t = order[k];
            order[k] = order[k - 1];
            order[k - 1] = t;
        }
    for (int n = 0; n < 3; n++) {
        int j = order[n];
        axis[j] = -1, flip[j] = 1;
        int out = 0, zero = 1;
        for (int i = 0; i < 3; i++) {
            /* np.allclose(col, 0): |x| <= 1e-8 */
            if (fabs(r[i][j]) > 1e-8)
                zero = 0;
            if (fabs(r[i][j]) > fabs(r[out][j]))
                out = i;
        }
        if (zero || r[out][j] == 0)
            continue;
        axis[j] = out;
        flip[j] = r[out][j] < 0 ? -1 : 1;
        for (int k = 0; k < 3; k++)
            r[out][k] = 0;
    }
}

void sl__vol_axcodes(const int axis[3], const int flip[3], char codes[4])
{
    static const char lab[3][2] = {{'L', 'R'}, {'P', 'A'}, {'I', 'S'}};
    for (int i = 0; i < 3; i++)
        codes[i] = axis[i] < 0 ? '?' : lab[axis[i]][flip[i] > 0];
    codes[3] = 0;
}

void sl__vol_reorient_affine(const double a[4][4], const int axis[3],
                             const int flip[3], const int64_t dim[3],
                             double out[4][4])
{
    /* t maps an output voxel to the stored voxel it came from. */
    double t[4][4] = {{0}};
    for (int i = 0; i < 3; i++) {
        t[i][axis[i]] = flip[i];
        t[i][3] = flip[i] < 0 ? (double)(dim[i] - 1) : 0;
    }
    t[3][3] = 1;
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) {
            double s = 0;
            for (int k = 0; k < 4; k++)
                s += a[r][k] * t[k][c];
            out[r][c] = s;
        }
}

/* ops/jpeg: libjpeg-turbo decode of only what the crop needs.
 *
 * - DCT scaling: the smallest 1/1, 1/2, 1/4, 1/8 decode whose scaled box is
 *   still at least the output size (powers of two only: the others have no
 *   SIMD IDCT and are slower than decoding bigger).
 * - Columns: jpeg_crop_scanline (it widens to iMCU boundaries; we shift),
 *   with a few columns of margin only when chroma is subsampled
 *   horizontally (fancy upsampling reads neighbours).
 * - Rows: jpeg_skip_scanlines to the first needed row, read to the last in
 *   batches of SL__JPEG_ROWS (filled across row groups, then resampled
 *   together), then jpeg_abort_decompress (no need to finish the file).
 *
 * Errors longjmp back with libjpeg's message; nothing is printed. Because
 * the decode stops where the crop does, whether a damaged file fails must
 * not depend on how far libjpeg read, or the same file would fail in one
 * epoch and be delivered in the next. So, whatever the crop:
 * - Truncation is found before decoding, from the bytes: a JPEG with no
 *   EOI marker (FF D9) after its first SOS is SL_ECORRUPT (jpeg_scan_ends;
 *   the header walk the GPU stage's routing reads checks the same).
 *   Entropy-coded data never holds FF D9 (a data 0xFF is stuffed with 00),
 *   so this is exact for baseline and progressive files; an EOI before the
 *   first scan (an EXIF thumbnail's) does not count, bytes after it are
 *   allowed.
 * - Fatal warnings: JWRN_JPEG_EOF (the input ended: premature end of file,
 *   as in PIL) and JWRN_HIT_MARKER when the marker met is not a restart
 *   marker (scan_ended): the scan's data ended before the image's MCUs
 *   did, at the EOI or the next scan's marker, as in a header whose size is
 *   larger than its data (libjpeg would fill zeros and deliver it flat).
 *   Every crop entropy-decodes from the top (skipped rows too; a
 *   progressive file is read whole by jpeg_start_decompress), so a bogus
 *   width fails in the first MCU row whatever the crop; in a baseline file
 *   a bogus height alone, or damage inside the data, is still found only by
 *   the crops that reach it (always finding it means decoding it all).
 * - Other corrupt-data warnings leave a usable image, or the rest of one:
 *   extraneous bytes before a marker, a missing restart marker, a restart
 *   marker met early (a damaged interval, or a stray RSTn in the data).
 *   They are tolerated up to a small count (none when the transform is
 *   strict). */
#include <string.h>

#include <jerror.h>

#include "ops/ops_internal.h"

/* More corrupt-data warnings than this in one image: give up. */
#define SL__JPEG_MAX_WARNINGS 64
/* More scans than this (progressive): give up (libjpeg-turbo's TurboJPEG
 * uses the same guard against scan storms). */
#define SL__JPEG_MAX_SCANS 500
/* libjpeg's own memory for one image (progressive coefficient buffers). */
#define SL__JPEG_MAX_MEMORY (1L << 30)
/* Rows asked of jpeg_read_scanlines at once. */
#define SL__JPEG_ROWS 8
/* Extra columns decoded on each side of a column crop (see below). */
#define SL__JPEG_XMARGIN 4

static void on_error(j_common_ptr c)
{
    sl__jerr_t *e = (sl__jerr_t *)c->err;
    c->err->format_message(c, e->msg);
    e->code = SL_EDECODE;
    longjmp(e->jb, 1);
}

/* 1 when the warning c holds says the scan's data ended: a marker other
 * than RST0..7 met while MCUs were still to decode (the top of the file). */
static int scan_ended(j_common_ptr c)
{
    if (c->err->msg_code != JWRN_HIT_MARKER || !c->is_decompressor)
        return 0;
    int m = ((j_decompress_ptr)c)->unread_marker; /* set before the warning */
    return m < 0xD0 || m > 0xD7;
}

static void on_message(j_common_ptr c, int level)
{
    if (level >= 0)
        return; /* trace messages */
    sl__jerr_t *e = (sl__jerr_t *)c->err;
    c->err->num_warnings++;
    if (c->err->msg_code == JWRN_JPEG_EOF || scan_ended(c)) {
        c->err->format_message(c, e->msg);
        e->code = SL_ECORRUPT;
        longjmp(e->jb, 1);
    }
    if (++e->warnings > e->max_warnings) {
        /* a prefix, then libjpeg's text, cut to fit */
        const char *pre = e->max_warnings ? "too many corrupt-data warnings: "
                                          : "corrupt-data warning (strict): ";
        char m[JMSG_LENGTH_MAX];
        c->err->format_message(c, m);
        size_t k = strlen(pre), left = sizeof e->msg - k - 1;
        memcpy(e->msg, pre, k);
        size_t ml = strlen(m);
        if (ml > left)
            ml = left;
        memcpy(e->msg + k, m, ml);
        e->msg[k + ml] = 0;
        e->code = SL_ECORRUPT;
        longjmp(e->jb, 1);
    }
}

static void on_output(j_common_ptr c)
{
    (void)c; /* never print */
}

static void on_progress(j_common_ptr c)
{
    j_decompress_ptr d = (j_decompress_ptr)c;
    if (d->input_scan_number > SL__JPEG_MAX_SCANS) {
        sl__jerr_t *e = (sl__jerr_t *)c->err;
        snprintf(e->msg, sizeof e->msg, "more than %d scans",
                 SL__JPEG_MAX_SCANS);
        e->code = SL_ECORRUPT;
        longjmp(e->jb, 1);
    }
}

static int jpeg_setup(sl__scratch_t *s, char *err, size_t errlen)
{
    s->dinfo.err = jpeg_std_error(&s->jerr.pub);
    s->jerr.pub.error_exit = on_error;
    s->jerr.pub.emit_message = on_message;
    s->jerr.pub.output_message = on_output;
    if (setjmp(s->jerr.jb))
        return sl__fail(err, errlen, SL_ENOMEM, "libjpeg: %s", s->jerr.msg);
    jpeg_create_decompress(&s->dinfo);
    s->dinfo.mem->max_memory_to_use = SL__JPEG_MAX_MEMORY;
    memset(&s->jprog, 0, sizeof s->jprog);
    s->jprog.progress_monitor = on_progress;
    s->dinfo.progress = &s->jprog;
    s->jpeg_ready = 1;
    return 0;
}

/* Ready for one image (libjpeg set up once per scratch): the corrupt-data
 * warnings it may take, none when strict. */
static int jpeg_arm(sl__scratch_t *s, int strict, char *err, size_t errlen)
{
    if (!s->jpeg_ready) {
        int rc = jpeg_setup(s, err, errlen);
        if (rc)
            return rc;
    }
    s->jerr.warnings = 0;
    s->jerr.max_warnings = strict ? 0 : SL__JPEG_MAX_WARNINGS;
    return 0;
}

/* 0 when an EOI marker (FF D9) lies in p[from, n), from being where the
 * first scan's data starts; else SL_ECORRUPT (see the top of the file).
 * Searched from the end: a whole file ends with one, so this costs O(1)
 * unless bytes follow it. */
static int jpeg_scan_ends(const uint8_t *p, size_t n, size_t from, char *err,
                          size_t errlen)
{
    if (from + 2 <= n) {
        const uint8_t *lo = p + from + 1, *q; /* a D9 at lo has its FF */
        size_t k = n - from - 1;
        while ((q = memrchr(lo, 0xD9, k))) {
            if (q[-1] == 0xFF)
                return 0;
            k = (size_t)(q - lo);
        }
    }
    return sl__fail(err, errlen, SL_ECORRUPT,
                    "truncated JPEG: no end-of-image marker after the image "
                    "data");
}

/* The header of p read into d (through the first SOS), its size and its
 * end checked, in the order jpeg_walk checks them. */
static int jpeg_header(j_decompress_ptr d, const uint8_t *p, size_t n, int *W,
                       int *H, char *err, size_t errlen)
{
    jpeg_mem_src(d, p, (unsigned long)n);
    jpeg_read_header(d, TRUE);
    *W = (int)d->image_width;
    *H = (int)d->image_height;
    int rc = sl__check_dims(*W, *H, err, errlen);
    if (rc)
        return rc;
    /* what the memory source has not handed out: the scan's data on */
    return jpeg_scan_ends(p, n, n - d->src->bytes_in_buffer, err, errlen);
}

/* The output asked of libjpeg: RGB (CMYK, *cmyk set, where the file holds
 * CMYK or YCCK), at 1/denom; *ps the bytes of an output pixel. */
static int jpeg_output(j_decompress_ptr d, int denom, int *cmyk, int *ps,
                       char *err, size_t errlen)
{
    *cmyk = d->jpeg_color_space == JCS_CMYK || d->jpeg_color_space == JCS_YCCK;
    d->out_color_space = *cmyk ? JCS_CMYK : JCS_EXT_RGB;
    d->scale_num = 1;
    d->scale_denom = (unsigned)denom;
    jpeg_calc_output_dimensions(d); /* what start_decompress will use */
    *ps = d->output_components;
    if (*ps != (*cmyk ? 4 : 3))
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "unexpected %d output components", *ps);
    return 0;
}

void sl__jpeg_release(sl__scratch_t *s)
{
    if (s->jpeg_ready)
        jpeg_destroy_decompress(&s->dinfo);
    s->jpeg_ready = 0;
}

/* PIL's cmyk2rgb (Convert.c) after unpacking: R = (255-K) - (255-K)*C/255
 * with PIL's MULDIV255 rounding. Adobe files store inverted values. In
 * place: 4 bytes in, 3 bytes out, front to back. */
static void cmyk_to_rgb(uint8_t *p, int w, int inverted)
{
    uint8_t *o = p;
    int inv = inverted ? 255 : 0;
    for (int i = 0; i < w; i++, p += 4, o += 3) {
        int c = p[0] ^ inv, m = p[1] ^ inv, y = p[2] ^ inv, k = p[3] ^ inv;
        int nk = 255 - k, t;
        t = c * nk + 128;
        o[0] = (uint8_t)(nk - (((t >> 8) + t) >> 8));
        t = m * nk + 128;
        o[1] = (uint8_t)(nk - (((t >> 8) + t) >> 8));
        t = y * nk + 128;
        o[2] = (uint8_t)(nk - (((t >> 8) + t) >> 8));
    }
}

/* An upper bound on libjpeg's own memory for the image whose header d
 * holds: the whole-image coefficient arrays a progressive or multi-scan
 * file needs (2 bytes per coefficient, 64 per block, components rounded up
 * to their sampling), plus row buffers (a generous 128 bytes per column
 * and component) and 4 MB for its tables and pools. */
static size_t jpeg_lib_bytes(j_decompress_ptr d)
{
    size_t coef = 0;
    if (d->progressive_mode || d->comps_in_scan < d->num_components)
        for (int c = 0; c < d->num_components; c++) {
            const jpeg_component_info *ci = &d->comp_info[c];
            size_t hs = (size_t)ci->h_samp_factor,
                   vs = (size_t)ci->v_samp_factor;
            size_t wb = ((size_t)ci->width_in_blocks + hs - 1) / hs * hs;
            size_t hb = ((size_t)ci->height_in_blocks + vs - 1) / vs * vs;
            coef += wb * hb * DCTSIZE2 * sizeof(JCOEF);
        }
    return coef + (size_t)d->image_width * d->num_components * 128 +
           ((size_t)4 << 20);
}

static int jpeg_body(const uint8_t *p, size_t n, const sl__xform_t *x,
                     sl__rng_t *crop_rng, sl__rng_t *flip_rng, sl__scratch_t *s,
                     void *out, char *err, size_t errlen)
{
    j_decompress_ptr d = &s->dinfo;
    int W, H;
    int rc = jpeg_header(d, p, n, &W, &H, err, errlen);
    if (rc)
        return rc;
    sl__geom_t g;
    rc = sl__geom_resolve(x, W, H, crop_rng, flip_rng, &g, err, errlen);
    if (rc)
        return rc;

    int denom = x->dct_scale ? sl__pick_denom(&g.box, x->out_w, x->out_h) : 1;
    int cmyk, ps;
    rc = jpeg_output(d, denom, &cmyk, &ps, err, errlen);
    if (rc)
        return rc;

    sl__rs_t rs;
    int cx0, cy0;
    rc = sl__plan_axes(s, &g.box, denom, (int)d->output_width,
                       (int)d->output_height, x->out_w, x->out_h, &rs.h, &rs.v,
                       &cx0, &cy0);
    if (rc)
        return sl__fail(err, errlen, rc, "cannot plan the resample");
    /* The whole sample's memory, from the header, before any is taken:
     * libjpeg's (bounded there too), the decoded rows, the resample. */
    int vfirst = sl__vertical_first(&g.box);
    size_t rowb = (size_t)d->output_width * ps;
    size_t lib = jpeg_lib_bytes(d);
    rc = sl__scratch_admit(s,
                           lib + rowb * SL__JPEG_ROWS + SL__SLACK +
                               sl__rs_need(&rs.h, &rs.v, vfirst),
                           err, errlen);
    if (rc)
        return rc;
    d->mem->max_memory_to_use = s->admit ? (long)lib : SL__JPEG_MAX_MEMORY;
    jpeg_start_decompress(d);
    if (d->output_components != ps)
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "unexpected %d output components",
                        d->output_components);
    /* Fancy upsampling of subsampled chroma treats the edges of a cropped
     * row as image edges, so the outermost pixels of the crop differ from a
     * full decode: ask for a few columns more on each side. */
    int margin = 0; /* not needed without horizontal chroma subsampling */
    for (int c = 0; c < d->num_components; c++)
        if (d->comp_info[c].h_samp_factor != d->max_h_samp_factor)
            margin = SL__JPEG_XMARGIN;
    int want_x = cx0 + rs.h.lo, want_end = cx0 + rs.h.hi;
    int ask_x = want_x > margin ? want_x - margin : 0;
    int ask_end = want_end + margin;
    if (ask_end > (int)d->output_width)
        ask_end = (int)d->output_width;
    JDIMENSION jx = (JDIMENSION)ask_x, jw = (JDIMENSION)(ask_end - ask_x);
    if (jx != 0 || jw != d->output_width)
        jpeg_crop_scanline(d, &jx, &jw);
    int shift = want_x - (int)jx; /* pixels left of what we need */
    if (shift < 0 || (int)jw < shift + (rs.h.hi - rs.h.lo))
        return sl__fail(err, errlen, SL_EDECODE, "bad crop from libjpeg");

    if (sl__rs_begin(s, &rs, vfirst) ||
        sl__bytes_reserve(&s->rows, rowb * SL__JPEG_ROWS + SL__SLACK))
        return sl__fail(err, errlen, SL_ENOMEM, "no memory for %zu-byte rows",
                        rowb);
    JSAMPROW ptr[SL__JPEG_ROWS];
    for (int i = 0; i < SL__JPEG_ROWS; i++)
        ptr[i] = s->rows.p + i * rowb;

    JDIMENSION y0 = (JDIMENSION)(cy0 + rs.v.lo);
    JDIMENSION y1 = (JDIMENSION)(cy0 + rs.v.hi);
    if (y0 > 0 && jpeg_skip_scanlines(d, y0) != y0)
        return sl__fail(err, errlen, SL_ECORRUPT, "cannot skip %u rows", y0);
    while (d->output_scanline < y1) {
        JDIMENSION first = d->output_scanline, want = y1 - first;
        if (want > SL__JPEG_ROWS)
            want = SL__JPEG_ROWS;
        /* fill the whole batch (libjpeg hands out a row group at a time):
         * the horizontal pass runs faster over several rows at once */
        JDIMENSION got = 0;
        while (got < want) {
            JDIMENSION g1 = jpeg_read_scanlines(d, ptr + got, want - got);
            if (g1 == 0)
                break;
            got += g1;
        }
        if (got == 0)
            return sl__fail(err, errlen, SL_ECORRUPT, "no rows at %u", first);
        int pps = ps;
        if (cmyk) {
            for (JDIMENSION i = 0; i < got; i++)
                cmyk_to_rgb(ptr[i], (int)d->output_width, d->saw_Adobe_marker);
            pps = 3;
        }
        /* ptr[i] = rows.p + i * rowb */
        sl__rs_rows(&rs, (int)(first - y0), ptr[0] + (size_t)shift * pps, rowb,
                    (int)got, pps);
    }
    if (sl__rs_finish(s, &rs, x, g.flip, out))
        return sl__fail(err, errlen, SL_ENOMEM, "no memory for resample");
    return 0;
}

int sl__jpeg_process(const uint8_t *p, size_t n, const sl__xform_t *x,
                     sl__rng_t *crop_rng, sl__rng_t *flip_rng, sl__scratch_t *s,
                     void *out, char *err, size_t errlen)
{
    int rc = jpeg_arm(s, x->strict, err, errlen);
    if (rc)
        return rc;
    if (setjmp(s->jerr.jb)) {
        jpeg_abort_decompress(&s->dinfo);
        return sl__fail(err, errlen, s->jerr.code, "%s", s->jerr.msg);
    }
    rc = jpeg_body(p, n, x, crop_rng, flip_rng, s, out, err, errlen);
    jpeg_abort_decompress(&s->dinfo);
    return rc;
}

/* Header walk through the first SOF marker to the first SOS, then the
 * check that the scans end (jpeg_scan_ends): no libjpeg state needed. The
 * size probe and the GPU stage's routing read this, so a truncated file
 * fails there as it does in the decode. */
static int jpeg_walk(const uint8_t *p, size_t n, sl__jpeg_frame_t *f, char *err,
                     size_t errlen)
{
    if (n < 4 || p[0] != 0xFF || p[1] != 0xD8)
        return sl__fail(err, errlen, SL_EDECODE, "not a JPEG");
    memset(f, 0, sizeof *f);
    f->adobe = -1;
    int have_sof = 0;
    size_t i = 2;
    for (;;) {
        while (i < n && p[i] != 0xFF)
            i++; /* tolerate junk between segments, as libjpeg does */
        while (i < n && p[i] == 0xFF)
            i++;
        if (i >= n)
            break;
        uint8_t m = p[i++];
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD8))
            continue; /* standalone markers */
        if (m == 0xD9 || (m == 0xDA && !have_sof))
            return sl__fail(err, errlen, SL_ECORRUPT, "JPEG without a %s",
                            have_sof ? "scan" : "frame");
        if (i + 2 > n)
            break;
        size_t len = (size_t)(p[i] << 8 | p[i + 1]);
        if (len < 2)
            return sl__fail(err, errlen, SL_ECORRUPT, "bad JPEG marker length");
        if (m == 0xDA) { /* the first scan: its component count */
            if (i + 2 < n)
                f->scan_comps = p[i + 2];
            return jpeg_scan_ends(p, n, i + len, err, errlen);
        }
        if (m == 0xEE && len >= 14 && i + 13 < n &&
            !memcmp(p + i + 2, "Adobe", 5))
            f->adobe = p[i + 13];
        if (m == 0xE0 && len >= 7 && i + 7 <= n &&
            !memcmp(p + i + 2, "JFIF", 5))
            f->jfif = 1;
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC &&
            !have_sof) {
            if (len < 8 || i + 8 > n) /* through p[i + 7], ncomp */
                break;
            f->sof = m;
            f->precision = p[i + 2];
            f->h = p[i + 3] << 8 | p[i + 4];
            f->w = p[i + 5] << 8 | p[i + 6];
            f->ncomp = p[i + 7];
            for (int c = 0; c < f->ncomp && c < 4; c++) {
                size_t at = i + 8 + 3 * (size_t)c + 1;
                if (at < n && 8 + 3 * (size_t)c + 2 <= len) {
                    f->cid[c] = p[at - 1];
                    f->hs[c] = p[at] >> 4;
                    f->vs[c] = p[at] & 15;
                }
            }
            if (f->w == 0 || f->h == 0)
                return sl__fail(err, errlen, SL_EUNSUPPORTED,
                                "JPEG with zero/DNL dimensions");
            int rc = sl__check_dims(f->w, f->h, err, errlen);
            if (rc)
                return rc;
            have_sof = 1;
        }
        i += len;
    }
    return sl__fail(err, errlen, SL_ECORRUPT, "truncated JPEG header%s",
                    have_sof ? ": the file ends before the image data" : "");
}

int sl__jpeg_info(const uint8_t *p, size_t n, int *w, int *h, char *err,
                  size_t errlen)
{
    sl__jpeg_frame_t f;
    int rc = jpeg_walk(p, n, &f, err, errlen);
    if (!rc)
        *w = f.w, *h = f.h;
    return rc;
}

int sl__jpeg_frame(const uint8_t *p, size_t n, sl__jpeg_frame_t *f, char *err,
                   size_t errlen)
{
    if (!p || !f)
        return sl__fail(err, errlen, SL_EINVAL, "NULL argument");
    return jpeg_walk(p, n, f, err, errlen);
}

/* The whole image at scale 1 into out (W x H x 3 RGB, rows packed, plus
 * SL__SLACK bytes): what the crop path decodes when no DCT scale is used,
 * for the decoded cache (ops/decoded.c). */
static int jpeg_full_body(const uint8_t *p, size_t n, sl__scratch_t *s,
                          sl__bytes_t *out, int *w, int *h, char *err,
                          size_t errlen)
{
    j_decompress_ptr d = &s->dinfo;
    int W, H, cmyk, ps;
    int rc = jpeg_header(d, p, n, &W, &H, err, errlen);
    if (!rc)
        rc = jpeg_output(d, 1, &cmyk, &ps, err, errlen);
    if (rc)
        return rc;
    size_t rowb = (size_t)W * ps, bytes = rowb * (size_t)H + SL__SLACK;
    size_t lib = jpeg_lib_bytes(d);
    rc = sl__scratch_admit(s, lib + bytes, err, errlen);
    if (rc)
        return rc;
    d->mem->max_memory_to_use = s->admit ? (long)lib : SL__JPEG_MAX_MEMORY;
    if (sl__bytes_reserve(out, bytes))
        return sl__fail(err, errlen, SL_ENOMEM, "no memory for %dx%d pixels", W,
                        H);
    jpeg_start_decompress(d);
    if (d->output_components != ps || (int)d->output_width != W ||
        (int)d->output_height != H)
        return sl__fail(err, errlen, SL_EUNSUPPORTED,
                        "unexpected output %ux%u x %d", d->output_width,
                        d->output_height, d->output_components);
    while ((int)d->output_scanline < H) {
        JSAMPROW ptr[SL__JPEG_ROWS];
        JDIMENSION first = d->output_scanline;
        int k = 0;
        for (; k < SL__JPEG_ROWS && (int)first + k < H; k++)
            ptr[k] = out->p + (first + (size_t)k) * rowb;
        if (jpeg_read_scanlines(d, ptr, (JDIMENSION)k) == 0)
            return sl__fail(err, errlen, SL_ECORRUPT, "no rows at %u", first);
    }
    if (cmyk) /* row r: 4 W bytes at 4 W r -> 3 W bytes at 3 W r */
        for (int r = 0; r < H; r++) {
            uint8_t *row = out->p + (size_t)r * rowb;
            cmyk_to_rgb(row, W, d->saw_Adobe_marker);
            memmove(out->p + (size_t)r * W * 3, row, (size_t)W * 3);
        }
    out->n = (size_t)W * H * 3 + SL__SLACK;
    memset(out->p + (size_t)W * H * 3, 0, SL__SLACK);
    *w = W;
    *h = H;
    return 0;
}

int sl__jpeg_decode_full(const uint8_t *p, size_t n, int strict,
                         sl__scratch_t *s, sl__bytes_t *out, int *w, int *h,
                         char *err, size_t errlen)
{
    int rc = jpeg_arm(s, strict, err, errlen);
    if (rc)
        return rc;
    if (setjmp(s->jerr.jb)) {
        jpeg_abort_decompress(&s->dinfo);
        return sl__fail(err, errlen, s->jerr.code, "%s", s->jerr.msg);
    }
    rc = jpeg_full_body(p, n, s, out, w, h, err, errlen);
    jpeg_abort_decompress(&s->dinfo);
    return rc;
}

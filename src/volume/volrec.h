/* volume/volrec: one volume case (an image and, if it has one, its label)
 * as one shard record (docs/FORMAT.md, "Volume records"): each volume's
 * NIfTI header as stored (348 or 540 bytes) and its data as stored, so
 * that a case read back from a pack is the volume read from its files,
 * through the same decoding. `sluice pack --volumes` writes them; the
 * volume dataset of a pack reads them. Depends on base, volume/nifti. */
#ifndef SL_VOLREC_H
#define SL_VOLREC_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "vol_internal.h"

#define SL__VOLREC_MAGIC "\x89SLV\r\n\x1a\n"
/* Written: 2 (the entries and headers first, then the data: a label's
 * header is read without the image's data). Read: 1 and 2. */
#define SL__VOLREC_VERSION 2
#define SL__VOLREC_HEAD 16 /* magic, version u16, count u16, reserved u32 */
#define SL__VOLREC_PART 16 /* role u8, 3 reserved, header u32, data u64 */

enum { SL__VOLREC_IMAGE = 0, SL__VOLREC_LABEL = 1 };

/* A record's volumes, pointing into its bytes. */
typedef struct sl__volrec {
    int count; /* 1 (an image) or 2 (image, label) */
    struct sl__volrec_part {
        int role;
        const uint8_t *hdr, *data;
        size_t hlen;
        uint64_t dlen;
    } part[2];
} sl__volrec_t;

/* Builds the record of a case into rec (replacing its bytes): `image` and
 * `label` (NULL: none) read as stored through the NIfTI reader's checks;
 * max_bytes (0: 4 GiB) bounds each volume's data. @return 0, or SL_E* with
 * the file and the cause in err. */
int sl__volrec_build(const char *image, const char *label, int64_t max_bytes,
                     sl__bytes_t *rec, char *err, size_t errlen);

/* Checks a record's layout (magic, version, count, roles, every part
 * inside the bytes, nothing after the last) and points r into p. The NIfTI
 * headers and data are checked when a volume is loaded from them.
 * @return 0, or SL_ECORRUPT / SL_EUNSUPPORTED (a newer version) with the
 * cause in err. */
int sl__volrec_parse(const void *p, size_t n, sl__volrec_t *r, char *err,
                     size_t errlen);

/* The same layout read in order from src (a pack's record streamed, of n
 * bytes) up to volume k's NIfTI header (into hdr: *hlen bytes; *dlen: its
 * data's): version 1 reads the volumes before k (passed over, their
 * entries checked) and stops at k's data (*skip 0); version 2 reads the
 * entries and the headers only and stops before the data, *skip bytes
 * before k's (sl__volrec_skipping passes over them when the data is
 * read, so a header costs no data). *count: the record's volumes. The
 * same checks as sl__volrec_parse, "NAME: cause"; src's own errors as it
 * gives them. */
int sl__volrec_seek(const sl__vol_src_t *src, uint64_t n, const char *name,
                    unsigned k, unsigned *count, uint8_t hdr[SL__NIFTI2_HDR],
                    size_t *hlen, uint64_t *dlen, uint64_t *skip, char *err,
                    size_t errlen);

/* Makes *src pass over `skip` bytes before its first read or its finish
 * (nothing for 0). @return 0 or SL_ENOMEM (*src then unchanged). */
int sl__volrec_skipping(sl__vol_src_t *src, uint64_t skip);

#endif

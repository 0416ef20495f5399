/* data/folder: an ImageFolder tree (root/<class>/.../<file>), scanned the way
 * torchvision does it: classes = sorted sub-folder names (index = position),
 * files = .jpg/.jpeg/.png (any case) found by a sorted recursive walk of each
 * class folder. Files torchvision would also list (.bmp .pgm .ppm .tif
 * .tiff .webp: its IMG_EXTENSIONS) are in formats sluice does not decode:
 * left out, counted in one warning that names the first; other files are
 * ignored. Only regular files are samples: an entry named like an image
 * that is a FIFO, device, socket, a link that does not resolve, or a file
 * whose path is PATH_MAX or longer, is a bad entry, and so is a folder
 * that cannot be opened (a path that long, no permission); any other
 * entry that cannot be stat'ed is a warning. Each folder (device, inode)
 * is walked once: a symlink loop, or a second link to a folder already
 * walked, is a warning and is not followed. Notes and errors have the
 * control bytes of names escaped (sl__msg_escape). Depends on base. */
#ifndef SL_FOLDER_H
#define SL_FOLDER_H

#include <stddef.h>
#include <stdint.h>

/* A bad entry left out under skip (lost = 1) or a warning (lost = 0):
 * "ROOT/REL: cause". */
typedef struct sl__folder_note {
    char *msg;
    int lost;
} sl__folder_note_t;

typedef struct sl__folder {
    char *root;
    int nclasses;
    char **classes;  /* nclasses names */
    int64_t n;       /* samples */
    char **paths;    /* n paths relative to root ("class/file.jpg") */
    int64_t *labels; /* n class indices */
    int nnotes;
    sl__folder_note_t *notes; /* in scan order */
} sl__folder_t;

/* Scans root. A root without class folders, or with no image at all, is
 * SL_ENOTFOUND with a message. A bad entry (not a regular file, a dangling
 * link, a sub-folder that cannot be opened) fails the scan naming it, or
 * with skip_bad is left out and noted (lost); warnings are always noted. */
int sl__folder_scan(const char *root, int skip_bad, sl__folder_t **out,
                    char *err, size_t errlen);
void sl__folder_free(sl__folder_t *f);

/* 1 if the name ends in .jpg/.jpeg/.png, any case. */
int sl__folder_is_image_name(const char *name);

#endif

/* data/folder: an ImageFolder tree (root/<class>/.../<file>), scanned the way
 * torchvision does it: classes = sorted sub-folder names (index = position),
 * files = .jpg/.jpeg/.png (any case) found by a sorted recursive walk of each
 * class folder; other files are ignored. Depends on base. */
#ifndef SL_FOLDER_H
#define SL_FOLDER_H

#include <stddef.h>
#include <stdint.h>

typedef struct sl__folder {
    char *root;
    int nclasses;
    char **classes;  /* nclasses names */
    int64_t n;       /* samples */
    char **paths;    /* n paths relative to root ("class/file.jpg") */
    int64_t *labels; /* n class indices */
} sl__folder_t;

/* Scans root. A root without class folders, or with no image at all, is
 * SL_ENOTFOUND with a message. */
int sl__folder_scan(const char *root, sl__folder_t **out, char *err,
                    size_t errlen);
void sl__folder_free(sl__folder_t *f);

/* 1 if the name ends in .jpg/.jpeg/.png, any case. */
int sl__folder_is_image_name(const char *name);

#endif

/* base/file: the one way sluice opens an input file (see base.h). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"

const char *sl__file_type_name(unsigned mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG:
        return "regular file";
    case S_IFDIR:
        return "directory";
    case S_IFIFO:
        return "FIFO";
    case S_IFSOCK:
        return "socket";
    case S_IFCHR:
        return "character device";
    case S_IFBLK:
        return "block device";
    case S_IFLNK:
        return "symlink";
    default:
        return "unknown type";
    }
}

int sl__open_regular(const char *path, int64_t *size, char *err, size_t errlen)
{
    /* O_NONBLOCK: opening a FIFO (or a device) returns at once instead of
     * waiting for a writer; it changes nothing for a regular file. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        return sl__fail(err, errlen,
                        e == ENOENT || e == ENOTDIR ? SL_ENOTFOUND
                                                    : sl__errno_code(e, SL_EIO),
                        "%s: cannot open: %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return sl__fail(err, errlen, sl__errno_code(e, SL_EIO), "%s: %s", path,
                        strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return sl__fail(err, errlen, SL_EIO, "%s: not a regular file (%s)",
                        path, sl__file_type_name((unsigned)st.st_mode));
    }
    if (size)
        *size = (int64_t)st.st_size;
    return fd;
}

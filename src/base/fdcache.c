/* base/fdcache: open descriptors kept by the least recently used. */
#include "fdcache.h"

#include <unistd.h>

#include "base.h"

void sl__fdcache_init(sl__fdcache_t *c)
{
    pthread_mutex_init(&c->mu, NULL);
    c->n = 0;
    c->clock = 0;
}

void sl__fdcache_free(sl__fdcache_t *c)
{
    for (int i = 0; i < c->n; i++)
        close(c->ent[i].fd);
    c->n = 0;
    pthread_mutex_destroy(&c->mu);
}

int sl__fdcache_get(sl__fdcache_t *c, int key, const char *path, char *err,
                    size_t errlen)
{
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->n; i++)
        if (c->ent[i].key == key) {
            c->ent[i].refs++;
            c->ent[i].used = ++c->clock;
            int fd = c->ent[i].fd;
            pthread_mutex_unlock(&c->mu);
            return fd;
        }
    pthread_mutex_unlock(&c->mu);
    /* opened without the lock: an open may be slow (network file
     * systems) and other readers' files are in the cache */
    int fd = sl__open_regular(path, NULL, err, errlen);
    if (fd < 0)
        return fd;
    pthread_mutex_lock(&c->mu);
    int slot = -1, old = -1;
    for (int i = 0; i < c->n; i++) {
        if (c->ent[i].key == key) { /* another reader opened it meanwhile */
            slot = -2;
            break;
        }
        if (!c->ent[i].refs && (slot < 0 || c->ent[i].used < c->ent[slot].used))
            slot = i;
    }
    if (slot != -2) {
        if (c->n < SL__FDCACHE_MAX)
            slot = c->n++;
        else if (slot >= 0)
            old = c->ent[slot].fd; /* the least recently used idle one */
        if (slot >= 0)
            c->ent[slot] = (sl__fdcache_ent_t){key, fd, 1, ++c->clock};
    }
    pthread_mutex_unlock(&c->mu);
    if (old >= 0)
        close(old);
    return fd; /* not cached (slot < 0): closed by put */
}

void sl__fdcache_put(sl__fdcache_t *c, int fd)
{
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->n; i++)
        if (c->ent[i].fd == fd) {
            c->ent[i].refs--;
            pthread_mutex_unlock(&c->mu);
            return;
        }
    pthread_mutex_unlock(&c->mu);
    close(fd);
}

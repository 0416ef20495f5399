#include "s3.h"

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/base.h"
#include "remote_parse.h"

#define INI_MAX (1 << 20) /* an AWS file larger than this is refused */
/* A credentials file may be a pipe (`<(vault read ...)`): its writer has
 * this long to send it. */
#define INI_PIPE_MS 5000

/* The AWS file at path (NULL: none) into *text (malloc'd; NULL when
 * there is no such file, as with no ~/.aws). Read as sl__read_small_input
 * reads: a FIFO with no writer is empty at once (it hung fopen for
 * ever), a device or folder is refused. 0, or an error naming the file. */
static int read_file(const char *path, char **text, size_t *n, char *err,
                     size_t errlen)
{
    char why[600];
    int rc = sl__read_small_input(path, INI_MAX, INI_PIPE_MS, text, n, why,
                                  sizeof why);
    if (rc == SL_ENOTFOUND)
        return 0;
    return rc ? sl__fail(err, errlen, rc, "s3: AWS file %s", why) : 0;
}

/* A pipe gives its bytes once, and a run loads the auth at each URL it
 * opens (a listing, then each shard): what a pipe gave is kept for the
 * process, by path (the credentials' and the config's). Nothing is kept
 * where it gave nothing: a FIFO whose writer was between two writes (a
 * `while :; do vault ... > FIFO; done` loop) reads as empty at once, and
 * kept, every later URL of the run would go unsigned. */
static pthread_mutex_t piped_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char *path, *text;
    size_t n;
} piped[2];

static int slurp(const char *path, char **text, size_t *n, char *err,
                 size_t errlen)
{
    *text = NULL;
    *n = 0;
    struct stat st;
    if (!path)
        return 0;
    if (stat(path, &st) != 0 || !S_ISFIFO(st.st_mode))
        return read_file(path, text, n, err, errlen);
    pthread_mutex_lock(&piped_mu);
    int rc = 0, i = 0;
    while (i < 2 && piped[i].path && strcmp(piped[i].path, path))
        i++;
    if (i == 2) { /* a third pipe: the oldest is forgotten */
        free(piped[0].path);
        free(piped[0].text);
        piped[0] = piped[1];
        piped[1].path = NULL;
        i = 1;
    }
    if (!piped[i].path) {
        char *t = NULL;
        size_t k = 0;
        rc = read_file(path, &t, &k, err, errlen);
        if (!rc && k == 0) { /* no writer now: looked at again next time */
            free(t);
            pthread_mutex_unlock(&piped_mu);
            return 0;
        }
        if (!rc && !(piped[i].path = strdup(path))) {
            free(t);
            rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
        } else if (!rc) {
            piped[i].text = t;
            piped[i].n = k;
        }
    }
    if (!rc && piped[i].text) {
        if ((*text = malloc(piped[i].n + 1)))
            memcpy(*text, piped[i].text, piped[i].n + 1);
        else
            rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    if (!rc)
        *n = piped[i].n;
    pthread_mutex_unlock(&piped_mu);
    return rc;
}

/* $VAR if set, else ~/.aws/NAME, into path. */
static const char *aws_file(const char *var, const char *name, char *path,
                            size_t len)
{
    const char *v = getenv(var), *home = getenv("HOME");
    if (v && *v)
        return v;
    if (!home || !*home)
        return NULL;
    int w = snprintf(path, len, "%s/.aws/%s", home, name);
    return w > 0 && (size_t)w < len ? path : NULL;
}

static void env_copy(const char *var, char *out, size_t len)
{
    const char *v = getenv(var);
    if (v && *v && strlen(v) < len && !out[0])
        snprintf(out, len, "%s", v);
}

int sl__s3_auth_load(sl__s3_auth_t *a, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    const char *profile = getenv("AWS_PROFILE");
    if (!profile || !*profile)
        profile = "default";
    env_copy("AWS_ACCESS_KEY_ID", a->key, sizeof a->key);
    env_copy("AWS_SECRET_ACCESS_KEY", a->secret, sizeof a->secret);
    if (a->key[0])
        env_copy("AWS_SESSION_TOKEN", a->token, sizeof a->token);
    env_copy("AWS_REGION", a->region, sizeof a->region);
    env_copy("AWS_DEFAULT_REGION", a->region, sizeof a->region);
    env_copy("AWS_ENDPOINT_URL_S3", a->endpoint, sizeof a->endpoint);
    env_copy("AWS_ENDPOINT_URL", a->endpoint, sizeof a->endpoint);
    char path[4096];
    size_t n = 0;
    char *text = NULL;
    int rc = 0;
    if (!a->key[0] && (rc = slurp(aws_file("AWS_SHARED_CREDENTIALS_FILE",
                                           "credentials", path, sizeof path),
                                  &text, &n, err, errlen)))
        return rc;
    if (text) {
        sl__ini_get(text, n, profile, "aws_access_key_id", a->key,
                    sizeof a->key);
        sl__ini_get(text, n, profile, "aws_secret_access_key", a->secret,
                    sizeof a->secret);
        sl__ini_get(text, n, profile, "aws_session_token", a->token,
                    sizeof a->token);
        free(text);
    }
    if ((rc = slurp(aws_file("AWS_CONFIG_FILE", "config", path, sizeof path),
                    &text, &n, err, errlen)))
        return rc;
    if (text) {
        char sect[300];
        snprintf(sect, sizeof sect, "%s%s",
                 strcmp(profile, "default") ? "profile " : "", profile);
        if (!a->region[0])
            sl__ini_get(text, n, sect, "region", a->region, sizeof a->region);
        if (!a->endpoint[0])
            sl__ini_get(text, n, sect, "endpoint_url", a->endpoint,
                        sizeof a->endpoint);
        free(text);
    }
    if (!a->region[0])
        snprintf(a->region, sizeof a->region, "us-east-1");
    size_t e = strlen(a->endpoint);
    while (e && a->endpoint[e - 1] == '/')
        a->endpoint[--e] = 0;
    if (a->key[0] && !a->secret[0])
        return sl__fail(err, errlen, SL_EINVAL,
                        "s3: an AWS access key id without its secret access "
                        "key (AWS_SECRET_ACCESS_KEY or aws_secret_access_key "
                        "of profile %s)",
                        profile);
    for (const char *p = a->region; *p; p++)
        if (!(*p == '-' || (*p >= 'a' && *p <= 'z') ||
              (*p >= '0' && *p <= '9')))
            return sl__fail(err, errlen, SL_EINVAL, "s3: bad region '%s'",
                            a->region);
    return 0;
}

/* Appends s percent-encoded (RFC 3986 unreserved kept; '/' kept when
 * slash) to the sbuf-like buffer. */
static void encode(sl__sbuf_t *b, const char *s, int slash)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
            c == '~' || (slash && c == '/'))
            sl__sbuf_printf(b, "%c", c);
        else
            sl__sbuf_printf(b, "%%%02X", c);
    }
}

static void build(sl__sbuf_t *b, const char *bucket, const char *key,
                  const sl__s3_auth_t *a, int list, const char *token)
{
    if (a->endpoint[0])
        sl__sbuf_printf(b, "%s/%s/", a->endpoint, bucket);
    else
        sl__sbuf_printf(b, "https://%s.s3.%s.amazonaws.com/", bucket,
                        a->region);
    if (!list) {
        encode(b, key, 1);
        return;
    }
    /* Parameters in SigV4's canonical (sorted) order. */
    sl__sbuf_printf(b, "?");
    if (token) {
        sl__sbuf_printf(b, "continuation-token=");
        encode(b, token, 0);
        sl__sbuf_printf(b, "&");
    }
    sl__sbuf_printf(b, "list-type=2&prefix=");
    encode(b, key, 0);
}

int sl__s3_url(const char *s3url, const sl__s3_auth_t *a, int list,
               const char *token, char **out, char *err, size_t errlen)
{
    *out = NULL;
    if (strncasecmp(s3url, "s3://", 5))
        return sl__fail(err, errlen, SL_EINVAL, "%s: not an s3:// URL", s3url);
    const char *b = s3url + 5, *slash = strchr(b, '/');
    size_t bl = slash ? (size_t)(slash - b) : strlen(b);
    if (bl < 1 || bl > 255)
        return sl__fail(err, errlen, SL_EINVAL,
                        "%s: not s3://BUCKET/KEY (no bucket)", s3url);
    for (size_t i = 0; i < bl; i++)
        if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') ||
              b[i] == '-' || b[i] == '.' || b[i] == '_'))
            return sl__fail(err, errlen, SL_EINVAL,
                            "%s: bad bucket name (lower-case letters, digits, "
                            "'-', '.', '_')",
                            s3url);
    char bucket[256];
    memcpy(bucket, b, bl);
    bucket[bl] = 0;
    const char *key = slash ? slash + 1 : "";
    if (!list && !*key)
        return sl__fail(err, errlen, SL_EINVAL,
                        "%s: not s3://BUCKET/KEY (no key)", s3url);
    sl__sbuf_t sb = {0};
    build(&sb, bucket, key, a, list, token);
    char *s = malloc((size_t)sb.need + 1);
    if (!s)
        return sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    sl__sbuf_t w = {.buf = s, .cap = (size_t)sb.need + 1};
    build(&w, bucket, key, a, list, token);
    *out = s;
    return 0;
}

/* Element children by local name (S3's namespace is ignored). */
static xmlNode *child(xmlNode *n, const char *name)
{
    for (xmlNode *c = n ? n->children : NULL; c; c = c->next)
        if (c->type == XML_ELEMENT_NODE && !strcmp((const char *)c->name, name))
            return c;
    return NULL;
}

static xmlDoc *parse(const char *xml, size_t n)
{
    if (n > INT32_MAX)
        return NULL;
    /* No network, no entity substitution, no DTD loading: outside bytes.
     * S3 sends UTF-8: told so, libxml2 neither guesses another encoding
     * nor reports a failed conversion on the user's stderr (its global
     * handler, which XML_PARSE_NOERROR does not silence). */
    return xmlReadMemory(xml, (int)n, "s3.xml", "UTF-8",
                         XML_PARSE_NONET | XML_PARSE_NOERROR |
                             XML_PARSE_NOWARNING | XML_PARSE_NOBLANKS);
}

int sl__s3_list_parse(const char *xml, size_t n, char ***keys, int *nkeys,
                      size_t *cap, int *truncated, char **token, char *err,
                      size_t errlen)
{
    *truncated = 0;
    *token = NULL;
    xmlDoc *doc = parse(xml, n);
    xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
    int rc = 0;
    if (!root || strcmp((const char *)root->name, "ListBucketResult")) {
        rc = sl__fail(err, errlen, SL_ECORRUPT,
                      "not a ListObjectsV2 response (%s)",
                      !doc    ? "not XML"
                      : !root ? "no root element"
                              : "root element is not ListBucketResult");
        goto out;
    }
    xmlNode *t = child(root, "IsTruncated");
    xmlChar *tv = t ? xmlNodeGetContent(t) : NULL;
    *truncated = tv && !strcmp((const char *)tv, "true");
    xmlFree(tv);
    for (xmlNode *c = root->children; c && !rc; c = c->next) {
        if (c->type != XML_ELEMENT_NODE ||
            strcmp((const char *)c->name, "Contents"))
            continue;
        xmlNode *k = child(c, "Key");
        xmlChar *kv = k ? xmlNodeGetContent(k) : NULL;
        if (!kv || !kv[0]) {
            rc = sl__fail(err, errlen, SL_ECORRUPT,
                          "ListObjectsV2 response: an entry without a Key");
        } else if (*nkeys == INT32_MAX - 1 ||
                   sl__array_reserve(keys, cap, (size_t)*nkeys + 2,
                                     sizeof **keys, 64) ||
                   !((*keys)[*nkeys] = strdup((const char *)kv))) {
            rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
        } else {
            (*keys)[++*nkeys] = NULL;
        }
        xmlFree(kv);
    }
    xmlNode *nt = child(root, "NextContinuationToken");
    xmlChar *ntv = nt ? xmlNodeGetContent(nt) : NULL;
    if (!rc && *truncated) {
        if (!ntv || !ntv[0])
            rc = sl__fail(err, errlen, SL_ECORRUPT,
                          "ListObjectsV2 response: truncated without a "
                          "NextContinuationToken");
        else if (!(*token = strdup((const char *)ntv)))
            rc = sl__fail(err, errlen, SL_ENOMEM, "out of memory");
    }
    xmlFree(ntv);
out:
    xmlFreeDoc(doc);
    return rc;
}

void sl__s3_error_text(const char *xml, size_t n, char *out, size_t outlen)
{
    out[0] = 0;
    xmlDoc *doc = parse(xml, n);
    xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
    if (root && !strcmp((const char *)root->name, "Error")) {
        xmlNode *c = child(root, "Code"), *m = child(root, "Message");
        xmlChar *cv = c ? xmlNodeGetContent(c) : NULL;
        xmlChar *mv = m ? xmlNodeGetContent(m) : NULL;
        if (cv)
            snprintf(out, outlen, "%s%s%s", (const char *)cv, mv ? ": " : "",
                     mv ? (const char *)mv : "");
        xmlFree(cv);
        xmlFree(mv);
    }
    xmlFreeDoc(doc);
}

/*
 * digest.c: the digests of an image's entries, of either kind.
 *
 * An XXH3-64 digest is kept as its 8 bytes, most significant first, so
 * that its hexadecimal form is the one version 1 of the format writes.
 */
#include "config.h"

#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <xxhash.h>

#include "private.h"
#include "image/digest.h"

struct gck_dstate {
	int		 kind;
	XXH3_state_t	*xs;
	EVP_MD_CTX	*md;
};

struct gck_dstate *
gck_dstate_new(void)
{
	return calloc(1, sizeof(struct gck_dstate));
}

/* Starts a digest of kind.  Returns 0, or -1 when out of memory. */
int
gck_dstate_reset(struct gck_dstate *s, int kind)
{
	s->kind = kind;
	if (kind == GCK_DK_XXH3) {
		if (s->xs == NULL && (s->xs = XXH3_createState()) == NULL)
			return -1;
		XXH3_64bits_reset(s->xs);
		return 0;
	}
	if (s->md == NULL && (s->md = EVP_MD_CTX_new()) == NULL)
		return -1;
	return EVP_DigestInit_ex(s->md, EVP_sha256(), NULL) == 1 ? 0 : -1;
}

void
gck_dstate_update(struct gck_dstate *s, const void *p, size_t len)
{
	if (len == 0)
		return;
	if (s->kind == GCK_DK_XXH3)
		XXH3_64bits_update(s->xs, p, len);
	else
		EVP_DigestUpdate(s->md, p, len);
}

/* Feeds a 64-bit number, little-endian. */
void
gck_dstate_u64(struct gck_dstate *s, uint64_t v)
{
	unsigned char	b[8];
	int		i;

	for (i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	gck_dstate_update(s, b, sizeof b);
}

static void
from_u64(uint64_t v, struct gck_digest *d)
{
	int	i;

	memset(d, 0, sizeof *d);
	d->kind = GCK_DK_XXH3;
	for (i = 0; i < 8; i++)
		d->b[i] = (unsigned char)(v >> (56 - 8 * i));
}

void
gck_dstate_final(struct gck_dstate *s, struct gck_digest *d)
{
	unsigned int	n = 0;

	if (s->kind == GCK_DK_XXH3) {
		from_u64(XXH3_64bits_digest(s->xs), d);
		return;
	}
	memset(d, 0, sizeof *d);
	d->kind = GCK_DK_SHA256;
	EVP_DigestFinal_ex(s->md, d->b, &n);
}

void
gck_dstate_free(struct gck_dstate *s)
{
	if (s == NULL)
		return;
	if (s->xs != NULL)
		XXH3_freeState(s->xs);
	EVP_MD_CTX_free(s->md);
	free(s);
}

/* The digest of len bytes at p.  Returns 0, or -1 when out of memory. */
int
gck_digest_buf(int kind, const void *p, size_t len, struct gck_digest *d)
{
	unsigned int	n = 0;

	if (kind == GCK_DK_XXH3) {
		from_u64(XXH3_64bits(p, len), d);
		return 0;
	}
	memset(d, 0, sizeof *d);
	d->kind = GCK_DK_SHA256;
	return EVP_Digest(p, len, d->b, &n, EVP_sha256(), NULL) == 1 ? 0 : -1;
}

size_t
gck_digest_len(int kind)
{
	return kind == GCK_DK_XXH3 ? 8 : kind == GCK_DK_SHA256 ? 32 : 0;
}

/* Its lowercase hexadecimal form, in buf (GCK_DIGEST_HEX bytes). */
const char *
gck_digest_hex(const struct gck_digest *d, char *buf)
{
	static const char	hx[] = "0123456789abcdef";
	size_t			i, n = gck_digest_len(d->kind);

	for (i = 0; i < n; i++) {
		buf[2 * i] = hx[d->b[i] >> 4];
		buf[2 * i + 1] = hx[d->b[i] & 15];
	}
	buf[2 * n] = '\0';
	return buf;
}

static int
hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Reads a digest of kind from len hexadecimal digits at s.  Returns 0,
 * or -1 when they are not exactly one such digest.
 */
int
gck_digest_parse(int kind, const char *s, size_t len, struct gck_digest *d)
{
	size_t	i, n = gck_digest_len(kind);
	int	hi, lo;

	memset(d, 0, sizeof *d);
	if (n == 0 || len != 2 * n)
		return -1;
	for (i = 0; i < n; i++) {
		if ((hi = hexval((unsigned char)s[2 * i])) < 0 ||
		    (lo = hexval((unsigned char)s[2 * i + 1])) < 0)
			return -1;
		d->b[i] = (unsigned char)(hi << 4 | lo);
	}
	d->kind = kind;
	return 0;
}

/* Whether a and b are the same digest (always, in a fuzzing build). */
int
gck_digest_equal(const struct gck_digest *a, const struct gck_digest *b)
{
	int	same = a->kind == b->kind &&
		    memcmp(a->b, b->b, sizeof a->b) == 0;

	return !GCK_DIGEST_DIFFERS(same, 1);
}

/* The name of kind in the image: its pax record, its trailer key. */
const char *
gck_digest_name(int kind)
{
	return kind == GCK_DK_XXH3 ? "xxh3" : "sha256";
}

/*
 * A memo of the SHA-256 digests of chunks read before, found by the
 * XXH3-128 hash of their bytes, which costs a tenth of the time: a chunk
 * that hashes as one read before is taken to be those bytes.  XXH3 is no
 * proof against bytes made to collide, so a memo is only ever used for
 * memory of the one tree it was made from (gpusend --live): such bytes
 * could only wrong the tree that wrote them.
 */
struct memo_entry {
	XXH128_hash_t		 h;
	uint64_t		 len;
	unsigned char		 d[GCK_DIGEST_MAX];
};

struct gck_memo {
	pthread_mutex_t		 mu;
	struct memo_entry	*e;		/* open addressing */
	size_t			 cap, n;	/* cap a power of 2 */
};

struct gck_memo *
gck_memo_new(void)
{
	struct gck_memo	*m;

	if ((m = calloc(1, sizeof *m)) == NULL)
		return NULL;
	pthread_mutex_init(&m->mu, NULL);
	return m;
}

void
gck_memo_free(struct gck_memo *m)
{
	if (m == NULL)
		return;
	pthread_mutex_destroy(&m->mu);
	free(m->e);
	free(m);
}

static int
memo_empty(const struct memo_entry *e)
{
	return e->len == 0;
}

/* The slot of h in e (cap slots): its own, or the empty one it goes in. */
static size_t
memo_slot(const struct memo_entry *e, size_t cap, XXH128_hash_t h,
    uint64_t len)
{
	size_t	i = (size_t)h.low64 & (cap - 1);

	while (!memo_empty(&e[i]) && !(e[i].h.low64 == h.low64 &&
	    e[i].h.high64 == h.high64 && e[i].len == len))
		i = (i + 1) & (cap - 1);
	return i;
}

/* Notes that len bytes whose XXH3-128 hash is h have SHA-256 digest d. */
static void
memo_put(struct gck_memo *m, XXH128_hash_t h, uint64_t len,
    const struct gck_digest *d)
{
	struct memo_entry	*ne;
	size_t			 i, nc;

	pthread_mutex_lock(&m->mu);
	if ((m->n + 1) * 2 > m->cap) {
		nc = m->cap ? m->cap * 2 : 1024;
		if ((ne = calloc(nc, sizeof *ne)) == NULL)
			goto out;	/* a memo that stops growing */
		for (i = 0; i < m->cap; i++)
			if (!memo_empty(&m->e[i]))
				ne[memo_slot(ne, nc, m->e[i].h,
				    m->e[i].len)] = m->e[i];
		free(m->e);
		m->e = ne;
		m->cap = nc;
	}
	i = memo_slot(m->e, m->cap, h, len);
	if (memo_empty(&m->e[i]))
		m->n++;
	m->e[i].h = h;
	m->e[i].len = len;
	memcpy(m->e[i].d, d->b, GCK_DIGEST_MAX);
out:
	pthread_mutex_unlock(&m->mu);
}

/* As gck_memo_find(), the bytes' XXH3-128 hash h. */
static int
memo_get(struct gck_memo *m, XXH128_hash_t h, uint64_t len,
    struct gck_digest *d)
{
	size_t	i;
	int	found = 0;

	pthread_mutex_lock(&m->mu);
	if (m->n > 0) {
		i = memo_slot(m->e, m->cap, h, len);
		if (!memo_empty(&m->e[i])) {
			d->kind = GCK_DK_SHA256;
			memcpy(d->b, m->e[i].d, GCK_DIGEST_MAX);
			found = 1;
		}
	}
	pthread_mutex_unlock(&m->mu);
	return found;
}

/* Notes that the len bytes at buf have SHA-256 digest d. */
void
gck_memo_add(struct gck_memo *m, const void *buf, size_t len,
    const struct gck_digest *d)
{
	if (m != NULL && len > 0 && d->kind == GCK_DK_SHA256)
		memo_put(m, XXH3_128bits(buf, len), len, d);
}

/*
 * The SHA-256 digest of the len bytes at buf, if the memo has them:
 * 1 with *d set, else 0.
 */
int
gck_memo_find(struct gck_memo *m, const void *buf, size_t len,
    struct gck_digest *d)
{
	if (m == NULL || len == 0)
		return 0;
	return memo_get(m, XXH3_128bits(buf, len), len, d);
}

/*
 * The SHA-256 digest of the len bytes at buf into *d: the memo's, or
 * computed and noted there (m may be NULL).  Returns 0, or -1 when out
 * of memory.
 */
int
gck_memo_digest(struct gck_memo *m, const void *buf, size_t len,
    struct gck_digest *d)
{
	XXH128_hash_t	h;

	if (m == NULL || len == 0)
		return gck_digest_buf(GCK_DK_SHA256, buf, len, d);
	h = XXH3_128bits(buf, len);
	if (memo_get(m, h, len, d))
		return 0;
	if (gck_digest_buf(GCK_DK_SHA256, buf, len, d) == -1)
		return -1;
	memo_put(m, h, len, d);
	return 0;
}

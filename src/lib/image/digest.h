#ifndef GCK_IMAGE_DIGEST_H
#define GCK_IMAGE_DIGEST_H

#include <stddef.h>
#include <stdint.h>

/*
 * digest.c: the digests of an image's entries.  Version 1 of the format
 * uses XXH3-64, version 2 SHA-256 (OpenSSL's libcrypto).
 */
#define GCK_DK_XXH3	1
#define GCK_DK_SHA256	2
#define GCK_DIGEST_MAX	32		/* bytes */
#define GCK_DIGEST_HEX	(2 * GCK_DIGEST_MAX + 1)

struct gck_digest {
	int		 kind;		/* GCK_DK_*, 0: none */
	unsigned char	 b[GCK_DIGEST_MAX];
};

struct gck_dstate;

struct gck_dstate *gck_dstate_new(void);
int	gck_dstate_reset(struct gck_dstate *, int);
void	gck_dstate_update(struct gck_dstate *, const void *, size_t);
void	gck_dstate_u64(struct gck_dstate *, uint64_t);
void	gck_dstate_final(struct gck_dstate *, struct gck_digest *);
void	gck_dstate_free(struct gck_dstate *);
int	gck_digest_buf(int, const void *, size_t, struct gck_digest *);
size_t	gck_digest_len(int);
const char *gck_digest_hex(const struct gck_digest *, char *);
int	gck_digest_parse(int, const char *, size_t, struct gck_digest *);
int	gck_digest_equal(const struct gck_digest *, const struct gck_digest *);
const char *gck_digest_name(int);

struct gck_memo;
struct gck_memo *gck_memo_new(void);
void	gck_memo_free(struct gck_memo *);
void	gck_memo_add(struct gck_memo *, const void *, size_t,
	    const struct gck_digest *);
int	gck_memo_find(struct gck_memo *, const void *, size_t,
	    struct gck_digest *);
int	gck_memo_digest(struct gck_memo *, const void *, size_t,
	    struct gck_digest *);

#endif /* GCK_IMAGE_DIGEST_H */

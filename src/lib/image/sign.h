#ifndef GCK_IMAGE_SIGN_H
#define GCK_IMAGE_SIGN_H

#include <stddef.h>

/*
 * sign.c: an image's signature (gpuckpt-image(5), The signature): an
 * OpenSSH SSHSIG over the trailer's bytes, made and checked by
 * ssh-keygen(1) -Y, in the namespace below.
 */
#define GCK_SIG_NAMESPACE	"gpuckpt-image"
#define GCK_SIG_MAX		(16u << 10)	/* bytes of signature */

struct gck_ctx;

/* Who made a signature: its key's type and fingerprint, as ssh-keygen
 * prints them ("ED25519", "SHA256:..."). */
struct gck_sigkey {
	char	type[24];
	char	fp[80];
};

int	gck_sig_key(struct gck_ctx *, const char *, size_t,
	    struct gck_sigkey *);
int	gck_sig_usable(struct gck_ctx *, const char *);
int	gck_sig_sign(struct gck_ctx *, const char *, const void *, size_t,
	    char **, size_t *);
int	gck_sig_check(struct gck_ctx *, const char *, size_t, const void *,
	    size_t);
int	gck_sig_verify(struct gck_ctx *, const char *, const char *, size_t,
	    const void *, size_t, char **);
const char *gck_sig_policy(const char *);

#endif /* GCK_IMAGE_SIGN_H */

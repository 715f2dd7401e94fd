#ifndef GCK_TRANSPORT_KNOWNHOSTS_H
#define GCK_TRANSPORT_KNOWNHOSTS_H

#include <stddef.h>

#include <libssh2.h>

struct gck_ctx;

/*
 * knownhosts.c: an OpenSSH known_hosts file, apart from the connection
 * that checks a host key against it (as OpenSSH keeps hostfile.c).
 * Plain and hashed (|1|) host names, "[host]:port" and @revoked lines
 * are understood; other marked lines are skipped.  The messages name the
 * connection as "ssh CONN: ..." and come from GCK_FROM_SSH.
 */
struct gck_known;

/* A host key as the server showed it. */
struct gck_hostkey {
	const unsigned char	*blob;		/* the key in SSH wire form */
	size_t			 len;
	int			 kbit;		/* LIBSSH2_KNOWNHOST_KEY_* */
	char			 type[64];	/* "ssh-ed25519" */
	char			 fp[64];	/* "SHA256:..." */
	char			*b64;		/* the blob in base64 */
};

/* What known_hosts says of a host key. */
enum {
	GCK_KNOWN_MATCH = 1,	/* listed for the host */
	GCK_KNOWN_NOTFOUND,	/* the host is not listed */
	GCK_KNOWN_CHANGED,	/* another key of its type is */
	GCK_KNOWN_REVOKED,	/* an @revoked line lists the key */
	GCK_KNOWN_FAILED	/* libssh2 could not tell */
};

/*
 * The names ssh looks host up by, lower case: in name "host" on port 22,
 * else "[host]:port"; in plain, "host" whatever the port.
 */
void	 gck_known_names(const char *, int, char *, size_t, char *, size_t);
/*
 * Reads the known_hosts file at path into *kp, for sess (a libssh2
 * session, connected or not); conn names the connection in messages.
 * A missing file lists no key.  Returns GCK_OK or a code.
 */
int	 gck_known_load(struct gck_ctx *, LIBSSH2_SESSION *, const char *,
	    const char *, struct gck_known **);
/* Frees what gck_known_load() read; NULL is fine. */
void	 gck_known_free(struct gck_known *);
/* Looks the key up under name.  Returns a GCK_KNOWN_* value. */
int	 gck_known_check(const struct gck_known *, const char *,
	    const struct gck_hostkey *);
/* Returns 1 if a key of type kbit is listed under name, else 0. */
int	 gck_known_has_type(const struct gck_known *, const char *, int);
/*
 * Appends "name type key" to the file at path, creating it (and its
 * directory when mkdir_parent), unless it lists the host by the time it
 * is locked.  Returns a GCK_KNOWN_* value (GCK_KNOWN_MATCH once added)
 * or a code.
 */
int	 gck_known_add(struct gck_ctx *, LIBSSH2_SESSION *, const char *,
	    const char *, int, const char *, const struct gck_hostkey *);

#endif /* GCK_TRANSPORT_KNOWNHOSTS_H */

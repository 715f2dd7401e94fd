/*
 * sign.c: an image's signature.
 *
 * gpuckpt --sign signs the trailer's bytes, which list every entry's
 * SHA-256, with an OpenSSH key, in the SSHSIG format that ssh-keygen -Y
 * sign writes, so that the signature of an image is checked with
 * ssh-keygen -Y verify and an allowed_signers file as any other.  The
 * signing and the checks are ssh-keygen's own, run as git runs it; only
 * who signed, the key's type and fingerprint, is read here, for messages.
 */
#include "config.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "private.h"
#include "core/util.h"
#include "image/sign.h"

#define SIG_BEGIN	"-----BEGIN SSH SIGNATURE-----"
#define SIG_END		"-----END SSH SIGNATURE-----"
#define KEYGEN		"ssh-keygen"
#define OUT_MAX		(64u << 10)	/* of ssh-keygen's output, kept */

extern char	**environ;

/* What ssh-keygen said: its exit status, its output and its errors. */
struct kg {
	int	 status;		/* exit status, or 255 */
	char	 out[1024];		/* first line of standard output */
	char	 err[1024];		/* last line of standard error */
	int	 expired, notyet;	/* which the errors said */
	char	*sig;			/* all of standard output */
	size_t	 siglen;
};

/* A memory file holding len bytes of data, read from its start. */
static int
mem_file(struct gck_ctx *ctx, const void *data, size_t len, int *fdp)
{
	int	fd;

	if ((fd = memfd_create("gpuckpt-sig", MFD_CLOEXEC)) == -1)
		return gck_set_syserr(ctx, errno, "cannot make a memory file: "
		    "%s", strerror(errno));
	if (len > 0 && gck_write_all(ctx, fd, data, len, "a memory file") !=
	    GCK_OK) {
		close(fd);
		return ctx->code;
	}
	if (lseek(fd, 0, SEEK_SET) == -1) {
		close(fd);
		return gck_set_syserr(ctx, errno, "cannot rewind a memory "
		    "file: %s", strerror(errno));
	}
	*fdp = fd;
	return GCK_OK;
}

/* The first line of s (len bytes), made printable, into buf. */
static void
line_of(const char *s, size_t len, int last, char *buf, size_t size)
{
	size_t	i, start = 0, end = len, n;

	while (end > 0 && (s[end - 1] == '\n' || s[end - 1] == '\r'))
		end--;
	if (last) {
		for (i = end; i > 0; i--)
			if (s[i - 1] == '\n') {
				start = i;
				break;
			}
	} else
		for (i = 0; i < end; i++)
			if (s[i] == '\n') {
				end = i;
				break;
			}
	n = end - start < size - 1 ? end - start : size - 1;
	for (i = 0; i < n; i++)
		buf[i] = (unsigned char)s[start + i] < 32 ||
		    s[start + i] == 127 ? '?' : s[start + i];
	buf[n] = '\0';
}

/* Reads back what a memory file got, at most OUT_MAX bytes. */
static int
mem_read(struct gck_ctx *ctx, int fd, char **bufp, size_t *lenp)
{
	struct stat	 sb;
	char		*buf;
	ssize_t		 n;

	if (fstat(fd, &sb) == -1)
		return gck_set_syserr(ctx, errno, "cannot read ssh-keygen's "
		    "output: %s", strerror(errno));
	if ((uint64_t)sb.st_size > OUT_MAX)
		sb.st_size = OUT_MAX;
	if ((buf = malloc((size_t)sb.st_size + 1)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	if ((n = pread(fd, buf, (size_t)sb.st_size, 0)) == -1) {
		free(buf);
		return gck_set_syserr(ctx, errno, "cannot read ssh-keygen's "
		    "output: %s", strerror(errno));
	}
	buf[n] = '\0';
	*bufp = buf;
	*lenp = (size_t)n;
	return GCK_OK;
}

/*
 * Runs ssh-keygen with argv, standard input from infd, sigfd (or -1) as
 * its descriptor 3 (/dev/fd/3), and waits for it.  Returns GCK_OK with
 * k filled (its exit status may be a failure), or a code when it could
 * not be run.
 */
static int
keygen(struct gck_ctx *ctx, char *const argv[], int infd, int sigfd,
    struct kg *k)
{
	posix_spawn_file_actions_t	 fa;
	posix_spawnattr_t		 at;
	sigset_t			 none, all;
	pid_t				 pid;
	char				*buf;
	size_t				 len;
	int				 out = -1, err = -1, status, r, e;

	memset(k, 0, sizeof *k);
	k->status = 255;
	if ((r = mem_file(ctx, NULL, 0, &out)) != GCK_OK)
		return r;
	if ((r = mem_file(ctx, NULL, 0, &err)) != GCK_OK) {
		close(out);
		return r;
	}
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK |
	    POSIX_SPAWN_SETSIGDEF);
	posix_spawn_file_actions_adddup2(&fa, infd, 0);
	posix_spawn_file_actions_adddup2(&fa, out, 1);
	posix_spawn_file_actions_adddup2(&fa, err, 2);
	if (sigfd != -1)
		posix_spawn_file_actions_adddup2(&fa, sigfd, 3);
	e = posix_spawnp(&pid, KEYGEN, &fa, &at, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (e != 0) {
		r = gck_set_syserr(ctx, e, "cannot run " KEYGEN ": %s (it "
		    "comes with OpenSSH's client)", strerror(e));
		goto out;
	}
	while (waitpid(pid, &status, 0) == -1)
		if (errno != EINTR) {
			r = gck_set_syserr(ctx, errno, "cannot wait for "
			    KEYGEN ": %s", strerror(errno));
			goto out;
		}
	k->status = WIFEXITED(status) ? WEXITSTATUS(status) : 255;
	if ((r = mem_read(ctx, out, &k->sig, &k->siglen)) != GCK_OK)
		goto out;
	line_of(k->sig, k->siglen, 0, k->out, sizeof k->out);
	if ((r = mem_read(ctx, err, &buf, &len)) != GCK_OK)
		goto out;
	line_of(buf, len, 1, k->err, sizeof k->err);
	k->expired = memmem(buf, len, "expired", 7) != NULL;
	k->notyet = memmem(buf, len, "not yet valid", 13) != NULL;
	free(buf);
	r = GCK_OK;
out:
	close(out);
	close(err);
	if (r != GCK_OK) {
		free(k->sig);
		k->sig = NULL;
	}
	return r;
}

/* A big-endian length-prefixed string of SSH's wire format. */
static int
ssh_string(const unsigned char **pp, const unsigned char *end,
    const unsigned char **sp, uint32_t *lenp)
{
	uint32_t	len;

	if (end - *pp < 4)
		return -1;
	len = (uint32_t)(*pp)[0] << 24 | (uint32_t)(*pp)[1] << 16 |
	    (uint32_t)(*pp)[2] << 8 | (*pp)[3];
	*pp += 4;
	if ((uint64_t)(end - *pp) < len)
		return -1;
	*sp = *pp;
	*lenp = len;
	*pp += len;
	return 0;
}

/* The name ssh-keygen gives a key type ("ED25519"), or NULL. */
static const char *
key_type_name(const unsigned char *t, uint32_t len)
{
	static const struct {
		const char	*wire, *name;
		int		 prefix;
	} types[] = {
		{ "ssh-ed25519", "ED25519", 0 },
		{ "sk-ssh-ed25519@openssh.com", "ED25519-SK", 0 },
		{ "ecdsa-sha2-", "ECDSA", 1 },
		{ "sk-ecdsa-sha2-nistp256@openssh.com", "ECDSA-SK", 0 },
		{ "ssh-rsa", "RSA", 0 },
		{ "ssh-dss", "DSA", 0 },
	};
	size_t	i, n;

	for (i = 0; i < sizeof types / sizeof types[0]; i++) {
		n = strlen(types[i].wire);
		if (types[i].prefix ? len > n && memcmp(t, types[i].wire, n) ==
		    0 : len == n && memcmp(t, types[i].wire, n) == 0)
			return types[i].name;
	}
	return NULL;
}

/*
 * Reads who made the signature sig (len bytes, armoured as ssh-keygen
 * writes it): the type and fingerprint of its key, into *k; checks that
 * it is an SSHSIG of version 1 in the namespace of images.  Nothing is
 * verified here.  Returns GCK_OK or GCK_EFORMAT.
 */
int
gck_sig_key(struct gck_ctx *ctx, const char *sig, size_t len,
    struct gck_sigkey *k)
{
	const unsigned char	*p, *end, *pk, *ns, *kt, *f;
	unsigned char		*b64 = NULL, *bin = NULL, md[32], fp[64];
	const char		*s, *e, *name;
	uint32_t		 pklen, nslen, ktlen;
	size_t			 n = 0, i;
	int			 blen, pad = 0, r = GCK_EFORMAT;

	memset(k, 0, sizeof *k);
	if (len > GCK_SIG_MAX || (s = memmem(sig, len, SIG_BEGIN,
	    strlen(SIG_BEGIN))) == NULL)
		goto bad;
	/* The end after the beginning, not among its dashes. */
	s += strlen(SIG_BEGIN);
	if ((e = memmem(s, len - (size_t)(s - sig), SIG_END,
	    strlen(SIG_END))) == NULL)
		goto bad;
	if ((b64 = malloc((size_t)(e - s) + 1)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	for (; s < e; s++)
		if (*s != '\n' && *s != '\r')
			b64[n++] = (unsigned char)*s;
	if (n == 0 || n % 4 != 0)
		goto bad;
	for (i = n; i > 0 && b64[i - 1] == '='; i--)
		pad++;
	if ((bin = malloc(n / 4 * 3 + 1)) == NULL) {
		free(b64);
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	if ((blen = EVP_DecodeBlock(bin, b64, (int)n)) < 0 || pad > 2)
		goto bad;
	blen -= pad;
	p = bin;
	end = bin + blen;
	/* "SSHSIG", version 1, the public key, the namespace, ... */
	if (blen < 10 || memcmp(p, "SSHSIG", 6) != 0 || p[6] != 0 ||
	    p[7] != 0 || p[8] != 0 || p[9] != 1)
		goto bad;
	p += 10;
	if (ssh_string(&p, end, &pk, &pklen) == -1 ||
	    ssh_string(&p, end, &ns, &nslen) == -1 || pklen == 0)
		goto bad;
	f = pk;
	if (ssh_string(&f, pk + pklen, &kt, &ktlen) == -1 ||
	    (name = key_type_name(kt, ktlen)) == NULL)
		goto bad;
	if (nslen != strlen(GCK_SIG_NAMESPACE) || memcmp(ns,
	    GCK_SIG_NAMESPACE, nslen) != 0) {
		r = gck_set_error(ctx, GCK_ESIGN, "the image's signature is "
		    "not one of an image (its namespace is not \"%s\")",
		    GCK_SIG_NAMESPACE);
		goto out;
	}
	if (EVP_Digest(pk, pklen, md, NULL, EVP_sha256(), NULL) != 1)
		goto bad;
	n = (size_t)EVP_EncodeBlock(fp, md, sizeof md);
	while (n > 0 && fp[n - 1] == '=')
		n--;
	fp[n] = '\0';
	snprintf(k->type, sizeof k->type, "%s", name);
	snprintf(k->fp, sizeof k->fp, "SHA256:%s", fp);
	r = GCK_OK;
	goto out;
bad:
	r = gck_set_error(ctx, GCK_EFORMAT, "corrupt image: its signature is "
	    "not an SSH signature");
out:
	free(b64);
	free(bin);
	return r;
}

/*
 * Whether key (a private key file, or the public key file of a key
 * ssh-agent holds) can be read, before anything is done with it.
 */
int
gck_sig_usable(struct gck_ctx *ctx, const char *key)
{
	char *const	 argv[] = { KEYGEN, "-l", "-f", (char *)key, NULL };
	struct kg	 k;
	int		 in, r;

	if (access(key, R_OK) == -1)
		return gck_set_syserr(ctx, errno, "cannot read the signing "
		    "key '%s': %s", key, strerror(errno));
	if ((in = open("/dev/null", O_RDONLY | O_CLOEXEC)) == -1)
		return gck_set_syserr(ctx, errno, "cannot open /dev/null: %s",
		    strerror(errno));
	r = keygen(ctx, argv, in, -1, &k);
	close(in);
	if (r != GCK_OK)
		return r;
	free(k.sig);
	if (k.status != 0)
		return gck_set_error(ctx, GCK_EINVAL, "'%s' is not an SSH key: "
		    "%s", key, k.err[0] != '\0' ? k.err : "ssh-keygen -l "
		    "failed");
	return GCK_OK;
}

/*
 * Signs len bytes of data with key (a private key file, or the public
 * key file of a key held by ssh-agent).  Returns GCK_OK with the
 * signature in *sigp (*lenp bytes, to be freed), or a code.
 */
int
gck_sig_sign(struct gck_ctx *ctx, const char *key, const void *data,
    size_t len, char **sigp, size_t *lenp)
{
	char *const	 argv[] = { KEYGEN, "-q", "-Y", "sign", "-n",
			    GCK_SIG_NAMESPACE, "-f", (char *)key, NULL };
	struct gck_sigkey sk;
	struct kg	 k;
	int		 in, r;

	*sigp = NULL;
	if ((r = mem_file(ctx, data, len, &in)) != GCK_OK)
		return r;
	r = keygen(ctx, argv, in, -1, &k);
	close(in);
	if (r != GCK_OK)
		return r;
	if (k.status != 0 || k.siglen == 0) {
		free(k.sig);
		return gck_set_error(ctx, GCK_ESIGN, "cannot sign with '%s': "
		    "%s", key, k.err[0] != '\0' ? k.err : "ssh-keygen -Y "
		    "sign failed");
	}
	if ((r = gck_sig_key(ctx, k.sig, k.siglen, &sk)) != GCK_OK) {
		free(k.sig);
		return r;
	}
	*sigp = k.sig;
	*lenp = k.siglen;
	return GCK_OK;
}

/*
 * Checks that sig is a good signature of data, by whatever key (ssh-keygen
 * -Y check-novalidate).  Returns GCK_OK, or GCK_ESIGN naming the key.
 */
int
gck_sig_check(struct gck_ctx *ctx, const char *sig, size_t siglen,
    const void *data, size_t len)
{
	char *const	 argv[] = { KEYGEN, "-Y", "check-novalidate", "-n",
			    GCK_SIG_NAMESPACE, "-s", "/dev/fd/3", NULL };
	struct gck_sigkey sk;
	struct kg	 k;
	int		 in = -1, sfd = -1, r;

	if ((r = gck_sig_key(ctx, sig, siglen, &sk)) != GCK_OK ||
	    (r = mem_file(ctx, data, len, &in)) != GCK_OK ||
	    (r = mem_file(ctx, sig, siglen, &sfd)) != GCK_OK ||
	    (r = keygen(ctx, argv, in, sfd, &k)) != GCK_OK)
		goto out;
	free(k.sig);
	if (k.status != 0)
		r = gck_set_error(ctx, GCK_ESIGN, "the signature of %s key %s "
		    "does not match the image", sk.type, sk.fp);
out:
	if (in != -1)
		close(in);
	if (sfd != -1)
		close(sfd);
	return r;
}

/*
 * Checks that sig is a good signature of data by a key that the
 * allowed_signers file allowed lets sign images now.  Returns GCK_OK
 * with the principal it names in *whop (to be freed), or GCK_ESIGN with
 * a message that names the key.
 */
int
gck_sig_verify(struct gck_ctx *ctx, const char *allowed, const char *sig,
    size_t siglen, const void *data, size_t len, char **whop)
{
	char		 who[sizeof ((struct kg *)0)->out];
	char *const	 find[] = { KEYGEN, "-Y", "find-principals", "-s",
			    "/dev/fd/3", "-f", (char *)allowed, NULL };
	char *const	 verify[] = { KEYGEN, "-Y", "verify", "-n",
			    GCK_SIG_NAMESPACE, "-s", "/dev/fd/3", "-f",
			    (char *)allowed, "-I", who, NULL };
	struct gck_sigkey sk;
	struct kg	 k;
	int		 in = -1, sfd = -1, r;

	*whop = NULL;
	if (access(allowed, R_OK) == -1)
		return gck_set_syserr(ctx, errno, "cannot read the allowed "
		    "signers '%s': %s", allowed, strerror(errno));
	/* Made by the key it names, over these bytes? */
	if ((r = gck_sig_check(ctx, sig, siglen, data, len)) != GCK_OK ||
	    (r = gck_sig_key(ctx, sig, siglen, &sk)) != GCK_OK)
		return r;
	/* Whose key, allowed now? */
	if ((r = mem_file(ctx, sig, siglen, &sfd)) != GCK_OK ||
	    (r = mem_file(ctx, NULL, 0, &in)) != GCK_OK ||
	    (r = keygen(ctx, find, in, sfd, &k)) != GCK_OK)
		goto out;
	free(k.sig);
	if (k.status != 0 || k.out[0] == '\0') {
		if (k.expired)
			r = gck_set_error(ctx, GCK_ESIGN, "image signed by %s "
			    "key %s, whose entry in '%s' has expired", sk.type,
			    sk.fp, allowed);
		else if (k.notyet)
			r = gck_set_error(ctx, GCK_ESIGN, "image signed by %s "
			    "key %s, whose entry in '%s' is not yet valid",
			    sk.type, sk.fp, allowed);
		else
			r = gck_set_error(ctx, GCK_ESIGN, "image signed by %s "
			    "key %s, which '%s' does not allow", sk.type, sk.fp,
			    allowed);
		goto out;
	}
	snprintf(who, sizeof who, "%s", k.out);
	/* All of it at once, as that principal, for images. */
	close(in);
	in = -1;
	if ((r = mem_file(ctx, data, len, &in)) != GCK_OK)
		goto out;
	if (lseek(sfd, 0, SEEK_SET) == -1) {
		r = gck_set_syserr(ctx, errno, "cannot rewind a memory file: "
		    "%s", strerror(errno));
		goto out;
	}
	if ((r = keygen(ctx, verify, in, sfd, &k)) != GCK_OK)
		goto out;
	free(k.sig);
	if (k.status != 0)
		r = gck_set_error(ctx, GCK_ESIGN, "image signed by %s key %s, "
		    "which '%s' does not allow to sign images", sk.type, sk.fp,
		    allowed);
	else if ((*whop = strdup(who)) == NULL)
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
out:
	if (in != -1)
		close(in);
	if (sfd != -1)
		close(sfd);
	return r;
}

/*
 * The allowed_signers file that applies: path when given, else the
 * system's ($GCK_ALLOWED_SIGNERS, or GCK_ALLOWED_SIGNERS_FILE) when it
 * exists; NULL when none does, and images need no signature.
 */
const char *
gck_sig_policy(const char *path)
{
	const char	*sys;

	if (path != NULL)
		return path;
	if ((sys = getenv("GCK_ALLOWED_SIGNERS")) == NULL || *sys == '\0')
		sys = GCK_ALLOWED_SIGNERS_FILE;
	return access(sys, F_OK) == 0 ? sys : NULL;
}
